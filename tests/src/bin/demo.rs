//! The main job: a local control plane and S3 server, the CRDs, the sample
//! provisioner running as its own ServiceAccount under the RBAC of
//! `deploy/rbac.yaml`, and an example claim bound end to end.
//!
//! `scripts/demo` builds the provisioner and runs this. Prints the bound
//! claim, its Secret's keys (never the values) and its ConfigMap.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use obc_tests::TestEnv;
use obc_tests::recording::{install_crds, wait_phase};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> Result<String> {
    let p = repo_root().join(path);
    std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
}

#[tokio::main]
async fn main() -> Result<()> {
    let env = TestEnv::start().await?;
    let client = env.admin_client();
    println!(
        "control plane ready: {} (kubeconfig {})",
        env.apiserver_url(),
        env.kubeconfig_path().display()
    );
    println!("S3 server ready: {}", env.s3_endpoint());

    install_crds(&env).await?;
    env.apply_yaml(&read("deploy/namespace.yaml")?).await?;
    env.apply_yaml(&read("deploy/rbac.yaml")?).await?;

    // The example StorageClass, pointed at the local S3 server, and the
    // admin credentials in the Secret it names.
    let mut class: StorageClass = serde_yaml::from_str(&read("deploy/example-storageclass.yaml")?)?;
    let params = class.parameters.get_or_insert_with(Default::default);
    params.insert("endpoint".into(), env.s3_endpoint());
    let secret_name = params.get("adminSecretName").cloned().unwrap_or_default();
    let secret_ns = params
        .get("adminSecretNamespace")
        .cloned()
        .unwrap_or_default();
    let (access_key, secret_key) = env.s3_root_credentials();
    let admin: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": secret_name, "namespace": secret_ns},
        "stringData": {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    }))?;
    Api::<Secret>::namespaced(client.clone(), &secret_ns)
        .create(&PostParams::default(), &admin)
        .await
        .context("creating the admin Secret")?;
    let class_name = class.metadata.name.clone().unwrap_or_default();
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .context("creating the StorageClass")?;

    // The provisioner, as the ServiceAccount the manifests bind.
    let kubeconfig = env
        .service_account_kubeconfig("obc-system", "sample-provisioner")
        .await?;
    let binary = std::env::var_os("SAMPLE_PROVISIONER")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/debug/sample-provisioner"));
    if !binary.exists() {
        bail!(
            "{} is missing: run `cargo build -p sample-provisioner` (scripts/demo does)",
            binary.display()
        );
    }
    let mut provisioner = tokio::process::Command::new(&binary)
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "demo-provisioner")
        .env("POD_NAMESPACE", "obc-system")
        .args(["--no-metrics", "--log-level", "info"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    println!(
        "sample provisioner started as system:serviceaccount:obc-system:sample-provisioner (StorageClass {class_name})"
    );

    // The example claim.
    let mut claim: ObjectBucketClaim = serde_yaml::from_str(&read("deploy/example-claim.yaml")?)?;
    let ns = claim
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = claim.metadata.name.clone().unwrap_or_default();
    claim.spec.storage_class_name = class_name;
    env.ensure_namespace(&ns).await?;
    Api::<ObjectBucketClaim>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &claim)
        .await
        .context("creating the example claim")?;

    let bound = wait_phase(
        &client,
        &ns,
        &name,
        ClaimPhase::Bound,
        Duration::from_secs(60),
    )
    .await?;
    let ob = Api::<ObjectBucket>::all(client.clone())
        .get(bound.spec.object_bucket_name.as_deref().unwrap_or_default())
        .await?;
    println!("\n--- ObjectBucketClaim {ns}/{name}");
    print!(
        "{}",
        serde_yaml::to_string(&serde_json::json!({"spec": bound.spec, "status": bound.status}))?
    );
    println!(
        "--- ObjectBucket {}",
        ob.metadata.name.clone().unwrap_or_default()
    );
    print!("{}", serde_yaml::to_string(&ob.spec)?);
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get(&name)
        .await?;
    let keys: Vec<String> = secret.data.unwrap_or_default().into_keys().collect();
    println!(
        "--- Secret {ns}/{name} keys (values not shown): {}",
        keys.join(", ")
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get(&name)
        .await?;
    println!("--- ConfigMap {ns}/{name}");
    print!("{}", serde_yaml::to_string(&cm.data.unwrap_or_default())?);

    // The bucket is real: it is listed by the store itself.
    let buckets = env.s3_client().list_buckets().send().await?;
    let bucket = ob.bucket_name().unwrap_or_default();
    let listed = buckets.buckets().iter().any(|b| b.name() == Some(bucket));
    println!("--- S3 server lists bucket {bucket:?}: {listed}");
    let _ = provisioner.kill().await;
    if !listed {
        bail!("the bucket is not in the S3 server");
    }
    println!("\ndemo complete: the claim is Bound");
    Ok(())
}
