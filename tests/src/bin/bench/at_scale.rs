//! `--scale N`: the library with N bound claims, seeded directly
//! ([`crate::seed`]). What it measures, in one run so that every ratio has
//! its baseline from the same machine state:
//!
//! 1. the controller's memory with no claim, and a new claim's bind latency
//!    one by one on an empty cluster (the baseline);
//! 2. the seeding (rate, and the control plane's memory before and after);
//! 3. a restart over the N claims: time to ready and to idle, API writes
//!    (must be 0) and reads, provisioner calls, memory per claim;
//! 4. a new claim's bind latency while the N are cached, against (1);
//! 5. the memory breakdown (the caches alone).
//!
//! `OBC_BENCH_TIMELINE_DIR=DIR` writes each one-by-one claim's create
//! instant and latency to `DIR/<namespace>.timeline`
//! ([`crate::latency::one_by_one`]).

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::claims;
use crate::ctl::{Controller, Memory, memory};
use crate::latency::memory_baseline;
use crate::report::{header, mib, ms, out, percentile};
use crate::run::Run;
use crate::scale::{memory_breakdown, restart_kept};
use crate::seed::{self, TEMPLATE, Template};

/// The seeded claims' namespace.
const NS: &str = "bench-seed";

/// What `--scale` found, for the summary.
pub struct AtScale {
    pub claims: usize,
    pub per_claim_peak: f64,
    pub restart_writes: f64,
    pub restart_idle: Duration,
    pub bind_p50_ratio: f64,
    pub bind_p99_ratio: f64,
}

/// The seeded claims' names.
fn name(i: usize) -> String {
    format!("s-{i:06}")
}

/// Runs the at-scale part with `n` claims; `latency` claims one by one
/// before and after.
pub async fn at_scale(run: &mut Run, n: usize, latency: usize) -> Result<AtScale> {
    let crate::latency::Baseline {
        mut ctl,
        mem0,
        probe0,
    } = memory_baseline(run).await?;
    header(&format!(
        "bind latency on an empty cluster (the baseline): {latency} claims one by one"
    ));
    let empty = binds(run, &mut ctl, "bench-scale-empty", latency).await?;
    run.env.ensure_namespace(NS).await?;
    claims::create(&run.client, NS, TEMPLATE).await?;
    run.tracker
        .bound(NS, TEMPLATE, Duration::from_secs(60))
        .await?;
    ctl.stop().await?;
    let template = Template::read(&run.client, NS, TEMPLATE).await?;

    header(&format!(
        "seeding {} bound claims directly (copies of one the controller bound; 6 writes each)",
        n - 1
    ));
    let plane0 = control_plane_memory(run);
    let took = seed::seed(&run.client, &template, NS, n - 1, name).await?;
    let plane1 = control_plane_memory(run);
    out(format!(
        "    seeded in {:.0} s ({:.0} claims/s)",
        took.as_secs_f64(),
        (n - 1) as f64 / took.as_secs_f64()
    ));
    for ((what, before), (_, after)) in plane0.iter().zip(&plane1) {
        out(format!(
            "    {what}: VmRSS {:.0} MiB before, {:.0} MiB with {n} claims ({:.1} KiB per claim)",
            mib(before.rss),
            mib(after.rss),
            (after.rss as f64 - before.rss as f64) / n as f64 / 1024.0
        ));
    }

    let (restart, mut ctl) = restart_kept(run, n, &mem0).await?;
    header(&format!(
        "bind latency with {n} claims cached: {latency} claims one by one"
    ));
    let full = binds(run, &mut ctl, "bench-scale-full", latency).await?;
    ctl.stop().await?;
    let ratio = |q: f64| ms(percentile(&full, q)) / ms(percentile(&empty, q)).max(0.001);
    out(format!(
        "    against the empty cluster, same run: p50 x{:.2}, p95 x{:.2}, p99 x{:.2}",
        ratio(0.5),
        ratio(0.95),
        ratio(0.99)
    ));
    memory_breakdown(run, n, (&probe0, &mem0, &restart.mem_n), false).await?;
    Ok(AtScale {
        claims: n,
        per_claim_peak: (restart.mem_n.hwm as f64 - mem0.hwm as f64) / n as f64,
        restart_writes: restart.writes,
        restart_idle: restart.idle.after,
        bind_p50_ratio: ratio(0.5),
        bind_p99_ratio: ratio(0.99),
    })
}

/// Creates `n` claims in `ns` one by one, each once the previous is Bound;
/// returns the latencies, sorted.
async fn binds(run: &mut Run, ctl: &mut Controller, ns: &str, n: usize) -> Result<Vec<Duration>> {
    run.env.ensure_namespace(ns).await?;
    let counts0 = ctl.counts().await?;
    let phase = Instant::now();
    let mut latencies = crate::latency::one_by_one(run, ns, n).await?;
    ctl.wait_idle(
        phase,
        counts0.reconciles + n as f64,
        Duration::from_secs(2),
        Duration::from_secs(120),
    )
    .await?;
    latencies.sort();
    out(format!(
        "    claim created -> Bound: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms (max {:.1})",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.95)),
        ms(percentile(&latencies, 0.99)),
        ms(latencies[n - 1])
    ));
    Ok(latencies)
}

/// kube-apiserver's and etcd's memory now.
fn control_plane_memory(run: &Run) -> Vec<(&'static str, Memory)> {
    [
        ("kube-apiserver", run.apiserver_pid),
        ("etcd", run.etcd_pid),
    ]
    .into_iter()
    .filter_map(|(what, pid)| Some((what, memory(pid?).ok()?)))
    .collect()
}

/// The at-scale figures against their targets (issue 37).
pub fn print_summary(s: &AtScale) {
    const PER_CLAIM_TARGET: f64 = 6.0 * 1024.0;
    header(&format!(
        "summary at {} claims (targets of issue 37)",
        s.claims
    ));
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    out(format!(
        "    restart: idle after {:.2} s, {:.0} API writes (target 0): {}",
        s.restart_idle.as_secs_f64(),
        s.restart_writes,
        verdict(s.restart_writes == 0.0)
    ));
    out(format!(
        "    memory per cached claim {:.2} KiB peak (target <= {:.0} KiB): {}",
        s.per_claim_peak / 1024.0,
        PER_CLAIM_TARGET / 1024.0,
        verdict(s.per_claim_peak <= PER_CLAIM_TARGET)
    ));
    out(format!(
        "    bind latency with every claim cached, against an empty cluster: p50 x{:.2}, p99 x{:.2}",
        s.bind_p50_ratio, s.bind_p99_ratio
    ));
}
