//! Starts the local test environment (etcd, kube-apiserver,
//! kube-controller-manager and one object store) with the project's CRDs
//! installed, and keeps it running until Ctrl-C:
//!
//! ```text
//! cargo run -p obc-tests --bin local-env                    # RustFS
//! cargo run -p obc-tests --bin local-env -- --store s3s-fs  # s3s-fs
//! ```
//!
//! Only the chosen store is started, and only its binary is needed. RustFS
//! (the default) has the MinIO admin API that the sample's default
//! `credentialsMode: per-claim` needs; s3s-fs has neither users nor bucket
//! tags (`credentialsMode: shared-admin`, `ownership: marker`). A missing
//! binary is named before anything starts, with the `scripts/install-testenv`
//! command that builds it.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Result, bail};
use obc_tests::TestEnv;
use obc_tests::rustfs::RustFs;
use obc_tests::testenv::{
    BinarySpec, KUBE_APISERVER_BINARY, KUBE_CONTROLLER_MANAGER_BINARY, RUSTFS_BINARY,
    S3_SERVER_BINARY, Store, resolve_binary_from_env,
};

const USAGE: &str = "usage: local-env [--store rustfs|s3s-fs]  (default: rustfs)";

/// The object store to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    RustFs,
    S3sFs,
}

fn parse_args(args: &[String]) -> Result<Choice> {
    match args {
        [] => Ok(Choice::RustFs),
        [flag, store] if flag == "--store" => match store.as_str() {
            "rustfs" => Ok(Choice::RustFs),
            "s3s-fs" => Ok(Choice::S3sFs),
            other => bail!("unknown store {other:?}\n{USAGE}"),
        },
        [one] if one.starts_with("--store=") => parse_args(&[
            "--store".to_owned(),
            one.trim_start_matches("--store=").to_owned(),
        ]),
        _ => bail!("{USAGE}"),
    }
}

/// Fails, before anything starts, naming every program `choice` needs that
/// is missing and the one command that builds them all.
fn check_binaries(choice: Choice) -> Result<()> {
    let store = match choice {
        Choice::RustFs => RUSTFS_BINARY,
        Choice::S3sFs => S3_SERVER_BINARY,
    };
    let needed: [BinarySpec; 3] = [KUBE_APISERVER_BINARY, KUBE_CONTROLLER_MANAGER_BINARY, store];
    let missing: Vec<_> = needed
        .iter()
        .filter_map(|spec| resolve_binary_from_env(spec).err())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|m| m.spec.name).collect();
    let details: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
    bail!(
        "missing {} (--store {} runs kube-apiserver, kube-controller-manager and {}):\n{}\nBuild {} with:\n  scripts/install-testenv {}",
        names.join(" and "),
        store.name,
        store.name,
        details.join("\n"),
        if names.len() == 1 { "it" } else { "them" },
        names.join(" ")
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("local-env: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal())
        .init();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let choice = parse_args(&args)?;
    check_binaries(choice)?;
    let env = TestEnv::start_with(match choice {
        Choice::RustFs => Store::None,
        Choice::S3sFs => Store::S3sFs,
    })
    .await?;
    // The CRDs before the controller manager, whose garbage collector
    // discovers resource types at start (then every 30 s).
    obc_tests::setup::install_crds(&env).await?;
    env.start_controller_manager().await?;
    let rustfs = match choice {
        Choice::RustFs => Some(RustFs::start(env.dir()).await?),
        Choice::S3sFs => None,
    };
    let (endpoint, (access_key, secret_key), what) = match &rustfs {
        Some(store) => (
            store.endpoint().trim_end_matches('/').to_owned(),
            store.root_credentials(),
            "RustFS, with the MinIO admin API",
        ),
        None => (
            env.s3_endpoint(),
            env.s3_root_credentials(),
            "s3s-fs: no users, no bucket tags; classes need credentialsMode: shared-admin and ownership: marker",
        ),
    };
    print_summary(&env, &endpoint, &access_key, &secret_key, what);

    tokio::signal::ctrl_c().await?;
    println!("Stopping...");
    if let Some(store) = rustfs {
        store.stop().await;
    }
    drop(env);
    Ok(())
}

fn print_summary(env: &TestEnv, endpoint: &str, access_key: &str, secret_key: &str, what: &str) {
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
    println!("S3 endpoint:    {endpoint} ({what})");
    println!();
    println!("Press Ctrl-C to stop and remove everything.");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_store_is_rustfs_unless_chosen() {
        assert_eq!(parse_args(&[]).expect("default"), Choice::RustFs);
        assert_eq!(
            parse_args(&args(&["--store", "s3s-fs"])).expect("s3s-fs"),
            Choice::S3sFs
        );
        assert_eq!(
            parse_args(&args(&["--store=rustfs"])).expect("rustfs"),
            Choice::RustFs
        );
        let err = parse_args(&args(&["--store", "minio"])).expect_err("minio");
        assert!(format!("{err}").contains("usage"), "{err}");
    }
}
