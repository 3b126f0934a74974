//! The node's processes, in start order: etcd, kube-apiserver (advertising
//! the bridge address, so Pods reach it through the `kubernetes` Service),
//! kube-controller-manager (all default controllers) and kube-scheduler,
//! containerd, the kubelet, and kube-proxy (nftables mode). Fixed ports,
//! all below the kernel's ephemeral range, so they never meet the loopback
//! test environment's (which binds port 0 and gets one from that range).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::super::process::Proc;
use super::NODE_NAME;
use super::NodeBinaries;
use super::certs::PkiFiles;
use super::configs::{CONTAINERD_SOCKET, Kubeconfigs, apiserver_url};
use super::host::output;
use super::network::{BRIDGE_ADDRESS, SERVICE_CIDR};

/// etcd's client port (127.0.0.1); its peer port is the next one.
pub const ETCD_PORT: u16 = 12379;
/// kube-apiserver's port, on the bridge address.
pub const APISERVER_PORT: u16 = 16443;
const CONTROLLER_MANAGER_PORT: u16 = 10257;
const SCHEDULER_PORT: u16 = 10259;

const READY_TIMEOUT: Duration = Duration::from_secs(90);

fn arg(flag: &str, value: impl std::fmt::Display) -> OsString {
    format!("--{flag}={value}").into()
}

fn path_arg(flag: &str, p: &Path) -> OsString {
    arg(flag, p.display())
}

pub(super) async fn start_etcd(
    bins: &NodeBinaries,
    root: &Path,
    http: &reqwest::Client,
) -> Result<Proc> {
    let client = format!("http://127.0.0.1:{ETCD_PORT}");
    let peer = format!("http://127.0.0.1:{}", ETCD_PORT + 1);
    let args = vec![
        "--name=obc-node".into(),
        path_arg("data-dir", &root.join("etcd-data")),
        arg("listen-client-urls", &client),
        arg("advertise-client-urls", &client),
        arg("listen-peer-urls", &peer),
        arg("initial-advertise-peer-urls", &peer),
        arg("initial-cluster", format!("obc-node={peer}")),
        "--unsafe-no-fsync".into(),
        "--log-level=warn".into(),
    ];
    let mut proc = Proc::new("etcd", bins.etcd.clone(), args, root.join("etcd.log"));
    let health = format!("{client}/health");
    proc.spawn_ready(&client, READY_TIMEOUT, || async {
        let body: serde_json::Value = http.get(&health).send().await?.json().await?;
        Ok(body.get("health").and_then(|h| h.as_str()) == Some("true"))
    })
    .await?;
    Ok(proc)
}

pub(super) async fn start_apiserver(
    bins: &NodeBinaries,
    root: &Path,
    pki: &PkiFiles,
    http: &reqwest::Client,
) -> Result<Proc> {
    let args = vec![
        arg("etcd-servers", format!("http://127.0.0.1:{ETCD_PORT}")),
        arg("bind-address", BRIDGE_ADDRESS),
        arg("secure-port", APISERVER_PORT),
        arg("advertise-address", BRIDGE_ADDRESS),
        arg("service-cluster-ip-range", SERVICE_CIDR),
        path_arg("tls-cert-file", &pki.path("apiserver.crt")),
        path_arg("tls-private-key-file", &pki.path("apiserver.key")),
        path_arg("client-ca-file", &pki.path("ca.crt")),
        path_arg("cert-dir", &root.join("apiserver-cert-dir")),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        path_arg("service-account-key-file", &pki.path("sa.pub")),
        path_arg("service-account-signing-key-file", &pki.path("sa.key")),
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        path_arg(
            "kubelet-client-certificate",
            &pki.path("apiserver-kubelet-client.crt"),
        ),
        path_arg(
            "kubelet-client-key",
            &pki.path("apiserver-kubelet-client.key"),
        ),
        path_arg("kubelet-certificate-authority", &pki.path("ca.crt")),
        "--kubelet-preferred-address-types=InternalIP".into(),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
    ];
    let mut proc = Proc::new(
        "kube-apiserver",
        bins.apiserver.clone(),
        args,
        root.join("kube-apiserver.log"),
    );
    // /readyz is open to anonymous requests (system:public-info-viewer).
    let readyz = format!("{}/readyz", apiserver_url());
    proc.spawn_ready(&apiserver_url(), READY_TIMEOUT, || async {
        Ok(http.get(&readyz).send().await?.status() == reqwest::StatusCode::OK)
    })
    .await?;
    Ok(proc)
}

