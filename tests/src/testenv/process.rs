//! Child processes: a command line and a log file each, restartable, killed
//! when dropped; free ports, and retries when one was taken meanwhile.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::Rng;
use rand::distr::Alphanumeric;
use tokio::process::{Child, Command};

const POLL_INTERVAL: Duration = Duration::from_millis(50);

const PORT_ATTEMPTS: usize = 3;

const LOG_TAIL_LINES: usize = 40;

pub(crate) fn random_string(len: usize) -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail_of(path: &Path, lines: usize) -> String {
    let read = || -> std::io::Result<String> {
        let mut f = fs::File::open(path)?;
        let len = f.metadata()?.len();
        let start = len.saturating_sub(64 * 1024);
        f.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            all[from..].join("\n")
        }
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}

/// One child process with its command line and log file, restartable.
pub(crate) struct Proc {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    pub(crate) envs: Vec<(OsString, OsString)>,
    log_path: PathBuf,
    child: Option<Child>,
}

impl Proc {
    pub(crate) fn new(
        name: &'static str,
        program: PathBuf,
        args: Vec<OsString>,
        log_path: PathBuf,
    ) -> Self {
        Self {
            name,
            program,
            args,
            envs: Vec::new(),
            log_path,
            child: None,
        }
    }

    pub(crate) fn spawn(&mut self) -> Result<()> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("opening {}", self.log_path.display()))?;
        writeln!(
            log,
            "==== obc-testenv: starting {} {}",
            self.program.display(),
            self.args
                .iter()
                .map(|a| redact(&a.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(" ")
        )?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} ({})", self.name, self.program.display()))?;
        tracing::debug!(name = self.name, pid = child.id(), "started");
        self.child = Some(child);
        Ok(())
    }

    /// The running child's PID.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    fn log_tail(&self) -> String {
        tail_of(&self.log_path, LOG_TAIL_LINES)
    }

    /// Fails, with the log tail, if the process is not running.
    pub(crate) fn ensure_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("{} is not running (it was stopped)", self.name);
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => bail!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log_path.display(),
                self.log_tail()
            ),
            Err(e) => bail!("checking on {}: {e}", self.name),
        }
    }

    /// Kills the process and waits for it (async).
    pub(crate) async fn stop(&mut self) {
        if let Some(mut child) = self.child.take()
            && let Err(e) = child.kill().await
        {
            tracing::warn!(name = self.name, "killing: {e}");
        }
    }

    /// Kills the process and waits for it, without a runtime (for `Drop`).
    pub(crate) fn stop_blocking(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Err(e) = child.start_kill() {
            tracing::warn!(name = self.name, "killing: {e}");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => {
                    tracing::warn!(name = self.name, "still running 10s after SIGKILL");
                    return;
                }
                Err(e) => {
                    tracing::warn!(name = self.name, "waiting: {e}");
                    return;
                }
            }
        }
    }

    /// Spawns the process and waits until `probe` says it is ready (see
    /// [`Self::wait_ready`]); logs that it serves `url`, and how soon.
    pub(crate) async fn spawn_ready<F, Fut>(
        &mut self,
        url: &str,
        timeout: Duration,
        probe: F,
    ) -> Result<Duration>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<bool>>,
    {
        self.spawn()?;
        let took = self.wait_ready(self.name, timeout, probe).await?;
        tracing::info!("{} ready on {url} in {took:.1?}", self.name);
        Ok(took)
    }

    /// Polls `probe` until it returns `Ok(true)`, failing early if the process exits.
    pub(crate) async fn wait_ready<F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut probe: F,
    ) -> Result<Duration>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<bool>>,
    {
        let start = Instant::now();
        let mut last;
        loop {
            self.ensure_running()?;
            match probe().await {
                Ok(true) => return Ok(start.elapsed()),
                Ok(false) => last = "not ready yet".into(),
                Err(e) => last = format!("{e:#}"),
            }
            if start.elapsed() > timeout {
                bail!(
                    "{what} not ready after {timeout:?} (last probe: {last}); last lines of {}:\n{}",
                    self.log_path.display(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop_blocking();
    }
}

/// Hides secret flag values in logged command lines.
fn redact(arg: &str) -> String {
    match arg.split_once('=') {
        Some((flag, _)) if flag.contains("secret") => format!("{flag}=<redacted>"),
        _ => arg.to_string(),
    }
}

fn log_mentions_port_clash(log: &str) -> bool {
    log.contains("address already in use") || log.contains("Address already in use")
}

/// Runs `attempt` with fresh ports until it succeeds or fails for a reason other
/// than a port someone took between choosing and binding it.
pub(crate) async fn with_port_retries<T, F, Fut>(what: &str, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut n = 1;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if n < PORT_ATTEMPTS && log_mentions_port_clash(&format!("{e:#}")) => {
                tracing::warn!("{what}: port taken, retrying with other ports: {e:#}");
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
