//! A throwaway Kubernetes control plane plus an S3 server, on loopback.
//!
//! [`TestEnv::start`] runs, each on free 127.0.0.1 ports and inside one temporary
//! directory per environment:
//!
//! * **etcd** (the binary shipped by the `etcd-bin-vendored` crate),
//! * a real **kube-apiserver** (built by `scripts/install-testenv`), serving TLS with
//!   a CA generated here, RBAC authorization, a static admin token and
//!   service-account tokens minted through the TokenRequest API,
//! * **s3s-fs**, an Apache-2.0 S3 server storing objects in a directory.
//!
//! Everything is killed and the directory removed when the [`TestEnv`] is dropped,
//! including while a test panics. Set `OBC_KEEP_TESTENV=1` to keep the directory
//! (logs, kubeconfigs, etcd data) for inspection. See `docs/testenv.md`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{self, OpenOptions};
use std::future::Future;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{self, Scope};
use kube::{Client, Config};
use rand::Rng;
use rand::distr::Alphanumeric;
use serde::Deserialize;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

/// The kube-apiserver release `scripts/install-testenv` builds.
pub const KUBE_APISERVER_VERSION: &str = "v1.37.2";
/// The s3s-fs release `scripts/install-testenv` installs.
pub const S3S_FS_VERSION: &str = "0.14.1";

/// Overrides the kube-apiserver binary path.
pub const ENV_KUBE_APISERVER: &str = "OBC_KUBE_APISERVER";
/// Overrides the S3 server (s3s-fs) binary path.
pub const ENV_S3_SERVER: &str = "OBC_S3_SERVER";
/// Overrides the RustFS binary path.
pub const ENV_RUSTFS_SERVER: &str = "OBC_RUSTFS_SERVER";
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

const FIELD_MANAGER: &str = "obc-testenv";
const POLL_INTERVAL: Duration = Duration::from_millis(50);
const ETCD_TIMEOUT: Duration = Duration::from_secs(30);
const APISERVER_TIMEOUT: Duration = Duration::from_secs(90);
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(60);
const S3_TIMEOUT: Duration = Duration::from_secs(30);
const PORT_ATTEMPTS: usize = 3;
const LOG_TAIL_LINES: usize = 40;

// ---------------------------------------------------------------------------
// Binary resolution
// ---------------------------------------------------------------------------

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
    cache_path: "kube-apiserver-v1.37.2/kube-apiserver",
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

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

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

pub(crate) fn random_string(len: usize) -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

/// A port that was free on 127.0.0.1 a moment ago.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))
}

/// The last `lines` lines of a log file, for error messages.
fn tail_of(path: &Path, lines: usize) -> String {
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

fn is_kube_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------

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

    fn log_tail(&self) -> String {
        tail_of(&self.log_path, LOG_TAIL_LINES)
    }

    /// Fails, with the log tail, if the process is not running.
    fn ensure_running(&mut self) -> Result<()> {
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
    fn stop_blocking(&mut self) {
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

// ---------------------------------------------------------------------------
// PKI
// ---------------------------------------------------------------------------

struct Pki {
    ca_pem: String,
    serving_cert_pem: String,
    serving_key_pem: String,
    sa_private_pem: String,
    sa_public_pem: String,
}

fn generate_pki() -> Result<Pki> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
    };

    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "obc-testenv CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut serving = CertificateParams::new(
        [
            "127.0.0.1",
            "::1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.0.0.1",
        ]
        .map(String::from)
        .to_vec(),
    )?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let sa_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;

    Ok(Pki {
        ca_pem: ca_cert.pem(),
        serving_cert_pem: serving_cert.pem(),
        serving_key_pem: serving_key.serialize_pem(),
        sa_private_pem: sa_key.serialize_pem(),
        sa_public_pem: sa_key.public_key_pem(),
    })
}

// ---------------------------------------------------------------------------
// Kubeconfig
// ---------------------------------------------------------------------------

fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    token: &str,
    namespace: &str,
) -> Result<()> {
    let ca_data = serde_json::to_value(ByteString(ca_pem.as_bytes().to_vec()))?;
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "obc-testenv",
            "cluster": { "server": server, "certificate-authority-data": ca_data },
        }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{
            "name": user,
            "context": { "cluster": "obc-testenv", "user": user, "namespace": namespace },
        }],
        "current-context": user,
        "preferences": {},
    });
    write_private(path, serde_yaml::to_string(&doc)?.as_bytes())
}

/// A `kube::Client` from a kubeconfig file (its current context; TLS verified).
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client> {
    let kubeconfig =
        Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", path.display()))?;
    Client::try_from(config).context("building kube client")
}

// ---------------------------------------------------------------------------
// The environment
// ---------------------------------------------------------------------------

/// How long each part of [`TestEnv::start`] took.
#[derive(Debug, Clone, Default)]
pub struct StartupTimings {
    /// etcd spawn → `/health` says true.
    pub etcd: Duration,
    /// kube-apiserver spawn → `/readyz` 200.
    pub apiserver: Duration,
    /// `/readyz` 200 → `default` namespace and bootstrap cluster roles exist.
    pub apiserver_bootstrap: Duration,
    /// s3s-fs spawn → answers HTTP.
    pub s3: Duration,
    /// The whole of [`TestEnv::start`] (etcd and S3 start concurrently).
    pub total: Duration,
}

