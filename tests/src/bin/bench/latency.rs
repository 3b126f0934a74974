//! The phases with one claim at a time: the controller's memory with no
//! claim, bind latency (claims created one by one), and deletes.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::DEFAULT_CONCURRENCY;
use crate::baseline::serial_latency;
use crate::claims;
use crate::ctl::{Controller, Counts, Memory};
use crate::report::{
    header, is_apiserver_own, mib, ms, out, percentile, print_gets, print_requests,
    print_server_time,
};
use crate::run::{Run, children_collected};

/// The namespace of the latency and delete phases' claims.
const NS: &str = "bench-latency";

/// The controller with no claim, kept running for the next phases.
pub struct Baseline {
    /// The controller (concurrency [`DEFAULT_CONCURRENCY`]).
    pub ctl: Controller,
    /// Its memory.
    pub mem0: Memory,
    /// The memory of `bench-controller --caches-only`.
    pub probe0: Memory,
}

/// Starts a controller with no claim and measures its memory, and that of
/// its caches alone.
pub async fn memory_baseline(run: &mut Run) -> Result<Baseline> {
    header("controller memory with 0 claims (baseline)");
    let ctl = run.controller(DEFAULT_CONCURRENCY).await?;
    let ready = ctl.started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mem0 = ctl.memory()?;
    out(format!(
        "    ready (caches synced) {:.0} ms after spawn; VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        ms(ready),
        mib(mem0.rss),
        mib(mem0.hwm)
    ));
    let probe0 = run.caches_only(false).await?;
    out(format!(
        "    caches alone (bench-controller --caches-only): VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        mib(probe0.rss),
        mib(probe0.hwm)
    ));
    Ok(Baseline { ctl, mem0, probe0 })
}

/// Creates `n` claims in `ns` one by one, each once the previous is Bound;
/// returns each one's latency (created → the watch saw it Bound), in
/// order, and their [`Timeline`] as `<ns>.timeline`.
pub async fn one_by_one(run: &Run, ns: &str, n: usize) -> Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(n);
    let mut timeline = Timeline::default();
    for i in 0..n {
        let name = claims::name(i);
        let (t0, wall) = (Instant::now(), wall_clock());
        claims::create(&run.client, ns, &name).await?;
        let at = run
            .tracker
            .bound(ns, &name, Duration::from_secs(60))
            .await?;
        latencies.push(at.duration_since(t0));
        timeline.push(&format!("{ns}/{name}"), wall, latencies[i]);
        if (i + 1) % 50 == 0 || i + 1 == n {
            out(format!("    ... {}/{n} bound", i + 1));
        }
    }
    timeline.write(ns)?;
    Ok(latencies)
}

/// Objects created one by one: each one's create instant and latency, for
/// `<OBC_BENCH_TIMELINE_DIR>/<name>.timeline`, to read beside the
/// controller's log (docs/performance.md, "Bind tails").
#[derive(Default)]
pub struct Timeline(String);

impl Timeline {
    /// Records `key`, created at `wall` ([`wall_clock`]), ready `latency`
    /// later.
    pub fn push(&mut self, key: &str, wall: String, latency: Duration) {
        self.0
            .push_str(&format!("{key} {wall} {:.1}\n", ms(latency)));
    }

    /// Writes the file, if `OBC_BENCH_TIMELINE_DIR` is set.
    pub fn write(&self, name: &str) -> Result<()> {
        if let Ok(dir) = std::env::var("OBC_BENCH_TIMELINE_DIR") {
            std::fs::write(format!("{dir}/{name}.timeline"), &self.0)?;
        }
        Ok(())
    }
}

