//! Bucket settings through the claim (issue 38), against the real apiserver
//! and RustFS with the sample provisioner: the class's allow-list and
//! bounds, versioning in its three states, lifecycle rules and a tenant's
//! bucket policy applied at provisioning, replaced and removed after bind,
//! put back when changed on the store behind the claim, refused where a
//! change cannot be made (versioning back to unset, object lock after
//! creation); and a versioned bucket deleted with every version.
//!
//! Every assertion about a setting reads the store with the root
//! credentials: what the provisioner said it did is not evidence.

use std::time::Duration;

use aws_sdk_s3::types::BucketVersioningStatus;
use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::CONFIG_APPLIED_CONDITION;
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::recording::{wait_event, wait_gone, wait_phase};
use obc_tests::wait_for;
use serde_json::json;

use crate::after_bind::{Fixture, NS, T, condition, observed_generation, wait_config};

const LIFECYCLE: &str = "Rules:\n- ID: logs\n  Status: Enabled\n  Filter: {Prefix: logs/}\n  Expiration: {Days: 30}\n  NoncurrentVersionExpiration: {NoncurrentDays: 7}\n";
const POLICY: &str = r#"{"Statement":[{"Sid":"keep","Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::${bucket}/keep/*"}]}"#;

async fn configurable_class(f: &Fixture) {
    let endpoint = f.endpoint();
    f.class_with(
        "configurable",
        &endpoint,
        &[
            (
                "allowedConfig",
                "maxSize,versioning,bucketLifecycle,bucketPolicy,objectLockMode,objectLockDays",
            ),
            ("lifecycleMaxDays", "90"),
        ],
    )
    .await;
}

async fn versioning(f: &Fixture, bucket: &str) -> Option<BucketVersioningStatus> {
    let out = f
        .store
        .root_client()
        .get_bucket_versioning()
        .bucket(bucket)
        .send()
        .await
        .expect("GetBucketVersioning");
    out.status().cloned()
}

