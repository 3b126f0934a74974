//! The `bench-controller` process: start, readiness, metrics, memory, CPU,
//! idleness, stop. Plus CPU accounting of the other processes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};

use obc_tests::setup::spawn_provisioner;
use obc_tests::testenv::tail_of;

use crate::prom;

/// A running `bench-controller`.
pub struct Controller {
    child: Child,
    pid: u32,
    base: String,
    http: reqwest::Client,
    log: PathBuf,
    pub started: Instant,
}

/// What the controller's `/metrics` says.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// `obc_reconciles_total`, all results.
    pub reconciles: f64,
    /// `obc_reconciles_total` with a result other than `ok`.
    pub reconcile_errors: f64,
    pub provision: f64,
    pub delete: f64,
    pub grant: f64,
    pub revoke: f64,
}

/// Resident memory, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// VmRSS, bytes.
    pub rss: u64,
    /// VmHWM (peak RSS), bytes.
    pub hwm: u64,
}

/// When the controller went quiet.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    /// Since `since` (the caller's start), the last moment activity was seen.
    pub after: Duration,
    pub counts: Counts,
}

impl Controller {
    pub async fn start(
        bin: &Path,
        kubeconfig: &Path,
        concurrency: u16,
        extra: &[&str],
        log: PathBuf,
    ) -> Result<Self> {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
            .local_addr()?
            .port();
        let started = Instant::now();
        let mut cmd = Command::new(bin);
        cmd.arg("--metrics-addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--concurrency")
            .arg(concurrency.to_string())
            .args(extra)
            // obc-tests builds the library with its `failpoints` feature (for
            // the reliability suite): never arm one here.
            .env_remove("OBC_FAILPOINTS");
        let rust_log = std::env::var("OBC_BENCH_CONTROLLER_LOG").unwrap_or_else(|_| "info".into());
        let child = spawn_provisioner(&mut cmd, kubeconfig, &rust_log, &log)?;
        let pid = child.id().context("bench-controller has no pid")?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            child,
            pid,
            base: format!("http://127.0.0.1:{port}"),
            http,
            log,
            started,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "bench-controller exited ({status}); last lines of {}:\n{}",
                self.log.display(),
                tail_of(&self.log, 30)
            );
        }
        Ok(())
    }

    /// Waits until `/readyz` says the caches are synced; returns the time
    /// since the process was spawned.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<Duration> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if let Ok(r) = self.http.get(format!("{}/readyz", self.base)).send().await
                && r.status().is_success()
            {
                return Ok(self.started.elapsed());
            }
            if Instant::now() > deadline {
                bail!(
                    "bench-controller not ready after {timeout:?}; last lines of {}:\n{}",
                    self.log.display(),
                    tail_of(&self.log, 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The controller's (or the cache probe's) `/metrics`, parsed.
    async fn scrape(&self) -> Result<Vec<prom::Sample>> {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .context("scraping bench-controller /metrics")?
            .error_for_status()?
            .text()
            .await?;
        Ok(prom::parse(&text))
    }

    pub async fn counts(&self) -> Result<Counts> {
        let s = self.scrape().await?;
        let op = |name: &str| {
            prom::sum(&s, "obc_provisioner_operations_total", |l| {
                l.get("operation").map(String::as_str) == Some(name)
            })
        };
        Ok(Counts {
            reconciles: prom::sum(&s, "obc_reconciles_total", |_| true),
            reconcile_errors: prom::sum(&s, "obc_reconciles_total", |l| {
                l.get("result").map(String::as_str) != Some("ok")
            }),
            provision: op("provision"),
            delete: op("delete"),
            grant: op("grant"),
            revoke: op("revoke"),
        })
    }

    pub fn memory(&self) -> Result<Memory> {
        memory(self.pid)
    }

    /// What `bench-controller --caches-only` says each cache costs: per
    /// cache, its objects and the resident memory it added.
    pub async fn cache_costs(&self) -> Result<Vec<(String, f64, f64)>> {
        let s = self.scrape().await?;
        let of = |metric: &str, cache: &str| {
            prom::sum(&s, metric, |l| {
                l.get("cache").map(String::as_str) == Some(cache)
            })
        };
        Ok(["claims", "objectbuckets", "secrets", "configmaps"]
            .iter()
            .map(|c| {
                (
                    (*c).to_owned(),
                    of("bench_cache_objects", c),
                    of("bench_cache_rss_bytes", c),
                )
            })
            .collect())
    }

    pub fn cpu(&self) -> Result<Duration> {
        cpu_time(self.pid)
    }

    /// Waits until the controller is idle: at least `min_reconciles`
    /// reconciles done, and for `quiet` neither a new reconcile nor more than
    /// 10% of a core of CPU. Returns when activity was last seen, measured
    /// from `since`.
    pub async fn wait_idle(
        &mut self,
        since: Instant,
        min_reconciles: f64,
        quiet: Duration,
        timeout: Duration,
    ) -> Result<Idle> {
        let deadline = Instant::now() + timeout;
        let poll = Duration::from_millis(100);
        let mut last = self.counts().await?;
        let mut last_cpu = self.cpu()?;
        let mut last_activity = Instant::now();
        loop {
            tokio::time::sleep(poll).await;
            self.check_running()?;
            let now = Instant::now();
            let counts = self.counts().await?;
            let cpu = self.cpu()?;
            let busy = (cpu.saturating_sub(last_cpu)).as_secs_f64() > 0.10 * poll.as_secs_f64();
            if counts.reconciles != last.reconciles || busy || counts.reconciles < min_reconciles {
                last_activity = now;
            }
            last = counts;
            last_cpu = cpu;
            if now.duration_since(last_activity) >= quiet {
                return Ok(Idle {
                    after: last_activity.duration_since(since),
                    counts,
                });
            }
            if now > deadline {
                bail!(
                    "bench-controller not idle after {timeout:?} ({} reconciles, {min_reconciles} expected)",
                    counts.reconciles
                );
            }
        }
    }

    /// SIGKILL (as a crashed or evicted pod), and wait for the exit.
    pub async fn stop(mut self) -> Result<()> {
        self.child
            .kill()
            .await
            .context("killing bench-controller")?;
        Ok(())
    }
}

pub fn memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("{name} missing from /proc/{pid}/status"))?;
        let kb: u64 = line
            .split_whitespace()
            .nth(1)
            .context("malformed status line")?
            .parse()?;
        Ok(kb * 1024)
    };
    Ok(Memory {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux if unknown).
pub fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// User + system CPU time of a process.
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may contain spaces) in parens.
    let after = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc/pid/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    Ok(Duration::from_secs_f64(
        (utime + stime) as f64 / clock_ticks() as f64,
    ))
}

