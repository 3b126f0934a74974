//! The node's configuration files: a kubeconfig per component, containerd's
//! TOML, the kubelet's and kube-proxy's YAML, and the empty resolv.conf the
//! Pods get.

use std::path::{Path, PathBuf};

use anyhow::Result;
use k8s_openapi::ByteString;

use super::super::identities::write_kubeconfig_for;
use super::certs::{NodePki, Pair, PkiFiles};
use super::network::{BRIDGE_ADDRESS, POD_CIDR};
use super::{APISERVER_PORT, NODE_NAME, NodeBinaries, PAUSE_IMAGE};
use crate::testenv::node::host::write_file;

/// containerd's root, state and socket: the CRI's well-known places (the
/// kubelet and `ctr` find them there).
pub(super) const CONTAINERD_ROOT: &str = "/var/lib/containerd";
pub(super) const CONTAINERD_STATE: &str = "/run/containerd";
pub(super) const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";

/// `https://<bridge address>:<port>`: what every client of the node's
/// apiserver uses (Pods reach the bridge address too).
pub fn apiserver_url() -> String {
    format!("https://{BRIDGE_ADDRESS}:{APISERVER_PORT}")
}

/// The kubeconfigs written into the node's directory.
pub(super) struct Kubeconfigs {
    pub(super) admin: PathBuf,
    pub(super) controller_manager: PathBuf,
    pub(super) scheduler: PathBuf,
    pub(super) kube_proxy: PathBuf,
    pub(super) kubelet: PathBuf,
}

fn kubeconfig(path: &Path, ca: &str, user: &str, pair: &Pair) -> Result<()> {
    let credentials = serde_json::json!({
        "client-certificate-data": serde_json::to_value(ByteString(pair.cert.clone().into_bytes()))?,
        "client-key-data": serde_json::to_value(ByteString(pair.key.clone().into_bytes()))?,
    });
    write_kubeconfig_for(path, &apiserver_url(), ca, user, credentials, "default")
}

pub(super) fn write_kubeconfigs(pki: &NodePki, root: &Path) -> Result<Kubeconfigs> {
    let ca = &pki.ca.cert;
    let k = Kubeconfigs {
        admin: root.join("admin.kubeconfig"),
        controller_manager: root.join("kube-controller-manager.kubeconfig"),
        scheduler: root.join("kube-scheduler.kubeconfig"),
        kube_proxy: root.join("kube-proxy.kubeconfig"),
        kubelet: root.join("kubelet.kubeconfig"),
    };
    kubeconfig(&k.admin, ca, "admin", &pki.admin)?;
    kubeconfig(
        &k.controller_manager,
        ca,
        "system:kube-controller-manager",
        &pki.controller_manager,
    )?;
    kubeconfig(&k.scheduler, ca, "system:kube-scheduler", &pki.scheduler)?;
    kubeconfig(&k.kube_proxy, ca, "system:kube-proxy", &pki.kube_proxy)?;
    kubeconfig(
        &k.kubelet,
        ca,
        &format!("system:node:{NODE_NAME}"),
        &pki.kubelet,
    )?;
    Ok(k)
}

/// containerd v2.4 (`version = 4`). Opt and NRI are moved or off so that
/// nothing lands in /opt/containerd or /run/nri; `restrict_oom_score_adj`
/// because root here lacks CAP_SYS_RESOURCE (a negative oom_score_adj is
/// refused); the sandbox image is the locally imported pause image.
pub(super) fn containerd_toml(bins: &NodeBinaries) -> String {
    format!(
        r#"version = 4
root = "{CONTAINERD_ROOT}"
state = "{CONTAINERD_STATE}"
[grpc]
  address = "{CONTAINERD_SOCKET}"
[plugins.'io.containerd.internal.v1.opt']
  path = "{CONTAINERD_ROOT}/opt"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni}"]
    conf_dir = "/etc/cni/net.d"
"#,
        runc = bins.runc.display(),
        cni = bins.cni_dir.display(),
    )
}

/// The kubelet on cgroup v1 (this machine's hierarchy) with the cgroupfs
/// driver; serving on the bridge address only, Pods get an empty
/// resolv.conf, no image garbage collection (the images are local only).
pub(super) fn kubelet_yaml(pki: &PkiFiles, resolv_conf: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
containerRuntimeEndpoint: unix://{CONTAINERD_SOCKET}
address: {BRIDGE_ADDRESS}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: {serving_crt}
tlsPrivateKeyFile: {serving_key}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
resolvConf: {resolv}
clusterDomain: cluster.local
makeIPTablesUtilChains: false
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}}
"#,
        serving_crt = pki.path("kubelet-serving.crt").display(),
        serving_key = pki.path("kubelet-serving.key").display(),
        ca = pki.path("ca.crt").display(),
        resolv = resolv_conf.display(),
    )
}

/// kube-proxy in nftables mode; NodePorts on the bridge address only; it
/// leaves the conntrack sysctls alone.
pub(super) fn kube_proxy_yaml(kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: {NODE_NAME}
clientConnection: {{kubeconfig: {kubeconfig}}}
clusterCIDR: {POD_CIDR}
nodePortAddresses: ["{BRIDGE_ADDRESS}/32"]
bindAddress: {BRIDGE_ADDRESS}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"#,
        kubeconfig = kubeconfig.display(),
    )
}

/// Writes `name` into `root`.
pub(super) fn write_config(root: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = root.join(name);
    write_file(&path, contents)?;
    Ok(path)
}