/// etcd, kube-apiserver and an S3 server for one test. See the module docs.
pub struct TestEnv {
    s3: Mutex<Proc>,
    apiserver: Mutex<Proc>,
    etcd: Mutex<Proc>,
    etcd_port: u16,
    apiserver_port: u16,
    s3_port: u16,
    admin_token: String,
    ca_pem: String,
    kubeconfig_path: PathBuf,
    s3_access_key: String,
    s3_secret_key: String,
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
            .field("s3", &self.s3_endpoint())
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// Starts etcd, kube-apiserver and the S3 server and waits until all are ready.
    pub async fn start() -> Result<TestEnv> {
        init_tracing();
        let started = Instant::now();

        // Fail fast, before spawning anything, if a binary is missing.
        let etcd_bin = etcd_binary()?;
        let apiserver_bin = resolve_binary_from_env(&KUBE_APISERVER_BINARY)?;
        let s3_bin = resolve_binary_from_env(&S3_SERVER_BINARY)?;

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
            let (apiserver, apiserver_port, apiserver_time) =
                start_apiserver(&apiserver_bin, &root, &pki, &admin_token, etcd_port, &http)
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
        let s3_side = start_s3_server(&s3_bin, &root, &s3_access_key, &s3_secret_key, &http);
        let (kube_side, s3_side) = tokio::join!(kube_side, s3_side);
        let (s3, s3_port, s3_time) = s3_side?;
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

        let mut env = TestEnv {
            s3: Mutex::new(s3),
            apiserver: Mutex::new(apiserver),
            etcd: Mutex::new(etcd),
            etcd_port,
            apiserver_port,
            s3_port,
            admin_token,
            ca_pem: pki.ca_pem,
            kubeconfig_path,
            s3_access_key,
            s3_secret_key,
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

    /// Waits until the apiserver's own bootstrap objects exist: the `default`
    /// namespace and the RBAC default cluster roles.
    async fn wait_for_bootstrap(&self) -> Result<()> {
        let namespaces: Api<Namespace> = Api::all(self.admin.clone());
        let roles: Api<ClusterRole> = Api::all(self.admin.clone());
        wait_for(
            BOOTSTRAP_TIMEOUT,
            "the default namespace and bootstrap cluster roles",
            || async {
                if namespaces.get_opt("default").await?.is_none() {
                    return Ok(None);
                }
                for role in ["admin", "edit", "view", "cluster-admin"] {
                    if roles.get_opt(role).await?.is_none() {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
        .await
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

    /// PEM of the CA that signed the apiserver's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// `http://127.0.0.1:<port>` of etcd's client endpoint.
    pub fn etcd_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// `http://127.0.0.1:<port>` of the S3 server.
    pub fn s3_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// The S3 server's root `(access key, secret key)`.
    pub fn s3_root_credentials(&self) -> (String, String) {
        (self.s3_access_key.clone(), self.s3_secret_key.clone())
    }

    /// An S3 client for the S3 server with the root credentials.
    pub fn s3_client(&self) -> aws_sdk_s3::Client {
        self.s3_client_with_credentials(&self.s3_access_key, &self.s3_secret_key)
    }

    /// An S3 client for the S3 server with other credentials (e.g. to check that
    /// wrong ones are refused).
    pub fn s3_client_with_credentials(
        &self,
        access_key: &str,
        secret_key: &str,
    ) -> aws_sdk_s3::Client {
        s3_client_for(&self.s3_endpoint(), access_key, secret_key)
    }

    /// Creates `namespace` if it does not exist.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.admin.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(e) if is_kube_status(&e, 409) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating namespace {namespace}")),
        }
    }

    /// Creates the namespace and ServiceAccount if needed and mints a token for it
    /// through the TokenRequest API (valid 24h, audience [`SERVICE_ACCOUNT_ISSUER`]).
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> Result<String> {
        self.ensure_namespace(namespace).await?;
        let api: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), namespace);
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(e) if is_kube_status(&e, 409) => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating serviceaccount {namespace}/{name}"));
            }
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![SERVICE_ACCOUNT_ISSUER.to_string()]),
                expiration_seconds: Some(24 * 3600),
                ..Default::default()
            }),
            ..Default::default()
        };
        let response = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .with_context(|| format!("TokenRequest for serviceaccount {namespace}/{name}"))?;
        let token = response
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .with_context(|| format!("TokenRequest for {namespace}/{name} returned no token"))?;
        Ok(token)
    }

    /// Writes `<dir>/sa-<namespace>-<name>.kubeconfig` authenticating as
    /// `system:serviceaccount:<namespace>:<name>` (default namespace `<namespace>`),
    /// creating the namespace and ServiceAccount if needed. Start a controller process
    /// with `KUBECONFIG=<path>` to run it under that identity.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> Result<PathBuf> {
        let token = self.service_account_token(namespace, name).await?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let path = self.dir().join(format!("sa-{namespace}-{name}.kubeconfig"));
        write_kubeconfig(
            &path,
            &self.apiserver_url(),
            &self.ca_pem,
            &user,
            &token,
            namespace,
        )?;
        Ok(path)
    }

    /// A client authenticating as `system:serviceaccount:<namespace>:<name>` (see
    /// [`Self::service_account_kubeconfig`]). It can do only what RBAC grants it.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> Result<Client> {
        let path = self.service_account_kubeconfig(namespace, name).await?;
        client_from_kubeconfig(&path).await
    }

    /// Server-side applies every object of a multi-document YAML string with the
    /// admin client (any kind the apiserver serves: RBAC, Namespace, ServiceAccount,
    /// StorageClass, CRDs, custom objects...). Namespaced objects without a namespace
    /// go to `default`. Returns the applied objects.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>> {
        let mut applied = Vec::new();
        for (i, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
            let value = serde_yaml::Value::deserialize(doc)
                .with_context(|| format!("parsing YAML document {i}"))?;
            if value.is_null() {
                continue;
            }
            let obj: DynamicObject = serde_yaml::from_value(value)
                .with_context(|| format!("YAML document {i} is not a Kubernetes object"))?;
            applied.push(
                self.apply_object(obj)
                    .await
                    .with_context(|| format!("applying YAML document {i}"))?,
            );
        }
        Ok(applied)
    }

    /// Server-side applies one object (see [`Self::apply_yaml`]).
    pub async fn apply_object(&self, obj: DynamicObject) -> Result<DynamicObject> {
        let types = obj
            .types
            .as_ref()
            .context("object has no apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(types)?;
        let name = obj
            .metadata
            .name
            .clone()
            .with_context(|| format!("{} without metadata.name", gvk.kind))?;
        let (resource, caps) = discovery::pinned_kind(&self.admin, &gvk)
            .await
            .with_context(|| format!("discovering {}/{} {}", gvk.group, gvk.version, gvk.kind))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(self.admin.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(self.admin.clone(), &resource),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying {} {name}", gvk.kind))
    }

    /// Applies the CustomResourceDefinitions in a multi-document YAML string and
    /// waits until each is Established.
    pub async fn install_crds(&self, yaml: &str) -> Result<Vec<CustomResourceDefinition>> {
        let mut crds = Vec::new();
        for (i, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
            let value = serde_yaml::Value::deserialize(doc)
                .with_context(|| format!("parsing YAML document {i}"))?;
            if value.is_null() {
                continue;
            }
            let crd: CustomResourceDefinition = serde_yaml::from_value(value)
                .with_context(|| format!("YAML document {i} is not a CustomResourceDefinition"))?;
            crds.push(crd);
        }
        if crds.is_empty() {
            bail!("install_crds: no CustomResourceDefinition in the YAML");
        }
        let mut installed = Vec::new();
        for crd in &crds {
            installed.push(self.install_crd(crd).await?);
        }
        Ok(installed)
    }

    /// Applies one CustomResourceDefinition (e.g. `MyKind::crd()`) and waits until it
    /// is Established.
    pub async fn install_crd(
        &self,
        crd: &CustomResourceDefinition,
    ) -> Result<CustomResourceDefinition> {
        let name = crd
            .metadata
            .name
            .clone()
            .context("CustomResourceDefinition without metadata.name")?;
        let api: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut body = crd.clone();
        body.metadata.managed_fields = None;
        body.metadata.resource_version = None;
        body.status = None;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&body))
            .await
            .with_context(|| format!("applying CustomResourceDefinition {name}"))?;
        wait_for(
            Duration::from_secs(30),
            format_args!("CustomResourceDefinition {name} to be Established"),
            || async {
                let crd = api.get(&name).await?;
                let established = crd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    });
                Ok(established.then_some(crd))
            },
        )
        .await
    }

    /// Stops the S3 server (SIGKILL). Its data and port are kept for [`Self::start_s3`].
    pub async fn stop_s3(&self) {
        let mut s3 = self.s3.lock().await;
        s3.stop().await;
        tracing::info!("s3s-fs stopped");
    }

    /// Starts the S3 server again on the same port with the same data and
    /// credentials, and waits until it answers. A no-op if it is running.
    pub async fn start_s3(&self) -> Result<()> {
        let mut s3 = self.s3.lock().await;
        if s3.ensure_running().is_ok() {
            return Ok(());
        }
        s3.spawn()?;
        let url = self.s3_endpoint();
        let took = s3
            .wait_ready("s3s-fs", S3_TIMEOUT, || probe_s3(&self.http, &url))
            .await?;
        tracing::info!("s3s-fs ready again on {url} in {took:.1?}");
        Ok(())
    }

    /// Kills kube-apiserver and starts it again with the same port, flags and etcd
    /// (so all objects survive); waits until `/readyz` is 200. Existing clients keep
    /// working once it is back.
    pub async fn restart_apiserver(&self) -> Result<()> {
        let mut apiserver = self.apiserver.lock().await;
        apiserver.stop().await;
        tracing::info!("kube-apiserver stopped; restarting");
        apiserver.spawn()?;
        let url = self.apiserver_url();
        let took = apiserver
            .wait_ready("kube-apiserver", APISERVER_TIMEOUT, || {
                probe_readyz(&self.http, &url, &self.admin_token)
            })
            .await?;
        tracing::info!("kube-apiserver ready again on {url} in {took:.1?}");
        Ok(())
    }

    /// Fails, with the log tail, if any of the processes has died.
    pub async fn ensure_running(&self) -> Result<()> {
        self.etcd.lock().await.ensure_running()?;
        self.apiserver.lock().await.ensure_running()?;
        self.s3.lock().await.ensure_running()
    }
}

