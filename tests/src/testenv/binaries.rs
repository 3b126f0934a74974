//! Where the environment's programs are: an override variable each, else the
//! cache directory `scripts/install-testenv` builds into.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{
    ENV_CRANE, ENV_HELM, ENV_KUBE_APISERVER, ENV_KUBE_CONTROLLER_MANAGER, ENV_RUSTFS_SERVER,
    ENV_S3_SERVER, ENV_TESTENV_CACHE,
};

/// An external program the environment runs, and where to find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinarySpec {
    /// Human name, e.g. `kube-apiserver`.
    pub name: &'static str,
    /// Environment variable that overrides the path.
    pub env_var: &'static str,
    /// Path below the test-environment cache directory.
    pub cache_path: &'static str,
}

/// The kube-apiserver built by `scripts/install-testenv`.
pub const KUBE_APISERVER_BINARY: BinarySpec = BinarySpec {
    name: "kube-apiserver",
    env_var: ENV_KUBE_APISERVER,
    cache_path: "kube-apiserver-v1.37.2-stamped/kube-apiserver",
};

/// The kube-controller-manager built by `scripts/install-testenv` from the
/// same module version as [`KUBE_APISERVER_BINARY`].
pub const KUBE_CONTROLLER_MANAGER_BINARY: BinarySpec = BinarySpec {
    name: "kube-controller-manager",
    env_var: ENV_KUBE_CONTROLLER_MANAGER,
    cache_path: "kube-controller-manager-v1.37.2-stamped/kube-controller-manager",
};

/// The RustFS store (S3 + MinIO's admin API) built by `scripts/install-testenv`.
pub const RUSTFS_BINARY: BinarySpec = BinarySpec {
    name: "rustfs",
    env_var: ENV_RUSTFS_SERVER,
    cache_path: "rustfs-1.0.1-dev/bin/rustfs",
};

/// The s3s-fs S3 server installed by `scripts/install-testenv`.
pub const S3_SERVER_BINARY: BinarySpec = BinarySpec {
    name: "s3s-fs",
    env_var: ENV_S3_SERVER,
    cache_path: "s3s-fs-0.14.1/bin/s3s-fs",
};

/// Helm, built by `scripts/install-testenv` (the chart tests).
pub const HELM_BINARY: BinarySpec = BinarySpec {
    name: "helm",
    env_var: ENV_HELM,
    cache_path: "helm-v4.3.2/helm",
};

/// crane (go-containerregistry), built by `scripts/install-testenv`
/// (`scripts/build-image`).
pub const CRANE_BINARY: BinarySpec = BinarySpec {
    name: "crane",
    env_var: ENV_CRANE,
    cache_path: "crane-v0.22.1/crane",
};

/// A binary the environment needs is not where it was looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingBinary {
    /// Which binary.
    pub spec: BinarySpec,
    /// Where it was looked for (`None`: no cache directory could be determined).
    pub path: Option<PathBuf>,
    /// Whether `path` came from the override variable.
    pub from_env: bool,
}

impl fmt::Display for MissingBinary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.spec.name;
        let var = self.spec.env_var;
        match (&self.path, self.from_env) {
            (Some(path), true) => write!(
                f,
                "{name} not found at {} (the path {var} points to); run `scripts/install-testenv` \
                 to build it, or point {var} at an existing {name} binary",
                path.display()
            ),
            (Some(path), false) => write!(
                f,
                "{name} not found at {}; run `scripts/install-testenv` to build it \
                 (or set {var} to the path of an existing {name} binary; \
                 {ENV_TESTENV_CACHE} changes the cache directory)",
                path.display()
            ),
            (None, _) => write!(
                f,
                "{name} not found: neither {var}, {ENV_TESTENV_CACHE} nor HOME is set; \
                 run `scripts/install-testenv` to build it, or set {var} to the path of an \
                 existing {name} binary"
            ),
        }
    }
}

impl std::error::Error for MissingBinary {}

fn non_empty(v: Option<&OsStr>) -> Option<&OsStr> {
    v.filter(|s| !s.is_empty())
}

/// The cache directory, computed like `scripts/install-testenv` does:
/// `${OBC_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/obc-testenv}`.
/// Empty values count as unset. Pure: takes the variables' values.
pub fn testenv_cache_dir(
    obc_testenv_cache: Option<&OsStr>,
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Option<PathBuf> {
    if let Some(dir) = non_empty(obc_testenv_cache) {
        return Some(PathBuf::from(dir));
    }
    let cache_home = match non_empty(xdg_cache_home) {
        Some(x) => PathBuf::from(x),
        None => Path::new(non_empty(home)?).join(".cache"),
    };
    Some(cache_home.join("obc-testenv"))
}

/// The cache directory from this process's environment.
pub fn testenv_cache_dir_from_env() -> Option<PathBuf> {
    testenv_cache_dir(
        std::env::var_os(ENV_TESTENV_CACHE).as_deref(),
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// Where `spec` is: `env_override` (the value of `spec.env_var`) if set and non-empty,
/// else `<cache_dir>/<spec.cache_path>`. Does not read the process environment, so
/// tests can call it with any values; it only checks that the file exists.
pub fn resolve_binary(
    spec: &BinarySpec,
    env_override: Option<&OsStr>,
    cache_dir: Option<&Path>,
) -> std::result::Result<PathBuf, MissingBinary> {
    let (path, from_env) = match non_empty(env_override) {
        Some(p) => (PathBuf::from(p), true),
        None => match cache_dir {
            Some(dir) => (dir.join(spec.cache_path), false),
            None => {
                return Err(MissingBinary {
                    spec: *spec,
                    path: None,
                    from_env: false,
                });
            }
        },
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(MissingBinary {
            spec: *spec,
            path: Some(path),
            from_env,
        })
    }
}

/// [`resolve_binary`] with this process's environment.
pub fn resolve_binary_from_env(spec: &BinarySpec) -> std::result::Result<PathBuf, MissingBinary> {
    resolve_binary(
        spec,
        std::env::var_os(spec.env_var).as_deref(),
        testenv_cache_dir_from_env().as_deref(),
    )
}

/// Path of the etcd binary shipped by the `etcd-bin-vendored` crate.
pub fn etcd_binary() -> Result<PathBuf> {
    Ok(etcd_bin_vendored::etcd_bin_path()
        .context("etcd-bin-vendored has no etcd for this platform")?
        .to_path_buf())
}