async fn lifecycle_ids(f: &Fixture, bucket: &str) -> Vec<String> {
    match f
        .store
        .root_client()
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => out
            .rules()
            .iter()
            .filter_map(|r| r.id().map(str::to_owned))
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn policy(f: &Fixture, bucket: &str) -> Option<String> {
    let out = f
        .store
        .root_client()
        .get_bucket_policy()
        .bucket(bucket)
        .send()
        .await;
    out.ok().and_then(|o| o.policy().map(str::to_owned))
}

async fn bucket_of(f: &Fixture, claim: &ObjectBucketClaim) -> String {
    f.object_bucket(claim)
        .await
        .spec
        .endpoint
        .as_ref()
        .map(|e| e.bucket_name.clone())
        .expect("bucket name")
}

async fn failed_claim(f: &Fixture, class: &str, name: &str, config: serde_json::Value) -> String {
    let spec: ObjectBucketClaimSpec = serde_json::from_value(json!({
        "storageClassName": class, "generateBucketName": name, "additionalConfig": config
    }))
    .expect("spec");
    f.claims()
        .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
        .await
        .expect("claim");
    let c = wait_phase(&f.admin, NS, name, ClaimPhase::Failed, T)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    c.status.and_then(|s| s.message).unwrap_or_default()
}

async fn refused_update(f: &Fixture, name: &str, config: serde_json::Value) -> String {
    f.patch_claim(name, json!({"spec": {"additionalConfig": config}}))
        .await
        .expect("edit");
    let c = wait_config(f, name, "False").await;
    let (_, reason, _) = condition(&c, CONFIG_APPLIED_CONDITION).expect("condition");
    assert_eq!(reason, "UpdateRefused");
    let events = wait_event(&f.admin, NS, name, |r, _| r == "UpdateRefused")
        .await
        .expect("an UpdateRefused Event");
    events
        .into_iter()
        .rev()
        .find(|(r, _)| r == "UpdateRefused")
        .map(|(_, note)| note)
        .expect("an UpdateRefused Event")
}

/// The reservation a refused claim's pass made goes (the library removes
/// it once the provisioner says nothing was created).
async fn no_object_bucket_for(f: &Fixture, claim: &str) {
    let api = Api::<ObjectBucket>::all(f.admin.clone());
    wait_for(
        T,
        format!("{claim}: nothing left for a refused claim"),
        || async {
            let obs = api.list(&Default::default()).await?;
            let ours = obs.items.iter().any(|ob| {
                ob.spec.claim_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(claim)
            });
            Ok((!ours).then_some(()))
        },
    )
    .await
    .expect("no ObjectBucket");
}

/// Refusals before anything exists: a key the class does not allow, and a
/// policy that would grant anyone access.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_a_class_does_not_allow_and_widening_policies_create_nothing() {
    let f = Fixture::start().await;
    configurable_class(&f).await;
    let message = failed_claim(&f, "s3", "plain", json!({"versioning": "Enabled"})).await;
    assert!(
        message.contains("versioning")
            && message.contains("StorageClass \"s3\"")
            && message.contains("allowedConfig"),
        "{message}"
    );
    let anyone = r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::${bucket}/*"}]}"#;
    let message = failed_claim(
        &f,
        "configurable",
        "public",
        json!({"bucketPolicy": anyone}),
    )
    .await;
    assert!(message.contains("bucketPolicyPrincipals"), "{message}");
    let other = POLICY.replace("${bucket}", "someone-elses");
    let message = failed_claim(&f, "configurable", "reach", json!({"bucketPolicy": other})).await;
    assert!(message.contains("someone-elses"), "{message}");
    let long = LIFECYCLE.replace("Days: 30", "Days: 365");
    let message = failed_claim(&f, "configurable", "long", json!({"bucketLifecycle": long})).await;
    assert!(message.contains("90"), "{message}");
    for claim in ["plain", "public", "reach", "long"] {
        no_object_bucket_for(&f, claim).await;
    }
    let buckets = f
        .store
        .root_client()
        .list_buckets()
        .send()
        .await
        .expect("list");
    assert!(
        buckets.buckets().is_empty(),
        "no bucket is created: {:?}",
        buckets.buckets()
    );
    f.stop().await;
}

/// Versioning, lifecycle and policy from the claim: applied, replaced,
/// removed, refused back to unset, put back after a change on the store,
/// and every version deleted with the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_follow_the_claim_and_come_back_when_changed_on_the_store() {
    let f = Fixture::start_checking(Some(Duration::from_secs(2))).await;
    configurable_class(&f).await;
    let config = [
        ("versioning", "Enabled"),
        ("bucketLifecycle", LIFECYCLE),
        ("bucketPolicy", POLICY),
    ];
    let c = f.bound_claim_of("configurable", "settings", &config).await;
    let bucket = bucket_of(&f, &c).await;
    assert_eq!(
        versioning(&f, &bucket).await,
        Some(BucketVersioningStatus::Enabled)
    );
    assert_eq!(lifecycle_ids(&f, &bucket).await, ["logs"]);
    let stored = policy(&f, &bucket).await.expect("the tenant's policy");
    assert!(
        stored.contains(&format!("arn:aws:s3:::{bucket}/keep/*")),
        "{stored}"
    );

    // Suspended, lifecycle removed, policy removed: each applied.
    f.patch_claim(
        "settings",
        json!({"spec": {"additionalConfig": {"versioning": "Suspended", "bucketLifecycle": null, "bucketPolicy": null}}}),
    )
    .await
    .expect("edit");
    let c = wait_config(&f, "settings", "True").await;
    assert_eq!(observed_generation(&c), c.metadata.generation);
    assert_eq!(
        versioning(&f, &bucket).await,
        Some(BucketVersioningStatus::Suspended)
    );
    assert!(lifecycle_ids(&f, &bucket).await.is_empty());
    assert_eq!(policy(&f, &bucket).await, None);

    // Back to never versioned: refused, the bucket untouched.
    let note = refused_update(&f, "settings", json!({"versioning": null})).await;
    assert!(
        note.contains("cannot be removed") && note.contains("Suspended"),
        "{note}"
    );
    assert_eq!(
        versioning(&f, &bucket).await,
        Some(BucketVersioningStatus::Suspended)
    );
    f.patch_claim(
        "settings",
        json!({"spec": {"additionalConfig": {"versioning": "Enabled", "bucketLifecycle": LIFECYCLE}}}),
    )
    .await
    .expect("edit");
    wait_config(&f, "settings", "True").await;

    // Changed on the store behind the claim: put back by the next check.
    let root = f.store.root_client();
    root.put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Suspended)
                .build(),
        )
        .send()
        .await
        .expect("suspend behind the claim");
    root.delete_bucket_lifecycle()
        .bucket(&bucket)
        .send()
        .await
        .expect("drop the rules behind the claim");
    wait_for(T, "the settings put back", || async {
        let back = versioning(&f, &bucket).await == Some(BucketVersioningStatus::Enabled)
            && lifecycle_ids(&f, &bucket).await == ["logs"];
        Ok(back.then_some(()))
    })
    .await
    .expect("restored");
    wait_event(&f.admin, NS, "settings", |r, n| {
        r == "ConfigRestored" && n.contains("versioning") && n.contains("bucketLifecycle")
    })
    .await
    .expect("a ConfigRestored Event");

    // Versions and delete markers go with the claim (reclaim policy Delete).
    let (s3, _) = f.claim_client("settings").await;
    for body in ["one", "two"] {
        s3.put_object()
            .bucket(&bucket)
            .key("data.txt")
            .body(body.as_bytes().to_vec().into())
            .send()
            .await
            .expect("put");
    }
    s3.delete_object()
        .bucket(&bucket)
        .key("data.txt")
        .send()
        .await
        .expect("delete");
    let listed = root
        .list_object_versions()
        .bucket(&bucket)
        .send()
        .await
        .expect("versions");
    assert_eq!(listed.versions().len(), 2, "two versions kept");
    assert_eq!(listed.delete_markers().len(), 1, "and a delete marker");
    f.claims()
        .delete("settings", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&f.claims(), "settings", T)
        .await
        .expect("claim gone");
    f.assert_nothing_left(&[bucket]).await;
    f.stop().await;
}

/// Object lock is set when the bucket is created, and only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_lock_is_set_at_creation_and_refused_after_bind() {
    let f = Fixture::start().await;
    configurable_class(&f).await;
    let lock = [("objectLockMode", "GOVERNANCE"), ("objectLockDays", "1")];
    let c = f.bound_claim_of("configurable", "locked", &lock).await;
    let bucket = bucket_of(&f, &c).await;
    let out = f
        .store
        .root_client()
        .get_object_lock_configuration()
        .bucket(&bucket)
        .send()
        .await
        .expect("lock configuration");
    let retention = out
        .object_lock_configuration()
        .and_then(|c| c.rule())
        .and_then(|r| r.default_retention())
        .expect("default retention");
    assert_eq!(retention.days(), Some(1));
    assert_eq!(
        versioning(&f, &bucket).await,
        Some(BucketVersioningStatus::Enabled)
    );

    let c = f.bound_claim_of("configurable", "unlocked", &[]).await;
    let plain = bucket_of(&f, &c).await;
    let note = refused_update(
        &f,
        "unlocked",
        json!({"objectLockMode": "GOVERNANCE", "objectLockDays": "1"}),
    )
    .await;
    assert!(
        note.contains("only be set when the bucket is created"),
        "{note}"
    );
    let unlocked = f
        .store
        .root_client()
        .get_object_lock_configuration()
        .bucket(&plain)
        .send()
        .await;
    assert!(unlocked.is_err(), "no object lock on {plain}: {unlocked:?}");
    for name in ["locked", "unlocked"] {
        f.claims()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete claim");
        wait_gone(&f.claims(), name, T).await.expect("claim gone");
    }
    f.assert_nothing_left(&[bucket, plain]).await;
    f.stop().await;
}

/// A store without these S3 settings (s3s-fs answers `NotImplemented`):
/// the claim fails with a message naming the key to remove, instead of
/// retrying a server error forever, and its deletion leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_the_setting_fails_the_claim_with_the_key_to_remove() {
    let f = Fixture::start().await;
    let (key, secret) = f.env.s3_root_credentials();
    obc_tests::reliability::register_secret(&secret);
    obc_tests::setup::create_admin_secret(&f.admin, "obc-system", "s3s-admin", &key, &secret)
        .await
        .expect("admin secret");
    let endpoint = f.env.s3_endpoint();
    let params = [
        ("endpoint", endpoint.as_str()),
        ("adminSecretName", "s3s-admin"),
        ("adminSecretNamespace", "obc-system"),
        ("credentialsMode", "shared-admin"),
        ("ownership", "marker"),
        ("forceDelete", "true"),
        ("allowedConfig", "versioning"),
    ];
    obc_tests::setup::create_class(
        &f.admin,
        "s3s",
        "objectbucket.io/sample-s3",
        "Delete",
        params,
    )
    .await
    .expect("class");
    let message = failed_claim(&f, "s3s", "unversioned", json!({"versioning": "Enabled"})).await;
    assert!(
        message.contains("does not support versioning") && message.contains("remove versioning"),
        "{message}"
    );
    f.claims()
        .delete("unversioned", &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_gone(&f.claims(), "unversioned", T)
        .await
        .expect("claim gone");
    let left = f.env.s3_client().list_buckets().send().await.expect("list");
    assert!(
        !left
            .buckets()
            .iter()
            .any(|b| b.name().is_some_and(|n| n.starts_with("unversioned"))),
        "{:?}",
        left.buckets()
    );
    f.stop().await;
}
