//! Crash safety after bind: the sample provisioner, as its own process
//! under `deploy/rbac.yaml`, against RustFS, killed at each crash point of
//! an update of a Bound claim's `additionalConfig` and of a rotation of its
//! credentials (`lib_provisioner::failpoint::AFTER_BIND_POINTS`, and the
//! Secret's switch during a rotation). After each kill a fresh process must
//! finish the change: the quota and bucket settings (versioning, a
//! lifecycle rule) applied on the store and recorded, or the claim on new
//! credentials that work with the previous ones revoked, exactly one user
//! per claim on the store, and nothing left once the claim is deleted.

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lib_provisioner::api::{
    APPLIED_CONFIG_ANNOTATION, ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
    ROTATE_ANNOTATION, ROTATED_ANNOTATION,
};
use lib_provisioner::failpoint::AFTER_BIND_POINTS;
use lib_provisioner::{CONFIG_APPLIED_CONDITION, CREDENTIALS_ROTATED_CONDITION};
use obc_tests::reliability::{
    SampleSuite, Summary, claim_bucket, claim_keys, log_root, register_claim_secrets,
    register_secret, wait_all_bound, wait_all_gone, walked_settings,
};
use obc_tests::testenv::s3_client_for;
use sample_provisioner::credentials::{policy_name, rotated_user_name, user_name};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_crash-provisioner");
const T: Duration = Duration::from_secs(45);
const PROVISIONER: &str = "objectbucket.io/sample-s3-after-bind";
const CLASS: &str = "ab-delete";
/// What the update asks for: a larger quota, and bucket settings the
/// store must hold after any crash (issue 38: each setting's crash points
/// are the update's).
fn updated_config() -> std::collections::BTreeMap<String, String> {
    let mut config = walked_settings();
    config.insert("maxSize".to_owned(), "2Mi".to_owned());
    config
}

fn logs() -> &'static Path {
    log_root(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// What a scenario changes on the Bound claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Update,
    Rotate,
}

/// The change that reaches `point`.
fn change_for(point: &str) -> Change {
    if point.contains("updated") || point.contains("config") {
        Change::Update
    } else {
        Change::Rotate
    }
}

/// The claim's users and policy on the store.
async fn identities(suite: &SampleSuite, uid: &str) -> Result<(BTreeSet<String>, bool)> {
    let mine = [user_name(uid), rotated_user_name(uid)];
    let users = suite
        .store_admin
        .list_users()
        .await?
        .into_keys()
        .filter(|u| mine.contains(u))
        .collect();
    let policy = suite
        .store_admin
        .list_canned_policies()
        .await?
        .contains(&policy_name(uid));
    Ok((users, policy))
}

/// Whether the change asked for in iteration `idx` is complete.
async fn changed(suite: &SampleSuite, ns: &str, change: Change, idx: usize) -> Result<bool> {
    let claim = Api::<ObjectBucketClaim>::namespaced(suite.admin.clone(), ns)
        .get("c")
        .await?;
    let type_ = match change {
        Change::Update => CONFIG_APPLIED_CONDITION,
        Change::Rotate => CREDENTIALS_ROTATED_CONDITION,
    };
    let status = claim.status.as_ref().context("status")?;
    let condition = status.conditions.iter().find(|c| c.type_ == type_);
    Ok(match change {
        Change::Update => {
            condition.is_some_and(|c| c.status == "True")
                && status.observed_generation == claim.metadata.generation
        }
        Change::Rotate => {
            // The condition is written before the ObjectBucket records the
            // rotation done (the last crash point follows that record).
            let recorded = match claim.spec.object_bucket_name.as_deref() {
                Some(ob) => Api::<ObjectBucket>::all(suite.admin.clone())
                    .get(ob)
                    .await?
                    .metadata
                    .annotations
                    .and_then(|a| a.get(ROTATED_ANNOTATION).cloned()),
                None => None,
            };
            condition.is_some_and(|c| c.status == "True" && c.message.contains(&rotation(idx)))
                && recorded.as_deref() == Some(rotation(idx).as_str())
        }
    })
}

fn rotation(idx: usize) -> String {
    format!("rotation-{idx}")
}

/// The claim's Secret reaches its bucket.
async fn credentials_work(suite: &SampleSuite, ns: &str) -> Result<String> {
    let (key, secret) = claim_keys(&suite.admin, ns, "c").await?;
    register_secret(&secret);
    let bucket = claim_bucket(&suite.admin, ns, "c").await?;
    // RustFS answers 503 while it cannot check a quota just set.
    let client = s3_client_for(&suite.store.endpoint(), &key, &secret);
    obc_tests::rustfs::put_object_when_quota_ready(
        &client,
        &bucket,
        "probe.txt",
        b"probe".to_vec(),
    )
    .await
    .with_context(|| format!("{ns}/c's credentials on {bucket}"))?;
    Ok(key)
}

