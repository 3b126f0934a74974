//! A throwaway Kubernetes control plane plus an S3 server, on loopback.
//!
//! [`TestEnv::start`] runs, each on free 127.0.0.1 ports and inside one temporary
//! directory per environment:
//!
//! * **etcd** (the binary shipped by the `etcd-bin-vendored` crate),
//! * a real **kube-apiserver** (built by `scripts/install-testenv`), serving TLS with
//!   a CA generated here, RBAC authorization, a static admin token and
//!   service-account tokens minted through the TokenRequest API,
//! * **s3s-fs**, an Apache-2.0 S3 server storing objects in a directory;
//! * on demand ([`TestEnv::start_controller_manager`]), a real
//!   **kube-controller-manager** (garbage collector, namespace controller...)
//!   under its own identity.
//!
//! Everything is killed and the directory removed when the [`TestEnv`] is dropped,
//! including while a test panics. Set `OBC_KEEP_TESTENV=1` to keep the directory
//! (logs, kubeconfigs, etcd data) for inspection. See `docs/testenv.md`.
//!
//! One file a process: `etcd.rs`, `apiserver.rs` and `s3.rs` (s3s-fs), on
//! `process.rs` (child processes, ports), `certs.rs` (the PKI) and
//! `binaries.rs` (where the programs are); `controller_manager.rs` the
//! optional kube-controller-manager; `identities.rs` makes kubeconfigs
//! for the admin and ServiceAccounts, `objects.rs` writes namespaces, YAML
//! and CRDs.
//!
//! [`node`] is another environment: a real single-node cluster on the host
//! (kubelet, containerd, kube-proxy...) for tests that need Pods; root
//! only, see `docs/node.md`.

mod apiserver;
mod binaries;
mod certs;
mod controller_manager;
mod etcd;
mod identities;
pub mod node;
mod objects;
mod process;
mod s3;

use std::fmt;
use std::future::Future;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use kube::Client;
use tokio::sync::Mutex;

pub use binaries::{
    BinarySpec, CRANE_BINARY, HELM_BINARY, KUBE_APISERVER_BINARY, KUBE_CONTROLLER_MANAGER_BINARY,
    MissingBinary, RUSTFS_BINARY, S3_SERVER_BINARY, etcd_binary, resolve_binary,
    resolve_binary_from_env, testenv_cache_dir, testenv_cache_dir_from_env,
};
pub use controller_manager::{
    CONTROLLER_MANAGER_KUBECONFIG, CONTROLLER_MANAGER_USER, CONTROLLERS, ControllerManagerTimings,
};
pub use identities::client_from_kubeconfig;
pub(crate) use process::{Proc, random_string, with_port_retries};
pub use process::{free_port, tail_of};
pub use s3::s3_client_for;

use apiserver::start_apiserver;
use certs::generate_pki;
use etcd::start_etcd;
use identities::write_kubeconfig;
use s3::{S3sFs, start_s3_server};

/// The kube-apiserver release `scripts/install-testenv` builds.
pub const KUBE_APISERVER_VERSION: &str = "v1.37.2";
/// The s3s-fs release `scripts/install-testenv` installs.
pub const S3S_FS_VERSION: &str = "0.14.1";

/// Overrides the kube-apiserver binary path.
pub const ENV_KUBE_APISERVER: &str = "OBC_KUBE_APISERVER";
/// Overrides the kube-controller-manager binary path.
pub const ENV_KUBE_CONTROLLER_MANAGER: &str = "OBC_KUBE_CONTROLLER_MANAGER";
/// Overrides the S3 server (s3s-fs) binary path.
pub const ENV_S3_SERVER: &str = "OBC_S3_SERVER";
/// Overrides the RustFS binary path.
pub const ENV_RUSTFS_SERVER: &str = "OBC_RUSTFS_SERVER";
/// Overrides the helm binary path.
pub const ENV_HELM: &str = "OBC_HELM";
/// Overrides the crane binary path.
pub const ENV_CRANE: &str = "OBC_CRANE";
/// Overrides the cache directory `scripts/install-testenv` builds into.
pub const ENV_TESTENV_CACHE: &str = "OBC_TESTENV_CACHE";
/// `1` keeps the temporary directory of an environment after it is dropped.
pub const ENV_KEEP_TESTENV: &str = "OBC_KEEP_TESTENV";

