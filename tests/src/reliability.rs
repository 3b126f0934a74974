//! Support for the reliability suite (`tests/tests/reliability.rs`):
//! provisioner processes that can be crashed, killed, frozen and restarted,
//! a fixture with the sample S3 provisioner's RBAC, admin Secret and
//! classes, a check that the cluster and the S3 store agree exactly, a scan
//! of every captured log for credentials, and the summary table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use lib_provisioner::api::{
    BUCKET_ORIGIN_ANNOTATION, BucketPhase, ClaimPhase, FINALIZER, GENERATED_NAME_ANNOTATION,
    ObjectBucket, ObjectBucketClaim, ObjectBucketClaimSpec,
};
use sample_provisioner::store::{
    DEFAULT_STATE_BUCKET, INTENT_PREFIX, OWNER_MARKER_KEY, STATE_BUCKET_MARKER,
};
use tokio::process::{Child, Command};

use crate::setup::{create_admin_secret, install_deploy, spawn_provisioner};
pub use crate::setup::{create_class, events_for};
use crate::testenv::TestEnv;

/// The provisioner name of `deploy/` (and of the RBAC's Lease name).
pub const PROVISIONER: &str = "objectbucket.io/sample-s3";
/// Namespace of the deployment, the admin Secret and the Lease.
pub const SYSTEM_NAMESPACE: &str = "obc-system";
/// Name of the admin Secret the classes name.
pub const ADMIN_SECRET: &str = "s3-admin";
/// The Lease `deploy/rbac.yaml` lets the provisioner renew.
pub const LEASE_NAME: &str = "objectbucket.io-sample-s3";
/// The brownfield bucket the fixture creates (with data).
pub const SHARED_BUCKET: &str = "shared-data";

// ---------------------------------------------------------------------------
// Logs and credentials
// ---------------------------------------------------------------------------

static LOG_ROOT: OnceLock<PathBuf> = OnceLock::new();
static SECRETS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The directory every provisioner process of this test binary logs into:
/// `<base>/reliability-logs/run-<pid>`. Kept after the run for reading;
/// of earlier runs, only the two newest are kept.
pub fn log_root(base: &Path) -> &'static Path {
    LOG_ROOT.get_or_init(|| {
        let parent = base.join("reliability-logs");
        // Keep the two newest earlier runs (and any still running).
        if let Ok(entries) = std::fs::read_dir(&parent) {
            let mut dead: Vec<(std::time::SystemTime, PathBuf)> = entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    !name
                        .strip_prefix("run-")
                        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
                })
                .map(|e| {
                    let modified = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (modified, e.path())
                })
                .collect();
            dead.sort();
            for (_, path) in dead.iter().rev().skip(2) {
                let _ = std::fs::remove_dir_all(path);
            }
        }
        let dir = parent.join(format!("run-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("cannot create {}: {e}", dir.display());
        }
        dir
    })
}

/// Remembers a credential the suite minted or handed out, for
/// [`scan_logs`]. Values shorter than 8 characters are ignored (they would
/// match by chance).
pub fn register_secret(value: &str) {
    let value = value.trim();
    if value.len() >= 8 {
        SECRETS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(value.to_owned());
    }
}

