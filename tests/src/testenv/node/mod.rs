//! A real single-node Kubernetes cluster on this host, for tests that need
//! Pods: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
//! containerd + runc, the kubelet and kube-proxy as plain processes (no
//! container engine), Pods on a bridge of their own. See `docs/node.md`
//! and `/work/shared/NODE.md` for why each setting is what it is.
//!
//! [`Node::start`] needs root and the programs `scripts/install-testenv`
//! builds. It changes the host (a bridge, nft tables, mounts, cgroups,
//! /var/lib/kubelet and friends) and undoes all of it on
//! [`Node::shutdown`] or drop, also while a test panics; a run that crashed
//! is cleaned up by the next start. One node at a time per host
//! ([`NodeLock`]); tests of one process queue for it.
//!
//! One concept a file: `network.rs` (bridge, guard table, CNI config),
//! `certs.rs`, `configs.rs`, `processes.rs`, `images.rs`, `services.rs`
//! (host servers as Services), `lock.rs`, `state.rs` (the run's record),
//! `cleanup.rs`, `host.rs` (commands, signals), `binaries.rs`,
//! `host_state.rs` (snapshots for the tests).

mod binaries;
mod certs;
mod cleanup;
mod configs;
mod host;
mod host_state;
mod images;
mod lock;
mod network;
mod processes;
mod services;
mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Node as NodeObject, ServiceAccount};
use kube::Client;
use kube::api::Api;
use tokio::sync::{Mutex, OwnedMutexGuard};

pub use binaries::{
    CNI_PLUGINS_DIR, CONTAINERD_DIR, KUBE_PROXY_BINARY, KUBE_SCHEDULER_BINARY, KUBECTL_BINARY,
    KUBELET_BINARY, NodeBinaries, RUNC_BINARY,
};
pub use configs::apiserver_url;
pub use host_state::HostSnapshot;
pub use images::{BUSYBOX_IMAGE, BUSYBOX_PATH, OciImage, PAUSE_IMAGE, busybox_image, pause_image};
pub use lock::{LOCK_PATH, LockError, NodeLock};
pub use network::{
    BRIDGE, BRIDGE_ADDRESS, GUARD_TABLE, KUBERNETES_SERVICE_IP, POD_CIDR, SERVICE_CIDR,
};
pub use processes::{APISERVER_PORT, ETCD_PORT};
pub use state::STATE_PATH;

use super::process::Proc;
use super::{ENV_KEEP_TESTENV, init_tracing, wait_for};
use state::RunState;

/// The Node's name (and the kubelet's serving certificate's).
pub const NODE_NAME: &str = "obc-node";

/// Seconds [`Node::start`] waits for another process's node to finish
/// (default 0: it fails at once, naming the holder).
pub const ENV_NODE_LOCK_WAIT: &str = "OBC_NODE_LOCK_WAIT";

/// The start of every node run's directory name, under the temporary directory.
const NODE_DIR_PREFIX: &str = "/obc-node-";

const NODE_TIMEOUT: Duration = Duration::from_secs(60);

/// Tests of one process take turns: the second waits here instead of
/// failing on the host-wide [`NodeLock`].
static TURN: LazyLock<Arc<Mutex<()>>> = LazyLock::new(|| Arc::new(Mutex::new(())));

/// How [`Node::start`] runs.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Keep the run's directory (logs, configs, certificates) after the
    /// cleanup; default: `OBC_KEEP_TESTENV=1`.
    pub keep_dir: bool,
    /// How long to wait for another process's node to finish before
    /// failing with [`LockError::Held`]; default: `OBC_NODE_LOCK_WAIT`
    /// seconds, else zero.
    pub lock_wait: Duration,
}

impl NodeOptions {
    /// The defaults, with `keep_dir` from `OBC_KEEP_TESTENV`.
    pub fn from_env() -> NodeOptions {
        let lock_wait = std::env::var(ENV_NODE_LOCK_WAIT)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        NodeOptions {
            keep_dir: std::env::var_os(ENV_KEEP_TESTENV).is_some_and(|v| v == "1"),
            lock_wait: Duration::from_secs(lock_wait),
        }
    }
}

/// How long the parts of [`Node::start`] took.
#[derive(Debug, Clone, Default)]
pub struct NodeTimings {
    /// Waiting for this process's other nodes and another process's node
    /// (not part of `total`).
    pub lock_wait: Duration,
    /// Cleaning up what a crashed run left (zero when there was nothing).
    pub stale_cleanup: Duration,
    /// Bridge, route, guard table, CNI configuration.
    pub network: Duration,
    /// Certificates, etcd and kube-apiserver ready.
    pub control_plane: Duration,
    /// containerd ready and both images built and imported.
    pub containerd_and_images: Duration,
    /// kubelet start → Node registered.
    pub node_registered: Duration,
    /// Node registered → Ready (kube-proxy started meanwhile).
    pub node_ready: Duration,
    /// Ready → the `default` ServiceAccount and `kube-root-ca.crt` exist
    /// (the controller manager works).
    pub controllers: Duration,
    /// The whole start, from holding the lock on.
    pub total: Duration,
}

