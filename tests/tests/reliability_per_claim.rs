//! Crash safety of per-claim credentials: the sample provisioner, as its own
//! process under `deploy/rbac.yaml`, against RustFS (S3 and the MinIO admin
//! API), killed at each of its own crash points between the admin calls
//! (`sample_provisioner::credentials::POINTS`), and around a new bucket's
//! settings (`sample_provisioner::s3::BUCKET_POINTS`: versioning and a
//! lifecycle rule, which the store must hold after the restart). After each
//! kill a fresh
//! process must bind the claims with working credentials, and the store
//! must hold exactly one user and one policy per live claim: none doubled,
//! none orphaned, also when the claims are deleted while the process is
//! down (the ObjectBucket then records no user yet).

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_s3::primitives::ByteStream;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::reliability::{
    SampleSuite, Summary, claim_bucket, claim_keys, log_root, register_claim_secrets,
    wait_all_bound, wait_all_gone, walked_settings,
};
use obc_tests::testenv::s3_client_for;
use sample_provisioner::credentials::{POINTS, policy_name, user_name};
use sample_provisioner::s3::BUCKET_POINTS;

const BIN: &str = env!("CARGO_BIN_EXE_crash-provisioner");
const T: Duration = Duration::from_secs(45);
const PROVISIONER: &str = "objectbucket.io/sample-s3-per-claim";
fn logs() -> &'static Path {
    log_root(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The provisioner's users and policies on the store.
async fn store_identities(suite: &SampleSuite) -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let users = suite.store_admin.list_users().await?;
    let policies = suite.store_admin.list_canned_policies().await?;
    Ok((
        users.into_keys().filter(|u| u.starts_with("obc")).collect(),
        policies
            .into_iter()
            .filter(|p| p.starts_with("obc-claim-"))
            .collect(),
    ))
}

/// Exactly the users and policies of `uids`.
async fn expect_identities(suite: &SampleSuite, uids: &[String], when: &str) -> Result<()> {
    let (users, policies) = store_identities(suite).await?;
    let want_users: BTreeSet<String> = uids.iter().map(|u| user_name(u)).collect();
    let want_policies: BTreeSet<String> = uids.iter().map(|u| policy_name(u)).collect();
    ensure!(
        users == want_users,
        "{when}: users {users:?}, expected {want_users:?}"
    );
    ensure!(
        policies == want_policies,
        "{when}: policies {policies:?}, expected {want_policies:?}"
    );
    Ok(())
}

async fn bound(client: &Client, ns: &str, names: &[String]) -> Result<bool> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    for n in names {
        let c = api.get(n).await?;
        if c.status.and_then(|s| s.phase) != Some(ClaimPhase::Bound) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The claim's Secret reaches its bucket.
async fn credentials_work(suite: &SampleSuite, ns: &str, name: &str) -> Result<()> {
    let (key, secret) = claim_keys(&suite.admin, ns, name).await?;
    let bucket = claim_bucket(&suite.admin, ns, name).await?;
    let client = s3_client_for(&suite.store.endpoint(), &key, &secret);
    client
        .put_object()
        .bucket(&bucket)
        .key("probe.txt")
        .body(ByteStream::from_static(b"probe"))
        .send()
        .await
        .with_context(|| format!("{ns}/{name}'s credentials on {bucket}"))?;
    Ok(())
}

async fn delete_all(client: &Client, ns: &str, names: &[String]) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    for n in names {
        api.delete(n, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// One iteration: `point` armed while two claims (Delete, Retain)
/// provision; after the crash, either a fresh process binds them and they
/// are deleted, or they are deleted while the process is down.
async fn iteration(
    suite: &SampleSuite,
    point: &str,
    idx: usize,
    delete_while_down: bool,
) -> Result<()> {
    let ns = format!("pc-{idx}");
    suite.env.ensure_namespace(&ns).await?;
    let mut proc = suite.launch.armed(point).start(logs())?;
    let names: Vec<String> = ["del", "ret"].iter().map(|n| (*n).to_owned()).collect();
    let api: Api<ObjectBucketClaim> = Api::namespaced(suite.admin.clone(), &ns);
    for (name, class) in names.iter().zip(["pc-delete", "pc-retain"]) {
        let settings = (name == "del").then(walked_settings);
        let spec = ObjectBucketClaimSpec {
            storage_class_name: class.into(),
            generate_bucket_name: Some(format!("pc{idx}-{name}")),
            additional_config: settings,
            ..Default::default()
        };
        api.create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
            .await?;
    }
    let crashed = proc
        .crashed_or(T, Duration::ZERO, || bound(&suite.admin, &ns, &names))
        .await?;
    ensure!(crashed && proc.crashed_at(point), "did not die at {point}");
    let mut uids = Vec::new();
    for n in &names {
        uids.push(api.get(n).await?.metadata.uid.context("uid")?);
    }
    if delete_while_down {
        delete_all(&suite.admin, &ns, &names).await?;
        let _proc = suite.launch.unarmed().start(logs())?;
        wait_all_gone(&suite.admin, &ns, &names, T).await?;
        expect_identities(suite, &[], &format!("{point}, deleted while down")).await?;
        return Ok(());
    }
    let _proc = suite.launch.unarmed().start(logs())?;
    wait_all_bound(&suite.admin, &ns, &names, T).await?;
    for n in &names {
        credentials_work(suite, &ns, n).await?;
    }
    let bucket = claim_bucket(&suite.admin, &ns, "del").await?;
    suite.holds_walked_settings(&bucket, point).await?;
    expect_identities(suite, &uids, &format!("{point}, after the restart")).await?;
    register_claim_secrets(&suite.admin, &[ns.as_str()]).await?;
    delete_all(&suite.admin, &ns, &names).await?;
    wait_all_gone(&suite.admin, &ns, &names, T).await?;
    expect_identities(suite, &[], &format!("{point}, after deletion")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_claim_credentials_survive_a_crash_between_any_two_admin_calls() {
    let classes = [("pc-delete", "Delete"), ("pc-retain", "Retain")];
    let allowed = [("allowedConfig", "versioning,bucketLifecycle")];
    let suite = SampleSuite::start_with(BIN, PROVISIONER, "per-claim", &classes, &allowed)
        .await
        .expect("suite starts");
    let mut summary = Summary::new("per-claim credentials crash points");
    let mut result = Ok(());
    let mut idx = 0;
    let points: Vec<&str> = POINTS.iter().chain(BUCKET_POINTS).copied().collect();
    'points: for point in points.iter().copied() {
        for delete_while_down in [false, true] {
            idx += 1;
            if let Err(e) = iteration(&suite, point, idx, delete_while_down).await {
                result =
                    Err(e.context(format!("{point} (delete while down: {delete_while_down})")));
                break 'points;
            }
            summary.counts.scenarios += 1;
            summary.counts.crashes += 1;
        }
    }
    summary.note("crash points", points.len());
    summary.note(
        "variants per point",
        "restart then delete; delete while down",
    );
    suite.finish(summary, logs(), result).await.unwrap();
}
