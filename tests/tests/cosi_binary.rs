//! The sample binary with `--cosi-driver`: it serves the COSI gRPC driver
//! on `COSI_ENDPOINT` beside its ObjectBucketClaim controller, answers the
//! sidecar's first call, removes its socket when it stops on SIGTERM, and
//! refuses an endpoint COSI does not allow. Needs the binary built
//! (`cargo build -p sample-provisioner`; `SAMPLE_PROVISIONER` overrides).

#![allow(clippy::unwrap_used)] // tests may unwrap; the library may not

use std::time::Duration;

use anyhow::Result;
use lib_provisioner::cosi::grpc::proto::DriverGetInfoRequest;
use lib_provisioner::cosi::grpc::proto::identity_client::IdentityClient;
use obc_tests::cosi::connect;
use obc_tests::setup::{install_deploy, sample_provisioner_binary, spawn_provisioner};
use obc_tests::testenv::{self, TestEnv};

fn command(endpoint: &str) -> Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(sample_provisioner_binary()?);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("COSI_ENDPOINT", endpoint)
        .args([
            "--cosi-driver",
            "--cosi-driver-name=s3.binary.objectbucket.io",
            "--leader-elect=false",
            "--no-metrics",
        ]);
    Ok(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_cosi_on_cosi_endpoint_until_sigterm() -> Result<()> {
    testenv::init_tracing();
    let env = TestEnv::start().await?;
    install_deploy(&env).await?;
    let socket = env.dir().join("cosi-driver.sock");
    let endpoint = format!("unix://{}", socket.display());
    let log = env.dir().join("cosi-binary.log");
    let mut child = spawn_provisioner(
        &mut command(&endpoint)?,
        env.kubeconfig_path(),
        "info",
        &log,
    )?;

    let channel = connect(&socket).await?;
    let info = IdentityClient::new(channel)
        .driver_get_info(DriverGetInfoRequest {})
        .await?
        .into_inner();
    assert_eq!(info.name, "s3.binary.objectbucket.io");
    assert_eq!(info.supported_protocols.len(), 1);

    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await?;
    assert!(killed.success());
    let waited = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let text = std::fs::read_to_string(&log)?;
    let Ok(status) = waited else {
        anyhow::bail!("still running 30 s after SIGTERM; its log:\n{text}");
    };
    let status = status?;
    assert!(status.success(), "{status}: {text}");
    assert!(!socket.exists(), "the socket is removed at shutdown");
    assert!(text.contains("serving COSI"), "{text}");
    Ok(())
}

#[tokio::test]
async fn an_endpoint_cosi_does_not_allow_is_refused_at_start() -> Result<()> {
    for bad in ["tcp://127.0.0.1:9000", "unix:///tmp/cosi-driver"] {
        let out = command(bad)?.output().await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("COSI endpoint") && stderr.contains(".sock"),
            "{bad}: {stderr}"
        );
    }
    Ok(())
}