/// Issuer and audience of service-account tokens.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// User name of the static admin token (member of `system:masters`).
pub const ADMIN_USER: &str = "admin";
/// Region the S3 client is configured with.
pub const S3_REGION: &str = "us-east-1";
/// File name of the apiserver's audit log in [`TestEnv::dir`].
pub const AUDIT_LOG: &str = "audit.log";

/// Installs a `tracing` subscriber (env filter from `RUST_LOG`, default `info`) that
/// writes through the test harness's capture. Does nothing if one is installed already.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .with_ansi(std::io::stdout().is_terminal())
        .try_init();
}

/// Polls `f` every 100 ms until it returns `Ok(Some(value))`, and returns that value.
///
/// `Ok(None)` means "not yet"; `Err(e)` is retried too (most errors while waiting are
/// transient) and the last one is reported if `timeout` passes. A single call of `f`
/// that hangs is cut off at the deadline as well.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: impl fmt::Display, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let deadline = start + timeout;
    let mut last_error: Option<anyhow::Error> = None;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, f()).await {
            Ok(Ok(Some(v))) => return Ok(v),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => last_error = Some(e),
            Err(_) => {
                last_error = Some(anyhow!(
                    "the last attempt was still running at the deadline"
                ))
            }
        }
        if Instant::now() >= deadline {
            let detail = match last_error {
                Some(e) => format!("last error: {e:#}"),
                None => "the condition never held".to_string(),
            };
            bail!(
                "timed out after {:.1?} waiting for {what} ({attempts} attempts; {detail})",
                start.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(100).min(remaining)).await;
    }
}

fn is_kube_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// How long each part of [`TestEnv::start`] took.
#[derive(Debug, Clone, Default)]
pub struct StartupTimings {
    /// etcd spawn → `/health` says true.
    pub etcd: Duration,
    /// kube-apiserver spawn → `/readyz` 200.
    pub apiserver: Duration,
    /// `/readyz` 200 → `default` namespace and bootstrap cluster roles exist.
    pub apiserver_bootstrap: Duration,
    /// s3s-fs spawn → answers HTTP (zero without it, [`Store::None`]).
    pub s3: Duration,
    /// The whole of [`TestEnv::start`] (etcd and S3 start concurrently).
    pub total: Duration,
}

/// etcd, kube-apiserver and an S3 server for one test. See the module docs.
pub struct TestEnv {
    // First, so it stops before the apiserver it talks to.
    controller_manager: Mutex<Option<Proc>>,
    s3: Option<S3sFs>,
    apiserver: Mutex<Proc>,
    etcd: Mutex<Proc>,
    etcd_port: u16,
    apiserver_port: u16,
    admin_token: String,
    ca_pem: String,
    // Signs users' client certificates (`identities.rs`).
    ca_key_pem: String,
    kubeconfig_path: PathBuf,
    http: reqwest::Client,
    admin: Client,
    timings: StartupTimings,
    // Last, so it is removed after the processes are gone.
    dir: Option<tempfile::TempDir>,
}

impl fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestEnv")
            .field("dir", &self.dir())
            .field("apiserver", &self.apiserver_url())
            .field("etcd", &self.etcd_endpoint())
            .field("s3", &self.s3.as_ref().map(|_| self.s3_endpoint()))
            .finish_non_exhaustive()
    }
}

/// Which S3 server [`TestEnv::start_with`] runs beside etcd and kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// s3s-fs, what [`TestEnv::start`] runs: the `s3_*` methods serve it.
    S3sFs,
    /// None: the caller runs the store it needs (RustFS: [`crate::rustfs`]),
    /// and the `s3_*` methods panic.
    None,
}

