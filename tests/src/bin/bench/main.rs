//! Benchmarks of the library against the real local control plane (etcd +
//! kube-apiserver of the test environment), with the controller in its own
//! process (`bench-controller`) and a provisioner that does nothing, so the
//! figures are the library's and the apiserver's, not an object store's.
//!
//! ```text
//! cargo run --release -p obc-tests --bin bench             # full run (10,000 claims at restart)
//! cargo run --release -p obc-tests --bin bench -- --quick  # sanity run (1,000)
//! ```
//!
//! What it measures, and what bounds each figure: docs/performance.md.
//! Options (flags, or the environment variables in brackets):
//!
//! * `--claims N` [`OBC_BENCH_CLAIMS`]: bound claims at the restart (10,000; quick 1,000)
//! * `--latency-claims N` [`OBC_BENCH_LATENCY_CLAIMS`]: claims created one by one (200; quick 100)
//! * `--burst N` [`OBC_BENCH_BURST`]: claims created at once per concurrency (1,000; quick 300)
//! * `--concurrency 4,16,64` [`OBC_BENCH_CONCURRENCY`]: controller concurrencies to try
//! * `--raw N` [`OBC_BENCH_RAW`]: ConfigMaps per raw-create baseline (2,000; quick 500)
//! * `--controller-manager` [`OBC_BENCH_CONTROLLER_MANAGER=1`]: run
//!   kube-controller-manager too, so the API writes are the cluster's (its
//!   garbage collector's deletes of the claims' Secrets and ConfigMaps among
//!   them), not only the library's
//! * `--controller PATH` [`OBC_BENCH_CONTROLLER`]: the bench-controller binary (default:
//!   built with cargo next to this binary)

mod claims;
mod ctl;
mod prom;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Client, Resource};
use lib_provisioner::api::{ObjectBucket, ObjectBucketClaim};
use obc_tests::TestEnv;
use obc_tests::setup::{create_class, start_with_crds};
use obc_tests::testenv::client_from_kubeconfig;

use claims::Tracker;
use ctl::{Controller, CpuSnapshot, Memory};
use prom::Requests;

/// The provisioner name `bench-controller` serves.
const PROVISIONER: &str = "bench.objectbucket.io/noop";
/// The library's default concurrency: used where concurrency is not the subject.
const DEFAULT_CONCURRENCY: u16 = 4;
/// How many claims the benchmark creates at once (its own client).
const CREATORS: usize = 32;
/// Claims per step while filling up to `--claims`.
const FILL_CHUNK: usize = 1000;

const USAGE: &str = "\
cargo run --release -p obc-tests --bin bench -- [--quick] [options]

  --quick              sanity run: 1,000 claims at restart, 100 one by one, bursts of 300
  --claims N           bound claims at the restart and memory figures (10,000)  [OBC_BENCH_CLAIMS]
  --latency-claims N   claims created one by one for bind latency (200)        [OBC_BENCH_LATENCY_CLAIMS]
  --burst N            claims created at once per concurrency (1,000)           [OBC_BENCH_BURST]
  --concurrency LIST   controller concurrencies to try (4,16,64)                [OBC_BENCH_CONCURRENCY]
  --raw N              ConfigMaps per raw create-rate baseline (2,000)          [OBC_BENCH_RAW]
  --controller PATH    the bench-controller binary (default: built next to this one)
                                                                                [OBC_BENCH_CONTROLLER]
  --controller-manager run kube-controller-manager too (garbage collector...): the
                       writes counted are then the cluster's, not only the library's
                                                                                [OBC_BENCH_CONTROLLER_MANAGER=1]
See docs/performance.md.";

const P50_TARGET_MS: f64 = 50.0;
const P99_TARGET_MS: f64 = 250.0;
const THROUGHPUT_TARGET: f64 = 0.5;
const BYTES_PER_CLAIM_TARGET: f64 = 20.0 * 1024.0;

struct Config {
    quick: bool,
    controller_manager: bool,
    claims: usize,
    latency_claims: usize,
    burst: usize,
    concurrency: Vec<u16>,
    raw: usize,
    controller: Option<PathBuf>,
}

