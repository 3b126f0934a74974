//! Throughput: bursts of claims created at once, for each controller
//! concurrency, against the apiserver's raw create rate (its physical
//! limit) measured just before.

use std::time::{Duration, Instant};

use anyhow::Result;
use obc_tests::testenv::client_from_kubeconfig;

use crate::baseline::{Raw, raw_create_rate};
use crate::config::Config;
use crate::report::{
    header, is_apiserver_own, loadavg, ms, out, print_requests, print_server_time,
};
use crate::run::Run;
use crate::{CREATORS, claims};

/// One burst's figures: concurrency, claims/s, the limit, and their ratio.
pub type Throughput = (u16, f64, f64, f64);

/// Runs a burst of `config.burst` claims per concurrency; returns the
/// figures and how many claims are bound at the end.
pub async fn throughput(
    run: &mut Run,
    config: &Config,
    writes_provision: f64,
) -> Result<(Vec<Throughput>, usize)> {
    let client = run.client.clone();
    let tracker = run.tracker.clone();
    let burst = config.burst;
    let mut throughput = Vec::new();
    let mut existing = 0usize;
    let raw_client = client_from_kubeconfig(run.env.kubeconfig_path()).await?;
    for &c in &config.concurrency {
        header(&format!(
            "throughput: {burst} claims created at once, controller concurrency {c}"
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
        let raw_ns = format!("bench-raw-c{c}");
        run.env.ensure_namespace(&raw_ns).await?;
        let cpu_a = run.cpu(Some(&ctl));
        let raw = raw_create_rate(
            &raw_client,
            Raw::ConfigMap,
            &raw_ns,
            "cm",
            config.raw,
            c as usize,
        )
        .await?;
        let cpu_b = run.cpu(Some(&ctl));
        let raw_cr = raw_create_rate(
            &raw_client,
            Raw::CustomResource,
            &raw_ns,
            "cr",
            config.raw,
            c as usize,
        )
        .await?;
        let cpu_c = run.cpu(Some(&ctl));
        let cm_cpu = ms(cpu_b.control_plane_since(&cpu_a)) / config.raw as f64;
        let cr_cpu = ms(cpu_c.control_plane_since(&cpu_b)) / config.raw as f64;
        out(format!(
            "    baseline, {} creates {c} at a time from the same kind of client: ConfigMaps {raw:.0}/s ({cm_cpu:.2} ms kube-apiserver+etcd CPU each), small custom resources {raw_cr:.0}/s ({cr_cpu:.2} ms each)",
            config.raw
        ));
        out(format!(
            "      during the baseline: {}",
            cpu_c.describe_since(&cpu_a, run.cores)
        ));

        let ns = format!("bench-c{c}");
        run.env.ensure_namespace(&ns).await?;
        let counts0 = ctl.counts().await?;
        let before = run.api.snapshot().await?;
        let cpu0 = run.cpu(Some(&ctl));
        let t0 = Instant::now();
        claims::create_many(&client, &ns, 0, burst, CREATORS).await?;
        let created = t0.elapsed();
        let timeout = Duration::from_secs(120.max(burst as u64 / 2));
        let last = tracker.nth_bound(&ns, burst, timeout).await?;
        let all_bound = last.duration_since(t0);
        let cpu_bound = run.cpu(Some(&ctl));
        let load = loadavg();
        let idle = ctl
            .wait_idle(
                t0,
                counts0.reconciles + burst as f64,
                Duration::from_secs(2),
                Duration::from_secs(300),
            )
            .await?;
        let after = run.api.snapshot().await?;
        let rate = burst as f64 / all_bound.as_secs_f64();
        let delta = after.since(&before);
        let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
        writes.subtract("objectbucketclaims", "POST", burst as f64);
        let per_claim = writes.total() / burst as f64;
        let limit = raw / writes_provision;
        let limit_cr = raw_cr / writes_provision;
        let ratio = rate / limit;
        out(format!(
            "    created in {:.2} s ({CREATORS} at a time); all Bound {:.2} s after the first create: {rate:.1} claims/s",
            created.as_secs_f64(),
            all_bound.as_secs_f64()
        ));
        out(format!(
            "    physical limit = raw ConfigMap creates/s / writes per claim = {raw:.0} / {writes_provision:.2} = {limit:.1} claims/s: throughput is {:.0}% of it",
            ratio * 100.0
        ));
        out(format!(
            "    (with custom-resource creates as the baseline: {raw_cr:.0} / {writes_provision:.2} = {limit_cr:.1} claims/s: {:.0}%)",
            100.0 * rate / limit_cr
        ));
        out(format!(
            "    {:.2} reconciles per claim ({:.0} failed); controller idle {:.2} s after the first create",
            (idle.counts.reconciles - counts0.reconciles) / burst as f64,
            idle.counts.reconcile_errors - counts0.reconcile_errors,
            idle.after.as_secs_f64()
        ));
        out(format!(
            "    until all Bound: {}; load average {load}",
            cpu_bound.describe_since(&cpu0, run.cores),
        ));
        let cp_claim = ms(cpu_bound.control_plane_since(&cpu0)) / burst as f64;
        let ours_claim = ms(cpu_bound.ours_since(&cpu0)) / burst as f64;
        out(format!(
            "    CPU per claim: kube-apiserver+etcd {cp_claim:.1} ms (= {:.1} ConfigMap creates), all benchmark processes {ours_claim:.1} ms: {} cores alone would bind at most {:.0} claims/s",
            cp_claim / cm_cpu.max(1e-6),
            run.cores,
            1000.0 * run.cores as f64 / ours_claim.max(1e-6)
        ));
        print_server_time(&delta, burst, true);
        out(format!(
            "    API writes in this run: {per_claim:.2} per claim (the benchmark's {burst} creates subtracted)"
        ));
        print_requests(&writes, burst);
        throughput.push((c, rate, limit, ratio));
        existing += burst;
        ctl.stop().await?;
    }
    Ok((throughput, existing))
}