/// kube-controller-manager (every default controller, ServiceAccount
/// credentials per controller) and kube-scheduler; neither is waited for
/// here (the Node's start waits for what they make).
pub(super) fn start_controllers(
    bins: &NodeBinaries,
    root: &Path,
    pki: &PkiFiles,
    kubeconfigs: &Kubeconfigs,
) -> Result<(Proc, Proc)> {
    let kcm = &kubeconfigs.controller_manager;
    let mut controller_manager = Proc::new(
        "kube-controller-manager",
        bins.controller_manager.clone(),
        vec![
            path_arg("kubeconfig", kcm),
            path_arg("authentication-kubeconfig", kcm),
            path_arg("authorization-kubeconfig", kcm),
            path_arg("service-account-private-key-file", &pki.path("sa.key")),
            path_arg("root-ca-file", &pki.path("ca.crt")),
            "--use-service-account-credentials=true".into(),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            arg("secure-port", CONTROLLER_MANAGER_PORT),
            "--controllers=*".into(),
        ],
        root.join("kube-controller-manager.log"),
    );
    controller_manager.spawn()?;
    let sched = &kubeconfigs.scheduler;
    let mut scheduler = Proc::new(
        "kube-scheduler",
        bins.scheduler.clone(),
        vec![
            path_arg("kubeconfig", sched),
            path_arg("authentication-kubeconfig", sched),
            path_arg("authorization-kubeconfig", sched),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            arg("secure-port", SCHEDULER_PORT),
        ],
        root.join("kube-scheduler.log"),
    );
    scheduler.spawn()?;
    Ok((controller_manager, scheduler))
}

/// containerd, with its shim's directory first on PATH; ready when `ctr`
/// gets an answer on its socket.
pub(super) async fn start_containerd(
    bins: &NodeBinaries,
    root: &Path,
    config: &Path,
) -> Result<Proc> {
    let mut proc = Proc::new(
        "containerd",
        bins.containerd(),
        vec![path_arg("config", config)],
        root.join("containerd.log"),
    );
    let path = std::env::var("PATH").unwrap_or_default();
    proc.envs.push((
        "PATH".into(),
        format!("{}:{path}", bins.containerd_dir.display()).into(),
    ));
    let ctr = bins.ctr().to_string_lossy().into_owned();
    proc.spawn_ready(CONTAINERD_SOCKET, READY_TIMEOUT, || async {
        Ok(Path::new(CONTAINERD_SOCKET).exists()
            && output(&ctr, &["--address", CONTAINERD_SOCKET, "version"]).is_ok())
    })
    .await?;
    Ok(proc)
}

/// The kubelet; the caller waits for its Node.
pub(super) fn start_kubelet(
    bins: &NodeBinaries,
    root: &Path,
    config: &Path,
    kubeconfig: &Path,
) -> Result<Proc> {
    let mut proc = Proc::new(
        "kubelet",
        bins.kubelet.clone(),
        vec![
            path_arg("config", config),
            path_arg("kubeconfig", kubeconfig),
            arg("hostname-override", NODE_NAME),
            arg("node-ip", BRIDGE_ADDRESS),
        ],
        root.join("kubelet.log"),
    );
    // The kubelet runs iptables/nft/mount helpers: the standard PATH.
    proc.spawn()?;
    Ok(proc)
}

/// kube-proxy; started once the Node exists (started earlier, it waits
/// 30 s for it, then exits when it appears).
pub(super) fn start_kube_proxy(bins: &NodeBinaries, root: &Path, config: &Path) -> Result<Proc> {
    let mut proc = Proc::new(
        "kube-proxy",
        bins.kube_proxy.clone(),
        vec![path_arg("config", config)],
        root.join("kube-proxy.log"),
    );
    proc.spawn()?;
    Ok(proc)
}