#[derive(Default)]
struct Procs {
    kube_proxy: Option<Proc>,
    kubelet: Option<Proc>,
    containerd: Option<Proc>,
    scheduler: Option<Proc>,
    controller_manager: Option<Proc>,
    apiserver: Option<Proc>,
    etcd: Option<Proc>,
}

/// A running single-node cluster; see the module docs.
pub struct Node {
    procs: Procs,
    state: RunState,
    bins: NodeBinaries,
    dir: PathBuf,
    admin_kubeconfig: PathBuf,
    admin: Option<Client>,
    ca_pem: String,
    timings: NodeTimings,
    keep_dir: bool,
    cleaned: bool,
    // Released after the cleanup (fields drop after `Drop::drop`).
    _lock: NodeLock,
    _turn: OwnedMutexGuard<()>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("dir", &self.dir)
            .field("apiserver", &apiserver_url())
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Starts the node with [`NodeOptions::from_env`]: see [`Node::start_with`].
    pub async fn start() -> Result<Node> {
        Self::start_with(NodeOptions::from_env()).await
    }

    /// Cleans up after a crashed earlier run, refuses if the host has node
    /// state no run recorded, then starts everything and waits until the
    /// Node is Ready and the controllers work. On failure, everything
    /// started so far is undone before the error is returned.
    pub async fn start_with(options: NodeOptions) -> Result<Node> {
        init_tracing();
        let bins = NodeBinaries::find()?;
        require_root()?;
        let waiting = Instant::now();
        let turn = TURN.clone().lock_owned().await;
        let lock = NodeLock::acquire_waiting(options.lock_wait).await?;
        let lock_wait = waiting.elapsed();
        let started = Instant::now();

        let stale_started = Instant::now();
        if let Some(old) = RunState::load()? {
            tracing::warn!(
                "a node run (PID {}, {}) did not clean up: cleaning up after it",
                old.pid,
                old.dir.display()
            );
            cleanup::clean_host(&old, false).context("cleaning up after a crashed node run")?;
        }
        let stale_cleanup = stale_started.elapsed();
        let foreign = cleanup::foreign_state();
        if !foreign.is_empty() {
            bail!(
                "the host has node state that no node environment run recorded in {STATE_PATH}, \
                 so it is not this environment's to remove; remove it (or stop what made it) \
                 before starting:\n  {}",
                foreign.join("\n  ")
            );
        }

        let dir = tempfile::Builder::new()
            .prefix(NODE_DIR_PREFIX.trim_start_matches('/'))
            .tempdir()
            .context("creating the node's directory")?
            .keep();
        let state = RunState::new(&dir, bins.node_only())?;
        state.save()?;
        let mut node = Node {
            procs: Procs::default(),
            state,
            admin_kubeconfig: dir.join("admin.kubeconfig"),
            dir,
            bins,
            admin: None,
            ca_pem: String::new(),
            timings: NodeTimings {
                lock_wait,
                stale_cleanup,
                ..Default::default()
            },
            keep_dir: options.keep_dir,
            cleaned: false,
            _lock: lock,
            _turn: turn,
        };
        // On an error, dropping `node` undoes what was done.
        node.boot().await?;
        node.timings.total = started.elapsed();
        tracing::info!(
            "node ready in {:.1?} ({:?}) in {}",
            node.timings.total,
            node.timings,
            node.dir.display()
        );
        Ok(node)
    }

    async fn boot(&mut self) -> Result<()> {
        let root = self.dir.clone();
        let t = Instant::now();
        network::set_up()?;
        self.timings.network = t.elapsed();

        let t = Instant::now();
        let pki = certs::generate().context("generating the node's certificates")?;
        let pki_files = certs::write(&pki, &root)?;
        let kubeconfigs = configs::write_kubeconfigs(&pki, &root)?;
        self.ca_pem = pki.ca.cert.clone();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(pki.ca.cert.as_bytes())?)
            .tls_built_in_root_certs(false)
            .timeout(Duration::from_secs(5))
            .no_proxy()
            .build()?;
        self.procs.etcd = Some(processes::start_etcd(&self.bins, &root, &http).await?);
        self.procs.apiserver =
            Some(processes::start_apiserver(&self.bins, &root, &pki_files, &http).await?);
        let admin = super::client_from_kubeconfig(&kubeconfigs.admin).await?;
        self.admin = Some(admin.clone());
        let (kcm, scheduler) =
            processes::start_controllers(&self.bins, &root, &pki_files, &kubeconfigs)?;
        self.procs.controller_manager = Some(kcm);
        self.procs.scheduler = Some(scheduler);
        self.timings.control_plane = t.elapsed();

