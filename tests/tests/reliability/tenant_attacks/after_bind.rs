//! Attacks on a Bound claim, with the sample provisioner (its own process,
//! per-claim users) on RustFS: a tenant writes another tenant's access key
//! id into their own Secret (dropping the hash annotation, or recomputing
//! it) and asks for a rotation. The key a rotation revokes must be the one
//! the library recorded on the ObjectBucket (which tenants cannot edit),
//! so the victim's key keeps working and the attacker's real previous key
//! is the one revoked. See [`super`].

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use lib_provisioner::CREDENTIALS_ROTATED_CONDITION;
use lib_provisioner::api::{
    ObjectBucket, ObjectBucketClaimSpec, ROTATE_ANNOTATION, ROTATED_ANNOTATION,
    ROTATION_PENDING_ANNOTATION,
};
use obc_tests::reliability::{
    Summary, claim_bucket, claim_keys, register_secret, wait_all_bound, wait_all_gone,
};
use obc_tests::rustfs::RustFs;
use obc_tests::testenv::s3_client_for;
use obc_tests::wait_for;
use sample_provisioner::admin::AdminClient;
use sample_provisioner::credentials::{rotated_user_name, user_name};
use serde_json::json;

use crate::reliability::{Suite, T, claims, create, logs};

const VICTIM: &str = "ta-victim";
const TENANT: &str = "ta-tenant";
const CLASS: &str = "ta-rustfs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_key_id_written_into_a_claims_secret_is_never_revoked() {
    Suite::run(
        "tenant attacks after bind: a foreign key id in the claim's Secret, then a rotation",
        &[VICTIM, TENANT],
        async |suite, summary| {
            let store = RustFs::start(suite.env.dir())
                .await
                .context("RustFS (built into ~/.cache/obc-testenv by the tool install)")?;
            let result = scenario(suite, &store, summary).await;
            store.stop().await;
            result
        },
    )
    .await;
}

/// The store's admin API and a per-claim class on it.
async fn per_claim_store(suite: &Suite, store: &RustFs) -> Result<AdminClient> {
    let endpoint = super::rustfs_class(suite, store, CLASS).await?;
    let (key, secret) = store.root_credentials();
    for ns in [VICTIM, TENANT] {
        suite.env.ensure_namespace(ns).await?;
    }
    Ok(AdminClient::new(
        &endpoint,
        "us-east-1",
        lib_provisioner::Credentials::new(key, secret),
    )?)
}