/// How many distinct credentials are registered.
pub fn registered_secrets() -> usize {
    SECRETS.lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// Registers the S3 root key pair's secret half and the admin token of `env`.
pub fn register_env_secrets(env: &TestEnv) {
    register_secret(&env.s3_root_credentials().1);
    register_secret(env.admin_token());
}

/// Registers every `AWS_SECRET_ACCESS_KEY` of the Secrets in `namespaces`;
/// returns how many Secrets held one.
pub async fn register_claim_secrets(client: &Client, namespaces: &[&str]) -> Result<usize> {
    let mut n = 0;
    for ns in namespaces {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        for s in secrets.list(&ListParams::default()).await?.items {
            if let Some(v) = s.data.as_ref().and_then(|d| d.get("AWS_SECRET_ACCESS_KEY")) {
                register_secret(&String::from_utf8_lossy(&v.0));
                n += 1;
            }
        }
    }
    Ok(n)
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A credential found in a log.
#[derive(Debug)]
pub struct Leak {
    /// The log file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// The credential's first 4 characters and its length (never the value).
    pub what: String,
}

/// Scans every file under the log root for every registered credential,
/// verbatim and base64-encoded (as a Secret's `data` would carry it).
/// Returns the files scanned and the hits.
pub fn scan_logs(root: &Path) -> Result<(usize, Vec<Leak>)> {
    let secrets: Vec<String> = SECRETS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect();
    let needles: Vec<(String, String)> = secrets
        .iter()
        .flat_map(|s| {
            let head: String = s.chars().take(4).collect();
            let what = format!("{head}… ({} chars)", s.chars().count());
            let b64 = base64(s.as_bytes());
            // The encoding of a value without its padding, which is what
            // appears when the value sits inside a longer encoded string
            // only if aligned; the aligned prefix is enough to find it.
            let b64 = b64.trim_end_matches('=').to_owned();
            [(s.clone(), what.clone()), (b64, format!("{what}, base64"))]
        })
        .collect();
    let mut files = 0;
    let mut leaks = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        files += 1;
        let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
        for (i, line) in text.lines().enumerate() {
            for (needle, what) in &needles {
                if line.contains(needle.as_str()) {
                    leaks.push(Leak {
                        file: path.clone(),
                        line: i + 1,
                        what: what.clone(),
                    });
                }
            }
        }
    }
    Ok((files, leaks))
}

/// Fails if any registered credential appears in any captured log.
pub fn assert_no_leaks(root: &Path) -> Result<usize> {
    let (files, leaks) = scan_logs(root)?;
    if !leaks.is_empty() {
        bail!("credentials found in provisioner logs: {leaks:#?}");
    }
    Ok(files)
}

// ---------------------------------------------------------------------------
// Provisioner processes
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The fixture
// ---------------------------------------------------------------------------

/// CRDs, `deploy/` namespace and RBAC, the admin Secret and the brownfield
/// bucket; returns the kubeconfig of the provisioner's ServiceAccount.
pub async fn install_sample(env: &TestEnv) -> Result<PathBuf> {
    install_deploy(env).await?;
    let (ak, sk) = env.s3_root_credentials();
    create_admin_secret(
        &env.admin_client(),
        SYSTEM_NAMESPACE,
        ADMIN_SECRET,
        &ak,
        &sk,
    )
    .await?;
    register_env_secrets(env);
    let s3 = env.s3_client();
    s3.create_bucket()
        .bucket(SHARED_BUCKET)
        .send()
        .await
        .context("brownfield bucket")?;
    s3.put_object()
        .bucket(SHARED_BUCKET)
        .key("keep.txt")
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"keep"))
        .send()
        .await
        .context("brownfield data")?;
    env.service_account_kubeconfig(SYSTEM_NAMESPACE, "sample-provisioner")
        .await
}

/// The parameters of a working class of the sample provisioner on the
/// environment's s3s-fs, which has no user API and no bucket tagging: every
/// claim gets the admin credentials, and ownership is a marker object, both
/// of which the class must ask for.
pub fn sample_params(env: &TestEnv) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("credentialsMode".to_owned(), "shared-admin".to_owned()),
        ("ownership".to_owned(), "marker".to_owned()),
        ("endpoint".to_owned(), env.s3_endpoint()),
        ("adminSecretName".to_owned(), ADMIN_SECRET.to_owned()),
        (
            "adminSecretNamespace".to_owned(),
            SYSTEM_NAMESPACE.to_owned(),
        ),
    ])
}

/// The three classes a scenario uses, for `provisioner`:
/// `<prefix>-delete` (forceDelete), `<prefix>-retain`, `<prefix>-shared`
/// (brownfield [`SHARED_BUCKET`]).
pub async fn create_classes(
    env: &TestEnv,
    client: &Client,
    prefix: &str,
    provisioner: &str,
) -> Result<Classes> {
    let mut delete = sample_params(env);
    delete.insert("forceDelete".into(), "true".into());
    let mut shared = sample_params(env);
    shared.insert("bucketName".into(), SHARED_BUCKET.into());
    let classes = Classes {
        delete: format!("{prefix}-delete"),
        retain: format!("{prefix}-retain"),
        shared: format!("{prefix}-shared"),
    };
    create_class(client, &classes.delete, provisioner, "Delete", delete).await?;
    create_class(
        client,
        &classes.retain,
        provisioner,
        "Retain",
        sample_params(env),
    )
    .await?;
    create_class(client, &classes.shared, provisioner, "Delete", shared).await?;
    Ok(classes)
}

/// Names of a scenario's classes.
#[derive(Clone, Debug)]
pub struct Classes {
    /// Greenfield, reclaim policy Delete, forceDelete.
    pub delete: String,
    /// Greenfield, reclaim policy Retain.
    pub retain: String,
    /// Brownfield ([`SHARED_BUCKET`]).
    pub shared: String,
}

