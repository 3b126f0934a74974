//! The node's PKI (rcgen, ECDSA P-256), made afresh per run: one CA, the
//! apiserver's and the kubelet's serving certificates, a client certificate
//! per component, and the ServiceAccount signing key. Written into
//! `<dir>/pki/`, readable by root only.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};

use super::super::certs::write_private;
use super::NODE_NAME;
use super::network::{BRIDGE_ADDRESS, KUBERNETES_SERVICE_IP};

/// A certificate and its key, PEM.
pub(super) struct Pair {
    pub(super) cert: String,
    pub(super) key: String,
}

/// Every credential of the node's cluster.
pub(super) struct NodePki {
    pub(super) ca: Pair,
    pub(super) apiserver: Pair,
    pub(super) kubelet_serving: Pair,
    /// The apiserver's client certificate towards kubelets (logs, exec).
    pub(super) apiserver_kubelet_client: Pair,
    pub(super) admin: Pair,
    pub(super) controller_manager: Pair,
    pub(super) scheduler: Pair,
    pub(super) kube_proxy: Pair,
    /// `system:node:<name>` in `system:nodes`: the Node authorizer and
    /// NodeRestriction admit it.
    pub(super) kubelet: Pair,
    pub(super) sa_private: String,
    pub(super) sa_public: String,
}

fn ca_params() -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "obc-node CA");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// A leaf certificate for `cn` in groups `orgs`, valid for `sans` (server)
/// or as a client.
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    cn: &str,
    orgs: &[&str],
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<Pair> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    for org in orgs {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer)?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

pub(super) fn generate() -> Result<NodePki> {
    use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let ca_params = ca_params()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca = Pair {
        cert: ca_cert.pem(),
        key: ca_key.serialize_pem(),
    };
    let issuer = Issuer::new(ca_params, ca_key);
    let client = |cn: &str, orgs: &[&str]| leaf(&issuer, cn, orgs, &[], ClientAuth);
    // 10.96.0.1 is what Pods connect to (the `kubernetes` Service).
    let apiserver_sans = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
        KUBERNETES_SERVICE_IP,
        BRIDGE_ADDRESS,
        "127.0.0.1",
    ];
    let sa = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    Ok(NodePki {
        apiserver: leaf(&issuer, "kube-apiserver", &[], &apiserver_sans, ServerAuth)?,
        kubelet_serving: leaf(
            &issuer,
            NODE_NAME,
            &[],
            &[BRIDGE_ADDRESS, NODE_NAME],
            ServerAuth,
        )?,
        apiserver_kubelet_client: client("kube-apiserver-kubelet-client", &["system:masters"])?,
        admin: client("admin", &["system:masters"])?,
        controller_manager: client("system:kube-controller-manager", &[])?,
        scheduler: client("system:kube-scheduler", &[])?,
        kube_proxy: client("system:kube-proxy", &[])?,
        kubelet: client(&format!("system:node:{NODE_NAME}"), &["system:nodes"])?,
        sa_private: sa.serialize_pem(),
        sa_public: sa.public_key_pem(),
        ca,
    })
}

/// Paths of the files [`write`] made.
pub(super) struct PkiFiles {
    pub(super) dir: PathBuf,
}

impl PkiFiles {
    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Writes the files the processes read: `ca.crt`, `<name>.crt`/`.key`
/// for the apiserver, the kubelet's serving pair and the apiserver's kubelet
/// client, and `sa.key`/`sa.pub`.
pub(super) fn write(pki: &NodePki, root: &Path) -> Result<PkiFiles> {
    let dir = root.join("pki");
    std::fs::create_dir_all(&dir)?;
    let pair = |name: &str, p: &Pair| -> Result<()> {
        write_private(&dir.join(format!("{name}.crt")), p.cert.as_bytes())?;
        write_private(&dir.join(format!("{name}.key")), p.key.as_bytes())
    };
    write_private(&dir.join("ca.crt"), pki.ca.cert.as_bytes())?;
    pair("apiserver", &pki.apiserver)?;
    pair("kubelet-serving", &pki.kubelet_serving)?;
    pair("apiserver-kubelet-client", &pki.apiserver_kubelet_client)?;
    write_private(&dir.join("sa.key"), pki.sa_private.as_bytes())?;
    write_private(&dir.join("sa.pub"), pki.sa_public.as_bytes())?;
    Ok(PkiFiles { dir })
}
