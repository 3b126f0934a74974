//! One node environment at a time on a host: an exclusive `flock` on
//! [`LOCK_PATH`], holding the PID of its holder. The kernel drops the lock
//! when the holder exits, however it exits, so a crashed run never blocks
//! the next one (which then cleans up what it left: `cleanup.rs`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// The lock file (on tmpfs: it is left in place, empty of meaning once no
/// process holds the lock).
pub const LOCK_PATH: &str = "/run/obc-node.lock";

/// Another node environment runs, or the lock file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "another node environment is running on this host (PID {pid}: {command}), holding \
         {LOCK_PATH}: only one can run at a time, as they share the bridge, /var/lib/kubelet and \
         containerd's paths. Wait for it to finish; if it hangs, stop it (kill {pid}): the next \
         start cleans up what it left"
    )]
    Held {
        /// The holder's PID, as it wrote it into the lock file.
        pid: String,
        /// Its command line, or why it could not be read.
        command: String,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot use the node lock {LOCK_PATH} ({0}); the node environment needs root")]
    Io(#[from] std::io::Error),
}

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub struct NodeLock {
    _file: File,
}

impl NodeLock {
    /// Takes the lock without waiting, or says who holds it.
    pub fn acquire() -> Result<NodeLock, LockError> {
        Self::acquire_at(Path::new(LOCK_PATH))
    }

    /// Like [`Self::acquire`], but while another process holds the lock,
    /// tries again every half second for up to `wait` (for hosts where
    /// several people's tests share one node, e.g. `OBC_NODE_LOCK_WAIT`).
    pub async fn acquire_waiting(wait: Duration) -> Result<NodeLock, LockError> {
        let deadline = Instant::now() + wait;
        let mut said = false;
        loop {
            match Self::acquire() {
                Err(LockError::Held { pid, command }) if Instant::now() < deadline => {
                    if !said {
                        tracing::info!(
                            "waiting up to {wait:?} for the node lock, held by PID {pid} ({command})"
                        );
                        said = true;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
    }

    fn acquire_at(path: &Path) -> Result<NodeLock, LockError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                file.read_to_string(&mut pid)?;
                let pid = pid.trim().to_string();
                let command = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| {
                        String::from_utf8_lossy(&c)
                            .replace('\0', " ")
                            .trim()
                            .to_string()
                    })
                    .unwrap_or_else(|e| format!("command line unreadable: {e}"));
                return Err(LockError::Held { pid, command });
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        Ok(NodeLock { _file: file })
    }
}
