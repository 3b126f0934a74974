//! The reliability suite (issue 5): no crash, fault or bad input loses a
//! bucket, leaves an orphan or wedges a claim, against the real control
//! plane and the real S3 server (s3s-fs).
//!
//! The provisioner under test is the sample S3 provisioner, run as a
//! separate process (`crash-provisioner`, built with the library's
//! `failpoints` feature) under the ServiceAccount and RBAC of `deploy/`, so
//! that it can abort at a named point, be SIGKILLed, frozen and restarted.
//! Its stdout and stderr go to files under
//! `target/tmp/reliability-logs/run-<pid>/`, which every test scans for
//! credentials at its end.
//!
//! ```sh
//! cargo test -p obc-tests --test e2e -- reliability:: --test-threads=2
//! OBC_SOAK_CLAIMS=1000 OBC_SOAK_KILLS=40 cargo test -p obc-tests --test e2e -- reliability:: --ignored
//! ```
//!
//! One test binary, one module a theme: crash points, random kills,
//! dependency faults, two replicas, bad input, upgrades, and credentials in
//! logs. What several of them share (the [`Suite`], claim helpers, the
//! metrics reader) is here.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim, ObjectBucketClaimSpec};
use obc_tests::TestEnv;
use obc_tests::reliability::{
    Classes, Deleted, Expectations, Kind, Launch, PROVISIONER, Proc, SHARED_BUCKET, Summary,
    assert_no_leaks, bucket_of, create_classes, install_sample, log_root, register_claim_secrets,
};

mod bad_input;
mod cosi_crash_points;
mod cosi_modes;
mod crash_points;
mod faults;
mod random_kills;
mod replicas;
mod secrets_in_logs;
mod tenant_attacks;
mod upgrades;

const BIN: &str = env!("CARGO_BIN_EXE_crash-provisioner");
/// How long one claim may take to converge after a restart.
const T: Duration = Duration::from_secs(45);
/// The label value of [`obc_tests::reliability::PROVISIONER`].
const LABEL: &str = "objectbucket.io-sample-s3";

