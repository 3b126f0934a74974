//! Dependency faults: the S3 store going away, apiserver restarts, and
//! 409 conflict storms.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use futures::future::join_all;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
use obc_tests::reliability::{
    Kind, PROVISIONER, Summary, converge, create_classes, register_claim_secrets, wait_all_bound,
    wait_all_gone, wait_event,
};
use serde_json::json;

use super::{
    LABEL, MIXED, Suite, T, all_gone, claims, create, create_mixed, delete_claim, free_addr, logs,
    message, metric, phase, still_running,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_outage_makes_claims_wait_with_a_message_then_bind_once() {
    Suite::run("S3 outage", &["s3down"], s3_outage).await;
}

async fn s3_outage(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "s3down";
    let classes = suite.namespace(ns).await?;
    let mut proc = suite.launch("s3-outage").start(logs())?;
    create(
        client,
        ns,
        "warm",
        Kind::GeneratedDelete.spec(&classes, "warm"),
    )
    .await?;
    wait_all_bound(client, ns, &["warm".to_owned()], T).await?;
    let mut x = suite.expect(&[ns]);

    // The store goes away; new claims wait, saying why, and keep retrying.
    suite.env.stop_s3().await;
    let names: Vec<String> = (0..MIXED.len()).map(|i| format!("down-{i}")).collect();
    let kinds = create_mixed(client, ns, &classes, &names, "down").await?;
    // A deletion during the outage waits too.
    x.deleted
        .push(delete_claim(client, ns, "warm", &Kind::GeneratedDelete).await?);
    let api = claims(client, ns);
    for name in names.iter().chain(std::iter::once(&"warm".to_owned())) {
        let c = obc_tests::wait_for(T, format!("{name} to say the store is down"), || async {
            let c = api.get(name).await?;
            let m = message(&c);
            Ok((m.contains("did not answer") && m.contains("retrying")).then_some(c))
        })
        .await?;
        if name != "warm" {
            ensure!(
                phase(&c) == Some(ClaimPhase::Pending),
                "{name} is {:?}: {}",
                phase(&c),
                message(&c)
            );
        }
        wait_event(client, ns, name, |reason, note| {
            reason == "ProvisionerUnavailable" && note.contains("did not answer")
        })
        .await?;
    }
    // It keeps retrying (with backoff) while the store is down.
    let before = proc
        .log()
        .matches("reconcile failed; retrying later")
        .count();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = proc
        .log()
        .matches("reconcile failed; retrying later")
        .count();
    ensure!(
        after >= before + names.len(),
        "no retries during the outage ({before} -> {after})"
    );
    summary.note("retries logged during the outage", after);
    ensure!(
        api.get_opt("warm").await?.is_some(),
        "the claim was deleted while its bucket could not be"
    );
    suite.env.start_s3().await?;
    summary.counts.faults += 1;
    wait_all_bound(client, ns, &names, T).await?;
    wait_all_gone(client, ns, &["warm".to_owned()], T).await?;
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after the store came back", &a)?;
    ensure!(
        a.buckets == 1 + 3,
        "expected the shared bucket and 3 new ones, found {}",
        a.buckets
    );
    register_claim_secrets(client, &[ns]).await?;

    // Down again while the claims are deleted.
    suite.env.stop_s3().await;
    for (name, kind) in names.iter().zip(kinds.iter()) {
        x.deleted.push(delete_claim(client, ns, name, kind).await?);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        !all_gone(client, ns, &names).await?,
        "claims were released while the store was down"
    );
    suite.env.start_s3().await?;
    summary.counts.faults += 1;
    wait_all_gone(client, ns, &names, T).await?;
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after deletion", &a)?;
    still_running(&mut proc)?;
    summary.counts.scenarios = 2;
    summary.note("claims", names.len() + 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restarts_mid_work_lose_nothing() {
    Suite::run("apiserver restarts", &["restart"], apiserver_restarts).await;
}

/// How long claims may take after an apiserver restart (a bound for the
/// test, not the figure): the restarted apiserver answers 410 Expired and,
/// until its RBAC cache fills, 403, for a few seconds; the figure is the
/// note "waiting claims done after the API answers the provisioner".
const AFTER_RESTART: Duration = Duration::from_secs(180);

/// When the restarted apiserver answers the provisioner's own identity on
/// everything its watches list (its RBAC cache fills some time after it
/// serves the admin): the instant recovery is measured from.
async fn answers_the_provisioner(suite: &Suite) -> Result<Instant> {
    let sa = suite
        .env
        .service_account_client("obc-system", "sample-provisioner")
        .await?;
    obc_tests::wait_for(
        AFTER_RESTART,
        "the apiserver to answer the provisioner",
        || {
            let sa = sa.clone();
            async move {
                let lp = kube::api::ListParams::default().limit(1);
                let ok = Api::<ObjectBucketClaim>::all(sa.clone())
                    .list(&lp)
                    .await
                    .is_ok()
                    && Api::<ObjectBucket>::all(sa.clone()).list(&lp).await.is_ok()
                    && Api::<k8s_openapi::api::storage::v1::StorageClass>::all(sa)
                        .list(&lp)
                        .await
                        .is_ok();
                Ok(ok.then_some(()))
            }
        },
    )
    .await?;
    Ok(Instant::now())
}

async fn apiserver_restarts(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "restart";
    let classes = suite.namespace(ns).await?;
    let mut launch = suite.launch("apiserver-restart");
    // With leader election on, so renewal failures are part of it.
    launch.leader = Some(("restart-a".into(), 15));
    let mut proc = launch.start(logs())?;
    let kinds = MIXED;
    let names: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    let spec = |i: usize| kinds[i % kinds.len()].spec(&classes, &format!("restart-{i}"));
    for (i, name) in names.iter().enumerate().take(10) {
        create(client, ns, name, spec(i)).await?;
    }
    // Restart while those provision; create the rest right after.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let took = Instant::now();
    suite.env.restart_apiserver().await?;
    summary.note(
        "apiserver restart #1",
        format!("{:.1}s", took.elapsed().as_secs_f64()),
    );
    summary.counts.faults += 1;
    for (i, name) in names.iter().enumerate().skip(10) {
        create(client, ns, name, spec(i)).await?;
    }
    let back = Instant::now();
    let answering = answers_the_provisioner(suite).await?;
    wait_all_bound(client, ns, &names, AFTER_RESTART).await?;
    summary.note(
        "all Bound after restart #1",
        format!("{:.1}s", back.elapsed().as_secs_f64()),
    );
    let first = answering.elapsed();
    let mut x = suite.expect(&[ns]);
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after restart #1", &a)?;
    register_claim_secrets(client, &[ns]).await?;

    let doomed: Vec<String> = names.iter().step_by(2).cloned().collect();
    for name in &doomed {
        let i: usize = name[1..].parse()?;
        x.deleted
            .push(delete_claim(client, ns, name, &kinds[i % kinds.len()]).await?);
    }
    let took = Instant::now();
    suite.env.restart_apiserver().await?;
    summary.note(
        "apiserver restart #2",
        format!("{:.1}s", took.elapsed().as_secs_f64()),
    );
    summary.counts.faults += 1;
    let back = Instant::now();
    let answering = answers_the_provisioner(suite).await?;
    wait_all_gone(client, ns, &doomed, AFTER_RESTART).await?;
    summary.note(
        "all deleted after restart #2",
        format!("{:.1}s", back.elapsed().as_secs_f64()),
    );
    let recovery = first.max(answering.elapsed());
    summary.note(
        "waiting claims done after the API answers the provisioner (max)",
        format!("{:.1}s (target <= 5s)", recovery.as_secs_f64()),
    );
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after restart #2", &a)?;
    ensure!(
        proc.is_running(),
        "the provisioner exited across the restarts: {}",
        proc.log_tail(40)
    );
    summary.counts.scenarios = 2;
    summary.note("claims", names.len());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_storm_delays_but_never_duplicates() {
    Suite::run("409 conflict storm", &["storm"], conflict_storm).await;
}

/// Patches every claim's labels and annotations, round after round (with
/// `pause` between rounds), until `stop` or for at most `max`; returns how
/// many writes it made and when it ended.
fn storm(
    client: Client,
    ns: &'static str,
    names: Vec<String>,
    stop: Arc<AtomicBool>,
    pause: Duration,
    max: Duration,
) -> tokio::task::JoinHandle<(usize, Instant)> {
    tokio::spawn(async move {
        let api = claims(&client, ns);
        let started = Instant::now();
        let mut writes = 0usize;
        let mut round = 0usize;
        while !stop.load(Ordering::Relaxed) && started.elapsed() < max {
            round += 1;
            let patches = names.iter().map(|name| {
                let api = api.clone();
                let body = json!({"metadata": {
                    "labels": {"storm": round.to_string()},
                    "annotations": {"example.com/storm": round.to_string()}
                }});
                async move {
                    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
                        .await
                        .is_ok()
                }
            });
            writes += join_all(patches).await.into_iter().filter(|ok| *ok).count();
            tokio::time::sleep(pause).await;
        }
        (writes, Instant::now())
    })
}

/// Creates `n` claims of mixed kinds named `<prefix><i>`.
async fn storm_claims(
    suite: &Suite,
    ns: &str,
    prefix: &str,
    n: usize,
) -> Result<(Vec<String>, Vec<Kind>)> {
    let classes = create_classes(&suite.env, &suite.admin, prefix, PROVISIONER).await?;
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let kinds = create_mixed(&suite.admin, ns, &classes, &names, prefix).await?;
    Ok((names, kinds))
}

async fn conflict_storm(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "storm";
    suite.env.ensure_namespace(ns).await?;
    let addr = free_addr()?;
    let mut launch = suite.launch("conflict-storm");
    launch.metrics = Some(addr);
    let mut proc = launch.start(logs())?;
    let (names, kinds) = storm_claims(suite, ns, "s", 16).await?;

    // 1. A steady storm (every claim written about every 100-150 ms) while
    // the claims provision: they bind while it blows.
    let stop = Arc::new(AtomicBool::new(false));
    let storm_started = Instant::now();
    let writer = storm(
        client.clone(),
        ns,
        names.clone(),
        stop.clone(),
        Duration::from_millis(100),
        Duration::from_secs(60),
    );
    let bound = wait_all_bound(client, ns, &names, Duration::from_secs(50)).await;
    let bound_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let (writes, storm_ended) = writer.await?;
    bound?;
    summary.counts.faults += 1;
    summary.note("steady storm: writes", writes);
    summary.note(
        "steady storm: all Bound after",
        format!("{:.1}s", (bound_at - storm_started).as_secs_f64()),
    );
    ensure!(
        bound_at < storm_ended,
        "the claims bound only after the storm ended"
    );
    // Absorbed inside a pass (re-read, re-plan), or a pass that gave up.
    let conflicts = metric(addr, "obc_conflicts_total").await?
        + metric(addr, "obc_reconciles_total{result=\"conflict\"}").await?;
    summary.note("steady storm: conflicts the library hit", conflicts);
    ensure!(
        conflicts >= 1.0,
        "the storm caused no conflict: the test proves nothing"
    );
    let mut x = suite.expect(&[ns]);
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after the steady storm", &a)?;
    register_claim_secrets(client, &[ns]).await?;
    // The library's writes kept the other writer's labels and annotations.
    for c in claims(client, ns).list(&ListParams::default()).await?.items {
        ensure!(
            c.labels().contains_key("storm")
                && c.annotations().contains_key("example.com/storm")
                && c.labels().get(PROVISIONER_LABEL).map(String::as_str) == Some(LABEL),
            "{}: labels {:?}, annotations {:?}",
            c.name_any(),
            c.labels(),
            c.annotations()
        );
    }

    // 2. A tight storm (no pause) for a bounded time while the claims are
    // deleted: they may stall while it blows (see
    // claims_make_progress_under_a_tight_conflict_storm), but converge
    // right after, and nothing is torn down twice or left behind.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = storm(
        client.clone(),
        ns,
        names.clone(),
        stop,
        Duration::ZERO,
        Duration::from_secs(8),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (name, kind) in names.iter().zip(kinds.iter()) {
        x.deleted.push(delete_claim(client, ns, name, kind).await?);
    }
    let (writes, storm_ended) = writer.await?;
    let left = claims(client, ns)
        .list(&ListParams::default())
        .await?
        .items
        .len();
    summary.note("tight storm: claims left when it ended", left);
    wait_all_gone(client, ns, &names, T).await?;
    summary.counts.faults += 1;
    summary.note("tight storm: writes", writes);
    summary.note(
        "tight storm: all gone after it ended",
        format!("{:.1}s", storm_ended.elapsed().as_secs_f64()),
    );
    let a = converge(&suite.env, client, &x, T).await?;
    summary.check("after deletion in the tight storm", &a)?;
    let deletes = metric(
        addr,
        "obc_provisioner_operations_total{operation=\"delete\",result=\"ok\"}",
    )
    .await?;
    let greenfield_delete = kinds.iter().filter(|k| !k.keeps_bucket()).count();
    summary.note("delete calls that succeeded", deletes);
    still_running(&mut proc)?;
    ensure!(
        deletes >= greenfield_delete as f64,
        "{deletes} delete calls for {greenfield_delete} buckets"
    );
    summary.counts.scenarios = 2;
    Ok(())
}

/// Claims rewritten faster than the library's read-then-patch cycle (every
/// few tens of milliseconds) must still bind while that goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_make_progress_under_a_tight_conflict_storm() {
    Suite::run("tight conflict storm", &["tight"], tight_storm).await;
}

async fn tight_storm(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "tight";
    suite.env.ensure_namespace(ns).await?;
    let mut proc = suite.launch("tight-storm").start(logs())?;
    let (names, _) = storm_claims(suite, ns, "t", 16).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = storm(
        client.clone(),
        ns,
        names.clone(),
        stop.clone(),
        Duration::ZERO,
        Duration::from_secs(40),
    );
    let started = Instant::now();
    let bound = wait_all_bound(client, ns, &names, Duration::from_secs(30)).await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (writes, _) = writer.await?;
    summary.counts.faults += 1;
    summary.note("storm writes", writes);
    summary.note(
        "all Bound in the storm after",
        format!("{:.1}s", took.as_secs_f64()),
    );
    bound.context("while the storm blew")?;
    // Without a storm they bind in 1-2 s.
    ensure!(
        took <= Duration::from_secs(10),
        "binding took {took:?} in the storm"
    );
    let a = converge(&suite.env, client, &suite.expect(&[ns]), T).await?;
    summary.check("after the storm", &a)?;
    still_running(&mut proc)?;
    summary.counts.scenarios = 1;
    Ok(())
}