impl TestEnv {
    /// Starts etcd, kube-apiserver and the S3 server (s3s-fs) and waits until
    /// all are ready.
    pub async fn start() -> Result<TestEnv> {
        Self::start_with(Store::S3sFs).await
    }

    /// Starts etcd, kube-apiserver and `store`, and waits until all are ready.
    /// Fails before spawning anything if a binary they need is missing.
    pub async fn start_with(store: Store) -> Result<TestEnv> {
        init_tracing();
        let started = Instant::now();

        // Fail fast, before spawning anything, if a binary is missing.
        let etcd_bin = etcd_binary()?;
        let apiserver_bin = resolve_binary_from_env(&KUBE_APISERVER_BINARY)?;
        let s3_bin = match store {
            Store::S3sFs => Some(resolve_binary_from_env(&S3_SERVER_BINARY)?),
            Store::None => None,
        };

        let dir = tempfile::Builder::new()
            .prefix("obc-testenv-")
            .tempdir()
            .context("creating the test environment's temporary directory")?;
        let root = dir.path().to_path_buf();
        let mut dir = dir;
        if keep_requested() {
            // Also kept when startup fails, so the logs can be read.
            dir.disable_cleanup(true);
            tracing::info!("{ENV_KEEP_TESTENV}=1: keeping {}", root.display());
        }

        let admin_token = random_string(48);
        let controller_manager_token = random_string(48);
        let s3_access_key = format!("OBC{}", random_string(17).to_uppercase());
        let s3_secret_key = random_string(40);

        let pki = generate_pki().context("generating certificates")?;
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes())?)
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(5))
            .no_proxy()
            .build()
            .context("building HTTP client")?;

        let kube_side = async {
            let (etcd, etcd_port, etcd_time) = start_etcd(&etcd_bin, &root, &http).await?;
            let (apiserver, apiserver_port, apiserver_time) = start_apiserver(
                &apiserver_bin,
                &root,
                &pki,
                &admin_token,
                &controller_manager_token,
                etcd_port,
                &http,
            )
            .await?;
            anyhow::Ok((
                etcd,
                etcd_port,
                etcd_time,
                apiserver,
                apiserver_port,
                apiserver_time,
            ))
        };
        let s3_side = async {
            let Some(bin) = &s3_bin else {
                return Ok(None);
            };
            let started = start_s3_server(bin, &root, &s3_access_key, &s3_secret_key, &http);
            started.await.map(Some)
        };
        let (kube_side, s3_side) = tokio::join!(kube_side, s3_side);
        let (s3, s3_time) = match s3_side? {
            Some((proc, port, took)) => {
                let s3 = S3sFs {
                    proc: Mutex::new(proc),
                    port,
                    access_key: s3_access_key,
                    secret_key: s3_secret_key,
                };
                (Some(s3), took)
            }
            None => (None, Duration::ZERO),
        };
        let (etcd, etcd_port, etcd_time, apiserver, apiserver_port, apiserver_time) = kube_side?;

        let apiserver_url = format!("https://127.0.0.1:{apiserver_port}");
        let kubeconfig_path = root.join("admin.kubeconfig");
        write_kubeconfig(
            &kubeconfig_path,
            &apiserver_url,
            &pki.ca_pem,
            ADMIN_USER,
            &admin_token,
            "default",
        )?;
        let admin = client_from_kubeconfig(&kubeconfig_path).await?;
        // Written now (cheap); used only if the controller manager is started.
        write_kubeconfig(
            &root.join(CONTROLLER_MANAGER_KUBECONFIG),
            &apiserver_url,
            &pki.ca_pem,
            CONTROLLER_MANAGER_USER,
            &controller_manager_token,
            "kube-system",
        )?;

        let mut env = TestEnv {
            controller_manager: Mutex::new(None),
            s3,
            apiserver: Mutex::new(apiserver),
            etcd: Mutex::new(etcd),
            etcd_port,
            apiserver_port,
            admin_token,
            ca_pem: pki.ca_pem,
            ca_key_pem: pki.ca_key_pem,
            kubeconfig_path,
            http,
            admin,
            timings: StartupTimings::default(),
            dir: Some(dir),
        };

        let bootstrap_start = Instant::now();
        env.wait_for_bootstrap().await?;
        let bootstrap_time = bootstrap_start.elapsed();

        env.timings = StartupTimings {
            etcd: etcd_time,
            apiserver: apiserver_time,
            apiserver_bootstrap: bootstrap_time,
            s3: s3_time,
            total: started.elapsed(),
        };
        tracing::info!(
            "test environment ready in {:.1?} (etcd {:.1?}, kube-apiserver {:.1?} + bootstrap {:.1?}, s3 {:.1?}) in {}",
            env.timings.total,
            etcd_time,
            apiserver_time,
            bootstrap_time,
            s3_time,
            root.display()
        );
        Ok(env)
    }

    /// How long startup took, per component.
    pub fn startup_timings(&self) -> &StartupTimings {
        &self.timings
    }

    /// The apiserver's audit log (JSON lines): every request made by a
    /// ServiceAccount, at level Metadata.
    pub fn audit_log_path(&self) -> PathBuf {
        self.dir().join(AUDIT_LOG)
    }

    /// The temporary directory holding logs (`etcd.log`, `kube-apiserver.log`,
    /// `s3s-fs.log`), certificates, kubeconfigs and data.
    pub fn dir(&self) -> &Path {
        match &self.dir {
            Some(d) => d.path(),
            None => Path::new(""),
        }
    }

    /// Path of the admin kubeconfig (`system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A client authenticating with the admin token (`system:masters`); a clone of
    /// one shared client.
    pub fn admin_client(&self) -> Client {
        self.admin.clone()
    }

    /// The static admin bearer token.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// `https://127.0.0.1:<port>`.
    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// An admin client that reaches the apiserver through `server` (a proxy
    /// a test controls), from the admin kubeconfig pointed there; the
    /// kubeconfig is kept as `<name>.kubeconfig` in [`dir`](Self::dir).
    pub async fn admin_client_via(
        &self,
        server: std::net::SocketAddr,
        name: &str,
    ) -> Result<Client> {
        let text = std::fs::read_to_string(&self.kubeconfig_path)?;
        let direct = self.apiserver_url();
        anyhow::ensure!(text.contains(&direct), "the kubeconfig names {direct}");
        let path = self.dir().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, text.replace(&direct, &format!("https://{server}")))?;
        identities::client_from_kubeconfig(&path).await
    }

    /// PEM of the CA that signed the apiserver's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// `http://127.0.0.1:<port>` of etcd's client endpoint.
    pub fn etcd_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// Fails, with the log tail, if any of the processes has died.
    pub async fn ensure_running(&self) -> Result<()> {
        self.etcd.lock().await.ensure_running()?;
        self.apiserver.lock().await.ensure_running()?;
        if let Some(s3) = &self.s3 {
            s3.proc.lock().await.ensure_running()?;
        }
        if let Some(kcm) = self.controller_manager.lock().await.as_mut() {
            kcm.ensure_running()?;
        }
        Ok(())
    }
}

fn keep_requested() -> bool {
    std::env::var_os(ENV_KEEP_TESTENV).is_some_and(|v| v == "1")
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if let Some(kcm) = self.controller_manager.get_mut().as_mut() {
            kcm.stop_blocking();
        }
        if let Some(s3) = self.s3.as_mut() {
            s3.proc.get_mut().stop_blocking();
        }
        self.apiserver.get_mut().stop_blocking();
        self.etcd.get_mut().stop_blocking();
        if let Some(dir) = self.dir.take() {
            if keep_requested() {
                let path = dir.keep();
                eprintln!("obc-testenv: kept {}", path.display());
                tracing::info!("kept test environment directory {}", path.display());
            } else {
                let path = dir.path().to_path_buf();
                if let Err(e) = dir.close() {
                    tracing::warn!("removing {}: {e}", path.display());
                }
            }
        }
    }
}