/// One scenario: a Bound claim, `point` armed while `change` is made, a
/// fresh process after the crash, the end state, the deletion.
async fn iteration(suite: &SampleSuite, point: &str, idx: usize) -> Result<()> {
    let ns = format!("ab-{idx}");
    suite.env.ensure_namespace(&ns).await?;
    let api: Api<ObjectBucketClaim> = Api::namespaced(suite.admin.clone(), &ns);
    let spec = ObjectBucketClaimSpec {
        storage_class_name: CLASS.into(),
        generate_bucket_name: Some(format!("ab{idx}")),
        additional_config: Some([("maxSize".to_owned(), "1Mi".to_owned())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &ObjectBucketClaim::new("c", spec))
        .await?;
    let names = vec!["c".to_owned()];
    let mut proc = suite.launch.unarmed().start(logs())?;
    wait_all_bound(&suite.admin, &ns, &names, T).await?;
    proc.kill().await;
    let uid = api.get("c").await?.metadata.uid.context("uid")?;
    let (before, _) = claim_keys(&suite.admin, &ns, "c").await?;

    let change = change_for(point);
    let mut proc = suite.launch.armed(point).start(logs())?;
    let patch = match change {
        Change::Update => json!({"spec": {"additionalConfig": updated_config()}}),
        Change::Rotate => json!({"metadata": {"annotations": {ROTATE_ANNOTATION: rotation(idx)}}}),
    };
    api.patch("c", &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    // A point right after the last write of the change: the write can be
    // seen a moment before the process aborts.
    let crashed = proc
        .crashed_or(T, Duration::from_secs(3), || {
            changed(suite, &ns, change, idx)
        })
        .await?;
    ensure!(crashed && proc.crashed_at(point), "did not die at {point}");

    let mut proc = suite.launch.unarmed().start(logs())?;
    obc_tests::wait_for(T, format!("{point}: the change finished"), || async {
        Ok(changed(suite, &ns, change, idx).await?.then_some(()))
    })
    .await?;
    let key = credentials_work(suite, &ns).await?;
    let (users, policy) = identities(suite, &uid).await?;
    ensure!(
        users == BTreeSet::from([key.clone()]) && policy,
        "{point}: the claim's users are {users:?} (policy: {policy}); its Secret holds {key}"
    );
    let claim = api.get("c").await?;
    let ob = Api::<ObjectBucket>::all(suite.admin.clone())
        .get(claim.spec.object_bucket_name.as_deref().context("bound")?)
        .await?;
    match change {
        Change::Update => {
            let applied = ob
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(APPLIED_CONFIG_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            ensure!(
                applied == serde_json::to_string(&updated_config())?,
                "{point}: recorded {applied}"
            );
            suite
                .holds_walked_settings(ob.bucket_name().context("bucket name")?, point)
                .await?;
            ensure!(
                key == before,
                "{point}: an update does not touch credentials"
            );
        }
        Change::Rotate => ensure!(key != before, "{point}: still on the previous key"),
    }
    register_claim_secrets(&suite.admin, &[ns.as_str()]).await?;
    let bucket = ob.bucket_name().context("bucket name")?.to_owned();
    let ob_name = ob.metadata.name.clone().context("OB name")?;
    api.delete("c", &DeleteParams::default()).await?;
    wait_all_gone(&suite.admin, &ns, &names, T).await?;
    let (users, policy) = identities(suite, &uid).await?;
    ensure!(
        users.is_empty() && !policy,
        "{point}, after deletion: {users:?} {policy}"
    );
    ensure!(
        suite
            .store
            .root_client()
            .head_bucket()
            .bucket(&bucket)
            .send()
            .await
            .is_err(),
        "{point}: bucket {bucket} outlived its claim"
    );
    ensure!(
        Api::<ObjectBucket>::all(suite.admin.clone())
            .get_opt(&ob_name)
            .await?
            .is_none(),
        "{point}: ObjectBucket {ob_name} outlived its claim"
    );
    proc.kill().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_and_rotations_survive_a_crash_at_every_point() {
    let allowed = [("allowedConfig", "maxSize,versioning,bucketLifecycle")];
    let suite = SampleSuite::start_with(
        BIN,
        PROVISIONER,
        "after-bind",
        &[(CLASS, "Delete")],
        &allowed,
    )
    .await
    .expect("suite starts");
    let mut summary = Summary::new("after-bind crash points (update, rotation)");
    // The Secret's switch is a provisioning point too; here it is armed
    // only once the claim is bound, so it fires in the rotation.
    let points: Vec<&str> = AFTER_BIND_POINTS
        .iter()
        .copied()
        .chain(["after-secret-written"])
        .collect();
    let mut result = Ok(());
    for (idx, point) in points.iter().enumerate() {
        if let Err(e) = iteration(&suite, point, idx).await {
            result = Err(e.context(point.to_string()));
            break;
        }
        summary.counts.scenarios += 1;
        summary.counts.crashes += 1;
    }
    summary.note("crash points", points.len());
    suite.finish(summary, logs(), result).await.unwrap();
}
