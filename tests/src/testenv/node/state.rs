//! The record of a run, written before the node changes anything and
//! removed last by its cleanup: what the run's processes look like, which
//! shared paths existed before it, and the sysctl values the kubelet
//! overwrites. A run that crashed leaves it behind, and the next start reads
//! it to clean up; state on the host with no record is someone else's.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::host::write_file;

/// Where the record is (outside /run: /var/lib/kubelet and the rest
/// survive a reboot, so the record must too).
pub const STATE_PATH: &str = "/var/lib/obc-node/state.json";
const STATE_DIR: &str = "/var/lib/obc-node";

/// Paths several programs share: the node removes them at the end only if
/// it created them.
pub(super) const SHARED_PATHS: [&str; 5] = [
    "/etc/cni",
    "/etc/cni/net.d",
    "/run/netns",
    "/run/mount",
    "/root/.kube",
];

/// The sysctls the kubelet sets at start (`protectKernelDefaults: false`).
pub(super) const KUBELET_SYSCTLS: [&str; 5] = [
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// One run's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct RunState {
    /// The test process.
    pub(super) pid: u32,
    /// The run's directory (certificates, configs, logs, etcd data); every
    /// control-plane process has it on its command line.
    pub(super) dir: PathBuf,
    /// Binaries only the node runs (kubelet, containerd, its shim...): any
    /// process of one of them is the node's.
    pub(super) node_binaries: Vec<PathBuf>,
    /// Those of [`SHARED_PATHS`] that existed before the run.
    pub(super) preexisting: Vec<String>,
    /// `(key under /proc/sys, value)` before the kubelet started.
    pub(super) sysctls: Vec<(String, String)>,
}

impl RunState {
    pub(super) fn new(dir: &Path, node_binaries: Vec<PathBuf>) -> Result<Self> {
        let preexisting = SHARED_PATHS
            .iter()
            .filter(|p| Path::new(p).exists())
            .map(|p| p.to_string())
            .collect();
        let mut sysctls = Vec::new();
        for key in KUBELET_SYSCTLS {
            let path = format!("/proc/sys/{key}");
            let value = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            sysctls.push((key.to_string(), value.trim().to_string()));
        }
        Ok(RunState {
            pid: std::process::id(),
            dir: dir.to_path_buf(),
            node_binaries,
            preexisting,
            sysctls,
        })
    }

    pub(super) fn save(&self) -> Result<()> {
        write_file(Path::new(STATE_PATH), &serde_json::to_string_pretty(self)?)
    }

    /// The record a crashed run left, if any.
    pub(super) fn load() -> Result<Option<RunState>> {
        match fs::read_to_string(STATE_PATH) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .with_context(|| format!("{STATE_PATH} is not a node run's record: remove it")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {STATE_PATH}")),
        }
    }

    /// Removes the record: the last step of a cleanup.
    pub(super) fn remove() -> Result<()> {
        match fs::remove_dir_all(STATE_DIR) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing {STATE_DIR}")),
        }
    }

    /// Puts the kubelet's sysctls back to the recorded values.
    pub(super) fn restore_sysctls(&self) -> Result<()> {
        for (key, value) in &self.sysctls {
            let path = format!("/proc/sys/{key}");
            let now = fs::read_to_string(&path).unwrap_or_default();
            if now.trim() != value {
                fs::write(&path, value).with_context(|| format!("restoring {path} to {value}"))?;
            }
        }
        Ok(())
    }
}
