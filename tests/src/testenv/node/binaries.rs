//! Where the node's programs are: `scripts/install-testenv` builds them into
//! its cache (one directory per tool and version); an `OBC_...` variable
//! each overrides the path.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::super::binaries::{BinarySpec, resolve_binary_from_env, testenv_cache_dir_from_env};
use super::super::{KUBE_APISERVER_BINARY, KUBE_CONTROLLER_MANAGER_BINARY, etcd_binary};

/// kubelet, version-stamped, from the Kubernetes module `scripts/install-testenv` builds.
pub const KUBELET_BINARY: BinarySpec = BinarySpec {
    name: "kubelet",
    env_var: "OBC_KUBELET",
    cache_path: "kubelet-v1.37.2-stamped/kubelet",
};
/// kube-proxy, from the same module.
pub const KUBE_PROXY_BINARY: BinarySpec = BinarySpec {
    name: "kube-proxy",
    env_var: "OBC_KUBE_PROXY",
    cache_path: "kube-proxy-v1.37.2-stamped/kube-proxy",
};
/// kube-scheduler, from the same module.
pub const KUBE_SCHEDULER_BINARY: BinarySpec = BinarySpec {
    name: "kube-scheduler",
    env_var: "OBC_KUBE_SCHEDULER",
    cache_path: "kube-scheduler-v1.37.2-stamped/kube-scheduler",
};
/// kubectl, from the same module.
pub const KUBECTL_BINARY: BinarySpec = BinarySpec {
    name: "kubectl",
    env_var: "OBC_KUBECTL",
    cache_path: "kubectl-v1.37.2-stamped/kubectl",
};
/// runc v1.5.3 (cgo, seccomp).
pub const RUNC_BINARY: BinarySpec = BinarySpec {
    name: "runc",
    env_var: "OBC_RUNC",
    cache_path: "runc-v1.5.3/runc",
};
/// The directory with containerd, ctr and containerd-shim-runc-v2 v2.4.2.
pub const CONTAINERD_DIR: BinarySpec = BinarySpec {
    name: "containerd",
    env_var: "OBC_CONTAINERD_BIN_DIR",
    cache_path: "containerd-v2.4.2",
};
/// The directory with the CNI plugins bridge, host-local, loopback and portmap v1.10.0.
pub const CNI_PLUGINS_DIR: BinarySpec = BinarySpec {
    name: "cni-plugins",
    env_var: "OBC_CNI_BIN_DIR",
    cache_path: "cni-plugins-v1.10.0",
};

/// Every program the node runs, found.
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    /// etcd (the `etcd-bin-vendored` crate's).
    pub etcd: PathBuf,
    /// kube-apiserver.
    pub apiserver: PathBuf,
    /// kube-controller-manager.
    pub controller_manager: PathBuf,
    /// kube-scheduler.
    pub scheduler: PathBuf,
    /// kubelet.
    pub kubelet: PathBuf,
    /// kube-proxy.
    pub kube_proxy: PathBuf,
    /// kubectl.
    pub kubectl: PathBuf,
    /// runc.
    pub runc: PathBuf,
    /// containerd, ctr and containerd-shim-runc-v2 are in this directory.
    pub containerd_dir: PathBuf,
    /// The CNI plugins' directory.
    pub cni_dir: PathBuf,
}

impl NodeBinaries {
    /// Finds every program, or fails naming each one that is missing and
    /// how to build it.
    pub fn find() -> Result<NodeBinaries> {
        let mut missing = Vec::new();
        let mut file = |spec: &BinarySpec| match resolve_binary_from_env(spec) {
            Ok(p) => p,
            Err(e) => {
                missing.push(e.to_string());
                PathBuf::new()
            }
        };
        let apiserver = file(&KUBE_APISERVER_BINARY);
        let controller_manager = file(&KUBE_CONTROLLER_MANAGER_BINARY);
        let scheduler = file(&KUBE_SCHEDULER_BINARY);
        let kubelet = file(&KUBELET_BINARY);
        let kube_proxy = file(&KUBE_PROXY_BINARY);
        let kubectl = file(&KUBECTL_BINARY);
        let runc = file(&RUNC_BINARY);
        let containerd_dir = directory(
            &CONTAINERD_DIR,
            &["containerd", "ctr", "containerd-shim-runc-v2"],
            &mut missing,
        );
        let cni_dir = directory(
            &CNI_PLUGINS_DIR,
            &["bridge", "host-local", "loopback", "portmap"],
            &mut missing,
        );
        if !missing.is_empty() {
            bail!(
                "the node environment cannot start:\n  {}",
                missing.join("\n  ")
            );
        }
        Ok(NodeBinaries {
            etcd: etcd_binary()?,
            apiserver,
            controller_manager,
            scheduler,
            kubelet,
            kube_proxy,
            kubectl,
            runc,
            containerd_dir,
            cni_dir,
        })
    }

    /// `containerd` in [`Self::containerd_dir`].
    pub fn containerd(&self) -> PathBuf {
        self.containerd_dir.join("containerd")
    }

    /// `ctr` in [`Self::containerd_dir`].
    pub fn ctr(&self) -> PathBuf {
        self.containerd_dir.join("ctr")
    }

    /// The programs only a node runs: any process of one is the node's.
    pub(super) fn node_only(&self) -> Vec<PathBuf> {
        vec![
            self.kubelet.clone(),
            self.kube_proxy.clone(),
            self.scheduler.clone(),
            self.containerd(),
            self.containerd_dir.join("containerd-shim-runc-v2"),
        ]
    }
}

/// A directory of programs: the variable's value, else the cache's.
fn directory(spec: &BinarySpec, files: &[&str], missing: &mut Vec<String>) -> PathBuf {
    let dir = match std::env::var_os(spec.env_var).filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => testenv_cache_dir_from_env()
            .unwrap_or_default()
            .join(spec.cache_path),
    };
    let absent: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| !Path::new(&dir).join(f).is_file())
        .collect();
    if !absent.is_empty() {
        missing.push(format!(
            "{} ({}) not found in {}; run `scripts/install-testenv {}` to build them, or set {} \
             to a directory that has them",
            spec.name,
            absent.join(", "),
            dir.display(),
            spec.name,
            spec.env_var
        ));
    }
    dir
}
