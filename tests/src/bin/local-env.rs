//! Starts the local test environment (etcd, kube-apiserver,
//! kube-controller-manager, RustFS) with the project's CRDs installed, and
//! keeps it running until Ctrl-C:
//!
//! ```text
//! cargo run -p obc-tests --bin local-env
//! ```

use std::io::IsTerminal;

use obc_tests::TestEnv;
use obc_tests::rustfs::RustFs;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal())
        .init();

    let env = TestEnv::start().await?;
    // The CRDs before the controller manager, whose garbage collector
    // discovers resource types at start (then every 30 s).
    obc_tests::setup::install_crds(&env).await?;
    env.start_controller_manager().await?;
    // RustFS rather than the environment's s3s-fs: it has the MinIO admin
    // API that the default credentialsMode (per-claim) needs.
    let store = RustFs::start(env.dir()).await?;
    let endpoint = store.endpoint().trim_end_matches('/').to_owned();
    let (access_key, secret_key) = store.root_credentials();
    println!();
    println!(
        "Test environment is up ({:.1?}). Data and logs: {}",
        env.startup_timings().total,
        env.dir().display()
    );
    println!();
    println!("export KUBECONFIG={}", env.kubeconfig_path().display());
    println!("export AWS_ENDPOINT_URL={endpoint}");
    println!("export AWS_ACCESS_KEY_ID={access_key}");
    println!("export AWS_SECRET_ACCESS_KEY={secret_key}");
    println!("export AWS_REGION={}", obc_tests::testenv::S3_REGION);
    println!();
    println!("kube-apiserver: {}", env.apiserver_url());
    println!(
        "kube-controller-manager: {} (as {}, each controller as its own ServiceAccount in kube-system)",
        obc_tests::testenv::CONTROLLERS.join(", "),
        obc_tests::testenv::CONTROLLER_MANAGER_USER
    );
    println!("CRDs installed: objectbucketclaims.objectbucket.io, objectbuckets.objectbucket.io");
    println!("S3 endpoint:    {endpoint} (RustFS, with the MinIO admin API)");
    println!();
    println!("Press Ctrl-C to stop and remove everything.");

    tokio::signal::ctrl_c().await?;
    println!("Stopping...");
    store.stop().await;
    drop(env);
    Ok(())
}