/// The pids of this environment's kube-apiserver and etcd (found by their
/// command lines, which name the environment's directory).
pub fn control_plane_pids(env_dir: &Path) -> (Option<u32>, Option<u32>) {
    let dir = env_dir.to_string_lossy().into_owned();
    let mut apiserver = None;
    let mut etcd = None;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (None, None);
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let Some(program) = args.first() else {
            continue;
        };
        if !args.iter().any(|a| a.contains(&dir)) {
            continue;
        }
        if program.ends_with("kube-apiserver") {
            apiserver = Some(pid);
        } else if program.ends_with("/etcd") || program == "etcd" {
            etcd = Some(pid);
        }
    }
    (apiserver, etcd)
}

/// Busy CPU time of the whole machine (all cores), from `/proc/stat`.
pub fn machine_busy() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return Duration::ZERO;
    };
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return Duration::ZERO;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy: u64 = v
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
        .map(|(_, t)| t)
        .sum();
    Duration::from_secs_f64(busy as f64 / clock_ticks() as f64)
}

/// CPU times of the processes that share the machine during a phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSnapshot {
    pub apiserver: Duration,
    pub etcd: Duration,
    pub controller: Duration,
    pub bench: Duration,
    /// Every process on the machine.
    pub machine: Duration,
    pub at: Option<Instant>,
}

impl CpuSnapshot {
    pub fn take(apiserver: Option<u32>, etcd: Option<u32>, controller: Option<u32>) -> Self {
        let t = |pid: Option<u32>| pid.and_then(|p| cpu_time(p).ok()).unwrap_or_default();
        Self {
            apiserver: t(apiserver),
            etcd: t(etcd),
            controller: t(controller),
            bench: t(Some(std::process::id())),
            machine: machine_busy(),
            at: Some(Instant::now()),
        }
    }

    /// One line: CPU seconds per process over the phase, and the share of
    /// the machine they used.
    pub fn describe_since(&self, before: &CpuSnapshot, cores: usize) -> String {
        let wall = match (self.at, before.at) {
            (Some(a), Some(b)) => a.duration_since(b).as_secs_f64(),
            _ => 0.0,
        };
        let d = |a: Duration, b: Duration| a.saturating_sub(b).as_secs_f64();
        let (api, etcd, ctl, bench) = (
            d(self.apiserver, before.apiserver),
            d(self.etcd, before.etcd),
            d(self.controller, before.controller),
            d(self.bench, before.bench),
        );
        let total = api + etcd + ctl + bench;
        let others = (d(self.machine, before.machine) - total).max(0.0);
        let share = |x: f64| {
            if wall > 0.0 {
                100.0 * x / (wall * cores as f64)
            } else {
                0.0
            }
        };
        format!(
            "CPU s: kube-apiserver {api:.1}, etcd {etcd:.1}, controller {ctl:.1}, bench {bench:.1} = {total:.1} in {wall:.1} s wall ({:.0}% of {cores} cores; other processes on the machine {:.0}%)",
            share(total),
            share(others)
        )
    }

    /// kube-apiserver + etcd CPU over the phase.
    pub fn control_plane_since(&self, before: &CpuSnapshot) -> Duration {
        self.apiserver.saturating_sub(before.apiserver) + self.etcd.saturating_sub(before.etcd)
    }

    /// CPU of every process of the benchmark (control plane, controller,
    /// benchmark) over the phase.
    pub fn ours_since(&self, before: &CpuSnapshot) -> Duration {
        self.control_plane_since(before)
            + self.controller.saturating_sub(before.controller)
            + self.bench.saturating_sub(before.bench)
    }

    /// The controller's CPU over the phase.
    pub fn controller_since(&self, before: &CpuSnapshot) -> Duration {
        self.controller.saturating_sub(before.controller)
    }
}
