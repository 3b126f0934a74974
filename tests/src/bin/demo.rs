//! The main job: a local control plane (with kube-controller-manager: garbage
//! collection and namespace deletion work as in a real cluster) and S3
//! server, the CRDs, the sample
//! provisioner running as its own ServiceAccount under the RBAC of
//! `deploy/rbac.yaml`, and an example claim bound end to end.
//!
//! `scripts/demo` builds the provisioner and runs this. Prints the bound
//! claim, its Secret's keys (never the values) and its ConfigMap.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use lib_provisioner::api::{ClaimPhase, ObjectBucket, ObjectBucketClaim};
use obc_tests::TestEnv;
use obc_tests::recording::wait_phase;
use obc_tests::rustfs::RustFs;
use obc_tests::setup::{create_admin_secret, install_deploy, repo_file};
use obc_tests::testenv::s3_client_for;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
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
    // RustFS: S3 plus the MinIO admin API, so the claim gets its own user.
    let store = RustFs::start(env.dir()).await?;
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    println!("object store (RustFS) ready: {endpoint}");

    install_deploy(&env).await?;
    // After the CRDs: its garbage collector discovers resource types at start.
    env.start_controller_manager().await?;
    println!(
        "kube-controller-manager ready: {} (as {}, each controller as its own ServiceAccount)",
        obc_tests::testenv::CONTROLLERS.join(", "),
        obc_tests::testenv::CONTROLLER_MANAGER_USER
    );

    // The example StorageClass, pointed at the local S3 server, and the
    // admin credentials in the Secret it names.
    let mut class: StorageClass =
        serde_yaml::from_str(&repo_file("deploy/example-storageclass.yaml")?)?;
    let params = class.parameters.get_or_insert_with(Default::default);
    params.insert("endpoint".into(), endpoint.clone());
    let secret_name = params.get("adminSecretName").cloned().unwrap_or_default();
    let secret_ns = params
        .get("adminSecretNamespace")
        .cloned()
        .unwrap_or_default();
    let (access_key, secret_key) = store.root_credentials();
    create_admin_secret(&client, &secret_ns, &secret_name, &access_key, &secret_key).await?;
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
    let mut claim: ObjectBucketClaim =
        serde_yaml::from_str(&repo_file("deploy/example-claim.yaml")?)?;
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
    let data = secret.data.unwrap_or_default();
    let value = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    let (claim_key, claim_secret) = (value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY"));
    let keys: Vec<&String> = data.keys().collect();
    println!(
        "--- Secret {ns}/{name} keys (values not shown): {keys:?}; its access key is the claim's own user {claim_key:?}, not the admin's"
    );
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get(&name)
        .await?;
    println!("--- ConfigMap {ns}/{name}");
    print!("{}", serde_yaml::to_string(&cm.data.unwrap_or_default())?);

    // The bucket is real: it is listed by the store itself.
    let bucket = ob.bucket_name().unwrap_or_default().to_owned();
    let root = store.root_client();
    root.create_bucket().bucket("someone-else").send().await?;
    let proved = prove_isolation(&endpoint, &claim_key, &claim_secret, &bucket).await;
    let _ = provisioner.kill().await;
    store.stop().await;
    proved?;
    println!("\ndemo complete: the claim is Bound");
    Ok(())
}

/// Uses the claim's credentials as its application would: its bucket works,
/// another bucket on the same store does not.
async fn prove_isolation(endpoint: &str, key: &str, secret: &str, bucket: &str) -> Result<()> {
    let app = s3_client_for(endpoint, key, secret);
    app.put_object()
        .bucket(bucket)
        .key("hello.txt")
        .body(ByteStream::from_static(b"hello from the claim"))
        .send()
        .await
        .context("the claim's credentials writing its bucket")?;
    let body = app
        .get_object()
        .bucket(bucket)
        .key("hello.txt")
        .send()
        .await
        .context("the claim's credentials reading its bucket")?
        .body
        .collect()
        .await?
        .into_bytes();
    println!(
        "--- with the claim's credentials: wrote and read {bucket}/hello.txt ({:?})",
        String::from_utf8_lossy(&body)
    );
    match app.list_objects_v2().bucket("someone-else").send().await {
        Err(e) if e.code() == Some("AccessDenied") => {
            println!("--- with the claim's credentials: bucket someone-else is AccessDenied");
            Ok(())
        }
        Err(e) => bail!(
            "expected AccessDenied on another bucket, got {:?}",
            e.code()
        ),
        Ok(_) => bail!("the claim's credentials reach a bucket that is not the claim's"),
    }
}