/// What a claim asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `generateBucketName`, class with reclaim Delete.
    GeneratedDelete,
    /// `bucketName`, class with reclaim Delete.
    ExactDelete,
    /// `generateBucketName`, class with reclaim Retain.
    GeneratedRetain,
    /// `bucketName`, class with reclaim Retain.
    ExactRetain,
    /// Brownfield: access to [`SHARED_BUCKET`].
    Shared,
}

impl Kind {
    /// Whether deleting the claim keeps its bucket.
    pub fn keeps_bucket(&self) -> bool {
        !matches!(self, Self::GeneratedDelete | Self::ExactDelete)
    }

    /// Whether the claim gets a bucket of its own.
    pub fn greenfield(&self) -> bool {
        *self != Self::Shared
    }

    /// The claim's spec; `unique` makes exact bucket names unique.
    pub fn spec(&self, classes: &Classes, unique: &str) -> ObjectBucketClaimSpec {
        let (class, exact) = match self {
            Self::GeneratedDelete => (&classes.delete, false),
            Self::ExactDelete => (&classes.delete, true),
            Self::GeneratedRetain => (&classes.retain, false),
            Self::ExactRetain => (&classes.retain, true),
            Self::Shared => (&classes.shared, false),
        };
        let mut spec = ObjectBucketClaimSpec {
            storage_class_name: class.clone(),
            ..Default::default()
        };
        match (self, exact) {
            (Self::Shared, _) => {}
            (_, true) => spec.bucket_name = Some(format!("exact-{unique}")),
            (_, false) => spec.generate_bucket_name = Some(format!("gen-{unique}")),
        }
        spec
    }
}

/// A claim the test deleted, and what must remain of it.
#[derive(Clone, Debug)]
pub struct Deleted {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Its bucket, if it was known when the claim was deleted.
    pub bucket: Option<String>,
    /// What it asked for.
    pub kind: Kind,
    /// Whether it was ever Bound (then a retained bucket must be kept).
    pub was_bound: bool,
}

/// The bucket a claim has (from its ObjectBucket), or has fixed for itself.
pub async fn bucket_of(client: &Client, claim: &ObjectBucketClaim) -> Option<String> {
    let ob = Api::<ObjectBucket>::all(client.clone())
        .get_opt(&format!(
            "obc-{}-{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        ))
        .await
        .ok()
        .flatten()
        .filter(|ob| {
            ob.spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()) == claim.uid().as_deref()
        });
    if let Some(name) = ob.as_ref().and_then(|ob| ob.bucket_name()) {
        return Some(name.to_owned());
    }
    claim
        .spec
        .bucket_name
        .clone()
        .or_else(|| claim.annotations().get(GENERATED_NAME_ANNOTATION).cloned())
}

// ---------------------------------------------------------------------------
// Agreement between the cluster and the store
// ---------------------------------------------------------------------------

/// What the cluster and the store hold, and where they disagree.
#[derive(Debug, Default)]
pub struct Agreement {
    /// Live claims in scope.
    pub claims: usize,
    /// Buckets in the store (all, with the pre-existing ones).
    pub buckets: usize,
    /// Buckets that should exist and do not.
    pub lost: Vec<String>,
    /// Buckets, ObjectBuckets, Secrets and ConfigMaps no claim accounts for.
    pub orphaned: Vec<String>,
    /// Everything else that is wrong (phases, markers, owners...).
    pub wrong: Vec<String>,
}

impl Agreement {
    /// Whether everything agrees.
    pub fn ok(&self) -> bool {
        self.lost.is_empty() && self.orphaned.is_empty() && self.wrong.is_empty()
    }

    /// All problems, one per line.
    pub fn problems(&self) -> String {
        let mut out = String::new();
        for (what, list) in [
            ("LOST", &self.lost),
            ("ORPHAN", &self.orphaned),
            ("WRONG", &self.wrong),
        ] {
            for p in list {
                let _ = writeln!(out, "  {what}: {p}");
            }
        }
        out
    }
}

/// What [`agreement`] checks against.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    /// Namespaces whose claims, Secrets and ConfigMaps are checked.
    pub namespaces: Vec<String>,
    /// Buckets that existed before any claim (never deleted, not counted).
    pub preexisting: BTreeSet<String>,
    /// Claims the test deleted.
    pub deleted: Vec<Deleted>,
    /// Claims (`ns/name`) expected not to be Bound (bad input).
    pub not_bound: BTreeSet<String>,
    /// Whether `spec.objectBucketName` can be pruned (an old CRD schema).
    pub bind_pruned: bool,
    /// Greenfield buckets allowed to lack the ownership marker (made by
    /// another implementation, such as the Go library).
    pub unmarked: BTreeSet<String>,
}

fn owner_uid(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.kind == "ObjectBucketClaim")
        .map(|r| r.uid.clone())
}

fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The store's buckets and their ownership markers (`None`: no marker),
/// without the provisioner's state buckets (marked [`STATE_BUCKET_MARKER`]).
pub async fn store_buckets(s3: &aws_sdk_s3::Client) -> Result<BTreeMap<String, Option<String>>> {
    let out = s3.list_buckets().send().await.context("ListBuckets")?;
    let mut buckets = BTreeMap::new();
    for b in out.buckets() {
        let Some(name) = b.name() else { continue };
        let marker = match s3
            .get_object()
            .bucket(name)
            .key(OWNER_MARKER_KEY)
            .send()
            .await
        {
            Ok(o) => Some(
                String::from_utf8_lossy(&o.body.collect().await?.into_bytes())
                    .trim()
                    .to_owned(),
            ),
            Err(e) => {
                let missing = e.as_service_error().is_some_and(|s| s.is_no_such_key());
                if !missing {
                    // A bucket deleted between the listing and the read.
                    let gone = s3.head_bucket().bucket(name).send().await.is_err();
                    if gone {
                        continue;
                    }
                    return Err(anyhow!("reading the marker of {name}: {e:?}"));
                }
                None
            }
        };
        if marker.as_deref() == Some(STATE_BUCKET_MARKER) {
            continue;
        }
        buckets.insert(name.to_owned(), marker);
    }
    Ok(buckets)
}

/// A creation intent in the sample's state bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    /// The bucket it is for.
    pub bucket: String,
    /// The claim UID it holds.
    pub uid: String,
    /// `namespace/name` of its claim (metadata), if recorded.
    pub claim: Option<String>,
}

/// The intents in the default state bucket (none if there is none).
pub async fn store_intents(s3: &aws_sdk_s3::Client) -> Result<Vec<Intent>> {
    let listed = match s3
        .list_objects_v2()
        .bucket(DEFAULT_STATE_BUCKET)
        .prefix(INTENT_PREFIX)
        .send()
        .await
    {
        Ok(listed) => listed,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_bucket()) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(anyhow!("listing the intents: {e:?}")),
    };
    let mut intents = Vec::new();
    for key in listed.contents().iter().filter_map(|o| o.key()) {
        let Some(bucket) = key.strip_prefix(INTENT_PREFIX) else {
            continue;
        };
        let o = match s3
            .get_object()
            .bucket(DEFAULT_STATE_BUCKET)
            .key(key)
            .send()
            .await
        {
            Ok(o) => o,
            // Deleted between the listing and the read.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => continue,
            Err(e) => return Err(anyhow!("reading intent {key}: {e:?}")),
        };
        let claim = o.metadata().and_then(|m| m.get("obc-claim")).cloned();
        let uid = String::from_utf8_lossy(&o.body.collect().await?.into_bytes())
            .trim()
            .to_owned();
        intents.push(Intent {
            bucket: bucket.to_owned(),
            uid,
            claim,
        });
    }
    Ok(intents)
}

