//! The sample provisioner as a cluster runs it: its image (from
//! `scripts/build-image`) imported into a real node ([`Node`]), the chart
//! `charts/sample-provisioner` installed with Helm, RustFS on the node's
//! bridge address (where Pods reach it), and the application of
//! `scripts/build-app-image` run in a Pod with `envFrom` a claim's
//! ConfigMap and Secret. `tests/tests/node/chart.rs`, `tests/tests/node/operations.rs`
//! and `scripts/demo --node` share it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::Client;
use kube::api::{Api, ListParams, LogParams, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaim};

use crate::recording::wait_phase;
use crate::reliability::register_secret;
use crate::rustfs::RustFs;
use crate::setup::{create_admin_secret, repo_file};
use crate::testenv::node::{Node, NodeOptions};
use crate::wait_for;

mod app;
mod cut;
mod helm;
mod images;
mod process;

pub use app::{AppRun, app_pod, run_app};
pub use cut::{CUT_TABLE, Cut};
pub use helm::Helm;
pub use images::{app_archive, image_archive, provisioner_archive, renamed_archive};
pub use process::{ENTRYPOINT, check_locked_down, provisioner_pids};

/// The Helm release and the namespace it is installed in.
pub const RELEASE: &str = "sample-provisioner";
/// The release's namespace (the admin Secret lives there too).
pub const NAMESPACE: &str = "obc-system";
/// The chart, relative to the repository root.
pub const CHART: &str = "charts/sample-provisioner";
/// The Lease the chart's replicas elect a leader with (the provisioner
/// name, `/` replaced).
pub const LEASE: &str = "objectbucket.io-sample-s3";
/// The provisioner image's name on the node (the archive is renamed to it
/// on import: `scripts/build-image` names it as its caller asks).
pub const PROVISIONER_REPOSITORY: &str = "localhost/obc/sample-provisioner";
/// The application image `scripts/build-app-image` builds.
pub const APP_REPOSITORY: &str = "localhost/obc/bucket-app";
/// The workspace version: both images' tag.
pub const TAG: &str = env!("CARGO_PKG_VERSION");
/// Selects the provisioner's Pods.
pub const PROVISIONER_PODS: &str = "app.kubernetes.io/instance=sample-provisioner";

/// The chart's values for this node: the imported image, never pulled; the
/// example StorageClass on RustFS at `endpoint`; 1 s grace periods.
pub fn node_values(endpoint: &str) -> Vec<String> {
    vec![
        format!("image.repository={PROVISIONER_REPOSITORY}"),
        format!("image.tag={TAG}"),
        "image.pullPolicy=Never".into(),
        "exampleStorageClass.enabled=true".into(),
        format!("exampleStorageClass.endpoint={endpoint}"),
        "exampleStorageClass.parameters.forceDelete=true".into(),
        "terminationGracePeriodSeconds=1".into(),
        "logLevel=info".into(),
    ]
}

/// A node with RustFS on its bridge, both images imported and the chart
/// installed; its timings.
pub struct ChartOnNode {
    /// The node (dropping it stops and cleans everything).
    pub node: Node,
    /// RustFS on the bridge address.
    pub store: RustFs,
    /// Helm on the node's apiserver.
    pub helm: Helm,
    /// The cluster admin.
    pub client: Client,
}

/// How long [`start_node`] waits at least for another process's node to
/// finish (longer if `OBC_NODE_LOCK_WAIT` says so).
pub const NODE_TURN_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// [`Node::start`], waiting (up to [`NODE_TURN_TIMEOUT`]) while another
/// process holds the host's node lock: these tests queue rather than fail.
pub async fn start_node() -> Result<Node> {
    let mut options = NodeOptions::from_env();
    options.lock_wait = options.lock_wait.max(NODE_TURN_TIMEOUT);
    Node::start_with(options).await
}

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(name).await?.is_none() {
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(())
}

impl ChartOnNode {
    /// Starts the node (waiting while another process's node runs) and
    /// RustFS on its bridge, imports both images, creates the admin Secret
    /// and installs the chart with [`node_values`] and `extra` values. Does
    /// not wait for the provisioner.
    pub async fn start(extra: &[String]) -> Result<ChartOnNode> {
        let provisioner = provisioner_archive()?;
        let app = app_archive()?;
        let node = start_node().await?;
        let client = node.admin_client();
        let bridge: std::net::IpAddr = node.bridge_address().parse()?;
        let store = RustFs::start_on(node.dir(), bridge).await?;
        let renamed = renamed_archive(
            &provisioner,
            &format!("{PROVISIONER_REPOSITORY}:{TAG}"),
            node.dir(),
        )?;
        node.import_image(&renamed)?;
        node.import_image(&app)?;
        let helm = Helm::new(node.kubeconfig_path())?;
        let (ak, sk) = store.root_credentials();
        register_secret(&sk);
        let mut values = node_values(store.endpoint().trim_end_matches('/'));
        values.extend(extra.iter().cloned());
        // The Secret first, in the chart's namespace, made here.
        ensure_namespace(&client, NAMESPACE).await?;
        create_admin_secret(&client, NAMESPACE, "sample-s3-admin", &ak, &sk).await?;
        helm.install("install", &values)?;
        Ok(ChartOnNode {
            node,
            store,
            helm,
            client,
        })
    }

