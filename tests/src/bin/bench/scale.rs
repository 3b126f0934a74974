//! The phases at scale: filling up to `--claims` bound claims, a restart
//! with all of them (its resync must write nothing), and the memory per
//! cached claim.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::Config;
use crate::ctl::{Controller, Idle, Memory};
use crate::report::{header, is_apiserver_own, loadavg, mib, out, print_gets, print_requests};
use crate::run::{Run, cached_sizes};
use crate::{CREATORS, DEFAULT_CONCURRENCY, claims};

/// Claims per step while filling up to `--claims`.
const FILL_CHUNK: usize = 1000;

/// Creates claims until `config.claims` are bound (`existing` already
/// are); returns how many are bound.
pub async fn fill_up(run: &mut Run, config: &Config, existing: usize) -> Result<usize> {
    let client = run.client.clone();
    let tracker = run.tracker.clone();
    let total = config.claims.max(existing);
    if config.claims > existing {
        let c = config.concurrency.iter().copied().max().unwrap_or(16);
        let need = config.claims - existing;
        header(&format!(
            "filling up to {total} bound claims: {need} more, {FILL_CHUNK} at a time, controller concurrency {c}"
        ));
        let mut ctl = run.controller(c).await?;
        let since = Instant::now();
        ctl.wait_idle(
            since,
            existing as f64,
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
        .await?;
        let ns = "bench-fill";
        run.env.ensure_namespace(ns).await?;
        let t0 = Instant::now();
        let mut done = 0;
        while done < need {
            let chunk = FILL_CHUNK.min(need - done);
            claims::create_many(&client, ns, done, done + chunk, CREATORS).await?;
            tracker
                .nth_bound(ns, done + chunk, Duration::from_secs(900))
                .await?;
            done += chunk;
            out(format!(
                "    ... {}/{total} bound ({:.0} claims/s over the fill so far; load average {})",
                existing + done,
                done as f64 / t0.elapsed().as_secs_f64(),
                loadavg()
            ));
        }
        let counts0 = ctl.counts().await?;
        ctl.wait_idle(
            since,
            counts0.reconciles,
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
        .await?;
        ctl.stop().await?;
        header("JSON size of cached objects (average of up to 100, as the apiserver returns them)");
        for (what, size, managed) in cached_sizes(&client, ns).await? {
            out(format!(
                "    {what:<28} {size:>6.0} bytes, of which managedFields {managed:>5.0}"
            ));
        }
    }
    Ok(total)
}

/// What the restart measured.
pub struct Restart {
    /// When the restarted controller went idle, and its counts.
    pub idle: Idle,
    /// Its memory with every claim cached.
    pub mem_n: Memory,
    /// Provision and grant calls during the resync.
    pub provisions: f64,
    /// API writes during the resync (the apiserver's own not counted).
    pub writes: f64,
}

/// Restarts the controller with `total` bound claims and measures the
/// resync; `mem0` is its memory with none.
pub async fn restart(run: &mut Run, total: usize, mem0: &Memory) -> Result<Restart> {
    let (restart, ctl) = restart_kept(run, total, mem0).await?;
    ctl.stop().await?;
    Ok(restart)
}

/// [`restart`], with the restarted controller left running.
pub async fn restart_kept(
    run: &mut Run,
    total: usize,
    mem0: &Memory,
) -> Result<(Restart, Controller)> {
    header(&format!(
        "restart with {total} bound claims (controller concurrency {DEFAULT_CONCURRENCY})"
    ));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(None);
    let mut ctl = run.controller(DEFAULT_CONCURRENCY).await?;
    let ready = ctl.started.elapsed();
    let idle = ctl
        .wait_idle(
            ctl.started,
            total as f64,
            Duration::from_secs(3),
            Duration::from_secs(900),
        )
        .await?;
    let mem_n = ctl.memory()?;
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(&ctl));
    let delta = after.since(&before);
    let all_writes = delta.requests.writes();
    let own = all_writes.filter(is_apiserver_own);
    let writes = all_writes.filter(|k| !is_apiserver_own(k));
    out(format!(
        "    ready (caches synced) {:.2} s after spawn; idle (every claim reconciled, then no reconcile and <10% CPU for 3 s) {:.2} s after spawn",
        ready.as_secs_f64(),
        idle.after.as_secs_f64()
    ));
    out(format!(
        "    reconciles: {:.0} ({:.2} per claim, {:.0} failed); provisioner calls: provision {:.0}, grant {:.0}, delete {:.0}, revoke {:.0}",
        idle.counts.reconciles,
        idle.counts.reconciles / total as f64,
        idle.counts.reconcile_errors,
        idle.counts.provision,
        idle.counts.grant,
        idle.counts.delete,
        idle.counts.revoke
    ));
    out(format!(
        "    controller CPU {:.2} s ({:.0} us per claim); {}",
        cpu1.controller.as_secs_f64(),
        cpu1.controller.as_secs_f64() * 1e6 / total as f64,
        cpu1.describe_since(&cpu0, run.cores)
    ));
    out("    API writes during the resync (kube-apiserver metrics, every client):");
    print_requests(&writes, total);
    if !own.0.is_empty() {
        out(format!(
            "    (not counted: {:.0} writes of the apiserver's own identity lease)",
            own.total()
        ));
    }
    print_gets(&delta.requests, total);
    out(format!(
        "    memory with {total} claims cached: VmHWM (peak) {:.1} MiB, VmRSS {:.1} MiB",
        mib(mem_n.hwm),
        mib(mem_n.rss)
    ));
    let per = |a: u64, b: u64| (a as f64 - b as f64) / total as f64;
    out(format!(
        "    per claim (minus the 0-claim baseline {:.1} MiB RSS / {:.1} MiB peak): {:.0} bytes RSS, {:.0} bytes peak",
        mib(mem0.rss),
        mib(mem0.hwm),
        per(mem_n.rss, mem0.rss),
        per(mem_n.hwm, mem0.hwm)
    ));
    let restart_provisions = idle.counts.provision + idle.counts.grant;
    let restart = Restart {
        idle,
        mem_n,
        provisions: restart_provisions,
        writes: writes.total(),
    };
    Ok((restart, ctl))
}

/// How the memory per claim divides between the library's caches and the
/// rest of the controller; `probe0` and `mem0` are the figures with no
/// claim, `mem_n` the controller's with `total`. `managed_fields`: also
/// probe the caches as they were before the library stripped managedFields
/// (about three times the memory: left out at the largest scales, where the
/// machine may not hold it beside the control plane).
pub async fn memory_breakdown(
    run: &mut Run,
    total: usize,
    (probe0, mem0, mem_n): (&Memory, &Memory, &Memory),
    managed_fields: bool,
) -> Result<()> {
    let per = |a: u64, b: u64| (a as f64 - b as f64) / total as f64;
    header(&format!(
        "memory breakdown with {total} claims: the library's watches and caches alone (bench-controller --caches-only)"
    ));
    let per_claim = |m: &Memory| (m.hwm as f64 - probe0.hwm as f64) / total as f64;
    let (stripped, costs) = run.probe_caches(true).await?;
    let full = match managed_fields {
        true => Some(run.probe_caches(false).await?),
        false => None,
    };
    if let Some((full, _)) = &full {
        out(format!(
            "    with managedFields (as cached before the library stripped them): VmHWM {:.1} MiB, VmRSS {:.1} MiB: {:.0} bytes per claim (peak, over the 0-claim {:.1} MiB)",
            mib(full.hwm),
            mib(full.rss),
            per_claim(full),
            mib(probe0.hwm)
        ));
    }
    out(format!(
        "    as the library caches them: VmHWM {:.1} MiB, VmRSS {:.1} MiB: {:.0} bytes per claim{}",
        mib(stripped.hwm),
        mib(stripped.rss),
        per_claim(&stripped),
        full.as_ref().map_or(String::new(), |(full, _)| format!(
            " ({:.0}% less)",
            100.0 * (1.0 - per_claim(&stripped) / per_claim(full).max(1.0))
        ))
    ));
    out(format!(
        "    the controller beyond its caches: {:.0} bytes per claim (scheduler entries, reconcile state, allocator slack)",
        per(mem_n.hwm, mem0.hwm) - per_claim(&stripped)
    ));
    out(
        "    each cache, as it listed (resident memory it added, per object; listed one after another):",
    );
    for (i, (cache, objects, bytes)) in costs.iter().enumerate() {
        let before =
            full.as_ref()
                .and_then(|(_, c)| c.get(i))
                .map_or(String::new(), |(_, _, b)| {
                    format!(
                        " ({:>6.0} with managedFields, the children as PartialObjectMeta)",
                        b / objects.max(1.0)
                    )
                });
        out(format!(
            "      {cache:<14} {objects:>7.0} objects: {:>6.0} bytes each as the library keeps them{before}",
            bytes / objects.max(1.0),
        ));
    }
    Ok(())
}
