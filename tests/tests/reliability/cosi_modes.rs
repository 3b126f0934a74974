//! Moving between the two COSI driver modes over live objects: what the
//! in-process driver role made, the gRPC driver (as upstream's sidecar
//! calls it after a restart) finds as the same claim's and principal's, and
//! the other way round; buckets the gRPC path of earlier versions recorded
//! under their whole id are still their claim's. On RustFS, with the
//! sample's real users.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::ResourceExt;
use kube::api::DeleteParams;
use lib_provisioner::cosi::grpc::proto::{
    DriverCreateBucketRequest, DriverRevokeBucketAccessRequest, ObjectProtocol,
    driver_revoke_bucket_access_request, object_protocol,
};
use lib_provisioner::{BucketRequest, ClaimIdentity, Provisioner};
use obc_tests::cosi::Driver;
use obc_tests::cosi_e2e::{
    ACCESS_CLASS, CosiSuite, DELETE_CLASS, Kind, access_keys, access_of, api, claim_of_class,
    create, status_str, wait_ready,
};
use obc_tests::recording::wait_gone;
use obc_tests::reliability::{RUSTFS_ADMIN_SECRET, SYSTEM_NAMESPACE, Summary};
use obc_tests::wait_for;
use sample_provisioner::S3Provisioner;

use super::{BIN, T, logs};

const NS: &str = "modes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_and_users_survive_a_switch_between_driver_modes() {
    let suite = CosiSuite::start(BIN, "cosi-modes")
        .await
        .expect("environment, COSI and RustFS start");
    let mut summary = Summary::new("COSI driver modes (RustFS)");
    let result = switch(&suite, &mut summary).await;
    suite
        .finish(summary, logs(), result)
        .await
        .expect("both driver modes agree on who owns what");
}

async fn switch(suite: &CosiSuite, summary: &mut Summary) -> Result<()> {
    suite.env.ensure_namespace(NS).await?;
    let admin = &suite.admin;
    let sample = std::sync::Arc::new(S3Provisioner::new(admin.clone()));
    let params = class_parameters(suite);

    // 1. The in-process mode makes a bucket and a user.
    let mut proc = suite.launch.unarmed().start(logs())?;
    create(
        admin,
        Kind::BucketClaim,
        NS,
        "made-here",
        claim_of_class(DELETE_CLASS),
    )
    .await?;
    let access = access_of(
        ACCESS_CLASS,
        &[("made-here", "ReadWrite", "made-here-keys")],
    );
    create(admin, Kind::BucketAccess, NS, "rw", access).await?;
    let claim = wait_ready(admin, Kind::BucketClaim, NS, "made-here", T).await?;
    let granted = wait_ready(admin, Kind::BucketAccess, NS, "rw", T).await?;
    let bucket = status_str(&claim, "boundBucketName").context("the claim names its Bucket")?;
    let keys = access_keys(admin, NS, "made-here-keys").await?;
    proc.kill().await;

    // 2. The gRPC driver, as upstream's sidecar after a restart: creating
    //    the Bucket again is the same claim's bucket, and revoking the
    //    account ends the user the in-process role made.
    let dir = tempfile::tempdir()?;
    let driver = Driver::start(sample.clone(), dir.path()).await?;
    let mut cosi = driver.provisioner();
    let created = cosi
        .driver_create_bucket(create_request(&bucket, &params))
        .await
        .context("the gRPC driver takes the in-process mode's bucket as its claim's")?
        .into_inner();
    ensure!(created.bucket_id == bucket, "same id: {created:?}");
    let account = format!("ba-{}", granted.uid().unwrap_or_default());
    cosi.driver_revoke_bucket_access(revoke_request(&account, &bucket, &params))
        .await?;
    wait_for(T, "the in-process user to be revoked", || async {
        Ok(suite.users().await?.is_empty().then_some(()))
    })
    .await
    .context("revoking over gRPC ends the user the in-process role made")?;
    denied(&keys.s3(), &bucket).await?;
    summary.note(
        "in-process → gRPC",
        "bucket kept as its claim's, user revoked",
    );

    // 3. The other way: a bucket the gRPC path made (now, and as earlier
    //    versions recorded it, under the whole id) is the claim's when the
    //    in-process mode binds it.
    let (fresh, legacy) = ("made-there", "made-before");
    for name in [fresh, legacy] {
        create(
            admin,
            Kind::BucketClaim,
            NS,
            name,
            claim_of_class(DELETE_CLASS),
        )
        .await?;
    }
    for (name, old) in [(fresh, false), (legacy, true)] {
        let uid = api(admin, Kind::BucketClaim, NS)
            .get(name)
            .await?
            .uid()
            .unwrap_or_default();
        let id = format!("bc-{uid}");
        if old {
            let owner = ClaimIdentity::new("", &id, &id);
            let req = BucketRequest::new(owner, &id, "").with_parameters(params.clone());
            sample.create_bucket(&req).await?;
        } else {
            cosi.driver_create_bucket(create_request(&id, &params))
                .await?;
        }
    }
    driver.stop().await?;
    let mut proc = suite.launch.unarmed().start(logs())?;
    for name in [fresh, legacy] {
        wait_ready(admin, Kind::BucketClaim, NS, name, T)
            .await
            .with_context(|| format!("the in-process mode binds {name}, made over gRPC"))?;
    }
    summary.note(
        "gRPC → in-process",
        "both buckets bound (current and earlier records)",
    );

    // 4. Everything goes, through the in-process mode.
    for name in ["rw"] {
        api(admin, Kind::BucketAccess, NS)
            .delete(name, &DeleteParams::default())
            .await?;
    }
    for name in ["made-here", fresh, legacy] {
        api(admin, Kind::BucketClaim, NS)
            .delete(name, &DeleteParams::default())
            .await?;
    }
    for name in ["made-here", fresh, legacy] {
        wait_gone(
            &api(admin, Kind::BucketClaim, NS),
            name,
            Duration::from_secs(60),
        )
        .await?;
    }
    proc.kill().await;
    let left = suite.buckets().await?;
    ensure!(left.is_empty(), "buckets left after deletion: {left:?}");
    ensure!(suite.users().await?.is_empty(), "users left");
    summary.counts.scenarios += 3;
    Ok(())
}

