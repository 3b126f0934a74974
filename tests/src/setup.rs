//! Setup that the end-to-end tests, the benchmark and the demo share: an
//! environment with the project's CRDs, `deploy/`'s namespace and RBAC,
//! StorageClasses and admin Secrets, provisioner processes that log to a
//! file, and the Events a claim got.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use tokio::process::{Child, Command};

use crate::testenv::TestEnv;

/// A file of this repository (`deploy/rbac.yaml`...), read.
pub fn repo_file(path: &str) -> Result<String> {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))
}

/// Installs the CRDs from `crds/`.
pub async fn install_crds(env: &TestEnv) -> Result<()> {
    for (_, yaml) in lib_provisioner::api::crd_files() {
        env.install_crds(&yaml).await?;
    }
    Ok(())
}

/// Installs the CRDs as some older installs have them: the claim's without
/// `spec.objectBucketName` (the apiserver prunes it) and without transition
/// rules, the ObjectBucket's as it is.
pub async fn install_crds_without_object_bucket_name(env: &TestEnv) -> Result<()> {
    let files = lib_provisioner::api::crd_files();
    let mut claim_crd: serde_yaml::Value =
        serde_yaml::from_str(&files[0].1).context("claim CRD YAML")?;
    let root = &mut claim_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    // Nor the transition rules of newer versions (on the whole claim, and
    // on its spec, where they name the field).
    root.as_mapping_mut()
        .context("the claim CRD's schema")?
        .remove("x-kubernetes-validations");
    let spec = &mut root["properties"]["spec"];
    spec["properties"]
        .as_mapping_mut()
        .context("the claim CRD's spec properties")?
        .remove("objectBucketName");
    spec.as_mapping_mut()
        .context("the claim CRD's spec schema")?
        .remove("x-kubernetes-validations");
    env.install_crds(&serde_yaml::to_string(&claim_crd)?)
        .await
        .context("old claim CRD")?;
    env.install_crds(&files[1].1).await.context("OB CRD")?;
    Ok(())
}

/// Starts a [`TestEnv`] and installs the CRDs from `crds/` into it.
pub async fn start_with_crds() -> Result<TestEnv> {
    let env = TestEnv::start().await?;
    install_crds(&env).await?;
    Ok(env)
}

/// The CRDs, then `deploy/namespace.yaml` and `deploy/rbac.yaml`: what the
/// sample provisioner needs before it can run under its ServiceAccount.
pub async fn install_deploy(env: &TestEnv) -> Result<()> {
    install_crds(env).await?;
    env.apply_yaml(&repo_file("deploy/namespace.yaml")?).await?;
    env.apply_yaml(&repo_file("deploy/rbac.yaml")?).await?;
    Ok(())
}

/// Creates the Secret `ns/name` holding an S3 key pair (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`), as a class's `adminSecretName` names it.
pub async fn create_admin_secret(
    client: &Client,
    ns: &str,
    name: &str,
    access_key: &str,
    secret_key: &str,
) -> Result<()> {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": ns},
        "stringData": {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    }))?;
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .with_context(|| format!("creating the admin Secret {ns}/{name}"))?;
    Ok(())
}

/// Creates a StorageClass for `provisioner`.
pub async fn create_class<K, V>(
    client: &Client,
    name: &str,
    provisioner: &str,
    reclaim: &str,
    params: impl IntoIterator<Item = (K, V)>,
) -> Result<()>
where
    K: Into<String>,
    V: Into<String>,
{
    let mut class = StorageClass {
        provisioner: provisioner.to_owned(),
        reclaim_policy: Some(reclaim.to_owned()),
        parameters: Some(
            params
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ),
        ..Default::default()
    };
    class.metadata.name = Some(name.to_owned());
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .with_context(|| format!("creating StorageClass {name}"))?;
    Ok(())
}

/// Reasons and notes of the Events about object `name` in `ns` (both
/// `events.k8s.io/v1` and `core/v1`); none if they cannot be listed.
pub async fn events_for(client: &Client, ns: &str, name: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = match Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect(),
        Err(_) => Vec::new(),
    };
    if let Ok(list) = Api::<CoreEvent>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        out.extend(
            list.items
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default())),
        );
    }
    out
}

/// How long [`wait_event`] waits: Events are sent after the status they
/// repeat, and a loaded apiserver may take seconds to store them.
const EVENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until an Event about `name` in `ns` has a reason and note that
/// `matches`, and returns all of that object's Events then.
///
/// The controllers send an Event after the status it repeats, so a test that
/// has just seen the status must wait for the Event rather than list once.
/// The error, after 30 s, lists the Events that did arrive.
pub async fn wait_event(
    client: &Client,
    ns: &str,
    name: &str,
    matches: impl Fn(&str, &str) -> bool,
) -> Result<Vec<(String, String)>> {
    let what = format!("a matching Event on {ns}/{name}");
    crate::testenv::wait_for(EVENT_TIMEOUT, what, || async {
        let events = events_for(client, ns, name).await;
        if events.iter().any(|(reason, note)| matches(reason, note)) {
            return Ok(Some(events));
        }
        // Kept by `wait_for` as the last error, for its timeout's message.
        Err(anyhow::anyhow!("its Events so far: {events:?}"))
    })
    .await
}

/// Starts a provisioner (or controller) process: `KUBECONFIG` and
/// `RUST_LOG` set, stdin closed, stdout and stderr appended to `log`,
/// SIGKILLed when the child is dropped. The rest of its environment (an
/// `env_clear` first, if any) and its arguments are set on `cmd` before.
pub fn spawn_provisioner(
    cmd: &mut Command,
    kubeconfig: &Path,
    rust_log: &str,
    log: &Path,
) -> Result<Child> {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    cmd.env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", rust_log)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true);
    let program = PathBuf::from(cmd.as_std().get_program());
    cmd.spawn()
        .with_context(|| format!("starting {}", program.display()))
}

/// The sample provisioner binary: `SAMPLE_PROVISIONER`, else the debug
/// build in the target directory (`scripts/test` builds it).
pub fn sample_provisioner_binary() -> Result<PathBuf> {
    let path = match std::env::var_os("SAMPLE_PROVISIONER") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("CARGO_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
            .join("debug/sample-provisioner"),
    };
    anyhow::ensure!(
        path.is_file(),
        "{} is missing: run `cargo build -p sample-provisioner` (scripts/test does), or set SAMPLE_PROVISIONER",
        path.display()
    );
    Ok(path)
}

/// `/healthz`'s status and body on `127.0.0.1:port`; `None` while nothing
/// answers there.
pub async fn healthz(port: u16) -> Option<(u16, String)> {
    let r = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .ok()?;
    Some((r.status().as_u16(), r.text().await.ok()?))
}