/// Reads the cluster and the store once and lists every disagreement.
pub async fn agreement(env: &TestEnv, client: &Client, x: &Expectations) -> Result<Agreement> {
    let mut a = Agreement::default();
    let obs = Api::<ObjectBucket>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let store = store_buckets(&env.s3_client()).await?;
    a.buckets = store.len();
    let mut claims: BTreeMap<(String, String), ObjectBucketClaim> = BTreeMap::new();
    let mut secrets = Vec::new();
    let mut config_maps = Vec::new();
    for ns in &x.namespaces {
        for c in Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?
            .items
        {
            claims.insert((ns.clone(), c.name_any()), c);
        }
        secrets.extend(
            Api::<Secret>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|s| (ns.clone(), s.metadata)),
        );
        config_maps.extend(
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .list_metadata(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|s| (ns.clone(), s.metadata)),
        );
    }
    let claim_uids: BTreeSet<String> = claims.values().filter_map(|c| c.uid()).collect();
    a.claims = claims.len();

    // Every live claim: Bound, with its ObjectBucket, bucket, Secret, ConfigMap.
    for ((ns, name), c) in &claims {
        let key = format!("{ns}/{name}");
        let uid = c.uid().unwrap_or_default();
        if x.not_bound.contains(&key) {
            continue;
        }
        if c.metadata.deletion_timestamp.is_some() {
            a.wrong.push(format!("claim {key} is still being deleted"));
            continue;
        }
        let status = c.status.clone().unwrap_or_default();
        if status.phase != Some(ClaimPhase::Bound) {
            a.wrong.push(format!(
                "claim {key} is {:?}: {}",
                status.phase,
                status.message.unwrap_or_default()
            ));
            continue;
        }
        let ob_name = format!("obc-{ns}-{name}");
        if !x.bind_pruned && c.spec.object_bucket_name.as_deref() != Some(&ob_name) {
            a.wrong.push(format!(
                "claim {key} names ObjectBucket {:?}",
                c.spec.object_bucket_name
            ));
        }
        if !has_finalizer(&c.metadata) {
            a.wrong.push(format!("claim {key} has no finalizer"));
        }
        let Some(ob) = obs.iter().find(|o| o.name_any() == ob_name) else {
            a.wrong.push(format!(
                "claim {key} is Bound without ObjectBucket {ob_name}"
            ));
            continue;
        };
        // Older writers left no UID in the claimRef: then ns/name binds.
        if ob
            .spec
            .claim_ref
            .as_ref()
            .and_then(|r| r.uid.as_deref())
            .is_some_and(|u| !u.is_empty() && u != uid)
        {
            a.wrong.push(format!(
                "ObjectBucket {ob_name} is bound to another claim UID"
            ));
        }
        if ob.status.as_ref().and_then(|s| s.phase) != Some(BucketPhase::Bound) {
            a.wrong.push(format!("ObjectBucket {ob_name} is not Bound"));
        }
        let Some(bucket) = ob.bucket_name() else {
            a.wrong
                .push(format!("ObjectBucket {ob_name} names no bucket"));
            continue;
        };
        let brownfield = ob
            .annotations()
            .get(BUCKET_ORIGIN_ANNOTATION)
            .map(String::as_str)
            == Some("brownfield");
        match store.get(bucket) {
            None => a.lost.push(format!("{bucket} (claim {key})")),
            Some(None) if x.unmarked.contains(bucket) => {}
            Some(marker) if !brownfield && marker.as_deref() != Some(uid.as_str()) => a.wrong.push(
                format!("bucket {bucket} of claim {key} carries marker {marker:?}, not {uid}"),
            ),
            Some(_) => {}
        }
        for (kind, list) in [("Secret", &secrets), ("ConfigMap", &config_maps)] {
            match list
                .iter()
                .find(|(n, m)| n == ns && m.name.as_deref() == Some(name))
            {
                None => a.wrong.push(format!("claim {key} has no {kind}")),
                Some((_, m)) if owner_uid(m).as_deref() != Some(uid.as_str()) => a
                    .wrong
                    .push(format!("{kind} {key} is not owned by its claim")),
                Some(_) => {}
            }
        }
    }

    // ObjectBuckets: bound to a live claim, or Released (a retained bucket).
    let mut referenced: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ob in &obs {
        let r = ob.spec.claim_ref.clone().unwrap_or_default();
        let in_scope = r
            .namespace
            .as_ref()
            .is_some_and(|n| x.namespaces.contains(n));
        if let Some(b) = ob.bucket_name() {
            referenced
                .entry(b.to_owned())
                .or_default()
                .push(ob.name_any());
        }
        if !in_scope {
            continue;
        }
        let live = match r.uid.as_deref().filter(|u| !u.is_empty()) {
            Some(u) => claim_uids.contains(u),
            None => claims.contains_key(&(
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )),
        };
        let released = ob.status.as_ref().and_then(|s| s.phase) == Some(BucketPhase::Released);
        if !live {
            if !released {
                a.orphaned.push(format!(
                    "ObjectBucket {} (claim {}/{} is gone, not Released)",
                    ob.name_any(),
                    r.namespace.unwrap_or_default(),
                    r.name.unwrap_or_default()
                ));
            } else if has_finalizer(&ob.metadata) {
                a.wrong.push(format!(
                    "released ObjectBucket {} still has the finalizer",
                    ob.name_any()
                ));
            }
        }
    }

    // Secrets and ConfigMaps belong to live claims.
    for (kind, list) in [("Secret", &secrets), ("ConfigMap", &config_maps)] {
        for (ns, m) in list {
            if let Some(uid) = owner_uid(m)
                && !claim_uids.contains(&uid)
            {
                a.orphaned.push(format!(
                    "{kind} {ns}/{} (its claim is gone)",
                    m.name.clone().unwrap_or_default()
                ));
            }
        }
    }

    // Every bucket is accounted for by exactly one ObjectBucket.
    for (bucket, marker) in &store {
        if x.preexisting.contains(bucket) {
            continue;
        }
        match referenced.get(bucket).map(Vec::len).unwrap_or(0) {
            0 => a.orphaned.push(format!(
                "bucket {bucket} (marker {marker:?}) has no ObjectBucket"
            )),
            1 => {}
            n => a.wrong.push(format!(
                "bucket {bucket} is named by {n} ObjectBuckets: {:?}",
                referenced.get(bucket)
            )),
        }
    }
    for b in &x.preexisting {
        if !store.contains_key(b) {
            a.lost.push(format!("{b} (pre-existing)"));
        }
    }

    // Creation intents last only while their claim is being provisioned.
    for intent in store_intents(&env.s3_client()).await? {
        let in_scope = intent
            .claim
            .as_deref()
            .and_then(|c| c.split_once('/'))
            .is_none_or(|(ns, _)| x.namespaces.iter().any(|n| n == ns));
        if !in_scope {
            continue;
        }
        match claims.values().find(|c| c.uid().as_deref() == Some(&intent.uid)) {
            None => a.orphaned.push(format!(
                "creation intent for bucket {} of claim {:?} (UID {}), which is gone",
                intent.bucket, intent.claim, intent.uid
            )),
            Some(c) if c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound) => {
                a.wrong.push(format!(
                    "creation intent for bucket {} outlives the provisioning of claim {:?}, which is Bound",
                    intent.bucket, intent.claim
                ))
            }
            Some(_) => {}
        }
    }

    // Deleted claims: gone, and their buckets per reclaim policy.
    for d in &x.deleted {
        let key = format!("{}/{}", d.namespace, d.name);
        if let Some(c) = claims.get(&(d.namespace.clone(), d.name.clone()))
            && c.uid().as_deref() == Some(d.uid.as_str())
        {
            a.wrong.push(format!(
                "deleted claim {key} still exists ({})",
                c.status
                    .as_ref()
                    .and_then(|s| s.message.clone())
                    .unwrap_or_default()
            ));
            continue;
        }
        let Some(bucket) = &d.bucket else { continue };
        if !d.kind.greenfield() {
            continue;
        }
        let marker_ours = |m: &Option<String>| m.as_deref() == Some(d.uid.as_str());
        match (d.kind.keeps_bucket(), store.get(bucket)) {
            // Retained: it must still be there if the claim was ever Bound
            // (one deleted while provisioning may keep it only with a
            // Released ObjectBucket: an unrecorded one is an orphan above).
            (true, None) if d.was_bound => a
                .lost
                .push(format!("{bucket} (retained by deleted claim {key})")),
            (true, Some(m)) if d.was_bound && !marker_ours(m) => a.wrong.push(format!(
                "retained bucket {bucket} carries marker {m:?}, not {}",
                d.uid
            )),
            (false, Some(m)) if marker_ours(m) => a.orphaned.push(format!(
                "bucket {bucket} of deleted claim {key} (reclaim Delete) still exists"
            )),
            _ => {}
        }
    }
    Ok(a)
}

