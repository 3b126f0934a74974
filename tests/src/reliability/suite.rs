//! The sample provisioner against RustFS (S3 and the MinIO admin API), as
//! the crash-point suites of its own admin calls run it ([`SampleSuite`]),
//! and what they read back of a claim ([`claim_keys`], [`claim_bucket`]).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use sample_provisioner::admin::AdminClient;

use super::SYSTEM_NAMESPACE;
use super::logs::{assert_no_leaks, register_secret};
use super::process::Launch;
use super::sample::install_sample;
use super::summary::Summary;
use crate::rustfs::RustFs;
use crate::setup::{create_admin_secret, create_class};
use crate::testenv::TestEnv;

/// Name of the admin Secret (in [`SYSTEM_NAMESPACE`]) holding RustFS's root
/// key pair, which the classes of a [`SampleSuite`] name.
pub const RUSTFS_ADMIN_SECRET: &str = "rustfs-admin";

/// A test environment with the sample installed ([`install_sample`]), RustFS
/// beside it, classes on RustFS, and a launch of one provisioner process.
pub struct SampleSuite {
    /// The environment.
    pub env: TestEnv,
    /// Its admin client.
    pub admin: Client,
    /// The RustFS store the classes point at.
    pub store: RustFs,
    /// The store's admin API, with the root key pair.
    pub store_admin: AdminClient,
    /// The provisioner process to start: `bin` serving `provisioner`, one
    /// claim at a time (so the process dies exactly at an armed point).
    pub launch: Launch,
}

/// The bucket settings the crash walks ask for (issue 38): versioning and
/// one lifecycle rule, `tmp`, which the store must hold after every kill.
pub fn walked_settings() -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([
        ("versioning".to_owned(), "Enabled".to_owned()),
        (
            "bucketLifecycle".to_owned(),
            r#"{"Rules":[{"ID":"tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":3}}]}"#
                .to_owned(),
        ),
    ])
}

impl SampleSuite {
    /// `bucket` holds [`walked_settings`], read with the store's root
    /// credentials; the error names `point` and what the store holds.
    pub async fn holds_walked_settings(&self, bucket: &str, point: &str) -> Result<()> {
        let root = self.store.root_client();
        let versioning = root.get_bucket_versioning().bucket(bucket).send().await?;
        let rules = root
            .get_bucket_lifecycle_configuration()
            .bucket(bucket)
            .send()
            .await
            .with_context(|| format!("{point}: {bucket}'s lifecycle"))?;
        anyhow::ensure!(
            versioning.status().map(|s| s.as_str()) == Some("Enabled")
                && rules.rules().iter().any(|r| r.id() == Some("tmp")),
            "{point}: {bucket} holds versioning {:?}, rules {:?}",
            versioning.status(),
            rules.rules()
        );
        Ok(())
    }

    /// Starts the environment and RustFS, registers RustFS's root secret,
    /// creates [`RUSTFS_ADMIN_SECRET`] and one class per `(name, reclaim
    /// policy)` of `classes` for `provisioner` (on RustFS, forceDelete), and
    /// prepares a launch of `bin` tagged `tag`.
    pub async fn start(
        bin: impl Into<PathBuf>,
        provisioner: &str,
        tag: &str,
        classes: &[(&str, &str)],
    ) -> Result<Self> {
        Self::start_with(bin, provisioner, tag, classes, &[]).await
    }

    /// As [`SampleSuite::start`], with `extra` parameters on every class
    /// (an `allowedConfig`, say).
    pub async fn start_with(
        bin: impl Into<PathBuf>,
        provisioner: &str,
        tag: &str,
        classes: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> Result<Self> {
        let env = TestEnv::start().await?;
        let kubeconfig = install_sample(&env).await?;
        let store = RustFs::start(env.dir()).await?;
        let (key, secret) = store.root_credentials();
        register_secret(&secret);
        let admin = env.admin_client();
        create_admin_secret(&admin, SYSTEM_NAMESPACE, RUSTFS_ADMIN_SECRET, &key, &secret).await?;
        let endpoint = store.endpoint().trim_end_matches('/').to_owned();
        for (class, reclaim) in classes {
            let params = [
                ("endpoint", endpoint.as_str()),
                ("adminSecretName", RUSTFS_ADMIN_SECRET),
                ("adminSecretNamespace", SYSTEM_NAMESPACE),
                ("forceDelete", "true"),
            ];
            let params = params.iter().chain(extra).copied();
            create_class(&admin, class, provisioner, reclaim, params).await?;
        }
        let store_admin = AdminClient::new(
            &endpoint,
            "us-east-1",
            lib_provisioner::Credentials::new(key, secret),
        )?;
        let mut launch = Launch::new(bin, &kubeconfig, tag);
        launch.provisioner = provisioner.to_owned();
        launch.concurrency = Some(1);
        Ok(Self {
            env,
            admin,
            store,
            store_admin,
            launch,
        })
    }

    /// Ends a test: scans the logs under `logs` for credentials, notes the
    /// files scanned in `summary`, marks it failed if `result` or the scan
    /// failed, prints it, and stops the store. Returns the error of
    /// `result`, or else of the scan.
    pub async fn finish(
        &self,
        mut summary: Summary,
        logs: &Path,
        result: Result<()>,
    ) -> Result<()> {
        let scan = assert_no_leaks(logs);
        summary.note(
            "logs scanned for credentials",
            scan.as_ref().map_or("LEAK".to_owned(), ToString::to_string),
        );
        summary.failed = result.is_err() || scan.is_err();
        summary.print(logs);
        self.store.stop().await;
        result.and(scan.map(drop))
    }
}

/// The key pair in the Secret of claim `ns/name`: access key, secret key.
pub async fn claim_keys(client: &Client, ns: &str, name: &str) -> Result<(String, String)> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    let data = secret.data.context("secret data")?;
    let value = |k: &str| String::from_utf8(data[k].0.clone()).context("utf8");
    Ok((value("AWS_ACCESS_KEY_ID")?, value("AWS_SECRET_ACCESS_KEY")?))
}

/// The bucket name in the ConfigMap of claim `ns/name`.
pub async fn claim_bucket(client: &Client, ns: &str, name: &str) -> Result<String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    Ok(cm.data.context("configmap data")?["BUCKET_NAME"].clone())
}