async fn scenario(suite: &Suite, store: &RustFs, summary: &mut Summary) -> Result<()> {
    let admin = per_claim_store(suite, store).await?;
    let mut proc = suite.launch("ta-after-bind").start(logs())?;
    let names = vec!["c".to_owned()];
    for ns in [VICTIM, TENANT] {
        let spec = ObjectBucketClaimSpec {
            storage_class_name: CLASS.into(),
            generate_bucket_name: Some(ns.into()),
            ..Default::default()
        };
        create(&suite.admin, ns, "c", spec).await?;
        wait_all_bound(&suite.admin, ns, &names, T).await?;
    }
    let (victim_key, victim_secret) = claim_keys(&suite.admin, VICTIM, "c").await?;
    register_secret(&victim_secret);
    let victim_bucket = claim_bucket(&suite.admin, VICTIM, "c").await?;
    let victim = s3_client_for(&store.endpoint(), &victim_key, &victim_secret);
    victim
        .put_object()
        .bucket(&victim_bucket)
        .key("keep.txt")
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"keep"))
        .send()
        .await
        .context("the victim writes")?;

    // A first, honest rotation: the tenant now holds its second user.
    rotate(suite, "first").await?;
    let (previous, _) = claim_keys(&suite.admin, TENANT, "c").await?;
    let tenant_uid = claims(&suite.admin, TENANT)
        .get("c")
        .await?
        .metadata
        .uid
        .context("uid")?;

    // The attack: the victim's key id in the tenant's Secret, then a rotation.
    tenant_writes_key(suite, &victim_key).await?;
    summary.counts.attacks += 1;
    rotate(suite, "steal").await?;
    let message = rotation_message(suite).await?;

    // What it reached: the victim's key and data must be intact, and the
    // library must not even have named that key to revoke.
    let victim_works = victim
        .get_object()
        .bucket(&victim_bucket)
        .key("keep.txt")
        .send()
        .await
        .is_ok();
    let victim_users = admin.list_users().await?;
    if !victim_works || !victim_users.contains_key(&victim_key) {
        summary.counts.foreign_revocations += 1;
    }
    if message.contains(&victim_key) {
        summary.counts.foreign_revocations += 1;
    }
    let objects = store
        .root_client()
        .list_objects_v2()
        .bucket(&victim_bucket)
        .send()
        .await?;
    if objects.key_count().unwrap_or_default() < 1 {
        summary.counts.data_lost += 1;
    }
    // The tenant's real previous key is the one revoked: one live user.
    let (current, secret) = claim_keys(&suite.admin, TENANT, "c").await?;
    register_secret(&secret);
    let mine = [user_name(&tenant_uid), rotated_user_name(&tenant_uid)];
    let users: BTreeSet<String> = victim_users
        .into_keys()
        .filter(|u| mine.contains(u))
        .collect();
    ensure!(
        users == BTreeSet::from([current.clone()]),
        "the tenant's previous key {previous} still works after rotation \"steal\" was reported done ({message}); the tenant's users are {users:?}, its Secret holds {current}"
    );
    ensure!(
        message.contains(&previous),
        "the status does not name the key revoked ({previous}): {message}"
    );
    summary.counts.scenarios += 1;
    summary.note(
        "victim's key after the attack",
        if victim_works { "works" } else { "REVOKED" },
    );

    for ns in [VICTIM, TENANT] {
        claims(&suite.admin, ns)
            .delete("c", &Default::default())
            .await?;
        wait_all_gone(&suite.admin, ns, &names, T).await?;
    }
    proc.kill().await;
    Ok(())
}

/// What a tenant may do to their own Secret: any data, hash annotation off.
async fn tenant_writes_key(suite: &Suite, key: &str) -> Result<()> {
    let data = json!({"AWS_ACCESS_KEY_ID": ByteString(key.as_bytes().to_vec())});
    Api::<Secret>::namespaced(suite.admin.clone(), TENANT)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"objectbucket.io/secret-hash": null}},
                "data": data,
            })),
        )
        .await?;
    Ok(())
}

/// Asks for rotation `value` on the tenant's claim and waits until it is
/// over (recorded on the ObjectBucket, named by the condition).
async fn rotate(suite: &Suite, value: &str) -> Result<()> {
    claims(&suite.admin, TENANT)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ROTATE_ANNOTATION: value}}})),
        )
        .await?;
    wait_for(T, format!("rotation {value} over"), || async {
        let claim = claims(&suite.admin, TENANT).get("c").await?;
        let Some(ob) = claim.spec.object_bucket_name.as_deref() else {
            return Ok(None);
        };
        let a = Api::<ObjectBucket>::all(suite.admin.clone())
            .get(ob)
            .await?
            .metadata
            .annotations
            .unwrap_or_default();
        let over = a.get(ROTATED_ANNOTATION).map(String::as_str) == Some(value)
            && !a.contains_key(ROTATION_PENDING_ANNOTATION);
        Ok(over.then_some(()))
    })
    .await?;
    // The condition is written before the ObjectBucket records it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// The tenant claim's `CredentialsRotated` message.
async fn rotation_message(suite: &Suite) -> Result<String> {
    let claim = claims(&suite.admin, TENANT).get("c").await?;
    claim
        .status
        .and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == CREDENTIALS_ROTATED_CONDITION)
        })
        .map(|c| c.message)
        .context("no CredentialsRotated condition")
}
