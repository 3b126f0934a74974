//! kube-apiserver: TLS with the environment's CA, RBAC, a static admin token,
//! service-account tokens, users' client certificates and an audit log of what ServiceAccounts do; its
//! bootstrap, and restarts over the same etcd.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;

use super::certs::{Pki, write_private};
use super::controller_manager::token_file_line;
use super::process::{Proc, free_port, with_port_retries};
use super::{ADMIN_USER, AUDIT_LOG, SERVICE_ACCOUNT_ISSUER, TestEnv, wait_for};

const APISERVER_TIMEOUT: Duration = Duration::from_secs(90);

const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(60);

impl TestEnv {
    /// Waits until the apiserver's own bootstrap objects exist: the `default`
    /// namespace and the RBAC default cluster roles.
    pub(super) async fn wait_for_bootstrap(&self) -> Result<()> {
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

    /// Kills kube-apiserver and starts it again with the same port, flags and etcd
    /// (so all objects survive); waits until `/readyz` is 200. Existing clients keep
    /// working once it is back.
    pub async fn restart_apiserver(&self) -> Result<()> {
        self.stop_apiserver().await;
        self.start_stopped_apiserver().await
    }

    /// Kills kube-apiserver (etcd keeps running): an outage, until
    /// [`TestEnv::start_stopped_apiserver`].
    pub async fn stop_apiserver(&self) {
        self.apiserver.lock().await.stop().await;
        tracing::info!("kube-apiserver stopped");
    }

    /// Starts kube-apiserver again after [`TestEnv::stop_apiserver`], with the
    /// same port, flags and etcd; waits until `/readyz` is 200.
    pub async fn start_stopped_apiserver(&self) -> Result<()> {
        let mut apiserver = self.apiserver.lock().await;
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
}

async fn probe_readyz(http: &reqwest::Client, url: &str, token: &str) -> Result<bool> {
    let response = http
        .get(format!("{url}/readyz"))
        .bearer_auth(token)
        .send()
        .await?;
    Ok(response.status() == reqwest::StatusCode::OK)
}

pub(super) async fn start_apiserver(
    bin: &Path,
    root: &Path,
    pki: &Pki,
    admin_token: &str,
    controller_manager_token: &str,
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
        format!(
            "{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n{}",
            token_file_line(controller_manager_token)
        )
        .as_bytes(),
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
            // Users (tenants in the tests) authenticate with client
            // certificates the environment's CA signs (`identities.rs`).
            path_arg("client-ca-file", &file("ca.crt")),
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
        let url = format!("https://127.0.0.1:{port}");
        let took = proc
            .spawn_ready(&url, APISERVER_TIMEOUT, || {
                probe_readyz(http, &url, admin_token)
            })
            .await?;
        Ok((proc, port, took))
    })
    .await
}