        let t = Instant::now();
        let containerd_toml = configs::write_config(
            &root,
            "containerd.toml",
            &configs::containerd_toml(&self.bins),
        )?;
        self.procs.containerd =
            Some(processes::start_containerd(&self.bins, &root, &containerd_toml).await?);
        let images = root.join("images");
        std::fs::create_dir_all(&images)?;
        let pause = pause_image(&images)?.write_archive(&images.join("pause.tar"))?;
        self.import_image(&pause)?;
        let busybox = busybox_image(BUSYBOX_IMAGE)?.write_archive(&images.join("busybox.tar"))?;
        self.import_image(&busybox)?;
        self.timings.containerd_and_images = t.elapsed();

        let resolv_conf = configs::write_config(&root, "resolv.conf", "")?;
        let kubelet_yaml = configs::write_config(
            &root,
            "kubelet.yaml",
            &configs::kubelet_yaml(&pki_files, &resolv_conf),
        )?;
        let t = Instant::now();
        self.procs.kubelet = Some(processes::start_kubelet(
            &self.bins,
            &root,
            &kubelet_yaml,
            &kubeconfigs.kubelet,
        )?);
        let nodes: Api<NodeObject> = Api::all(admin.clone());
        wait_for(NODE_TIMEOUT, "the kubelet to register its Node", || async {
            self.ensure_running_sync()?;
            Ok(nodes.get_opt(NODE_NAME).await?.map(|_| ()))
        })
        .await?;
        self.timings.node_registered = t.elapsed();

        let t = Instant::now();
        let proxy_yaml = configs::write_config(
            &root,
            "kube-proxy.yaml",
            &configs::kube_proxy_yaml(&kubeconfigs.kube_proxy),
        )?;
        self.procs.kube_proxy = Some(processes::start_kube_proxy(&self.bins, &root, &proxy_yaml)?);
        wait_for(NODE_TIMEOUT, "the Node to be Ready", || async {
            self.ensure_running_sync()?;
            let node = nodes.get(NODE_NAME).await?;
            Ok(node_ready(&node).then_some(()))
        })
        .await?;
        self.timings.node_ready = t.elapsed();
        // The kubelet set them once at its start; put them back now, so a
        // crash from here on leaves them as they were.
        self.state.restore_sysctls()?;

