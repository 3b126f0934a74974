//! Who talks to the apiserver: kubeconfigs for the admin, for
//! ServiceAccounts (tokens from the TokenRequest API) and for users (client
//! certificates from the environment's CA); all but the admin can do only
//! what RBAC grants them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::certs::{client_certificate, write_private};
use super::{SERVICE_ACCOUNT_ISSUER, TestEnv, is_kube_status};

impl TestEnv {
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

    /// Writes `<dir>/user-<user>.kubeconfig` authenticating as the user `user`
    /// (in no group but `system:authenticated`) with a client certificate
    /// from the environment's CA, default namespace `namespace`: what a
    /// cluster's people (tenants) use, as opposed to ServiceAccounts.
    pub fn user_kubeconfig(&self, user: &str, namespace: &str) -> Result<PathBuf> {
        let (cert, key) = client_certificate(&self.ca_key_pem, user)
            .with_context(|| format!("a client certificate for {user}"))?;
        let path = self.dir().join(format!("user-{user}.kubeconfig"));
        let credentials = serde_json::json!({
            "client-certificate-data": serde_json::to_value(ByteString(cert.into_bytes()))?,
            "client-key-data": serde_json::to_value(ByteString(key.into_bytes()))?,
        });
        write_kubeconfig_for(
            &path,
            &self.apiserver_url(),
            &self.ca_pem,
            user,
            credentials,
            namespace,
        )?;
        Ok(path)
    }

    /// A client authenticating as the user `user` (see
    /// [`Self::user_kubeconfig`]). It can do only what RBAC grants it.
    pub async fn user_client(&self, user: &str, namespace: &str) -> Result<Client> {
        client_from_kubeconfig(&self.user_kubeconfig(user, namespace)?).await
    }
}

pub(super) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    token: &str,
    namespace: &str,
) -> Result<()> {
    let credentials = serde_json::json!({ "token": token });
    write_kubeconfig_for(path, server, ca_pem, user, credentials, namespace)
}

/// A kubeconfig whose user authenticates with `credentials` (the `user`
/// stanza of a kubeconfig: a token, or a client certificate and key).
pub(super) fn write_kubeconfig_for(
    path: &Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    credentials: serde_json::Value,
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
        "users": [{ "name": user, "user": credentials }],
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