fn parse_config() -> Result<Config> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let flag = |name: &str, var: &str| -> Result<Option<String>> {
        if let Some(i) = args.iter().position(|a| a == name) {
            return args
                .get(i + 1)
                .cloned()
                .map(Some)
                .with_context(|| format!("{name} needs a value"));
        }
        Ok(std::env::var(var).ok().filter(|v| !v.is_empty()))
    };
    let number = |name: &str, var: &str, full: usize, quick_value: usize| -> Result<usize> {
        match flag(name, var)? {
            Some(v) => v
                .replace(['_', ','], "")
                .parse()
                .with_context(|| format!("{name}: {v:?} is not a number")),
            None => Ok(if quick { quick_value } else { full }),
        }
    };
    for (i, a) in args.iter().enumerate() {
        let known_flag = [
            "--claims",
            "--latency-claims",
            "--burst",
            "--concurrency",
            "--raw",
            "--controller",
        ];
        let is_value = i > 0 && known_flag.contains(&args[i - 1].as_str());
        let switch = a == "--quick" || a == "--controller-manager";
        if !is_value && !switch && !known_flag.contains(&a.as_str()) {
            if a == "-h" || a == "--help" {
                println!("{USAGE}");
                std::process::exit(0);
            }
            bail!("unknown argument {a:?} (see --help)");
        }
    }
    let concurrency = match flag("--concurrency", "OBC_BENCH_CONCURRENCY")? {
        Some(list) => list
            .split(',')
            .map(|c| {
                c.trim()
                    .parse::<u16>()
                    .with_context(|| format!("--concurrency: {c:?} is not a number"))
            })
            .collect::<Result<Vec<_>>>()?,
        None => vec![4, 16, 64],
    };
    if concurrency.is_empty() || concurrency.contains(&0) {
        bail!("--concurrency: give one or more numbers above 0");
    }
    let controller_manager = args.iter().any(|a| a == "--controller-manager")
        || std::env::var("OBC_BENCH_CONTROLLER_MANAGER").is_ok_and(|v| v == "1");
    let config = Config {
        quick,
        controller_manager,
        claims: number("--claims", "OBC_BENCH_CLAIMS", 10_000, 1_000)?,
        latency_claims: number("--latency-claims", "OBC_BENCH_LATENCY_CLAIMS", 200, 100)?,
        burst: number("--burst", "OBC_BENCH_BURST", 1_000, 300)?,
        concurrency,
        raw: number("--raw", "OBC_BENCH_RAW", 2_000, 500)?,
        controller: flag("--controller", "OBC_BENCH_CONTROLLER")?.map(PathBuf::from),
    };
    if config.latency_claims == 0 || config.burst == 0 || config.raw == 0 {
        bail!("--latency-claims, --burst and --raw must be above 0");
    }
    Ok(config)
}

/// The bench-controller binary: the one given, else built by cargo (when run
/// through cargo) next to this binary, with the same profile.
fn controller_binary(config: &Config) -> Result<PathBuf> {
    if let Some(p) = &config.controller {
        if !p.is_file() {
            bail!("bench-controller not found at {}", p.display());
        }
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating this binary")?;
    let sibling = exe
        .parent()
        .context("this binary has no directory")?
        .join("bench-controller");
    if let Ok(cargo) = std::env::var("CARGO") {
        let mut cmd = std::process::Command::new(cargo);
        cmd.args([
            "build",
            "-q",
            "-p",
            "obc-tests",
            "--bin",
            "bench-controller",
        ]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        println!("building bench-controller: {cmd:?}");
        let status = cmd.status().context("running cargo build")?;
        if !status.success() {
            bail!("cargo build of bench-controller failed ({status})");
        }
    }
    if !sibling.is_file() {
        bail!(
            "{} is missing: run `cargo build --release -p obc-tests --bins`, or pass --controller PATH",
            sibling.display()
        );
    }
    Ok(sibling)
}

/// kube-apiserver's `/metrics`, read with the admin token.
struct Apiserver {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Apiserver {
    fn new(env: &TestEnv) -> Result<Self> {
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(env.ca_pem().as_bytes())?)
            .tls_built_in_root_certs(false)
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            http,
            url: format!("{}/metrics", env.apiserver_url()),
            token: env.admin_token().to_owned(),
        })
    }

    async fn snapshot(&self) -> Result<ApiSnapshot> {
        let text = self
            .http
            .get(&self.url)
            .bearer_auth(&self.token)
            .send()
            .await
            .context("GET /metrics of kube-apiserver")?
            .error_for_status()?
            .text()
            .await?;
        Ok(ApiSnapshot {
            requests: Requests::from_metrics(&text),
            seconds: Requests::named(&text, "apiserver_request_duration_seconds_sum"),
            timed: Requests::named(&text, "apiserver_request_duration_seconds_count"),
        })
    }
}

/// What kube-apiserver's metrics say at one moment.
struct ApiSnapshot {
    /// `apiserver_request_total`.
    requests: Requests,
    /// `apiserver_request_duration_seconds_sum` and `_count`.
    seconds: Requests,
    timed: Requests,
}

impl ApiSnapshot {
    fn since(&self, before: &ApiSnapshot) -> ApiSnapshot {
        ApiSnapshot {
            requests: self.requests.since(&before.requests),
            seconds: self.seconds.since_exact(&before.seconds),
            timed: self.timed.since(&before.timed),
        }
    }
}