/// The Delete class's parameters, as the sidecar passes them.
fn class_parameters(suite: &CosiSuite) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "endpoint".into(),
            suite.store.endpoint().trim_end_matches('/').to_owned(),
        ),
        ("adminSecretName".into(), RUSTFS_ADMIN_SECRET.into()),
        ("adminSecretNamespace".into(), SYSTEM_NAMESPACE.into()),
        ("forceDelete".into(), "true".into()),
    ])
}

fn s3() -> Option<ObjectProtocol> {
    Some(ObjectProtocol {
        r#type: object_protocol::Type::S3.into(),
    })
}

fn wire(params: &BTreeMap<String, String>) -> HashMap<String, String> {
    params.clone().into_iter().collect()
}

fn create_request(name: &str, params: &BTreeMap<String, String>) -> DriverCreateBucketRequest {
    DriverCreateBucketRequest {
        name: name.to_owned(),
        protocols: vec![s3().expect("S3")],
        parameters: wire(params),
    }
}

fn revoke_request(
    account: &str,
    bucket: &str,
    params: &BTreeMap<String, String>,
) -> DriverRevokeBucketAccessRequest {
    DriverRevokeBucketAccessRequest {
        account_id: account.to_owned(),
        protocol: s3(),
        parameters: wire(params),
        buckets: vec![driver_revoke_bucket_access_request::AccessedBucket {
            bucket_id: bucket.to_owned(),
        }],
        ..Default::default()
    }
}

/// `s3` may not list `bucket` any more (the store may cache a key briefly).
async fn denied(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<()> {
    wait_for(
        T,
        format!("the revoked key to be refused on {bucket}"),
        || async {
            Ok(s3
                .list_objects_v2()
                .bucket(bucket)
                .send()
                .await
                .is_err()
                .then_some(()))
        },
    )
    .await
}
