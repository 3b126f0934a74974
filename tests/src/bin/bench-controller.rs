//! The controller process of the benchmark (`cargo run --release -p obc-tests
//! --bin bench`, see docs/performance.md): the library's `ControllerBuilder`
//! with a provisioner that does nothing but answer, so the figures measure the
//! library and the apiserver, not an object store.
//!
//! ```text
//! KUBECONFIG=... bench-controller --metrics-addr 127.0.0.1:9090 [--concurrency 4] [--provisioner NAME]
//! ```
//!
//! It is a process of its own so that its memory can be read from
//! `/proc/<pid>/status`. Provisioner calls are counted by the library's
//! `obc_provisioner_operations_total` on `/metrics`, and logged again at exit.
//!
//! COSI (the benchmark's `--cosi` part): `--cosi DRIVER` serves COSI
//! in-process too (the binding role for every driver, the driver role for
//! `DRIVER`); `--cosi-grpc SOCKET --cosi-grpc-driver NAME` serves the same
//! no-op provisioner as a COSI gRPC driver on a unix socket, for upstream's
//! sidecar. With either, the OBC controllers watch only an empty namespace
//! (`--obc-namespace`, default `bench-cosi-no-obc`), so that the OBC claims
//! of the benchmark's earlier phases cost nothing here. Grants of several
//! buckets under one credential are accepted (the trait's default refuses
//! them), so a BucketAccess may name many claims.
//!
//! `--warnings-only` sends only the library's Warning Events
//! (`EventLevel::WarningsOnly`): the writes per claim without the Normal
//! ones.
//!
//! `--caches-only [--strip-managed-fields]` runs no controller: only watches
//! and caches shaped like the library's (claims and ObjectBuckets,
//! StorageClasses, Secret and ConfigMap metadata with the provisioner label).
//! With `--strip-managed-fields` they are kept as the library keeps them:
//! without `managedFields`, claims and ObjectBuckets compacted, children
//! reduced; without it, as decoded. It serves `/readyz` once they have
//! listed. The benchmark uses it to tell how much of the controller's memory
//! per claim the caches are, and what the library's reductions save.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use lib_provisioner::provisioner::{AccessGrant, AccessRequest, StoreEndpoint};
use lib_provisioner::{
    BucketAccess, BucketRequest, ControllerBuilder, Credentials, ProvisionError, Provisioner,
    TeardownRequest,
};

/// The provisioner name the benchmark's StorageClass names.
const DEFAULT_PROVISIONER: &str = "bench.objectbucket.io/noop";

/// Answers every call at once; counts them.
#[derive(Default)]
struct Noop {
    provision: AtomicU64,
    grant: AtomicU64,
    delete: AtomicU64,
    revoke: AtomicU64,
}

impl Noop {
    fn access(req: &BucketRequest) -> BucketAccess {
        BucketAccess::new(
            "s3.bench.invalid",
            443,
            Credentials::new(
                format!("AK{}", req.claim.uid.replace('-', "")),
                format!("SK{}", req.claim.uid),
            ),
        )
        .with_region("bench-1")
    }
}

