//! What the benchmark prints: lines and headers, units and percentiles,
//! requests by resource and verb, the machine, and the summary against the
//! targets.

use std::io::Write as _;
use std::time::Duration;

use crate::apiserver::ApiSnapshot;
use crate::ctl::Memory;
use crate::prom::{self, Requests};

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

pub fn out(line: impl AsRef<str>) {
    println!("{}", line.as_ref());
    let _ = std::io::stdout().flush();
}

pub fn header(title: &str) {
    out("");
    out(format!("== {title}"));
}

/// Server-side time of the requests of a phase, per claim, by request kind
/// (from `apiserver_request_duration_seconds`): where bind latency goes.
pub fn print_server_time(delta: &ApiSnapshot, per: usize, only_writes_and_gets: bool) {
    let seconds = delta.seconds.by_resource_verb();
    let counts = delta.timed.by_resource_verb();
    let mut total = 0.0;
    let mut parts = Vec::new();
    for ((resource, verb), n) in &counts {
        if only_writes_and_gets && !(prom::WRITE_VERBS.contains(&verb.as_str()) || verb == "GET") {
            continue;
        }
        if is_apiserver_own_resource(resource) {
            continue;
        }
        let secs = seconds
            .get(&(resource.clone(), verb.clone()))
            .copied()
            .unwrap_or(0.0);
        total += secs;
        parts.push(format!(
            "{resource} {verb} {:.1} ms x {:.2}",
            1000.0 * secs / n.max(1.0),
            n / per as f64
        ));
    }
    out(format!(
        "    apiserver time per claim (mean server-side duration x requests per claim): {:.1} ms in all",
        1000.0 * total / per as f64
    ));
    for p in parts {
        out(format!("      {p}"));
    }
}

/// Prints write requests by resource and verb, per claim.
pub fn print_requests(r: &Requests, per: usize) {
    let by = r.by_resource_verb();
    if by.is_empty() {
        out("    (none)");
        return;
    }
    out(format!(
        "    {:<42} {:<7} {:>8} {:>10}",
        "resource", "verb", "requests", "per claim"
    ));
    for ((resource, verb), n) in &by {
        out(format!(
            "    {resource:<42} {verb:<7} {n:>8.0} {:>10.2}",
            n / per as f64
        ));
    }
    out(format!(
        "    {:<42} {:<7} {:>8.0} {:>10.2}",
        "total",
        "",
        r.total(),
        r.total() / per as f64
    ));
    let failed = r.failed();
    if failed.0.is_empty() {
        out("    responses: all 2xx");
    } else {
        for (k, n) in &failed.0 {
            out(format!(
                "    non-2xx: {} {} -> {} x {n:.0}",
                k.resource, k.verb, k.code
            ));
        }
    }
}

/// GETs by resource, per claim (the library reads the API only on a cache miss).
pub fn print_gets(r: &Requests, per: usize) {
    let gets = r.filter(|k| k.verb == "GET");
    let by = gets.by_resource_verb();
    let parts: Vec<String> = by
        .iter()
        .map(|((res, _), n)| format!("{res} {:.2}", n / per as f64))
        .collect();
    out(format!(
        "    API reads (GET, cache misses) per claim: {}",
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    ));
}

/// Writes made by the apiserver itself (its identity lease), not by a client here.
pub fn is_apiserver_own(k: &prom::Key) -> bool {
    is_apiserver_own_resource(&k.resource)
}

fn is_apiserver_own_resource(resource: &str) -> bool {
    resource.starts_with("leases")
}

pub fn machine() -> Vec<String> {
    let mut lines = Vec::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    lines.push(format!("nproc: {cores} ({model})"));
    if let Ok(o) = std::process::Command::new("free").arg("-h").output() {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            lines.push(format!("free -h | {l}"));
        }
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        lines.push(format!("load average at start: {}", l.trim()));
    }
    lines
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

const P50_TARGET_MS: f64 = 50.0;
const P99_TARGET_MS: f64 = 250.0;
const THROUGHPUT_TARGET: f64 = 0.5;
const BYTES_PER_CLAIM_TARGET: f64 = 20.0 * 1024.0;

/// The figures the summary compares with the targets.
pub struct Summary {
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub writes_provision: f64,
    pub writes_delete: f64,
    pub throughput: Vec<(u16, f64, f64, f64)>,
    pub restart_claims: usize,
    pub restart_idle: Duration,
    pub restart_provisions: f64,
    pub restart_writes: f64,
    pub mem0: Memory,
    pub mem_n: Memory,
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

pub fn print_summary(s: &Summary) {
    header("summary (targets of issue 6)");
    let p50 = ms(s.p50);
    let p99 = ms(s.p99);
    out(format!(
        "    bind latency p50 {p50:.1} ms (target <= {P50_TARGET_MS:.0}): {}",
        verdict(p50 <= P50_TARGET_MS)
    ));
    out(format!(
        "    bind latency p95 {:.1} ms, p99 {p99:.1} ms (target <= {P99_TARGET_MS:.0}): {}",
        ms(s.p95),
        verdict(p99 <= P99_TARGET_MS)
    ));
    out(format!(
        "    writes per greenfield provision {:.2}, per delete {:.2}",
        s.writes_provision, s.writes_delete
    ));
    for (c, rate, limit, ratio) in &s.throughput {
        out(format!(
            "    throughput at concurrency {c:>3}: {rate:>6.1} claims/s = {:>3.0}% of the limit {limit:.1} (target >= {:.0}%): {}",
            ratio * 100.0,
            THROUGHPUT_TARGET * 100.0,
            verdict(*ratio >= THROUGHPUT_TARGET)
        ));
    }
    out(format!(
        "    restart with {} claims: idle after {:.2} s, {:.0} provisioner calls, {:.0} API writes (target 0): {}",
        s.restart_claims,
        s.restart_idle.as_secs_f64(),
        s.restart_provisions,
        s.restart_writes,
        verdict(s.restart_writes == 0.0 && s.restart_provisions == 0.0)
    ));
    let per_rss = (s.mem_n.rss as f64 - s.mem0.rss as f64) / s.restart_claims as f64;
    let per_hwm = (s.mem_n.hwm as f64 - s.mem0.hwm as f64) / s.restart_claims as f64;
    out(format!(
        "    memory per cached claim: {:.1} KiB RSS, {:.1} KiB peak (target <= {:.0} KiB): {}",
        per_rss / 1024.0,
        per_hwm / 1024.0,
        BYTES_PER_CLAIM_TARGET / 1024.0,
        verdict(per_hwm.max(per_rss) <= BYTES_PER_CLAIM_TARGET)
    ));
}