        let t = Instant::now();
        let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
        let config_maps: Api<ConfigMap> = Api::namespaced(admin, "default");
        wait_for(
            NODE_TIMEOUT,
            "the controller manager to make the default ServiceAccount and kube-root-ca.crt",
            || async {
                self.ensure_running_sync()?;
                let ready = accounts.get_opt("default").await?.is_some()
                    && config_maps.get_opt("kube-root-ca.crt").await?.is_some();
                Ok(ready.then_some(()))
            },
        )
        .await?;
        self.timings.controllers = t.elapsed();
        Ok(())
    }

    /// Fails, with its log tail, if a process of the node has exited.
    fn ensure_running_sync(&self) -> Result<()> {
        // `Proc::ensure_running` needs `&mut`; the checks that call this
        // hold `&self`, so it looks at the PIDs instead.
        let all = [
            &self.procs.etcd,
            &self.procs.apiserver,
            &self.procs.controller_manager,
            &self.procs.scheduler,
            &self.procs.containerd,
            &self.procs.kubelet,
            &self.procs.kube_proxy,
        ];
        for proc in all.into_iter().flatten() {
            if !proc.pid().is_some_and(host::alive) {
                bail!(
                    "a node process exited; see the logs in {}",
                    self.dir.display()
                );
            }
        }
        Ok(())
    }

    /// Fails, with the log tail, if any process of the node has exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        let procs = &mut self.procs;
        for proc in [
            &mut procs.etcd,
            &mut procs.apiserver,
            &mut procs.controller_manager,
            &mut procs.scheduler,
            &mut procs.containerd,
            &mut procs.kubelet,
            &mut procs.kube_proxy,
        ]
        .into_iter()
        .flatten()
        {
            proc.ensure_running()?;
        }
        Ok(())
    }

    /// A client with the admin's certificate (`system:masters`).
    pub fn admin_client(&self) -> Client {
        // Set in `boot`, before `start_with` returns the node.
        self.admin
            .clone()
            .expect("the admin client exists once the node has started")
    }

    /// The admin kubeconfig (server `https://10.88.0.1:16443`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// PEM of the cluster's CA (the apiserver's and the kubelet's serving certificates).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The run's directory: logs (`<process>.log`), configs, certificates,
    /// kubeconfigs, images.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The programs the node runs.
    pub fn binaries(&self) -> &NodeBinaries {
        &self.bins
    }

    /// The bridge's address: where a host server must listen for Pods to
    /// reach it (see [`Node::expose_host_port`]).
    pub fn bridge_address(&self) -> &'static str {
        BRIDGE_ADDRESS
    }

    /// How long the start took.
    pub fn timings(&self) -> &NodeTimings {
        &self.timings
    }

    /// Loads an OCI archive (e.g. [`OciImage::write_archive`]) into
    /// containerd's `k8s.io` namespace, where the kubelet finds it.
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        let ctr = self.bins.ctr().to_string_lossy().into_owned();
        host::output(
            &ctr,
            &[
                "--address",
                configs::CONTAINERD_SOCKET,
                "-n",
                "k8s.io",
                "images",
                "import",
                &archive.to_string_lossy(),
            ],
        )
        .map(drop)
        .with_context(|| format!("importing {} into containerd", archive.display()))
    }

    /// Runs kubectl with the admin kubeconfig (its discovery cache in the
    /// run's directory, not ~/.kube) and returns its stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let kubectl = self.bins.kubectl.to_string_lossy().into_owned();
        let kubeconfig = format!("--kubeconfig={}", self.admin_kubeconfig.display());
        let cache = format!("--cache-dir={}", self.dir.join("kubectl-cache").display());
        let mut all = vec![kubeconfig.as_str(), cache.as_str()];
        all.extend_from_slice(args);
        host::output(&kubectl, &all)
    }

    /// Stops everything and undoes every change to the host; fails if
    /// something could not be undone (saying what). Dropping the node
    /// does the same and logs such errors instead.
    pub async fn shutdown(mut self) -> Result<Duration> {
        let started = Instant::now();
        blocking(|| self.teardown()).map(|()| started.elapsed())
    }

    fn teardown(&mut self) -> Result<()> {
        if self.cleaned {
            return Ok(());
        }
        self.cleaned = true;
        let t = Instant::now();
        self.delete_workloads();
        let workloads = t.elapsed();
        let t = Instant::now();
        let procs = &mut self.procs;
        // The node's programs stop gracefully (the kubelet and containerd
        // tidy up); the control plane's state is thrown away.
        let graceful = Duration::from_secs(10);
        for (proc, grace) in [
            (&mut procs.kube_proxy, graceful),
            (&mut procs.kubelet, graceful),
            (&mut procs.containerd, graceful),
            (&mut procs.scheduler, Duration::ZERO),
            (&mut procs.controller_manager, Duration::ZERO),
            (&mut procs.apiserver, Duration::ZERO),
            (&mut procs.etcd, Duration::ZERO),
        ] {
            if let Some(mut p) = proc.take() {
                if let Some(pid) = p.pid() {
                    host::terminate(&[pid], grace);
                }
                p.stop_blocking();
            }
        }
        let stop = t.elapsed();
        let t = Instant::now();
        let cleaned = cleanup::clean_host(&self.state, self.keep_dir);
        tracing::info!(
            "node stopped: workloads deleted in {workloads:.1?}, processes stopped in {stop:.1?}, \
             host cleaned in {:.1?}",
            t.elapsed()
        );
        cleaned
    }

    /// Deletes every workload through the API while the kubelet runs, so
    /// that it stops the containers and containerd releases their network
    /// (CNI DEL) the ordinary way; the cleanup catches whatever is left.
    fn delete_workloads(&self) {
        let kubelet_up = self
            .procs
            .kubelet
            .as_ref()
            .and_then(Proc::pid)
            .is_some_and(host::alive);
        let apiserver_up = self
            .procs
            .apiserver
            .as_ref()
            .and_then(Proc::pid)
            .is_some_and(host::alive);
        if !(kubelet_up && apiserver_up) {
            return;
        }
        let deleted = self.kubectl(&[
            "delete",
            "deployments,replicasets,statefulsets,daemonsets,jobs,pods",
            "--all",
            "--all-namespaces",
            "--grace-period=1",
            "--wait=true",
            "--timeout=60s",
            "--request-timeout=10s",
        ]);
        if let Err(e) = deleted {
            tracing::warn!("deleting the workloads before stopping the node: {e:#}");
        }
    }
}

/// Runs blocking `f` (the teardown waits for processes and runs commands):
/// on a multi-threaded runtime's worker, telling it so; elsewhere directly.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn node_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn require_root() -> Result<()> {
    let uid = host::output("id", &["-u"])?;
    if uid.trim() != "0" {
        bail!(
            "the node environment needs root (it creates a bridge, nft tables, mounts and \
             cgroups); this process runs as uid {}",
            uid.trim()
        );
    }
    Ok(())
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Err(e) = blocking(|| self.teardown()) {
            eprintln!("obc-node: {e:#}");
            tracing::error!("{e:#}");
        }
    }
}