#[async_trait]
impl Provisioner for Noop {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.provision.fetch_add(1, Ordering::Relaxed);
        Ok(Self::access(req))
    }

    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.grant.fetch_add(1, Ordering::Relaxed);
        Ok(Self::access(req))
    }

    async fn delete(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        self.delete.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn revoke(&self, _: &TeardownRequest) -> Result<(), ProvisionError> {
        self.revoke.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Any number of buckets, any modes: one account (the default accepts
    /// one ReadWrite bucket only).
    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        self.grant.fetch_add(1, Ordering::Relaxed);
        let uid = req.principal.uid.replace('-', "");
        Ok(AccessGrant::new(
            req.account_name.clone(),
            Credentials::new(format!("AK{uid}"), format!("SK{uid}")),
            StoreEndpoint::new("s3.bench.invalid", 443).with_region("bench-1"),
        ))
    }
}

/// `Arc<Noop>` as the provisioner, so `main` can read the counts at exit.
struct Shared(Arc<Noop>);

#[async_trait]
impl Provisioner for Shared {
    async fn provision(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.0.provision(req).await
    }
    async fn grant(&self, req: &BucketRequest) -> Result<BucketAccess, ProvisionError> {
        self.0.grant(req).await
    }
    async fn delete(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.0.delete(req).await
    }
    async fn revoke(&self, req: &TeardownRequest) -> Result<(), ProvisionError> {
        self.0.revoke(req).await
    }
    async fn grant_access(&self, req: &AccessRequest) -> Result<AccessGrant, ProvisionError> {
        self.0.grant_access(req).await
    }
}

struct Args {
    metrics_addr: SocketAddr,
    concurrency: u16,
    provisioner: String,
    caches_only: bool,
    strip_managed_fields: bool,
    /// In-process COSI for this driver name.
    cosi: Option<String>,
    /// The COSI gRPC driver's socket and name.
    cosi_grpc: Option<(std::path::PathBuf, String)>,
    obc_namespace: String,
    /// `--warnings-only`: the library's Normal Events left out.
    warnings_only: bool,
}

fn parse_args() -> Result<Args> {
    let mut metrics_addr = None;
    let mut concurrency = 4u16;
    let mut provisioner = DEFAULT_PROVISIONER.to_owned();
    let mut caches_only = false;
    let mut strip_managed_fields = false;
    let mut cosi = None;
    let mut grpc_socket = None;
    let mut grpc_driver = None;
    let mut obc_namespace = "bench-cosi-no-obc".to_owned();
    let mut warnings_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().with_context(|| format!("{flag} needs a value"));
        match arg.as_str() {
            "--metrics-addr" => {
                metrics_addr = Some(
                    value("--metrics-addr")?
                        .parse()
                        .context("--metrics-addr: not an address")?,
                )
            }
            "--concurrency" => {
                concurrency = value("--concurrency")?
                    .parse()
                    .context("--concurrency: not a number")?
            }
            "--provisioner" => provisioner = value("--provisioner")?,
            "--caches-only" => caches_only = true,
            "--strip-managed-fields" => strip_managed_fields = true,
            "--cosi" => cosi = Some(value("--cosi")?),
            "--cosi-grpc" => grpc_socket = Some(std::path::PathBuf::from(value("--cosi-grpc")?)),
            "--cosi-grpc-driver" => grpc_driver = Some(value("--cosi-grpc-driver")?),
            "--obc-namespace" => obc_namespace = value("--obc-namespace")?,
            "--warnings-only" => warnings_only = true,
            "-h" | "--help" => {
                println!(
                    "KUBECONFIG=... bench-controller --metrics-addr ADDR [--concurrency N] [--provisioner NAME] [--caches-only [--strip-managed-fields]] [--cosi DRIVER] [--cosi-grpc SOCKET --cosi-grpc-driver NAME] [--obc-namespace NS] [--warnings-only]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    let cosi_grpc = match (grpc_socket, grpc_driver) {
        (Some(socket), Some(driver)) => Some((socket, driver)),
        (None, None) => None,
        _ => bail!("--cosi-grpc and --cosi-grpc-driver go together"),
    };
    Ok(Args {
        metrics_addr: metrics_addr.context("--metrics-addr is required")?,
        concurrency,
        provisioner,
        caches_only,
        strip_managed_fields,
        cosi,
        cosi_grpc,
        obc_namespace,
        warnings_only,
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .init();

    let args = parse_args()?;
    let client = kube::Client::try_default()
        .await
        .context("building a client from KUBECONFIG")?;
    if args.caches_only {
        return caches_only(client, &args).await;
    }
    let noop = Arc::new(Noop::default());
    tracing::info!(
        concurrency = args.concurrency,
        metrics = %args.metrics_addr,
        provisioner = %args.provisioner,
        "bench-controller starting"
    );
    let mut builder = ControllerBuilder::new(args.provisioner.clone(), Shared(noop.clone()))
        .concurrency(args.concurrency)
        .serve_on(args.metrics_addr);
    if args.warnings_only {
        builder = builder.events(lib_provisioner::EventLevel::WarningsOnly);
    }
    if args.cosi.is_some() || args.cosi_grpc.is_some() {
        // COSI only: the OBC claims of the earlier phases stay unwatched.
        builder = builder.namespaces([args.obc_namespace.clone()]);
    }
    if let Some(driver) = &args.cosi {
        let options = lib_provisioner::cosi::CosiOptions::new(driver.clone())?;
        builder = builder.cosi(options);
    }
    let controller = builder.run(client, shutdown_signal());
    let result = match args.cosi_grpc {
        None => controller.await.map_err(anyhow::Error::from),
        Some((socket, driver)) => {
            use lib_provisioner::cosi::grpc::{CosiDriver, Protocol};
            let grpc = CosiDriver::new(Shared(noop.clone()), driver, [Protocol::S3])?
                .serve_with_shutdown(socket, shutdown_signal());
            tokio::select! {
                r = controller => r.map_err(anyhow::Error::from),
                r = grpc => r.map_err(anyhow::Error::from),
            }
        }
    };
    tracing::info!(
        provision = noop.provision.load(Ordering::Relaxed),
        grant = noop.grant.load(Ordering::Relaxed),
        delete = noop.delete.load(Ordering::Relaxed),
        revoke = noop.revoke.load(Ordering::Relaxed),
        "bench-controller stopped; provisioner calls"
    );
    result.context("controller failed")
}

/// Watches and caches shaped like the library's, and nothing else (see the
/// module docs). They list one after another, and the process's resident
/// memory is read after each, so that `/metrics` can say what each cache
/// costs (`bench_cache_rss_bytes{cache}`, `bench_cache_objects{cache}`).
/// Serves `/readyz` (200 once every cache has listed).
async fn caches_only(client: kube::Client, args: &Args) -> Result<()> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::Api;
    use kube::core::PartialObjectMeta;
    use kube::runtime::watcher;
    use lib_provisioner::api::{ObjectBucket, ObjectBucketClaim, PROVISIONER_LABEL};
    use lib_provisioner::obc::Compact;

    let strip = args.strip_managed_fields;
    let wc = watcher::Config::default().any_semantic();
    let label = lib_provisioner::names::provisioner_label_value(&args.provisioner);
    let child_wc = wc.clone().labels(&format!("{PROVISIONER_LABEL}={label}"));
    let metrics = Arc::new(std::sync::Mutex::new(String::new()));
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let serving = serve_probe(args.metrics_addr, ready.clone(), metrics.clone());
    let filling = async {
        let mut feeds = Vec::new();
        // StorageClasses first: the client's first list (connection, TLS)
        // is not counted against the claims.
        let (_classes, feed) = probe_cache(
            Api::<StorageClass>::all(client.clone()),
            wc.clone(),
            strip,
            |k| k,
        )
        .await;
        feeds.push(feed);
        let record = |name: &str, objects: usize, before: u64| {
            let after = rss();
            let mut m = metrics.lock().unwrap_or_else(|p| p.into_inner());
            m.push_str(&format!(
                "bench_cache_rss_bytes{{cache=\"{name}\"}} {}\nbench_cache_objects{{cache=\"{name}\"}} {objects}\n",
                after.saturating_sub(before)
            ));
            tracing::info!(
                cache = name,
                objects,
                rss_delta = after.saturating_sub(before),
                "cache listed"
            );
        };
        // Each cache listed on its own, its resident memory read around it.
        macro_rules! listed {
            ($name:expr, $api:expr, $wc:expr, $keep:expr) => {{
                let before = rss();
                let (store, feed) = probe_cache($api, $wc, strip, $keep).await;
                record($name, store.state().len(), before);
                feeds.push(feed);
            }};
        }
        let claims = Api::<ObjectBucketClaim>::all(client.clone());
        let buckets = Api::<ObjectBucket>::all(client.clone());
        // Claims and ObjectBuckets as the library keeps them (stripped,
        // label and annotation maps compacted), or as decoded.
        if strip {
            listed!("claims", claims, wc.clone(), Compact::from);
            listed!("objectbuckets", buckets, wc.clone(), Compact::from);
        } else {
            listed!("claims", claims, wc.clone(), |k| k);
            listed!("objectbuckets", buckets, wc.clone(), |k| k);
        }
        let secrets = Api::<PartialObjectMeta<Secret>>::all(client.clone());
        let config_maps = Api::<PartialObjectMeta<ConfigMap>>::all(client.clone());
        // The children as the library keeps them (stripped), or as
        // `PartialObjectMeta` with their managedFields (not stripped).
        // The children as the library keeps them: `CachedChild` in its
        // own `ChildCache`.
        macro_rules! listed_children {
            ($name:expr, $api:expr) => {{
                let before = rss();
                let (cache, feed) = probe_child_cache($api, child_wc.clone(), &label).await;
                record($name, cache.len(), before);
                feeds.push(feed);
            }};
        }
        if strip {
            listed_children!("secrets", secrets);
            listed_children!("configmaps", config_maps);
        } else {
            listed!("secrets", secrets, child_wc.clone(), |k| k);
            listed!("configmaps", config_maps, child_wc.clone(), |k| k);
        }
        tracing::info!(strip, "caches are synced");
        ready.store(true, Ordering::Relaxed);
        futures::stream::select_all(feeds)
            .for_each(|()| async {})
            .await;
    };
    tokio::select! {
        () = filling => bail!("the watches ended"),
        () = serving => Ok(()),
        () = shutdown_signal() => Ok(()),
    }
}

/// One cache of `K` as `C` (the object, or what the library keeps of it),
/// listed: its store, and the feed that keeps it current (polled by the
/// caller from then on).
async fn probe_cache<K, C>(
    api: kube::Api<K>,
    wc: kube::runtime::watcher::Config,
    strip: bool,
    keep: fn(K) -> C,
) -> (
    kube::runtime::reflector::Store<C>,
    futures::stream::BoxStream<'static, ()>,
)
where
    K: lib_provisioner::obc::Watchable,
    C: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    use futures::{StreamExt, TryStreamExt};
    use kube::runtime::reflector;
    use kube::runtime::{WatchStreamExt, watcher};
    let (store, writer) = reflector::store();
    let mut feed = reflector::reflector(
        writer,
        watcher(api, wc)
            .modify(move |k: &mut K| {
                if strip {
                    k.meta_mut().managed_fields = None;
                }
            })
            .map_ok(move |e| kept(e, keep)),
    )
    .default_backoff()
    .map(|_| ())
    .boxed();
    let reader = store.clone();
    // Drive the feed until its first list is in the store.
    tokio::select! {
        _ = reader.wait_until_ready() => {}
        () = async { while feed.next().await.is_some() {} } => {}
    }
    (store, feed)
}

/// One child cache of `K` as the library keeps it, listed: the cache, and
/// the feed that keeps it current (polled by the caller from then on).
async fn probe_child_cache<K>(
    api: kube::Api<kube::core::PartialObjectMeta<K>>,
    wc: kube::runtime::watcher::Config,
    label: &str,
) -> (
    lib_provisioner::obc::ChildCache<K>,
    futures::stream::BoxStream<'static, ()>,
)
where
    K: lib_provisioner::obc::Watchable,
{
    use futures::{StreamExt, TryStreamExt};
    use kube::runtime::{WatchStreamExt, watcher};
    use lib_provisioner::obc::{CachedChild, ChildCache, ChildWatch};
    let watch: ChildWatch<K> = watcher(api, wc)
        .modify(|k| k.metadata.managed_fields = None)
        .default_backoff()
        .map_ok(|e| kept(e, CachedChild::from))
        .boxed();
    let (cache, feed) = ChildCache::filled_by(vec![(None, watch)], label);
    let mut feed = feed.map(|_| ()).boxed();
    tokio::select! {
        () = cache.wait_until_ready() => {}
        () = async { while feed.next().await.is_some() {} } => {}
    }
    (cache, feed)
}

/// A watch event with its object(s) as the cache keeps them.
fn kept<A, B>(
    event: kube::runtime::watcher::Event<A>,
    keep: fn(A) -> B,
) -> kube::runtime::watcher::Event<B> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(keep(o)),
        Event::Delete(o) => Event::Delete(keep(o)),
        Event::InitApply(o) => Event::InitApply(keep(o)),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// This process's resident memory, bytes (0 if unknown).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// `/readyz` (503 until `ready`) and `/metrics` (`metrics`'s text).
async fn serve_probe(
    addr: SocketAddr,
    ready: Arc<std::sync::atomic::AtomicBool>,
    metrics: Arc<std::sync::Mutex<String>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(listener) = tokio::net::TcpListener::bind(addr).await else {
        tracing::error!(%addr, "could not bind");
        return;
    };
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let ready = ready.load(Ordering::Relaxed);
        let body = metrics.lock().map(|m| m.clone()).unwrap_or_default();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = conn.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let (status, body) = if request.starts_with("GET /readyz") {
                (
                    if ready {
                        "200 OK"
                    } else {
                        "503 Service Unavailable"
                    },
                    String::new(),
                )
            } else {
                ("200 OK", body)
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
        });
    }
}