/// Server-side time of the requests of a phase, per claim, by request kind
/// (from `apiserver_request_duration_seconds`): where bind latency goes.
fn print_server_time(delta: &ApiSnapshot, per: usize, only_writes_and_gets: bool) {
    let seconds = delta.seconds.by_resource_verb();
    let counts = delta.timed.by_resource_verb();
    let mut total = 0.0;
    let mut parts = Vec::new();
    for ((resource, verb), n) in &counts {
        if only_writes_and_gets && !(prom::WRITE_VERBS.contains(&verb.as_str()) || verb == "GET") {
            continue;
        }
        if is_apiserver_own_resource(resource) {
            continue;
        }
        let secs = seconds
            .get(&(resource.clone(), verb.clone()))
            .copied()
            .unwrap_or(0.0);
        total += secs;
        parts.push(format!(
            "{resource} {verb} {:.1} ms x {:.2}",
            1000.0 * secs / n.max(1.0),
            n / per as f64
        ));
    }
    out(format!(
        "    apiserver time per claim (mean server-side duration x requests per claim): {:.1} ms in all",
        1000.0 * total / per as f64
    ));
    for p in parts {
        out(format!("      {p}"));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn out(line: impl AsRef<str>) {
    println!("{}", line.as_ref());
    let _ = std::io::stdout().flush();
}

fn header(title: &str) {
    out("");
    out(format!("== {title}"));
}

/// Prints write requests by resource and verb, per claim.
fn print_requests(r: &Requests, per: usize) {
    let by = r.by_resource_verb();
    if by.is_empty() {
        out("    (none)");
        return;
    }
    out(format!(
        "    {:<42} {:<7} {:>8} {:>10}",
        "resource", "verb", "requests", "per claim"
    ));
    for ((resource, verb), n) in &by {
        out(format!(
            "    {resource:<42} {verb:<7} {n:>8.0} {:>10.2}",
            n / per as f64
        ));
    }
    out(format!(
        "    {:<42} {:<7} {:>8.0} {:>10.2}",
        "total",
        "",
        r.total(),
        r.total() / per as f64
    ));
    let failed = r.failed();
    if failed.0.is_empty() {
        out("    responses: all 2xx");
    } else {
        for (k, n) in &failed.0 {
            out(format!(
                "    non-2xx: {} {} -> {} x {n:.0}",
                k.resource, k.verb, k.code
            ));
        }
    }
}

/// GETs by resource, per claim (the library reads the API only on a cache miss).
fn print_gets(r: &Requests, per: usize) {
    let gets = r.filter(|k| k.verb == "GET");
    let by = gets.by_resource_verb();
    let parts: Vec<String> = by
        .iter()
        .map(|((res, _), n)| format!("{res} {:.2}", n / per as f64))
        .collect();
    out(format!(
        "    API reads (GET, cache misses) per claim: {}",
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    ));
}

/// Writes made by the apiserver itself (its identity lease), not by a client here.
fn is_apiserver_own(k: &prom::Key) -> bool {
    is_apiserver_own_resource(&k.resource)
}

fn is_apiserver_own_resource(resource: &str) -> bool {
    resource.starts_with("leases")
}

/// A small custom resource for the baseline: custom resources cost the
/// apiserver more per write than built-in kinds (JSON, schema validation,
/// pruning, unstructured managedFields), and 5 of the library's 8 writes
/// per claim are to custom resources.
const RECORD_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: benchrecords.bench.objectbucket.io
spec:
  group: bench.objectbucket.io
  scope: Namespaced
  names: {kind: BenchRecord, plural: benchrecords, singular: benchrecord, listKind: BenchRecordList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                key: {type: string}
"#;

fn record_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.objectbucket.io", "v1", "BenchRecord"),
        "benchrecords",
    )
}

/// Which small object a baseline creates.
#[derive(Clone, Copy)]
enum Raw {
    ConfigMap,
    CustomResource,
}

async fn create_raw(client: &Client, kind: Raw, ns: &str, name: &str) -> Result<()> {
    match kind {
        Raw::ConfigMap => {
            let mut cm = ConfigMap {
                data: Some(BTreeMap::from([("key".to_owned(), "value".to_owned())])),
                ..Default::default()
            };
            cm.metadata.name = Some(name.to_owned());
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .create(&PostParams::default(), &cm)
                .await
                .with_context(|| format!("creating ConfigMap {ns}/{name}"))?;
        }
        Raw::CustomResource => {
            let ar = record_resource();
            let mut obj = DynamicObject::new(name, &ar).within(ns);
            obj.data = serde_json::json!({ "spec": { "key": "value" } });
            Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
                .create(&PostParams::default(), &obj)
                .await
                .with_context(|| format!("creating BenchRecord {ns}/{name}"))?;
        }
    }
    Ok(())
}

/// Creates `count` small objects, `concurrency` at a time; objects/s.
async fn raw_create_rate(
    client: &Client,
    kind: Raw,
    ns: &str,
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> Result<f64> {
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| async move { create_raw(client, kind, ns, &format!("{prefix}-{i:05}")).await })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// Latency of single requests, one at a time: the floor under bind latency.
async fn serial_latency(client: &Client, ns: &str, count: usize) -> Result<String> {
    let mut cm = Vec::with_capacity(count);
    let mut cr = Vec::with_capacity(count);
    let mut get = Vec::with_capacity(count);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..count {
        let t = Instant::now();
        create_raw(client, Raw::ConfigMap, ns, &format!("serial-{i:05}")).await?;
        cm.push(t.elapsed());
        let t = Instant::now();
        create_raw(client, Raw::CustomResource, ns, &format!("serial-{i:05}")).await?;
        cr.push(t.elapsed());
        let t = Instant::now();
        cms.get_opt(&format!("absent-{i:05}")).await?;
        get.push(t.elapsed());
    }
    for v in [&mut cm, &mut cr, &mut get] {
        v.sort();
    }
    Ok(format!(
        "one request at a time, p50: ConfigMap create {:.1} ms, custom resource create {:.1} ms, GET (404) {:.1} ms",
        ms(percentile(&cm, 0.5)),
        ms(percentile(&cr, 0.5)),
        ms(percentile(&get, 0.5))
    ))
}

/// Average JSON size of cached objects, and of their managedFields.
async fn cached_sizes(client: &Client, ns: &str) -> Result<Vec<(String, f64, f64)>> {
    fn avg<K: serde::Serialize + Resource>(items: &[K]) -> (f64, f64) {
        if items.is_empty() {
            return (0.0, 0.0);
        }
        let mut total = 0usize;
        let mut managed = 0usize;
        for k in items {
            total += serde_json::to_vec(k).map(|v| v.len()).unwrap_or(0);
            managed += serde_json::to_vec(&k.meta().managed_fields)
                .map(|v| v.len())
                .unwrap_or(0);
        }
        (
            total as f64 / items.len() as f64,
            managed as f64 / items.len() as f64,
        )
    }
    let lp = ListParams::default().limit(100);
    let claims = Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items;
    let obs: Vec<ObjectBucket> = Api::<ObjectBucket>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let labelled = lp.clone().labels("bucket-provisioner");
    let secrets = Api::<Secret>::namespaced(client.clone(), ns)
        .list_metadata(&labelled)
        .await?
        .items;
    let cms = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list_metadata(&labelled)
        .await?
        .items;
    let mut out = Vec::new();
    for (what, (t, m)) in [
        ("ObjectBucketClaim", avg(&claims)),
        ("ObjectBucket", avg(&obs)),
        ("Secret (metadata only)", avg(&secrets)),
        ("ConfigMap (metadata only)", avg(&cms)),
    ] {
        out.push((what.to_owned(), t, m));
    }
    Ok(out)
}

fn machine() -> Vec<String> {
    let mut lines = Vec::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    lines.push(format!("nproc: {cores} ({model})"));
    if let Ok(o) = std::process::Command::new("free").arg("-h").output() {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            lines.push(format!("free -h | {l}"));
        }
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        lines.push(format!("load average at start: {}", l.trim()));
    }
    lines
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

/// Waits until no Secret or ConfigMap of a claim (our label) is left in `ns`.
async fn children_collected(client: &Client, ns: &str) -> Result<()> {
    let labelled = ListParams::default().labels(lib_provisioner::api::PROVISIONER_LABEL);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    obc_tests::wait_for(
        Duration::from_secs(120),
        "the garbage collector to delete the claims' Secrets and ConfigMaps",
        || async {
            let left = secrets.list_metadata(&labelled).await?.items.len()
                + config_maps.list_metadata(&labelled).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await
}

struct Run {
    env: TestEnv,
    client: Client,
    api: Apiserver,
    tracker: std::sync::Arc<Tracker>,
    bin: PathBuf,
    apiserver_pid: Option<u32>,
    etcd_pid: Option<u32>,
    cores: usize,
    logs: usize,
}

impl Run {
    async fn controller(&mut self, concurrency: u16) -> Result<Controller> {
        self.controller_with(concurrency, &[]).await
    }

    /// `bench-controller --caches-only`, optionally without managedFields;
    /// its memory once the caches have listed and 2 s have passed.
    async fn caches_only(&mut self, strip: bool) -> Result<Memory> {
        let mut args = vec!["--caches-only"];
        if strip {
            args.push("--strip-managed-fields");
        }
        let probe = self.controller_with(DEFAULT_CONCURRENCY, &args).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mem = probe.memory()?;
        probe.stop().await?;
        Ok(mem)
    }

    async fn controller_with(&mut self, concurrency: u16, extra: &[&str]) -> Result<Controller> {
        self.logs += 1;
        let log = self
            .env
            .dir()
            .join(format!("bench-controller-{}.log", self.logs));
        let mut c = Controller::start(
            &self.bin,
            self.env.kubeconfig_path(),
            concurrency,
            extra,
            log,
        )
        .await?;
        c.wait_ready(Duration::from_secs(120)).await?;
        Ok(c)
    }

    fn cpu(&self, controller: Option<&Controller>) -> CpuSnapshot {
        CpuSnapshot::take(
            self.apiserver_pid,
            self.etcd_pid,
            controller.map(Controller::pid),
        )
    }
}

struct Summary {
    p50: Duration,
    p95: Duration,
    p99: Duration,
    writes_provision: f64,
    writes_delete: f64,
    throughput: Vec<(u16, f64, f64, f64)>,
    restart_claims: usize,
    restart_idle: Duration,
    restart_provisions: f64,
    restart_writes: f64,
    mem0: Memory,
    mem_n: Memory,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .init();
    let config = parse_config()?;
    let bin = controller_binary(&config)?;
    let started = Instant::now();

    header("machine");
    for l in machine() {
        out(format!("    {l}"));
    }
    if cfg!(debug_assertions) {
        out("    WARNING: debug build; run with --release for representative figures");
    }
    out(format!(
        "    mode: {}; latency claims {}, burst {}, concurrency {:?}, raw ConfigMaps {}, restart claims {}",
        if config.quick { "quick" } else { "full" },
        config.latency_claims,
        config.burst,
        config.concurrency,
        config.raw,
        config.claims
    ));

    let env = start_with_crds().await?;
    out(format!(
        "    test environment: kube-apiserver {} (etcd --unsafe-no-fsync), ready in {:.1?}",
        env.apiserver_url(),
        env.startup_timings().total
    ));
    let client = env.admin_client();
    create_class(
        &client,
        claims::CLASS,
        PROVISIONER,
        "Delete",
        BTreeMap::<String, String>::new(),
    )
    .await?;
    env.install_crds(RECORD_CRD).await?;
    if config.controller_manager {
        // After the CRDs: its garbage collector discovers resource types at start.
        let took = env.start_controller_manager().await?;
        out(format!(
            "    kube-controller-manager ({}): ready in {:.1?}; its writes are counted below",
            obc_tests::testenv::CONTROLLERS.join(", "),
            took.healthz + took.garbage_collector
        ));
    }
    for ns in ["bench-serial"] {
        env.ensure_namespace(ns).await?;
    }
    let api = Apiserver::new(&env)?;
    let tracker = Tracker::spawn(client.clone()).await?;
    let (apiserver_pid, etcd_pid) = ctl::control_plane_pids(env.dir());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut run = Run {
        env,
        client,
        api,
        tracker,
        bin,
        apiserver_pid,
        etcd_pid,
        cores,
        logs: 0,
    };
    let summary = benchmark(&mut run, &config).await;
    run.tracker.stop();
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            out(format!(
                "benchmark failed; controller logs were in {} (set OBC_KEEP_TESTENV=1 to keep them)",
                run.env.dir().display()
            ));
            return Err(e);
        }
    };
    print_summary(&summary);
    out(format!(
        "\nbenchmark took {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

async fn benchmark(run: &mut Run, config: &Config) -> Result<Summary> {
    let client = run.client.clone();
    let tracker = run.tracker.clone();

    // ---------------------------------------------------------------- memory, 0 claims
    header("controller memory with 0 claims (baseline)");
    let mut ctl = run.controller(DEFAULT_CONCURRENCY).await?;
    let ready = ctl.started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mem0 = ctl.memory()?;
    out(format!(
        "    ready (caches synced) {:.0} ms after spawn; VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        ms(ready),
        mib(mem0.rss),
        mib(mem0.hwm)
    ));
    let probe0 = run.caches_only(false).await?;
    out(format!(
        "    caches alone (bench-controller --caches-only): VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        mib(probe0.rss),
        mib(probe0.hwm)
    ));

    // ---------------------------------------------------------------- bind latency
    let n = config.latency_claims;
    header(&format!(
        "bind latency: {n} claims created one by one (controller concurrency {DEFAULT_CONCURRENCY})"
    ));
    let ns = "bench-latency";
    run.env.ensure_namespace(ns).await?;
    out(format!(
        "    floor: {}",
        serial_latency(&client, "bench-serial", 100).await?
    ));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(Some(&ctl));
    let phase = Instant::now();
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n {
        let name = claims::name(i);
        let t0 = Instant::now();
        claims::create(&client, ns, &name).await?;
        let at = tracker.bound(ns, &name, Duration::from_secs(60)).await?;
        latencies.push(at.duration_since(t0));
        if (i + 1) % 50 == 0 || i + 1 == n {
            out(format!("    ... {}/{n} bound", i + 1));
        }
    }
    let idle = ctl
        .wait_idle(
            phase,
            n as f64,
            Duration::from_secs(2),
            Duration::from_secs(120),
        )
        .await?;
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(&ctl));
    let mut sorted = latencies.clone();
    sorted.sort();
    let (p50, p95, p99) = (
        percentile(&sorted, 0.50),
        percentile(&sorted, 0.95),
        percentile(&sorted, 0.99),
    );
    let mean = latencies.iter().sum::<Duration>() / n as u32;
    out(format!(
        "    claim created -> Bound (seen by a watch): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms (min {:.1}, mean {:.1}, max {:.1})",
        ms(p50),
        ms(p95),
        ms(p99),
        ms(sorted[0]),
        ms(mean),
        ms(sorted[n - 1])
    ));
    out(format!(
        "    controller: {:.0} provision calls, {:.0} reconciles ({:.2} per claim, {:.0} failed), {:.2} ms CPU per claim",
        idle.counts.provision,
        idle.counts.reconciles,
        idle.counts.reconciles / n as f64,
        idle.counts.reconcile_errors,
        ms(cpu1.controller_since(&cpu0)) / n as f64
    ));
    out(format!("    {}", cpu1.describe_since(&cpu0, run.cores)));
    let delta = after.since(&before);
    print_server_time(&delta, n, true);
    let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
    writes.subtract("objectbucketclaims", "POST", n as f64);
    header(&format!(
        "API writes per greenfield provision (kube-apiserver apiserver_request_total, {n} claims; the benchmark's own {n} claim creates subtracted)"
    ));
    print_requests(&writes, n);
    print_gets(&delta.requests, n);
    let writes_provision = writes.total() / n as f64;
    let provision_counts = idle.counts;

    // ---------------------------------------------------------------- deletes
    header(&format!("delete: the {n} claims deleted one by one"));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(Some(&ctl));
    let phase = Instant::now();
    let mut delete_latencies = Vec::with_capacity(n);
    for i in 0..n {
        let name = claims::name(i);
        let t0 = Instant::now();
        claims::delete(&client, ns, &name).await?;
        let at = tracker.gone(ns, &name, Duration::from_secs(60)).await?;
        delete_latencies.push(at.duration_since(t0));
    }
    let idle = ctl
        .wait_idle(
            phase,
            provision_counts.reconciles + n as f64,
            Duration::from_secs(2),
            Duration::from_secs(120),
        )
        .await?;
    if run.env.controller_manager_running().await {
        // The collector deletes the Secrets and ConfigMaps after their claims
        // are gone: its writes belong to this phase.
        children_collected(&client, ns).await?;
    }
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(&ctl));
    delete_latencies.sort();
    out(format!(
        "    claim deleted -> gone (finalizer removed): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms",
        ms(percentile(&delete_latencies, 0.5)),
        ms(percentile(&delete_latencies, 0.95)),
        ms(percentile(&delete_latencies, 0.99)),
    ));
    out(format!(
        "    controller: {:.0} delete calls, {:.0} reconciles ({:.2} per claim)",
        idle.counts.delete - provision_counts.delete,
        idle.counts.reconciles - provision_counts.reconciles,
        (idle.counts.reconciles - provision_counts.reconciles) / n as f64
    ));
    out(format!("    {}", cpu1.describe_since(&cpu0, run.cores)));
    let delta = after.since(&before);
    let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
    writes.subtract("objectbucketclaims", "DELETE", n as f64);
    header(&format!(
        "API writes per delete (reclaim policy Delete; the benchmark's own {n} claim deletes subtracted)"
    ));
    print_requests(&writes, n);
    print_gets(&delta.requests, n);
    let writes_delete = writes.total() / n as f64;
    ctl.stop().await?;

    // ---------------------------------------------------------------- throughput
    let burst = config.burst;
    let mut throughput = Vec::new();
    let mut existing = 0usize;
    let raw_client = client_from_kubeconfig(run.env.kubeconfig_path()).await?;
    for &c in &config.concurrency {
        header(&format!(
            "throughput: {burst} claims created at once, controller concurrency {c}"
        ));
        let mut ctl = run.controller(c).await?;
        let since = Instant::now();
        ctl.wait_idle(
            since,
            existing as f64,
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
        .await?;
        let raw_ns = format!("bench-raw-c{c}");
        run.env.ensure_namespace(&raw_ns).await?;
        let cpu_a = run.cpu(Some(&ctl));
        let raw = raw_create_rate(
            &raw_client,
            Raw::ConfigMap,
            &raw_ns,
            "cm",
            config.raw,
            c as usize,
        )
        .await?;
        let cpu_b = run.cpu(Some(&ctl));
        let raw_cr = raw_create_rate(
            &raw_client,
            Raw::CustomResource,
            &raw_ns,
            "cr",
            config.raw,
            c as usize,
        )
        .await?;
        let cpu_c = run.cpu(Some(&ctl));
        let cm_cpu = ms(cpu_b.control_plane_since(&cpu_a)) / config.raw as f64;
        let cr_cpu = ms(cpu_c.control_plane_since(&cpu_b)) / config.raw as f64;
        out(format!(
            "    baseline, {} creates {c} at a time from the same kind of client: ConfigMaps {raw:.0}/s ({cm_cpu:.2} ms kube-apiserver+etcd CPU each), small custom resources {raw_cr:.0}/s ({cr_cpu:.2} ms each)",
            config.raw
        ));
        out(format!(
            "      during the baseline: {}",
            cpu_c.describe_since(&cpu_a, run.cores)
        ));

        let ns = format!("bench-c{c}");
        run.env.ensure_namespace(&ns).await?;
        let counts0 = ctl.counts().await?;
        let before = run.api.snapshot().await?;
        let cpu0 = run.cpu(Some(&ctl));
        let t0 = Instant::now();
        claims::create_many(&client, &ns, 0, burst, CREATORS).await?;
        let created = t0.elapsed();
        let timeout = Duration::from_secs(120.max(burst as u64 / 2));
        let last = tracker.nth_bound(&ns, burst, timeout).await?;
        let all_bound = last.duration_since(t0);
        let cpu_bound = run.cpu(Some(&ctl));
        let load = loadavg();
        let idle = ctl
            .wait_idle(
                t0,
                counts0.reconciles + burst as f64,
                Duration::from_secs(2),
                Duration::from_secs(300),
            )
            .await?;
        let after = run.api.snapshot().await?;
        let rate = burst as f64 / all_bound.as_secs_f64();
        let delta = after.since(&before);
        let mut writes = delta.requests.writes().filter(|k| !is_apiserver_own(k));
        writes.subtract("objectbucketclaims", "POST", burst as f64);
        let per_claim = writes.total() / burst as f64;
        let limit = raw / writes_provision;
        let limit_cr = raw_cr / writes_provision;
        let ratio = rate / limit;
        out(format!(
            "    created in {:.2} s ({CREATORS} at a time); all Bound {:.2} s after the first create: {rate:.1} claims/s",
            created.as_secs_f64(),
            all_bound.as_secs_f64()
        ));
        out(format!(
            "    physical limit = raw ConfigMap creates/s / writes per claim = {raw:.0} / {writes_provision:.2} = {limit:.1} claims/s: throughput is {:.0}% of it",
            ratio * 100.0
        ));
        out(format!(
            "    (with custom-resource creates as the baseline: {raw_cr:.0} / {writes_provision:.2} = {limit_cr:.1} claims/s: {:.0}%)",
            100.0 * rate / limit_cr
        ));
        out(format!(
            "    {:.2} reconciles per claim ({:.0} failed); controller idle {:.2} s after the first create",
            (idle.counts.reconciles - counts0.reconciles) / burst as f64,
            idle.counts.reconcile_errors - counts0.reconcile_errors,
            idle.after.as_secs_f64()
        ));
        out(format!(
            "    until all Bound: {}; load average {load}",
            cpu_bound.describe_since(&cpu0, run.cores),
        ));
        let cp_claim = ms(cpu_bound.control_plane_since(&cpu0)) / burst as f64;
        let ours_claim = ms(cpu_bound.ours_since(&cpu0)) / burst as f64;
        out(format!(
            "    CPU per claim: kube-apiserver+etcd {cp_claim:.1} ms (= {:.1} ConfigMap creates), all benchmark processes {ours_claim:.1} ms: {} cores alone would bind at most {:.0} claims/s",
            cp_claim / cm_cpu.max(1e-6),
            run.cores,
            1000.0 * run.cores as f64 / ours_claim.max(1e-6)
        ));
        print_server_time(&delta, burst, true);
        out(format!(
            "    API writes in this run: {per_claim:.2} per claim (the benchmark's {burst} creates subtracted)"
        ));
        print_requests(&writes, burst);
        throughput.push((c, rate, limit, ratio));
        existing += burst;
        ctl.stop().await?;
    }

    // ---------------------------------------------------------------- fill up
    let total = config.claims.max(existing);
    if config.claims > existing {
        let c = config.concurrency.iter().copied().max().unwrap_or(16);
        let need = config.claims - existing;
        header(&format!(
            "filling up to {total} bound claims: {need} more, {FILL_CHUNK} at a time, controller concurrency {c}"
        ));
        let mut ctl = run.controller(c).await?;
        let since = Instant::now();
        ctl.wait_idle(
            since,
            existing as f64,
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
        .await?;
        let ns = "bench-fill";
        run.env.ensure_namespace(ns).await?;
        let t0 = Instant::now();
        let mut done = 0;
        while done < need {
            let chunk = FILL_CHUNK.min(need - done);
            claims::create_many(&client, ns, done, done + chunk, CREATORS).await?;
            tracker
                .nth_bound(ns, done + chunk, Duration::from_secs(900))
                .await?;
            done += chunk;
            out(format!(
                "    ... {}/{total} bound ({:.0} claims/s over the fill so far; load average {})",
                existing + done,
                done as f64 / t0.elapsed().as_secs_f64(),
                loadavg()
            ));
        }
        let counts0 = ctl.counts().await?;
        ctl.wait_idle(
            since,
            counts0.reconciles,
            Duration::from_secs(2),
            Duration::from_secs(600),
        )
        .await?;
        ctl.stop().await?;
        header("JSON size of cached objects (average of up to 100, as the apiserver returns them)");
        for (what, size, managed) in cached_sizes(&client, ns).await? {
            out(format!(
                "    {what:<28} {size:>6.0} bytes, of which managedFields {managed:>5.0}"
            ));
        }
    }

    // ---------------------------------------------------------------- restart
    header(&format!(
        "restart with {total} bound claims (controller concurrency {DEFAULT_CONCURRENCY})"
    ));
    let before = run.api.snapshot().await?;
    let cpu0 = run.cpu(None);
    let mut ctl = run.controller(DEFAULT_CONCURRENCY).await?;
    let ready = ctl.started.elapsed();
    let idle = ctl
        .wait_idle(
            ctl.started,
            total as f64,
            Duration::from_secs(3),
            Duration::from_secs(900),
        )
        .await?;
    let mem_n = ctl.memory()?;
    let after = run.api.snapshot().await?;
    let cpu1 = run.cpu(Some(&ctl));
    let delta = after.since(&before);
    let all_writes = delta.requests.writes();
    let own = all_writes.filter(is_apiserver_own);
    let writes = all_writes.filter(|k| !is_apiserver_own(k));
    out(format!(
        "    ready (caches synced) {:.2} s after spawn; idle (every claim reconciled, then no reconcile and <10% CPU for 3 s) {:.2} s after spawn",
        ready.as_secs_f64(),
        idle.after.as_secs_f64()
    ));
    out(format!(
        "    reconciles: {:.0} ({:.2} per claim, {:.0} failed); provisioner calls: provision {:.0}, grant {:.0}, delete {:.0}, revoke {:.0}",
        idle.counts.reconciles,
        idle.counts.reconciles / total as f64,
        idle.counts.reconcile_errors,
        idle.counts.provision,
        idle.counts.grant,
        idle.counts.delete,
        idle.counts.revoke
    ));
    out(format!(
        "    controller CPU {:.2} s ({:.0} us per claim); {}",
        cpu1.controller.as_secs_f64(),
        cpu1.controller.as_secs_f64() * 1e6 / total as f64,
        cpu1.describe_since(&cpu0, run.cores)
    ));
    out("    API writes during the resync (kube-apiserver metrics, every client):");
    print_requests(&writes, total);
    if !own.0.is_empty() {
        out(format!(
            "    (not counted: {:.0} writes of the apiserver's own identity lease)",
            own.total()
        ));
    }
    print_gets(&delta.requests, total);
    out(format!(
        "    memory with {total} claims cached: VmHWM (peak) {:.1} MiB, VmRSS {:.1} MiB",
        mib(mem_n.hwm),
        mib(mem_n.rss)
    ));
    let per = |a: u64, b: u64| (a as f64 - b as f64) / total as f64;
    out(format!(
        "    per claim (minus the 0-claim baseline {:.1} MiB RSS / {:.1} MiB peak): {:.0} bytes RSS, {:.0} bytes peak",
        mib(mem0.rss),
        mib(mem0.hwm),
        per(mem_n.rss, mem0.rss),
        per(mem_n.hwm, mem0.hwm)
    ));
    let restart_provisions = idle.counts.provision + idle.counts.grant;
    ctl.stop().await?;

    // ---------------------------------------------------------------- memory breakdown
    header(&format!(
        "memory breakdown with {total} claims: the library's watches and caches alone (bench-controller --caches-only)"
    ));
    let full = run.caches_only(false).await?;
    let stripped = run.caches_only(true).await?;
    let per_claim = |m: &Memory| (m.hwm as f64 - probe0.hwm as f64) / total as f64;
    out(format!(
        "    with managedFields (as cached before the library stripped them): VmHWM {:.1} MiB, VmRSS {:.1} MiB: {:.0} bytes per claim (peak, over the 0-claim {:.1} MiB)",
        mib(full.hwm),
        mib(full.rss),
        per_claim(&full),
        mib(probe0.hwm)
    ));
    out(format!(
        "    without managedFields, as the library caches them: VmHWM {:.1} MiB, VmRSS {:.1} MiB: {:.0} bytes per claim ({:.0}% less)",
        mib(stripped.hwm),
        mib(stripped.rss),
        per_claim(&stripped),
        100.0 * (1.0 - per_claim(&stripped) / per_claim(&full).max(1.0))
    ));
    out(format!(
        "    the controller beyond its caches: {:.0} bytes per claim (scheduler entries, reconcile state, allocator slack)",
        per(mem_n.hwm, mem0.hwm) - per_claim(&stripped)
    ));

    Ok(Summary {
        p50,
        p95,
        p99,
        writes_provision,
        writes_delete,
        throughput,
        restart_claims: total,
        restart_idle: idle.after,
        restart_provisions,
        restart_writes: writes.total(),
        mem0,
        mem_n,
    })
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn print_summary(s: &Summary) {
    header("summary (targets of issue 6)");
    let p50 = ms(s.p50);
    let p99 = ms(s.p99);
    out(format!(
        "    bind latency p50 {p50:.1} ms (target <= {P50_TARGET_MS:.0}): {}",
        verdict(p50 <= P50_TARGET_MS)
    ));
    out(format!(
        "    bind latency p95 {:.1} ms, p99 {p99:.1} ms (target <= {P99_TARGET_MS:.0}): {}",
        ms(s.p95),
        verdict(p99 <= P99_TARGET_MS)
    ));
    out(format!(
        "    writes per greenfield provision {:.2}, per delete {:.2}",
        s.writes_provision, s.writes_delete
    ));
    for (c, rate, limit, ratio) in &s.throughput {
        out(format!(
            "    throughput at concurrency {c:>3}: {rate:>6.1} claims/s = {:>3.0}% of the limit {limit:.1} (target >= {:.0}%): {}",
            ratio * 100.0,
            THROUGHPUT_TARGET * 100.0,
            verdict(*ratio >= THROUGHPUT_TARGET)
        ));
    }
    out(format!(
        "    restart with {} claims: idle after {:.2} s, {:.0} provisioner calls, {:.0} API writes (target 0): {}",
        s.restart_claims,
        s.restart_idle.as_secs_f64(),
        s.restart_provisions,
        s.restart_writes,
        verdict(s.restart_writes == 0.0 && s.restart_provisions == 0.0)
    ));
    let per_rss = (s.mem_n.rss as f64 - s.mem0.rss as f64) / s.restart_claims as f64;
    let per_hwm = (s.mem_n.hwm as f64 - s.mem0.hwm as f64) / s.restart_claims as f64;
    out(format!(
        "    memory per cached claim: {:.1} KiB RSS, {:.1} KiB peak (target <= {:.0} KiB): {}",
        per_rss / 1024.0,
        per_hwm / 1024.0,
        BYTES_PER_CLAIM_TARGET / 1024.0,
        verdict(per_hwm.max(per_rss) <= BYTES_PER_CLAIM_TARGET)
    ));
}