/// Polls [`agreement`] until it holds or `timeout` passes, and returns the
/// last reading (check [`Agreement::ok`], or use [`Summary::check`]).
pub async fn converge(
    env: &TestEnv,
    client: &Client,
    x: &Expectations,
    timeout: Duration,
) -> Result<Agreement> {
    let deadline = Instant::now() + timeout;
    loop {
        match agreement(env, client, x).await {
            Ok(a) if a.ok() || Instant::now() >= deadline => return Ok(a),
            Err(e) if Instant::now() >= deadline => return Err(e),
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

// ---------------------------------------------------------------------------
// Claims, events
// ---------------------------------------------------------------------------

/// Waits until every claim in `ns` named in `names` is Bound.
pub async fn wait_all_bound(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        let list = api.list(&ListParams::default()).await;
        if let Ok(list) = &list {
            let pending: Vec<String> = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
                .map(|c| {
                    format!(
                        "{} ({:?}: {})",
                        c.name_any(),
                        c.status.as_ref().and_then(|s| s.phase),
                        c.status
                            .as_ref()
                            .and_then(|s| s.message.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            let present = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .count();
            if pending.is_empty() && present == wanted.len() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} of {} claims in {ns} not Bound after {timeout:?}: {pending:?}",
                    pending.len() + wanted.len() - present,
                    wanted.len()
                );
            }
        } else if Instant::now() >= deadline {
            bail!("listing claims in {ns}: {list:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until none of `names` exists in `ns`.
pub async fn wait_all_gone(
    client: &Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> Result<()> {
    let api: Api<ObjectBucketClaim> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let left: Vec<String> = list
                .items
                .iter()
                .filter(|c| wanted.contains(&c.name_any()))
                .map(|c| {
                    format!(
                        "{} ({})",
                        c.name_any(),
                        c.status
                            .as_ref()
                            .and_then(|s| s.message.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("claims in {ns} not gone after {timeout:?}: {left:?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------------------
// The summary table
// ---------------------------------------------------------------------------

/// The environment variable naming the file every reliability test appends
/// its figures to, one [`Record`] per line (JSON), for the suite-wide table
/// that `reliability-report` prints after `cargo test`. `scripts/test` sets
/// it; unset, nothing is appended.
pub const REPORT_ENV: &str = "OBC_RELIABILITY_REPORT";

/// The figures every reliability test reports, and the suite adds up.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Scenarios run.
    pub scenarios: usize,
    /// Crashes injected (failpoint aborts, SIGKILLs, freezes).
    pub crashes: usize,
    /// Dependency faults survived (S3 outages, apiserver restarts, conflicts).
    pub faults: usize,
    /// Bad inputs tried.
    pub bad_inputs: usize,
    /// Buckets lost.
    pub lost: usize,
    /// Buckets, ObjectBuckets, Secrets or ConfigMaps orphaned.
    pub orphaned: usize,
}

impl Counts {
    /// The names of [`Counts::cells`], in a test's own table.
    const NAMES: [&'static str; 6] = [
        "scenarios run",
        "crashes injected",
        "faults survived",
        "bad inputs tried",
        "buckets lost",
        "orphans (bucket/OB/Secret/ConfigMap)",
    ];

    /// The figures as table cells, in the order of [`Counts::NAMES`].
    fn cells(&self) -> [String; 6] {
        [
            self.scenarios,
            self.crashes,
            self.faults,
            self.bad_inputs,
            self.lost,
            self.orphaned,
        ]
        .map(|n| n.to_string())
    }

    fn add(&mut self, other: &Counts) {
        self.scenarios += other.scenarios;
        self.crashes += other.crashes;
        self.faults += other.faults;
        self.bad_inputs += other.bad_inputs;
        self.lost += other.lost;
        self.orphaned += other.orphaned;
    }

    /// No bucket lost, nothing orphaned.
    pub fn clean(&self) -> bool {
        self.lost == 0 && self.orphaned == 0
    }
}

/// The figures a reliability test reports at its end.
#[derive(Debug)]
pub struct Summary {
    test: String,
    started: Instant,
    /// Whether the test failed (its scenario, or the credential scan).
    pub failed: bool,
    /// The figures the suite adds up.
    pub counts: Counts,
    /// Other figures, in order.
    pub notes: Vec<(String, String)>,
}

impl Summary {
    /// An empty summary for `test`; the clock starts now.
    pub fn new(test: &str) -> Self {
        Self {
            test: test.to_owned(),
            started: Instant::now(),
            failed: false,
            counts: Counts::default(),
            notes: Vec::new(),
        }
    }

    /// Adds a figure.
    pub fn note(&mut self, what: &str, value: impl std::fmt::Display) {
        self.notes.push((what.to_owned(), value.to_string()));
    }

    /// Counts the problems of an agreement check.
    pub fn record(&mut self, a: &Agreement) {
        self.counts.lost += a.lost.len();
        self.counts.orphaned += a.orphaned.len();
    }

    /// Counts the problems of an agreement check, and fails on any.
    pub fn check(&mut self, when: &str, a: &Agreement) -> Result<()> {
        self.counts.lost += a.lost.len();
        self.counts.orphaned += a.orphaned.len();
        if !a.ok() {
            bail!(
                "{when}: the cluster and the store disagree ({} claims, {} buckets):\n{}",
                a.claims,
                a.buckets,
                a.problems()
            );
        }
        Ok(())
    }

    /// The table.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, String)> = Counts::NAMES
            .iter()
            .map(|n| (*n).to_owned())
            .zip(self.counts.cells())
            .collect();
        rows.extend(self.notes.iter().cloned());
        rows.push((
            "wall time".into(),
            format!("{:.1}s", self.started.elapsed().as_secs_f64()),
        ));
        let rows: Vec<Vec<String>> = rows.into_iter().map(|(k, v)| vec![k, v]).collect();
        format!(
            "\n== reliability summary: {} ==\n{}",
            self.test,
            markdown_table(&["what", "count"], &rows)
        )
    }

    /// The figures the suite-wide table adds up.
    pub fn to_record(&self) -> Record {
        Record {
            test: self.test.clone(),
            failed: self.failed,
            counts: self.counts.clone(),
            wall_secs: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Prints the table (past the test harness's capture) and appends it to
    /// `summary.txt` under the log root.
    pub fn print(&self, log_root: &Path) {
        let table = self.table();
        let _ = std::io::stderr().lock().write_all(table.as_bytes());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_root.join("summary.txt"))
        {
            let _ = f.write_all(table.as_bytes());
        }
        if let Some(path) = std::env::var_os(REPORT_ENV) {
            let appended = serde_json::to_string(&self.to_record())
                .map_err(std::io::Error::other)
                .and_then(|line| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)?
                        .write_all(format!("{line}\n").as_bytes())
                });
            if let Err(e) = appended {
                eprintln!("cannot append to {}: {e}", Path::new(&path).display());
            }
        }
    }
}

/// One test's line in the suite-wide table.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The test's summary title.
    pub test: String,
    /// Whether it failed.
    pub failed: bool,
    /// Its figures.
    #[serde(flatten)]
    pub counts: Counts,
    /// Wall time of the test.
    pub wall_secs: f64,
}

/// The suite-wide table: one row per test (sorted by title), then the
/// totals. Wall times add up to more than the suite's, as tests run side by
/// side.
pub fn suite_table(records: &[Record]) -> String {
    let mut records = records.to_vec();
    records.sort_by(|a, b| a.test.cmp(&b.test));
    let row = |name: String, r: &Record| {
        let mut cells = vec![name, if r.failed { "FAILED" } else { "ok" }.to_owned()];
        cells.extend(r.counts.cells());
        cells.push(format!("{:.1}s", r.wall_secs));
        cells
    };
    let mut total = Record::default();
    let mut rows = Vec::with_capacity(records.len() + 1);
    for r in &records {
        total.failed |= r.failed;
        total.counts.add(&r.counts);
        total.wall_secs += r.wall_secs;
        rows.push(row(r.test.clone(), r));
    }
    rows.push(row(format!("total ({} tests)", records.len()), &total));
    markdown_table(
        &[
            "test",
            "result",
            "scenarios",
            "crashes injected",
            "faults survived",
            "bad inputs",
            "buckets lost",
            "orphans",
            "wall time",
        ],
        &rows,
    )
}

/// A Markdown table: the first column left-aligned, the others right-aligned,
/// every column as wide as its widest cell (header included).
fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::from("|");
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let _ = if i == 0 {
                write!(out, " {cell:<w$} |")
            } else {
                write!(out, " {cell:>w$} |")
            };
        }
        out.push('\n');
        out
    };
    let mut out = line(&mut header.iter().copied());
    out.push('|');
    for w in &widths {
        out.push_str(&"-".repeat(w + 2));
        out.push('|');
    }
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn the_scan_finds_credentials_verbatim_and_base64_encoded() {
        let dir = tempfile::tempdir().expect("tempdir");
        register_secret("s3cr3t-value-for-the-scan-test");
        std::fs::write(dir.path().join("clean.log"), "nothing to see\n").expect("write");
        let (files, leaks) = scan_logs(dir.path()).expect("scan");
        assert_eq!((files, leaks.len()), (1, 0));
        std::fs::write(
            dir.path().join("leaky.log"),
            format!(
                "a\nkey=s3cr3t-value-for-the-scan-test\ndata={}\n",
                base64(b"s3cr3t-value-for-the-scan-test")
            ),
        )
        .expect("write");
        std::fs::write(
            dir.path().join("other.txt"),
            "s3cr3t-value-for-the-scan-test",
        )
        .expect("write");
        let (files, leaks) = scan_logs(dir.path()).expect("scan");
        assert_eq!(files, 2, "only .log files are scanned");
        assert_eq!(
            leaks.iter().map(|l| l.line).collect::<Vec<_>>(),
            vec![2, 3],
            "{leaks:?}"
        );
        assert!(
            leaks.iter().all(|l| !l.what.contains("value-for")),
            "{leaks:?}"
        );
    }

    #[test]
    fn the_suite_table_adds_up_every_test_and_aligns_its_columns() {
        let one = |test: &str, scenarios, failed| Record {
            test: test.into(),
            failed,
            counts: Counts {
                scenarios,
                crashes: 2,
                faults: 1,
                bad_inputs: 0,
                lost: 0,
                orphaned: usize::from(failed),
            },
            wall_secs: 1.25,
        };
        let table = suite_table(&[one("b", 3, false), one("a", 40, true)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[2].starts_with("| a "), "sorted by title:\n{table}");
        assert!(lines[2].contains("FAILED") && lines[3].contains(" ok "));
        assert_eq!(
            lines[4].split('|').map(str::trim).collect::<Vec<_>>(),
            vec![
                "",
                "total (2 tests)",
                "FAILED",
                "43",
                "4",
                "2",
                "0",
                "0",
                "1",
                "2.5s",
                ""
            ]
        );
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
    }

    #[test]
    fn a_summary_table_is_as_wide_as_its_header() {
        let table = Summary::new("t").table();
        let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
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