/// Now, as the controller's log prints it (RFC 3339, UTC).
pub fn wall_clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    k8s_openapi::jiff::Timestamp::from_microsecond(now.as_micros() as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// What the bind latency phase measured.
pub struct Provision {
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    /// API writes per greenfield provision.
    pub writes: f64,
    /// The controller's counts at the end of the phase.
    pub counts: Counts,
}

/// Creates `n` claims one by one, each once the previous is Bound.
pub async fn bind_latency(run: &mut Run, ctl: &mut Controller, n: usize) -> Result<Provision> {
    let client = run.client.clone();
    header(&format!(
        "bind latency: {n} claims created one by one (controller concurrency {DEFAULT_CONCURRENCY})"
    ));
    let ns = NS;
    run.env.ensure_namespace(ns).await?;
    out(format!(
        "    floor: {}",
        serial_latency(&client, "bench-serial", 100).await?
    ));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(Some(ctl));
    let phase = Instant::now();
    let latencies = one_by_one(run, ns, n).await?;
    let idle = ctl
        .wait_idle(
            phase,
            n as f64,
            Duration::from_secs(2),
            Duration::from_secs(120),
        )
        .await?;
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(ctl));
    let mut sorted = latencies.clone();
    sorted.sort();
    let (p50, p95, p99) = (
        percentile(&sorted, 0.50),
        percentile(&sorted, 0.95),
        percentile(&sorted, 0.99),
    );
    let mean = latencies.iter().sum::<Duration>() / n as u32;
    out(format!(
        "    claim created -> Bound (seen by a watch): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms (min {:.1}, mean {:.1}, max {:.1})",
        ms(p50),
        ms(p95),
        ms(p99),
        ms(sorted[0]),
        ms(mean),
        ms(sorted[n - 1])
    ));
    out(format!(
        "    controller: {:.0} provision calls, {:.0} reconciles ({:.2} per claim, {:.0} failed), {:.2} ms CPU per claim",
        idle.counts.provision,
        idle.counts.reconciles,
        idle.counts.reconciles / n as f64,
        idle.counts.reconcile_errors,
        ms(cpu1.controller_since(&cpu0)) / n as f64
    ));
    out(format!("    {}", cpu1.describe_since(&cpu0, run.cores)));
    let delta = after.since(&before);
    print_server_time(&delta, n, true);
    let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
    writes.subtract("objectbucketclaims", "POST", n as f64);
    header(&format!(
        "API writes per greenfield provision (kube-apiserver apiserver_request_total, {n} claims; the benchmark's own {n} claim creates subtracted)"
    ));
    print_requests(&writes, n);
    print_gets(&delta.requests, n);
    let writes_provision = writes.total() / n as f64;
    let provision_counts = idle.counts;
    Ok(Provision {
        p50,
        p95,
        p99,
        writes: writes_provision,
        counts: provision_counts,
    })
}

/// Deletes the `n` claims of [`bind_latency`] one by one, then stops `ctl`;
/// returns the API writes per delete.
pub async fn deletes(
    run: &mut Run,
    mut ctl: Controller,
    n: usize,
    provision_counts: Counts,
) -> Result<f64> {
    let client = run.client.clone();
    let tracker = run.tracker.clone();
    let ns = NS;
    header(&format!("delete: the {n} claims deleted one by one"));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(Some(&ctl));
    let phase = Instant::now();
    let mut delete_latencies = Vec::with_capacity(n);
    for i in 0..n {
        let name = claims::name(i);
        let t0 = Instant::now();
        claims::delete(&client, ns, &name).await?;
        let at = tracker.gone(ns, &name, Duration::from_secs(60)).await?;
        delete_latencies.push(at.duration_since(t0));
    }
    let idle = ctl
        .wait_idle(
            phase,
            provision_counts.reconciles + n as f64,
            Duration::from_secs(2),
            Duration::from_secs(120),
        )
        .await?;
    if run.env.controller_manager_running().await {
        // The collector deletes the Secrets and ConfigMaps after their claims
        // are gone: its writes belong to this phase.
        children_collected(&client, ns).await?;
    }
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(&ctl));
    delete_latencies.sort();
    out(format!(
        "    claim deleted -> gone (finalizer removed): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&delete_latencies, 0.5)),
        ms(percentile(&delete_latencies, 0.95)),
        ms(percentile(&delete_latencies, 0.99)),
    ));
    out(format!(
        "    controller: {:.0} delete calls, {:.0} reconciles ({:.2} per claim)",
        idle.counts.delete - provision_counts.delete,
        idle.counts.reconciles - provision_counts.reconciles,
        (idle.counts.reconciles - provision_counts.reconciles) / n as f64
    ));
    out(format!("    {}", cpu1.describe_since(&cpu0, run.cores)));
    let delta = after.since(&before);
    let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
    writes.subtract("objectbucketclaims", "DELETE", n as f64);
    header(&format!(
        "API writes per delete (reclaim policy Delete; the benchmark's own {n} claim deletes subtracted)"
    ));
    print_requests(&writes, n);
    print_gets(&delta.requests, n);
    let writes_delete = writes.total() / n as f64;
    ctl.stop().await?;
    Ok(writes_delete)
}
