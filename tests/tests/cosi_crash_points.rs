//! Every COSI crash point (`lib_provisioner::cosi::failpoint::POINTS`): the
//! controller (both roles, file-backed recording provisioner) is aborted
//! right after the write or call a point is named for, and started again.
//! For each point, a BucketClaim and a BucketAccess reach ready and are
//! deleted; afterwards the store holds nothing, no object is left, and
//! `create_bucket` ran once for the Bucket (twice only when the process
//! died between the call and its record, which the contract's idempotency
//! covers: still one bucket).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use lib_provisioner::cosi::api::*;
use lib_provisioner::cosi::failpoint::POINTS;
use obc_tests::cosi_recording::{CosiCall, CosiRecorder, DRIVER, install_cosi_crds};
use obc_tests::setup::{spawn_provisioner, start_with_crds};
use tokio::process::Child;

const BIN: &str = env!("CARGO_BIN_EXE_cosi-crash");
const T: Duration = Duration::from_secs(40);

fn spawn(kubeconfig: &Path, store: &Path, point: Option<&str>, log: &Path) -> Child {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env_clear().env("COSI_STORE_FILE", store);
    if let Some(p) = point {
        cmd.env("OBC_FAILPOINTS", p);
    }
    spawn_provisioner(&mut cmd, kubeconfig, "info", log).expect("cosi-crash starts")
}

/// Waits until `done` holds or the process exits; `true` if it exited.
/// A crash point right after the write that makes `done` hold aborts the
/// process a moment after that write is seen: its log says so first, and
/// then the exit is waited for (without it, `done` won the race).
async fn until_done_or_exit<F, Fut>(
    child: &mut Child,
    (log, crashes): (&Path, usize),
    what: &str,
    done: F,
) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return true;
        }
        if done().await {
            return aborts(log) > crashes && exits(child, what).await;
        }
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How often the point's processes said they abort at the armed crash
/// point (the log is appended to by each process of the point).
fn aborts(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |text| {
        text.lines()
            .filter(|l| l.starts_with("failpoint ") && l.ends_with(": aborting"))
            .count()
    })
}

