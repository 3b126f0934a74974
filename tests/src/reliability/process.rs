//! Provisioner processes that can be crashed, killed, frozen and restarted:
//! how to start one ([`Launch`]), the running process ([`Proc`]), and what its
//! log says it did ([`count_operations`]; every act, failed ones too:
//! [`acts`]).

use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use tokio::process::{Child, Command};

use super::{LEASE_NAME, PROVISIONER, SYSTEM_NAMESPACE};
use crate::setup::spawn_provisioner;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// How to start one provisioner process.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Path of the `crash-provisioner` binary.
    pub bin: PathBuf,
    /// The kubeconfig it runs with.
    pub kubeconfig: PathBuf,
    /// The provisioner name it serves.
    pub provisioner: String,
    /// Namespaces it serves (empty: all).
    pub namespaces: Vec<String>,
    /// `OBC_FAILPOINTS`.
    pub failpoints: Option<String>,
    /// Leader election: identity and lease duration in seconds.
    pub leader: Option<(String, u64)>,
    /// Metrics server address.
    pub metrics: Option<SocketAddr>,
    /// Tag in the log file name.
    pub tag: String,
    /// `RUST_LOG`.
    pub log_level: String,
    /// Claims reconciled at once (the binary's default is 8).
    pub concurrency: Option<u16>,
    /// More environment variables (`OBC_COSI_DRIVER_NAME`, ...).
    pub env: Vec<(String, String)>,
}

impl Launch {
    /// A launch of the sample provisioner (all namespaces, no leader election).
    pub fn new(bin: impl Into<PathBuf>, kubeconfig: impl Into<PathBuf>, tag: &str) -> Self {
        Self {
            bin: bin.into(),
            kubeconfig: kubeconfig.into(),
            provisioner: PROVISIONER.into(),
            namespaces: Vec::new(),
            failpoints: None,
            leader: None,
            metrics: None,
            tag: tag.into(),
            log_level: "info,lib_provisioner=debug,sample_provisioner=debug".into(),
            concurrency: None,
            env: Vec::new(),
        }
    }

    /// The same launch with `point` armed.
    pub fn armed(&self, point: &str) -> Self {
        Self {
            failpoints: Some(point.into()),
            ..self.clone()
        }
    }

    /// The same launch with nothing armed.
    pub fn unarmed(&self) -> Self {
        Self {
            failpoints: None,
            ..self.clone()
        }
    }

    /// Starts the process, logging stdout and stderr to one file under the
    /// log root.
    pub fn start(&self, log_root: &Path) -> Result<Proc> {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let log = log_root.join(format!("{seq:04}-{}.log", self.tag));
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .env("OBC_PROVISIONER_NAME", &self.provisioner)
            .env("OBC_NAMESPACES", self.namespaces.join(","))
            .env("OBC_BACKOFF_MAX_MS", "1000")
            .env("POD_NAMESPACE", SYSTEM_NAMESPACE)
            .env("OBC_LEASE_NAME", LEASE_NAME);
        if let Ok(path) = std::env::var("PATH") {
            cmd.env("PATH", path);
        }
        if let Some(points) = &self.failpoints {
            cmd.env("OBC_FAILPOINTS", points);
        }
        match &self.leader {
            Some((identity, lease)) => {
                cmd.env("OBC_LEADER_ELECT", "true")
                    .env("POD_NAME", identity)
                    .env("OBC_LEASE_DURATION_SECONDS", lease.to_string());
            }
            None => {
                cmd.env("OBC_LEADER_ELECT", "false")
                    .env("POD_NAME", &self.tag);
            }
        }
        if let Some(n) = self.concurrency {
            cmd.env("OBC_CONCURRENCY", n.to_string());
        }
        if let Some(addr) = self.metrics {
            cmd.env("OBC_METRICS_ADDR", addr.to_string());
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        let child = spawn_provisioner(&mut cmd, &self.kubeconfig, &self.log_level, &log)?;
        Ok(Proc {
            pid: child.id().unwrap_or_default(),
            child,
            log,
            exit: None,
            started: Instant::now(),
        })
    }
}

/// A running (or finished) provisioner process; SIGKILLed when dropped.
pub struct Proc {
    child: Child,
    pid: u32,
    log: PathBuf,
    exit: Option<ExitStatus>,
    started: Instant,
}

impl Proc {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// How long ago it was started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        if self.exit.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.exit = Some(status);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// Its exit status, if it exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.is_running();
        self.exit
    }