fn keep_requested() -> bool {
    std::env::var_os(ENV_KEEP_TESTENV).is_some_and(|v| v == "1")
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.s3.get_mut().stop_blocking();
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

/// An S3 client for `endpoint` (path-style, region us-east-1, static credentials).
pub fn s3_client_for(endpoint: &str, access_key: &str, secret_key: &str) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{
        BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    };
    let credentials =
        aws_credential_types::Credentials::new(access_key, secret_key, None, None, "obc-testenv");
    let config = aws_sdk_s3::config::Builder::new()
        .http_client(sample_provisioner::http::s3_http_client())
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(S3_REGION))
        .credentials_provider(credentials)
        .force_path_style(true)
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

// ---------------------------------------------------------------------------
// Starting each component
// ---------------------------------------------------------------------------

async fn probe_etcd(http: &reqwest::Client, url: &str) -> Result<bool> {
    let body: serde_json::Value = http.get(url).send().await?.json().await?;
    Ok(body.get("health").and_then(|h| h.as_str()) == Some("true"))
}

async fn probe_readyz(http: &reqwest::Client, url: &str, token: &str) -> Result<bool> {
    let response = http
        .get(format!("{url}/readyz"))
        .bearer_auth(token)
        .send()
        .await?;
    Ok(response.status() == reqwest::StatusCode::OK)
}