/// Waits for the process to exit; `true` once it has.
async fn exits(child: &mut Child, what: &str) -> bool {
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        assert!(
            start.elapsed() < T,
            "{what}: the process said it aborts but did not exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

async fn wait(what: &str, done: impl AsyncFn() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Objects {
    claims: Api<BucketClaim>,
    accesses: Api<BucketAccess>,
    secrets: Api<Secret>,
    buckets: Api<Bucket>,
}

impl Objects {
    async fn ready(&self) -> bool {
        let claim = self.claims.get_opt("data").await.ok().flatten();
        let access = self.accesses.get_opt("app").await.ok().flatten();
        claim.and_then(|c| c.status).is_some_and(|s| s.ready_to_use)
            && access
                .and_then(|a| a.status)
                .is_some_and(|s| s.ready_to_use)
    }

    async fn gone(&self, bucket: &str) -> bool {
        self.claims.get_opt("data").await.ok().flatten().is_none()
            && self.accesses.get_opt("app").await.ok().flatten().is_none()
            && self
                .secrets
                .get_opt("app-data")
                .await
                .ok()
                .flatten()
                .is_none()
            && self.buckets.get_opt(bucket).await.ok().flatten().is_none()
    }
}

async fn create(client: &Client, ns: &str) -> String {
    let claim = BucketClaim::new(
        "data",
        BucketClaimSpec {
            bucket_class_name: Some("gold".into()),
            protocols: Some(vec![ObjectProtocol::S3]),
            ..Default::default()
        },
    );
    let claim = Api::<BucketClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim");
    let access = BucketAccess::new(
        "app",
        BucketAccessSpec {
            bucket_claims: vec![BucketClaimAccess {
                bucket_claim_name: "data".into(),
                access_mode: BucketAccessMode::ReadOnly,
                access_secret_name: "app-data".into(),
            }],
            bucket_access_class_name: "ro".into(),
            protocol: ObjectProtocol::S3,
            service_account_name: None,
        },
    );
    Api::<BucketAccess>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &access)
        .await
        .expect("access");
    format!("bc-{}", claim.uid().expect("uid"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_cosi_crash_point_converges_with_nothing_orphaned() {
    let env = start_with_crds().await.expect("test environment starts");
    install_cosi_crds(&env).await.expect("COSI CRDs");
    let client = env.admin_client();
    let class = BucketClass::new(
        "gold",
        BucketClassSpec {
            driver_name: DRIVER.into(),
            deletion_policy: BucketDeletionPolicy::Delete,
            parameters: None,
        },
    );
    Api::<BucketClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class");
    let access_class = BucketAccessClass::new(
        "ro",
        BucketAccessClassSpec {
            driver_name: DRIVER.into(),
            authentication_type: AuthenticationType::Key,
            parameters: None,
            disallowed_bucket_access_modes: None,
            multi_bucket_access: None,
        },
    );
    Api::<BucketAccessClass>::all(client.clone())
        .create(&PostParams::default(), &access_class)
        .await
        .expect("access class");
    let dir: PathBuf = env.dir().join("cosi-crash");
    std::fs::create_dir_all(&dir).expect("dir");

    let first_deletion_point = POINTS
        .iter()
        .position(|p| *p == "cosi-after-secret-deleted")
        .expect("a deletion point");
    for (i, point) in POINTS.iter().enumerate() {
        let ns = format!("cosi-crash-{i}");
        env.ensure_namespace(&ns).await.expect("namespace");
        let store = dir.join(format!("store-{i}.json"));
        let log = dir.join(format!("{i:02}-{point}.log"));
        let o = Objects {
            claims: Api::namespaced(client.clone(), &ns),
            accesses: Api::namespaced(client.clone(), &ns),
            secrets: Api::namespaced(client.clone(), &ns),
            buckets: Api::all(client.clone()),
        };
        let mut child = spawn(env.kubeconfig_path(), &store, Some(point), &log);
        let bucket = create(&client, &ns).await;
        let mut crashed = until_done_or_exit(&mut child, (&log, 0), "ready", || o.ready()).await;
        if crashed {
            child = spawn(env.kubeconfig_path(), &store, None, &log);
            wait(&format!("{point}: ready after the restart"), async || {
                o.ready().await
            })
            .await;
        }
        o.accesses
            .delete("app", &DeleteParams::default())
            .await
            .expect("delete access");
        o.claims
            .delete("data", &DeleteParams::default())
            .await
            .expect("delete claim");
        if until_done_or_exit(&mut child, (&log, usize::from(crashed)), "gone", || {
            o.gone(&bucket)
        })
        .await
        {
            assert!(!crashed, "{point}: crashed twice");
            crashed = true;
            child = spawn(env.kubeconfig_path(), &store, None, &log);
            wait(
                &format!("{point}: everything gone after the restart"),
                async || o.gone(&bucket).await,
            )
            .await;
        }
        child.kill().await.expect("kill");
        assert!(crashed, "{point} was never reached (see {})", log.display());
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            log_text.contains(&format!("failpoint {point}: aborting")),
            "{point}: not the armed point that stopped it"
        );

        let state = CosiRecorder::read_file(&store).expect("store");
        assert!(
            state.buckets.is_empty(),
            "{point}: a bucket is left: {:?}",
            state.buckets
        );
        assert!(
            state.accounts.is_empty(),
            "{point}: an account is left: {:?}",
            state.accounts
        );
        let creates: Vec<_> = state
            .calls
            .iter()
            .filter(|c| matches!(c, CosiCall::CreateBucket(_)))
            .collect();
        assert!(
            creates
                .iter()
                .all(|c| **c == CosiCall::CreateBucket(bucket.clone())),
            "{point}: only the Bucket's own name: {creates:?}"
        );
        // The abort also cuts off whatever else the process was doing: a
        // create_bucket in flight for the Bucket is then asked again (by
        // the same name and claim UID: the same bucket). Once the claim
        // was ready, nothing creates again.
        match *point {
            "cosi-after-bucket-created" => assert_eq!(creates.len(), 2, "{point}: {creates:?}"),
            _ if i >= first_deletion_point => {
                assert_eq!(creates.len(), 1, "{point}: {creates:?}")
            }
            _ => assert!((1..=2).contains(&creates.len()), "{point}: {creates:?}"),
        }
        let grants: Vec<_> = state
            .calls
            .iter()
            .filter(|c| matches!(c, CosiCall::GrantAccess(..)))
            .collect();
        assert!(grants.iter().all(|c| matches!(c, CosiCall::GrantAccess(_, b) if b == &vec![(bucket.clone(), "ReadOnly".to_owned())])), "{point}: {grants:?}");
        println!("{point}: converged; calls {:?}", state.calls);
    }
}