    /// Waits up to `timeout` for it to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.exit {
            return Some(status);
        }
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.exit = Some(status);
                Some(status)
            }
            _ => None,
        }
    }

    /// SIGKILLs it (a no-op if it exited) and reaps it.
    pub async fn kill(&mut self) {
        if self.is_running() {
            let _ = self.child.start_kill();
        }
        let _ = self.wait_exit(Duration::from_secs(10)).await;
    }

    /// Sends a signal by name (`STOP`, `CONT`, `TERM`) to this process only.
    pub async fn signal(&self, name: &str) -> Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()
            .await
            .context("running kill")?;
        if !status.success() {
            bail!("kill -{name} {} failed: {status}", self.pid);
        }
        Ok(())
    }

    /// Whether it died at crash point `point`: aborted (SIGABRT) after
    /// printing the failpoint's line.
    pub fn crashed_at(&mut self, point: &str) -> bool {
        let aborted = self.exit_status().and_then(|s| s.signal()) == Some(6);
        aborted && self.log().contains(&format!("failpoint {point}: aborting"))
    }

    /// Waits up to `timeout` until it exits (`true`) or `done` holds
    /// (`false`). Once `done` holds, it still has `grace` (polled every
    /// 100 ms) to exit: at a crash point right after the last write of a
    /// change, the write can be seen a moment before the process aborts.
    pub async fn crashed_or<F, Fut>(
        &mut self,
        timeout: Duration,
        grace: Duration,
        mut done: F,
    ) -> Result<bool>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let poll = Duration::from_millis(100);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if !self.is_running() {
                return Ok(true);
            }
            if done().await.unwrap_or(false) {
                for _ in 0..grace.as_millis() / poll.as_millis() {
                    if !self.is_running() {
                        return Ok(true);
                    }
                    tokio::time::sleep(poll).await;
                }
                return Ok(false);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "neither crashed nor done in {timeout:?}:\n{}",
                    self.log_tail(30)
                );
            }
            tokio::time::sleep(poll).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.start_kill();
        }
    }
}

/// Counts log lines of a process that say a provisioner operation
/// succeeded (`operation=provision`, `grant`...).
pub fn count_operations(log: &str, operation: &str) -> usize {
    let needle = format!("operation=\"{operation}\"");
    let plain = format!("operation={operation}");
    log.lines()
        .filter(|l| l.contains("provisioner succeeded"))
        .filter(|l| l.contains(&needle) || l.split_whitespace().any(|w| w == plain))
        .count()
}

/// What the library logs (at debug, field `act`) for each act of a
/// replica: every Kubernetes write its reconcilers send, and every
/// provisioner call, before its outcome is known (failed, refused and
/// abandoned ones included). The Lease's own writes are not acts.
pub const ACT_MARKERS: [&str; 2] = ["kubernetes-write", "provisioner-call"];

/// Whether a log line records an act ([`ACT_MARKERS`]).
pub fn is_act(line: &str) -> bool {
    ACT_MARKERS.iter().any(|m| {
        line.contains(&format!("act=\"{m}\""))
            || line.split_whitespace().any(|w| w == format!("act={m}"))
    })
}

/// The lines of `log` that record an act.
pub fn acts(log: &str) -> Vec<&str> {
    log.lines().filter(|l| is_act(l)).collect()
}

/// Fails, quoting the first acts, if `log` (of replica `who`) records any.
pub fn ensure_no_acts(who: &str, log: &str) -> Result<()> {
    let found = acts(log);
    if !found.is_empty() {
        bail!(
            "{who} acted {} times (Kubernetes writes and provisioner calls, failed ones included); the first:\n{}",
            found.len(),
            found.iter().take(5).copied().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standby's log that only a complete count flags: a deletion
    /// produces no "provisioner succeeded" line, and failed acts none either.
    const STANDBY_DURING_DELETION: &str = "\
2026-12-05T09:00:00Z  INFO lib_provisioner::leader: standing by: another replica leads lease=x holder=a
2026-12-05T09:00:01Z DEBUG lib_provisioner::controller::gate: writing to Kubernetes act=\"kubernetes-write\" method=PATCH path=/apis/objectbucket.io/v1alpha1/namespaces/ha/objectbucketclaims/h0
2026-12-05T09:00:01Z DEBUG lib_provisioner::reconcile: calling the provisioner act=\"provisioner-call\" operation=\"delete\"
2026-12-05T09:00:01Z  WARN lib_provisioner::reconcile::steps: provisioner delete failed: store down
";

    #[test]
    fn a_standbys_failed_writes_and_teardowns_are_flagged() {
        assert_eq!(acts(STANDBY_DURING_DELETION).len(), 2);
        let err = ensure_no_acts("replica-a", STANDBY_DURING_DELETION)
            .expect_err("a standby that wrote is flagged");
        assert!(err.to_string().contains("acted 2 times"), "{err}");
        // What the replica test counted before: blind to all of it.
        let old = count_operations(STANDBY_DURING_DELETION, "provision")
            + count_operations(STANDBY_DURING_DELETION, "grant");
        assert_eq!(old, 0);
        // Unquoted values (another formatter) count too; mentions do not.
        assert!(is_act("x act=provisioner-call operation=grant"));
        assert!(!is_act("x error=\"provisioner call timed out\""));
        ensure_no_acts("replica-b", "INFO standing by\n").expect("an idle standby passes");
    }

    #[test]
    fn operations_are_counted_from_log_lines() {
        let log = "2026 INFO lib_provisioner::reconcile::claim: provisioner succeeded claim=a/b bucket=x operation=\"provision\"\n\
                   2026 INFO lib_provisioner::reconcile::claim: provisioner succeeded claim=a/c bucket=y operation=grant\n\
                   2026 INFO other operation=provision\n";
        assert_eq!(count_operations(log, "provision"), 1);
        assert_eq!(count_operations(log, "grant"), 1);
        assert_eq!(count_operations(log, "delete"), 0);
    }
}
