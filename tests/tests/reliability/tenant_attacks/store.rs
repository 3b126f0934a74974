//! See [`super`].

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, ensure};
use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::reliability::{
    RUSTFS_ADMIN_SECRET, SYSTEM_NAMESPACE, SampleSuite, Summary, claim_keys, create_class,
    register_secret,
};
use obc_tests::testenv::s3_client_for;
use serde_json::json;

use super::super::{BIN, T, logs};

const REISSUE_PROVISIONER: &str = "objectbucket.io/sample-s3-reissue";
/// A bucket several tenants' claims share (brownfield), on RustFS.
const COMMONS: &str = "commons";
const VICTIM_OBJECT: &str = "other-tenant.txt";

/// Issue 25, item 5, the tenant's side: a claim granted read-only access
/// to a shared bucket widens its `accessMode` after bind (the provisioner
/// refuses the update), then deletes its own Secret so that the repair
/// issues credentials anew. The repair is a re-issue from what the
/// ObjectBucket recorded: the access granted at bind, never the claim's
/// edited spec. Per-claim credentials, so against RustFS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_secret_is_reissued_with_the_access_granted_at_bind() {
    let suite = SampleSuite::start(BIN, REISSUE_PROVISIONER, "tenant-reissue", &[])
        .await
        .expect("test environment and RustFS start");
    let mut summary = Summary::new("tenant attacks: Secret re-issue");
    let result = widened_reissue(&suite, &mut summary).await;
    let result = result.and_then(|()| {
        ensure!(
            summary.counts.clean(),
            "the attack reached what was not the tenant's: {:?}",
            summary.counts
        );
        Ok(())
    });
    suite
        .finish(summary, logs(), result)
        .await
        .expect("the re-issue grants only what was granted at bind");
}

async fn widened_reissue(suite: &SampleSuite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "tenant-m";
    suite.env.ensure_namespace(ns).await?;
    let endpoint = suite.store.endpoint().trim_end_matches('/').to_owned();
    let params = [
        ("endpoint", endpoint.as_str()),
        ("adminSecretName", RUSTFS_ADMIN_SECRET),
        ("adminSecretNamespace", SYSTEM_NAMESPACE),
        ("bucketName", COMMONS),
    ];
    create_class(client, "commons", REISSUE_PROVISIONER, "Delete", params).await?;
    let (root_key, root_secret) = suite.store.root_credentials();
    let root = s3_client_for(&endpoint, &root_key, &root_secret);
    root.create_bucket().bucket(COMMONS).send().await?;
    root.put_object()
        .bucket(COMMONS)
        .key(VICTIM_OBJECT)
        .body(ByteStream::from_static(b"another tenant's data"))
        .send()
        .await?;
    let proc = suite.launch.start(logs())?;

    // The tenant's claim: read-only on the shared bucket.
    let claims: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let spec = ObjectBucketClaimSpec {
        storage_class_name: "commons".into(),
        additional_config: Some(BTreeMap::from([("accessMode".into(), "read-only".into())])),
        ..Default::default()
    };
    claims
        .create(&PostParams::default(), &ObjectBucketClaim::new("m", spec))
        .await?;
    obc_tests::recording::wait_phase(client, ns, "m", ClaimPhase::Bound, T).await?;
    let granted = claim_keys(client, ns, "m").await?;
    register_secret(&granted.1);
    let s3 = s3_client_for(&endpoint, &granted.0, &granted.1);
    s3.get_object()
        .bucket(COMMONS)
        .key(VICTIM_OBJECT)
        .send()
        .await
        .context("the read-only claim reads the shared bucket")?;

    // The attack: widen the access (refused), then have the Secret re-issued.
    summary.counts.attacks += 1;
    claims
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"additionalConfig": {"accessMode": "read-write"}}})),
        )
        .await?;
    obc_tests::wait_for(T, "the widened accessMode to be refused", || async {
        let c = claims.get("m").await?;
        let refused = c.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|x| x.type_ == "ConfigApplied" && x.status == "False")
        });
        Ok(refused.then_some(()))
    })
    .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets.delete("m", &Default::default()).await?;
    let reissued = obc_tests::wait_for(T, "the tenant's Secret to be re-issued", || async {
        Ok(match secrets.get_opt("m").await? {
            Some(_) => Some(claim_keys(client, ns, "m").await?).filter(|k| *k != granted),
            None => None,
        })
    })
    .await?;
    register_secret(&reissued.1);
    let s3 = s3_client_for(&endpoint, &reissued.0, &reissued.1);
    s3.get_object()
        .bucket(COMMONS)
        .key(VICTIM_OBJECT)
        .send()
        .await
        .context("the re-issued credentials work (read)")?;
    // With them: delete another tenant's object, write one of its own.
    let deleted = s3
        .delete_object()
        .bucket(COMMONS)
        .key(VICTIM_OBJECT)
        .send()
        .await
        .is_ok();
    let wrote = s3
        .put_object()
        .bucket(COMMONS)
        .key("tenant-m-was-here.txt")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .is_ok();
    let victim_left = root
        .head_object()
        .bucket(COMMONS)
        .key(VICTIM_OBJECT)
        .send()
        .await
        .is_ok();
    if !victim_left {
        summary.counts.data_lost += 1;
    }
    summary.note("delete with re-issued read-only keys accepted", deleted);
    summary.note("write with re-issued read-only keys accepted", wrote);
    ensure!(
        !deleted && !wrote && victim_left,
        "the re-issued credentials of a read-only claim wrote to the shared bucket (delete accepted: {deleted}, put accepted: {wrote}, other tenant's object kept: {victim_left})"
    );
    let c = claims.get("m").await?;
    ensure!(
        c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound),
        "the claim is not Bound after the re-issue"
    );
    ensure!(
        proc.log()
            .contains("issuing the bound claim's credentials again"),
        "the repair was not a re-issue"
    );
    summary.counts.scenarios += 1;
    Ok(())
}
