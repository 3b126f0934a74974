//! Crash points: every named failpoint, in provisioning and deletion,
//! with claims of every kind, converges once the process restarts.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use futures::future::join_all;
use kube::api::ListParams;
use kube::{Client, ResourceExt};
use lib_provisioner::api::ClaimPhase;
use lib_provisioner::failpoint::POINTS;
use obc_tests::reliability::{
    Classes, Deleted, Kind, Launch, PROVISIONER, Proc, Summary, converge, create_classes,
    register_claim_secrets, store_buckets, wait_all_bound, wait_all_gone,
};

use super::{Suite, T, all_gone, claims, create, delete_claim, logs};

/// Polls until the process exits (true) or `done` holds (false). After
/// `done`, waits a moment more: a crash point right after the last write
/// can fire just after that write became visible.
async fn exit_or<F, Fut>(proc: &mut Proc, timeout: Duration, mut done: F) -> Result<bool>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if !proc.is_running() {
            return Ok(true);
        }
        if done().await.unwrap_or(false) {
            return Ok(proc.wait_exit(Duration::from_millis(700)).await.is_some());
        }
        if Instant::now() >= deadline {
            bail!(
                "neither done nor exited after {timeout:?}; log tail:\n{}",
                proc.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn all_bound(client: &Client, ns: &str, names: &[String]) -> Result<bool> {
    let list = claims(client, ns).list(&ListParams::default()).await?;
    Ok(names.iter().all(|n| {
        list.items.iter().any(|c| {
            c.name_any() == *n && c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
        })
    }))
}

const LANES: usize = 3;
const LANE_KINDS: [Kind; 5] = [
    Kind::GeneratedDelete,
    Kind::ExactDelete,
    Kind::GeneratedRetain,
    Kind::ExactRetain,
    Kind::Shared,
];

/// One iteration of a crash point: its own namespace, provisioner name and
/// classes, so that iterations run side by side without sharing anything
/// but the apiserver and the store.
struct Lane {
    idx: usize,
    ns: String,
    classes: Classes,
    launch: Launch,
    /// On a crash while provisioning, delete the claims while the process
    /// is down (instead of letting them bind first).
    delete_while_down: bool,
    /// What its claims ask for.
    kinds: Vec<Kind>,
}

struct LaneRun {
    proc: Proc,
    names: Vec<String>,
    crashes: usize,
    deleted: Vec<Deleted>,
    finished: bool,
}

impl Lane {
    /// Starts armed, creates the claims; on a crash restarts unarmed, and
    /// either lets the claims bind or (variant) deletes them first.
    async fn provision(&self, client: &Client, point: &str, pi: usize) -> Result<LaneRun> {
        let mut proc = self.launch.armed(point).start(logs())?;
        let names: Vec<String> = (0..self.kinds.len())
            .map(|k| format!("p{pi}-c{k}"))
            .collect();
        for (k, kind) in self.kinds.iter().enumerate() {
            let spec = kind.spec(&self.classes, &format!("p{pi}-l{}-c{k}", self.idx));
            create(client, &self.ns, &names[k], spec).await?;
        }
        let mut run = LaneRun {
            proc,
            names,
            crashes: 0,
            deleted: Vec::new(),
            finished: false,
        };
        let crashed = exit_or(&mut run.proc, T, || all_bound(client, &self.ns, &run.names)).await?;
        if !crashed {
            return Ok(run);
        }
        ensure!(
            run.proc.crashed_at(point),
            "lane {} died, but not at {point} ({:?}):\n{}",
            self.idx,
            run.proc.exit_status(),
            run.proc.log_tail(30)
        );
        run.crashes += 1;
        if self.delete_while_down {
            for (name, kind) in run.names.iter().zip(self.kinds.iter()) {
                run.deleted
                    .push(delete_claim(client, &self.ns, name, kind).await?);
            }
            proc = self.launch.unarmed().start(logs())?;
            run.proc = proc;
            wait_all_gone(client, &self.ns, &run.names, T)
                .await
                .with_context(|| format!("lane {} after {point}", self.idx))?;
            run.finished = true;
        } else {
            run.proc = self.launch.unarmed().start(logs())?;
            wait_all_bound(client, &self.ns, &run.names, T)
                .await
                .with_context(|| format!("lane {} after {point}", self.idx))?;
        }
        ensure!(
            run.proc.is_running(),
            "the unarmed process exited: {}",
            run.proc.log_tail(30)
        );
        Ok(run)
    }

    /// Deletes the claims with `point` armed; on a crash restarts unarmed.
    async fn delete(&self, client: &Client, point: &str, run: &mut LaneRun) -> Result<()> {
        if run.finished {
            return Ok(());
        }
        // Keep an armed process that survived provisioning; else arm one.
        let armed_alive = run.crashes == 0 && run.proc.is_running();
        if !armed_alive {
            run.proc.kill().await;
            run.proc = self.launch.armed(point).start(logs())?;
        }
        for (name, kind) in run.names.iter().zip(self.kinds.iter()) {
            run.deleted
                .push(delete_claim(client, &self.ns, name, kind).await?);
        }
        let crashed = exit_or(&mut run.proc, T, || all_gone(client, &self.ns, &run.names)).await?;
        if crashed {
            ensure!(
                run.proc.crashed_at(point),
                "lane {} died, but not at {point} ({:?}):\n{}",
                self.idx,
                run.proc.exit_status(),
                run.proc.log_tail(30)
            );
            run.crashes += 1;
            run.proc = self.launch.unarmed().start(logs())?;
            wait_all_gone(client, &self.ns, &run.names, T)
                .await
                .with_context(|| format!("lane {} after {point}", self.idx))?;
        }
        run.finished = true;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_converges_in_provision_and_delete_flows() {
    let namespaces: Vec<String> = (0..LANES).map(|l| format!("crash-l{l}")).collect();
    let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    Suite::run("crash points", &ns_refs, async |suite, summary| {
        crash_points(suite, &namespaces, summary).await
    })
    .await;
}

async fn crash_points(suite: &Suite, namespaces: &[String], summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let mut lanes = Vec::new();
    for (idx, ns) in namespaces.iter().enumerate() {
        suite.env.ensure_namespace(ns).await?;
        let provisioner = format!("{PROVISIONER}-lane{idx}");
        let classes =
            create_classes(&suite.env, client, &format!("lane{idx}"), &provisioner).await?;
        let mut launch = suite.launch(&format!("crash-lane{idx}"));
        launch.provisioner = provisioner;
        launch.namespaces = vec![ns.clone()];
        // One claim at a time, so that the process dies exactly after the
        // named write and nowhere else (deaths at arbitrary instants are
        // the random-kill test's job).
        launch.concurrency = Some(1);
        lanes.push(Lane {
            idx,
            ns: ns.clone(),
            classes,
            launch,
            delete_while_down: idx == LANES - 1,
            kinds: LANE_KINDS.to_vec(),
        });
    }
    let ns_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let mut x = suite.expect(&ns_refs);
    let mut never_fired = Vec::new();
    let mut fired_in = Vec::new();
    for (pi, point) in POINTS.iter().enumerate() {
        let started = Instant::now();
        let runs: Vec<Result<LaneRun>> =
            join_all(lanes.iter().map(|l| l.provision(client, point, pi))).await;
        let mut runs: Vec<LaneRun> = runs
            .into_iter()
            .collect::<Result<_>>()
            .with_context(|| format!("provisioning with {point} armed"))?;
        let provision_crashes: usize = runs.iter().map(|r| r.crashes).sum();
        for r in &runs {
            x.deleted.extend(r.deleted.iter().cloned());
        }
        let a = converge(&suite.env, client, &x, T).await?;
        summary.check(&format!("{point}, after provisioning"), &a)?;
        register_claim_secrets(client, &ns_refs).await?;

        let results = join_all(
            lanes
                .iter()
                .zip(runs.iter_mut())
                .map(|(l, r)| l.delete(client, point, r)),
        )
        .await;
        for r in results {
            r.with_context(|| format!("deleting with {point} armed"))?;
        }
        for r in &mut runs {
            x.deleted.extend(
                r.deleted
                    .iter()
                    .filter(|d| !x.deleted.iter().any(|e| e.uid == d.uid))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            r.proc.kill().await;
        }
        let a = converge(&suite.env, client, &x, T).await?;
        summary.check(&format!("{point}, after deletion"), &a)?;

        let crashes: usize = runs.iter().map(|r| r.crashes).sum();
        summary.counts.scenarios += LANES;
        summary.counts.crashes += crashes;
        let lanes_fired = runs.iter().filter(|r| r.crashes > 0).count();
        if lanes_fired < LANES {
            never_fired.push(format!("{point} ({lanes_fired} of {LANES} lanes)"));
        }
        fired_in.push((
            format!("  {point}"),
            format!(
                "{provision_crashes} provisioning + {} deletion, {:.1}s",
                crashes - provision_crashes,
                started.elapsed().as_secs_f64()
            ),
        ));
    }
    summary.note("crash points", POINTS.len());
    summary.note("iterations per point", LANES);
    summary.note("claims per iteration", LANE_KINDS.len());
    for (point, line) in fired_in {
        summary.note(&point, line);
    }
    let store = store_buckets(&suite.env.s3_client()).await?;
    summary.note("buckets left (retained + shared)", store.len());
    ensure!(
        never_fired.is_empty(),
        "crash points that did not fire in every iteration: {never_fired:?}"
    );
    Ok(())
}

/// A crash point reached by one claim while other claims are between
/// CreateBucket and writing their ownership marker (the process runs 8
/// reconciles at once): on restart, every claim must still bind (the
/// sample's creation intents tell their unmarked buckets from foreign ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_concurrent_bucket_creation_does_not_wedge_exact_name_claims() {
    Suite::run(
        "crash during concurrent CreateBucket",
        &["midcreate"],
        concurrent_crash,
    )
    .await;
}

async fn concurrent_crash(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "midcreate";
    let classes = suite.namespace(ns).await?;
    let launch = suite.launch("midcreate");
    let mut proc = launch.armed("after-bucket-created").start(logs())?;
    let mut names = Vec::new();
    for i in 0..8 {
        let kind = if i == 0 {
            Kind::GeneratedDelete
        } else {
            Kind::ExactDelete
        };
        let name = format!("m{i}");
        create(client, ns, &name, kind.spec(&classes, &format!("mid-{i}"))).await?;
        names.push(name);
    }
    crashed_after_bucket_created(&mut proc, summary).await?;
    let _proc = launch.unarmed().start(logs())?;
    wait_all_bound(client, ns, &names, T).await?;
    let a = converge(&suite.env, client, &suite.expect(&[ns]), T).await?;
    summary.check("after the restart", &a)?;
    summary.counts.scenarios = 1;
    Ok(())
}

/// A Retain claim whose provisioning died after the bucket was created and
/// before its ObjectBucket, then deleted: nothing records the bucket any
/// more, so it must not be kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retain_claim_deleted_before_its_object_bucket_leaves_no_orphan() {
    Suite::run(
        "Retain claim deleted mid-provisioning",
        &["midretain"],
        retain_deleted_mid_provisioning,
    )
    .await;
}

async fn retain_deleted_mid_provisioning(suite: &Suite, summary: &mut Summary) -> Result<()> {
    let client = &suite.admin;
    let ns = "midretain";
    let classes = suite.namespace(ns).await?;
    let mut launch = suite.launch("midretain");
    launch.concurrency = Some(1);
    let mut x = suite.expect(&[ns]);
    for (i, kind) in [Kind::GeneratedRetain, Kind::ExactRetain]
        .iter()
        .enumerate()
    {
        let name = format!("r{i}");
        let mut proc = launch.armed("after-bucket-created").start(logs())?;
        create(
            client,
            ns,
            &name,
            kind.spec(&classes, &format!("midretain-{i}")),
        )
        .await?;
        crashed_after_bucket_created(&mut proc, summary).await?;
        x.deleted.push(delete_claim(client, ns, &name, kind).await?);
        let mut proc = launch.unarmed().start(logs())?;
        wait_all_gone(client, ns, &[name], T).await?;
        proc.kill().await;
        summary.counts.scenarios += 1;
    }
    let a = converge(&suite.env, client, &x, Duration::from_secs(5)).await?;
    summary.check("after deletion", &a)?;
    Ok(())
}

/// Waits for a process armed at `after-bucket-created` to die there, and
/// counts the crash.
async fn crashed_after_bucket_created(proc: &mut Proc, summary: &mut Summary) -> Result<()> {
    ensure!(
        proc.wait_exit(T).await.is_some() && proc.crashed_at("after-bucket-created"),
        "the armed process did not crash: {}",
        proc.log_tail(20)
    );
    summary.counts.crashes += 1;
    Ok(())
}
