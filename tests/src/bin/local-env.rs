//! Starts the local test environment (etcd, kube-apiserver, S3 server) and keeps it
//! running until Ctrl-C:
//!
//! ```text
//! cargo run -p obc-tests --bin local-env
//! ```

use std::io::IsTerminal;

use obc_tests::TestEnv;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal())
        .init();

    let env = TestEnv::start().await?;
    let (access_key, secret_key) = env.s3_root_credentials();
    println!();
    println!(
        "Test environment is up ({:.1?}). Data and logs: {}",
        env.startup_timings().total,
        env.dir().display()
    );
    println!();
    println!("export KUBECONFIG={}", env.kubeconfig_path().display());
    println!("export AWS_ENDPOINT_URL={}", env.s3_endpoint());
    println!("export AWS_ACCESS_KEY_ID={access_key}");
    println!("export AWS_SECRET_ACCESS_KEY={secret_key}");
    println!("export AWS_REGION={}", obc_tests::testenv::S3_REGION);
    println!();
    println!("kube-apiserver: {}", env.apiserver_url());
    println!("S3 endpoint:    {}", env.s3_endpoint());
    println!();
    println!("Press Ctrl-C to stop and remove everything.");

    tokio::signal::ctrl_c().await?;
    println!("Stopping...");
    drop(env);
    Ok(())
}
