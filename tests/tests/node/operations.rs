//! Operations as a cluster does them, on a real node (`obc_tests::testenv::node`)
//! with the chart installed at two replicas: the leader Pod deleted, the
//! other takes over and a claim created meanwhile binds; a rolling upgrade
//! (`helm upgrade` changing the container's environment) keeps claims
//! served; a standby cut off the apiserver fails its liveness probe and is
//! restarted by the kubelet, and comes back Ready; no claim's secret key is
//! in any provisioner log (`kubectl logs`, current and previous
//! containers). One test: one node runs at a time on a host.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim};
use obc_tests::node_chart::{
    ChartOnNode, Cut, NAMESPACE, RELEASE, claim_bound, claim_bucket, ensure_namespace, is_ready,
};
use obc_tests::reliability::assert_no_leaks;
use obc_tests::wait_for;

const T: Duration = Duration::from_secs(90);
const APPS: &str = "apps";
/// The chart's `deadWatchLimitSeconds` here: how long the cut standby's
/// watches stay broken before its /healthz fails (the default 120 s would
/// make this test two minutes longer).
const DEAD_WATCH_LIMIT_SECONDS: u64 = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_survive_a_deleted_leader_a_rollout_and_a_liveness_restart() {
    let _host = crate::HOST.lock().await;
    let started = Instant::now();
    let cluster = install().await.unwrap_or_else(|e| panic!("{e:#}"));
    if let Err(e) = operations(&cluster).await {
        panic!("{e:#}\n{}", cluster.diagnostics().await);
    }
    let took = cluster.stop().await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("[node-ops] teardown: {:.1} s", took.as_secs_f64());
    eprintln!(
        "[node-ops] test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The chart at two replicas.
async fn install() -> Result<ChartOnNode> {
    // Liveness probed every 2 s, 2 failures restart: the standby's /healthz
    // fails after its watches have been dead for DEAD_WATCH_LIMIT_SECONDS
    // (the chart's `deadWatchLimitSeconds`; 120 by default), the kubelet
    // acts within 4 s of that.
    // The chart's own grace period (30 s), not the tests' 1 s: a leader
    // lets its in-flight reconciles finish and releases the Lease on
    // SIGTERM, which a 1 s grace period can cut short (then the standby
    // waits for the Lease to expire).
    ChartOnNode::start(&[
        "terminationGracePeriodSeconds=30".into(),
        "replicaCount=2".into(),
        "livenessProbe.periodSeconds=2".into(),
        "livenessProbe.failureThreshold=2".into(),
        format!("deadWatchLimitSeconds={DEAD_WATCH_LIMIT_SECONDS}"),
    ])
    .await
}

async fn operations(cluster: &ChartOnNode) -> Result<()> {
    let client = cluster.client.clone();
    let phase = Instant::now();
    cluster.wait_provisioners_ready(2, T).await?;
    eprintln!(
        "[node-ops] 2 provisioner Pods Ready {:.2} s after helm install returned",
        phase.elapsed().as_secs_f64()
    );
    ensure_namespace(&cluster.client, APPS).await?;
    let took = claim_bound(&client, APPS, "before").await?;
    eprintln!(
        "[node-ops] claim create → Bound: {:.2} s",
        took.as_secs_f64()
    );
    let before_bucket = claim_bucket(&client, APPS, "before").await?;
    let before_secret = secret_data(cluster, "before").await?;

    failover(cluster).await?;
    rollout(cluster, &before_secret).await?;
    liveness_restart(cluster).await?;

    // Still Bound, same Secret, same bucket.
    ensure!(secret_data(cluster, "before").await? == before_secret);
    ensure!(
        obc_tests::node_chart::bucket_exists(&cluster.store, &before_bucket).await,
        "the first claim's bucket is gone"
    );
    for name in ["before", "failover", "rollout"] {
        claim_bucket(&client, APPS, name).await?;
    }

    // No claim's secret key, nor the admin's, in any container's log.
    let logs = cluster.provisioner_logs().await?;
    ensure!(!logs.is_empty(), "no provisioner logs");
    let dir = cluster.node.dir().join("pod-logs");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("provisioners.log"), &logs)?;
    let files = assert_no_leaks(&dir).context("a credential in the provisioner logs")?;
    ensure!(files == 1);
    Ok(())
}

async fn secret_data(cluster: &ChartOnNode, name: &str) -> Result<String> {
    let s = Api::<Secret>::namespaced(cluster.client.clone(), APPS)
        .get(name)
        .await?;
    Ok(serde_json::to_string(&s.data)?)
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// The leader Pod deleted (as `kubectl delete pod`): the standby takes the
/// Lease and binds a claim created right after the delete. The Lease's
/// holder is sampled throughout: the leader must release it on SIGTERM
/// (not leave the standby to wait for it to expire).
async fn failover(cluster: &ChartOnNode) -> Result<()> {
    let client = &cluster.client;
    let leader = wait_for(T, "a leader", || async { cluster.leader().await })
        .await
        .context("the Lease")?;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let deleted = Instant::now();
    let changes = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let leases = Api::<Lease>::namespaced(client.clone(), NAMESPACE);
        let changes = changes.clone();
        tokio::spawn(async move { holder_changes(&leases, deleted, &changes).await })
    };
    pods.delete(&leader, &DeleteParams::default()).await?;
    // Bound by whichever replica leads: the deleted one finishes its
    // in-flight reconciles before it gives the Lease up.
    let took = claim_bound(client, APPS, "failover").await?;
    let bound = deleted.elapsed();
    let new_leader = wait_for(T, "another replica to lead", || async {
        Ok(cluster.leader().await?.filter(|l| *l != leader))
    })
    .await?;
    let took_over = deleted.elapsed();
    sampler.abort();
    let changes = changes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    eprintln!(
        "[node-ops] leader {leader} deleted → claim created meanwhile Bound: {:.2} s (created {:.2} s after the delete); {new_leader} leads (checked at {:.2} s); the Lease's holder over time: {}",
        bound.as_secs_f64(),
        bound.saturating_sub(took).as_secs_f64(),
        took_over.as_secs_f64(),
        changes.join(", ")
    );
    ensure!(
        changes.iter().any(|c| c.ends_with("(released)")),
        "the deleted leader did not release the Lease on SIGTERM: {changes:?}"
    );
    cluster.wait_provisioners_ready(2, T).await?;
    Ok(())
}

/// Records the Lease's holder each time it changes, with the time since
/// `since`, until aborted.
async fn holder_changes(leases: &Api<Lease>, since: Instant, changes: &Mutex<Vec<String>>) {
    let mut last: Option<Option<String>> = None;
    loop {
        if let Ok(lease) = leases.get(obc_tests::node_chart::LEASE).await {
            let holder = lease.spec.and_then(|s| s.holder_identity);
            if last.as_ref() != Some(&holder) {
                changes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!(
                        "{:.2} s {}",
                        since.elapsed().as_secs_f64(),
                        holder.as_deref().unwrap_or("(released)")
                    ));
                last = Some(holder);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `helm upgrade` changes the container's environment (RUST_LOG): the
/// Deployment rolls both Pods; a claim created during the rollout binds, the
/// existing one stays Bound with its Secret unchanged throughout.
async fn rollout(cluster: &ChartOnNode, before_secret: &str) -> Result<()> {
    let client = &cluster.client;
    let old: Vec<String> = cluster.provisioner_pods().await?.iter().map(name).collect();
    let started = Instant::now();
    cluster.helm.install(
        "upgrade",
        &["logLevel=info\\,lib_provisioner=debug\\,sample_provisioner=debug".into()],
    )?;
    let took = claim_bound(client, APPS, "rollout").await?;
    eprintln!(
        "[node-ops] claim created during the rollout → Bound: {:.2} s",
        took.as_secs_f64()
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    let claims = Api::<ObjectBucketClaim>::namespaced(client.clone(), APPS);
    wait_for(
        Duration::from_secs(120),
        "the rollout to complete",
        || async {
            // Throughout: the existing claim Bound, its Secret as it was.
            let before = claims.get("before").await?;
            ensure!(
                before.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound),
                "the existing claim left Bound during the rollout: {:?}",
                before.status
            );
            ensure!(
                secret_data(cluster, "before").await? == before_secret,
                "the existing claim's Secret changed during the rollout"
            );
            let d = deployments.get(RELEASE).await?;
            let status = d.status.context("status")?;
            let want = d.spec.replicas;
            let done = status.observed_generation >= d.metadata.generation
            && status.updated_replicas == want
            && status.replicas == want
            && status.ready_replicas == want
            && status.terminating_replicas.unwrap_or(0) == 0
            // The old Pods gone, not only terminating.
            && cluster.provisioner_pods().await?.len() == 2;
            Ok(done.then_some(()))
        },
    )
    .await?;
    let pods = cluster.wait_provisioners_ready(2, T).await?;
    eprintln!(
        "[node-ops] rollout complete {:.2} s after helm upgrade",
        started.elapsed().as_secs_f64()
    );
    for pod in &pods {
        ensure!(!old.contains(&name(pod)), "{} was not replaced", name(pod));
        let env = pod.spec.as_ref().context("spec")?.containers[0]
            .env
            .clone()
            .unwrap_or_default();
        ensure!(
            env.iter()
                .any(|e| e.name == "RUST_LOG"
                    && e.value.as_deref().is_some_and(|v| v.contains("debug"))),
            "{}: {env:?}",
            name(pod)
        );
    }
    Ok(())
}

/// The standby cut off the apiserver: its watches fail, /healthz fails
/// after the library's limit, the kubelet restarts the container, which
/// comes back Ready once the cut is mended.
async fn liveness_restart(cluster: &ChartOnNode) -> Result<()> {
    let client = &cluster.client;
    let leader = wait_for(T, "a leader", || async { cluster.leader().await }).await?;
    let pods = cluster.wait_provisioners_ready(2, T).await?;
    let standby = pods
        .iter()
        .find(|p| name(p) != leader)
        .context("no standby")?;
    let standby_name = name(standby);
    let ip = standby
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("the standby's IP")?;
    let restarts = |p: &Pod| -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map_or(0, |c| c.restart_count)
    };
    let before = restarts(standby);
    let cut_at = Instant::now();
    let cut = Cut::start(&ip, obc_tests::testenv::node::APISERVER_PORT)?;
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let restarted = wait_for(
        Duration::from_secs(DEAD_WATCH_LIMIT_SECONDS + 60),
        format!("{standby_name} to be restarted by its liveness probe"),
        || async {
            let p = api.get(&standby_name).await?;
            Ok((restarts(&p) > before).then_some(p))
        },
    )
    .await?;
    let took = cut_at.elapsed();
    eprintln!(
        "[node-ops] standby {standby_name} cut off the apiserver → restarted: {:.1} s",
        took.as_secs_f64()
    );
    ensure!(
        took >= Duration::from_secs(DEAD_WATCH_LIMIT_SECONDS),
        "restarted {took:?} after the cut, before its watches were dead for {DEAD_WATCH_LIMIT_SECONDS} s"
    );
    drop(cut);
    let events = Api::<Event>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().fields(&format!("involvedObject.name={standby_name}")))
        .await?;
    let said: Vec<String> = events
        .items
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default()
            )
        })
        .collect();
    ensure!(
        said.iter().any(|m| m.contains("failed liveness probe")),
        "no liveness restart among the Pod's events: {said:#?}"
    );
    ensure!(
        cluster.leader().await?.as_deref() == Some(leader.as_str()),
        "the leader changed"
    );
    let mended = Instant::now();
    wait_for(T, format!("{standby_name} Ready again"), || async {
        let p = api.get(&standby_name).await?;
        Ok(is_ready(&p).then_some(()))
    })
    .await?;
    eprintln!(
        "[node-ops] restarted standby Ready {:.1} s after the cut was mended (restart count {})",
        mended.elapsed().as_secs_f64(),
        restarts(&restarted)
    );
    Ok(())
}