async fn probe_s3(http: &reqwest::Client, url: &str) -> Result<bool> {
    http.get(url).send().await?;
    Ok(true)
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

async fn start_etcd(
    bin: &Path,
    root: &Path,
    http: &reqwest::Client,
) -> Result<(Proc, u16, Duration)> {
    with_port_retries("etcd", || async {
        let client_port = free_port()?;
        let peer_port = free_port()?;
        let data_dir = root.join("etcd-data");
        if data_dir.exists() {
            fs::remove_dir_all(&data_dir)?;
        }
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let args: Vec<OsString> = vec![
            "--name=default".into(),
            OsString::from(format!("--data-dir={}", data_dir.display())),
            format!("--listen-client-urls={client_url}").into(),
            format!("--advertise-client-urls={client_url}").into(),
            format!("--listen-peer-urls={peer_url}").into(),
            format!("--initial-advertise-peer-urls={peer_url}").into(),
            format!("--initial-cluster=default={peer_url}").into(),
            "--initial-cluster-state=new".into(),
            format!("--initial-cluster-token=obc-testenv-{}", random_string(8)).into(),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        let mut proc = Proc::new("etcd", bin.to_path_buf(), args, root.join("etcd.log"));
        proc.spawn()?;
        let health = format!("{client_url}/health");
        let took = proc
            .wait_ready("etcd", ETCD_TIMEOUT, || probe_etcd(http, &health))
            .await?;
        tracing::info!("etcd ready on {client_url} in {took:.1?}");
        Ok((proc, client_port, took))
    })
    .await
}

async fn start_apiserver(
    bin: &Path,
    root: &Path,
    pki: &Pki,
    admin_token: &str,
    etcd_port: u16,
    http: &reqwest::Client,
) -> Result<(Proc, u16, Duration)> {
    let pki_dir = root.join("pki");
    fs::create_dir_all(&pki_dir)?;
    let file = |name: &str| pki_dir.join(name);
    write_private(&file("ca.crt"), pki.ca_pem.as_bytes())?;
    write_private(&file("apiserver.crt"), pki.serving_cert_pem.as_bytes())?;
    write_private(&file("apiserver.key"), pki.serving_key_pem.as_bytes())?;
    write_private(&file("sa.key"), pki.sa_private_pem.as_bytes())?;
    write_private(&file("sa.pub"), pki.sa_public_pem.as_bytes())?;
    write_private(
        &file("tokens.csv"),
        format!("{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n").as_bytes(),
    )?;
    let cert_dir = root.join("apiserver-cert-dir");
    fs::create_dir_all(&cert_dir)?;
    // Audit what ServiceAccounts do (not the admin's setup, not the apiserver's
    // own loops), so tests can compare the RBAC a controller is granted with
    // what it really uses.
    write_private(
        &file("audit-policy.yaml"),
        b"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  userGroups: [\"system:serviceaccounts\"]\n- level: None\n",
    )?;

    with_port_retries("kube-apiserver", || async {
        let port = free_port()?;
        let path_arg = |flag: &str, p: &Path| OsString::from(format!("--{flag}={}", p.display()));
        let args: Vec<OsString> = vec![
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}").into(),
            format!("--secure-port={port}").into(),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            path_arg("cert-dir", &cert_dir),
            path_arg("tls-cert-file", &file("apiserver.crt")),
            path_arg("tls-private-key-file", &file("apiserver.key")),
            path_arg("service-account-key-file", &file("sa.pub")),
            path_arg("service-account-signing-key-file", &file("sa.key")),
            format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}").into(),
            format!("--api-audiences={SERVICE_ACCOUNT_ISSUER}").into(),
            path_arg("token-auth-file", &file("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            path_arg("audit-policy-file", &file("audit-policy.yaml")),
            path_arg("audit-log-path", &root.join(AUDIT_LOG)),
            "--audit-log-format=json".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--enable-priority-and-fairness=false".into(),
            "--profiling=false".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            // The lease reconciler refuses a loopback advertise address; nothing
            // routes to the `kubernetes` Service here anyway.
            "--endpoint-reconciler-type=none".into(),
        ];
        let mut proc = Proc::new(
            "kube-apiserver",
            bin.to_path_buf(),
            args,
            root.join("kube-apiserver.log"),
        );
        proc.spawn()?;
        let url = format!("https://127.0.0.1:{port}");
        let took = proc
            .wait_ready("kube-apiserver", APISERVER_TIMEOUT, || {
                probe_readyz(http, &url, admin_token)
            })
            .await?;
        tracing::info!("kube-apiserver ready on {url} in {took:.1?}");
        Ok((proc, port, took))
    })
    .await
}

async fn start_s3_server(
    bin: &Path,
    root: &Path,
    access_key: &str,
    secret_key: &str,
    http: &reqwest::Client,
) -> Result<(Proc, u16, Duration)> {
    let data = root.join("s3-data");
    fs::create_dir_all(&data)?;
    with_port_retries("s3s-fs", || async {
        let port = free_port()?;
        let args: Vec<OsString> = vec![
            "--host=127.0.0.1".into(),
            format!("--port={port}").into(),
            format!("--access-key={access_key}").into(),
            format!("--secret-key={secret_key}").into(),
            data.clone().into_os_string(),
        ];
        let mut proc = Proc::new("s3s-fs", bin.to_path_buf(), args, root.join("s3s-fs.log"));
        proc.envs.push(("RUST_LOG".into(), "info".into()));
        proc.envs.push(("NO_COLOR".into(), "1".into()));
        proc.spawn()?;
        let url = format!("http://127.0.0.1:{port}");
        let took = proc
            .wait_ready("s3s-fs", S3_TIMEOUT, || probe_s3(http, &url))
            .await?;
        tracing::info!("s3s-fs ready on {url} in {took:.1?}");
        Ok((proc, port, took))
    })
    .await
}