fn logs() -> &'static Path {
    log_root(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

struct Suite {
    env: TestEnv,
    admin: Client,
    kubeconfig: PathBuf,
}

impl Suite {
    async fn start() -> Self {
        let env = TestEnv::start().await.expect("test environment starts");
        let kubeconfig = install_sample(&env)
            .await
            .expect("sample provisioner installs");
        // Its garbage collector deletes the Secrets and ConfigMaps of
        // deleted claims, as in any cluster (after the CRDs: it discovers
        // resource types at start).
        env.start_controller_manager()
            .await
            .expect("kube-controller-manager starts");
        Self {
            admin: env.admin_client(),
            env,
            kubeconfig,
        }
    }

    fn launch(&self, tag: &str) -> Launch {
        Launch::new(BIN, &self.kubeconfig, tag)
    }

    fn expect(&self, namespaces: &[&str]) -> Expectations {
        Expectations {
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            preexisting: BTreeSet::from([SHARED_BUCKET.to_owned()]),
            ..Default::default()
        }
    }

    /// Creates namespace `ns` and the three classes of [`create_classes`],
    /// named after it, for [`PROVISIONER`].
    async fn namespace(&self, ns: &str) -> Result<Classes> {
        self.env.ensure_namespace(ns).await?;
        create_classes(&self.env, &self.admin, ns, PROVISIONER).await
    }

    /// Starts a suite, runs the scenario titled `title` over `namespaces`
    /// in it, then [`finish`]es.
    async fn run(
        title: &str,
        namespaces: &[&str],
        scenario: impl AsyncFnOnce(&Suite, &mut Summary) -> Result<()>,
    ) {
        Self::start()
            .await
            .run_started(title, namespaces, scenario)
            .await;
    }

    /// [`Suite::run`] in a suite started otherwise.
    async fn run_started(
        self,
        title: &str,
        namespaces: &[&str],
        scenario: impl AsyncFnOnce(&Suite, &mut Summary) -> Result<()>,
    ) {
        let mut summary = Summary::new(title);
        let result = scenario(&self, &mut summary).await;
        finish(&self, namespaces, summary, result).await;
    }
}

/// Prints the summary, scans every log for credentials, then fails if the
/// scenario failed.
async fn finish(suite: &Suite, namespaces: &[&str], mut summary: Summary, result: Result<()>) {
    let registered = register_claim_secrets(&suite.admin, namespaces)
        .await
        .unwrap_or(0);
    let scan = assert_no_leaks(logs());
    match &scan {
        Ok(files) => summary.note("logs scanned for credentials", files),
        Err(_) => summary.note("logs scanned for credentials", "LEAK"),
    }
    summary.note("claim Secrets registered", registered);
    summary.failed = result.is_err() || scan.is_err() || !summary.counts.clean();
    summary.print(logs());
    if let Err(e) = result {
        panic!("{e:#}");
    }
    if let Err(e) = scan {
        panic!("{e:#}");
    }
    assert_eq!(summary.counts.lost, 0, "buckets lost");
    assert_eq!(summary.counts.orphaned, 0, "orphans left");
}

fn claims(client: &Client, ns: &str) -> Api<ObjectBucketClaim> {
    Api::namespaced(client.clone(), ns)
}

async fn create(client: &Client, ns: &str, name: &str, spec: ObjectBucketClaimSpec) -> Result<()> {
    claims(client, ns)
        .create(&PostParams::default(), &ObjectBucketClaim::new(name, spec))
        .await
        .with_context(|| format!("creating claim {ns}/{name}"))?;
    Ok(())
}

/// Records a claim for deletion (its UID and bucket), then deletes it.
async fn delete_claim(client: &Client, ns: &str, name: &str, kind: &Kind) -> Result<Deleted> {
    let claim = claims(client, ns).get(name).await?;
    let d = Deleted {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        uid: claim.uid().unwrap_or_default(),
        bucket: bucket_of(client, &claim).await,
        kind: kind.clone(),
        was_bound: claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound),
    };
    claims(client, ns)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {ns}/{name}"))?;
    Ok(d)
}

async fn all_gone(client: &Client, ns: &str, names: &[String]) -> Result<bool> {
    let list = claims(client, ns).list(&ListParams::default()).await?;
    Ok(!list.items.iter().any(|c| names.contains(&c.name_any())))
}

/// The kinds most scenarios cycle through.
const MIXED: [Kind; 4] = [
    Kind::GeneratedDelete,
    Kind::ExactDelete,
    Kind::GeneratedRetain,
    Kind::Shared,
];

/// Creates a claim for each of `names`, of the kinds of [`MIXED`] in turn,
/// the `i`th with exact names unique by `<unique>-<i>`; returns their kinds.
async fn create_mixed(
    client: &Client,
    ns: &str,
    classes: &Classes,
    names: &[String],
    unique: &str,
) -> Result<Vec<Kind>> {
    let mut kinds = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let kind = MIXED[i % MIXED.len()].clone();
        create(
            client,
            ns,
            name,
            kind.spec(classes, &format!("{unique}-{i}")),
        )
        .await?;
        kinds.push(kind);
    }
    Ok(kinds)
}

/// Fails, with the tail of its log, if the provisioner process exited.
fn still_running(proc: &mut Proc) -> Result<()> {
    ensure!(
        proc.is_running(),
        "the provisioner exited: {}",
        proc.log_tail(30)
    );
    Ok(())
}

fn message(c: &ObjectBucketClaim) -> String {
    c.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

fn phase(c: &ObjectBucketClaim) -> Option<ClaimPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

fn free_addr() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

async fn metric(addr: SocketAddr, line_prefix: &str) -> Result<f64> {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(line_prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}