    /// Stops RustFS and the node, undoing every change to the host; an
    /// error says what could not be undone.
    pub async fn stop(self) -> Result<Duration> {
        self.store.stop().await;
        self.node.shutdown().await
    }

    /// What to read when a step failed: the provisioner Pods' state and
    /// the tail of their logs, and where RustFS's log is.
    pub async fn diagnostics(&self) -> String {
        let pods = self.provisioner_pods().await.unwrap_or_default();
        let states: Vec<String> = pods
            .iter()
            .map(|p| {
                format!(
                    "{} ready={} {}",
                    p.metadata.name.clone().unwrap_or_default(),
                    is_ready(p),
                    serde_json::to_string(
                        &p.status.as_ref().and_then(|s| s.container_statuses.clone())
                    )
                    .unwrap_or_default()
                )
            })
            .collect();
        let logs = self.provisioner_logs().await.unwrap_or_default();
        let tail: Vec<&str> = logs.lines().rev().take(30).collect::<Vec<_>>();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "provisioner Pods: {states:#?}\nlast provisioner log lines:\n{}\nRustFS log: {}",
            tail.join("\n"),
            self.store.log_path().display()
        )
    }

    /// The provisioner's Pods.
    pub async fn provisioner_pods(&self) -> Result<Vec<Pod>> {
        Ok(Api::<Pod>::namespaced(self.client.clone(), NAMESPACE)
            .list(&ListParams::default().labels(PROVISIONER_PODS))
            .await?
            .items)
    }

    /// Waits until `n` provisioner Pods exist, none terminating, all Ready;
    /// returns them.
    pub async fn wait_provisioners_ready(&self, n: usize, timeout: Duration) -> Result<Vec<Pod>> {
        wait_for(timeout, format!("{n} provisioner Pods Ready"), || async {
            let pods = self.provisioner_pods().await?;
            let live: Vec<Pod> = pods
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            Ok((live.len() == n && live.iter().all(is_ready)).then_some(live))
        })
        .await
    }

    /// The Lease's holder (a Pod name), if any.
    pub async fn leader(&self) -> Result<Option<String>> {
        let lease = Api::<Lease>::namespaced(self.client.clone(), NAMESPACE)
            .get_opt(LEASE)
            .await?;
        Ok(lease.and_then(|l| l.spec?.holder_identity))
    }

    /// Every log of every provisioner Pod (the current and the previous
    /// container), as `kubectl logs` gets them through the kubelet.
    pub async fn provisioner_logs(&self) -> Result<String> {
        let pods = Api::<Pod>::namespaced(self.client.clone(), NAMESPACE);
        let mut all = String::new();
        for pod in self.provisioner_pods().await? {
            let name = pod.metadata.name.clone().unwrap_or_default();
            for previous in [true, false] {
                let params = LogParams {
                    previous,
                    ..LogParams::default()
                };
                if let Ok(text) = pods.logs(&name, &params).await {
                    all.push_str(&text);
                }
            }
        }
        Ok(all)
    }
}

/// Whether the Pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates the example claim (`deploy/example-claim.yaml`) as `ns/name`;
/// waits until Bound; returns how long that took.
pub async fn claim_bound(client: &Client, ns: &str, name: &str) -> Result<Duration> {
    let mut claim: ObjectBucketClaim =
        serde_yaml::from_str(&repo_file("deploy/example-claim.yaml")?)?;
    claim.metadata.namespace = Some(ns.to_owned());
    claim.metadata.name = Some(name.to_owned());
    let started = Instant::now();
    Api::<ObjectBucketClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .with_context(|| format!("creating claim {ns}/{name}"))?;
    wait_phase(client, ns, name, ClaimPhase::Bound, Duration::from_secs(90)).await?;
    Ok(started.elapsed())
}

/// The claim's bucket (its ConfigMap's `BUCKET_NAME`), and registers its
/// Secret's secret key for the log checks.
pub async fn claim_bucket(client: &Client, ns: &str, name: &str) -> Result<String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    let sk = secret
        .data
        .unwrap_or_default()
        .get("AWS_SECRET_ACCESS_KEY")
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .context("the claim's Secret has no AWS_SECRET_ACCESS_KEY")?;
    register_secret(&sk);
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    cm.data
        .unwrap_or_default()
        .get("BUCKET_NAME")
        .cloned()
        .context("the claim's ConfigMap has no BUCKET_NAME")
}

/// Whether RustFS still has `bucket` (asked as its root).
pub async fn bucket_exists(store: &RustFs, bucket: &str) -> bool {
    store
        .root_client()
        .head_bucket()
        .bucket(bucket)
        .send()
        .await
        .is_ok()
}
