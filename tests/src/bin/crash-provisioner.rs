//! The sample S3 provisioner as a process the reliability suite can crash,
//! kill and restart (`tests/tests/reliability.rs`).
//!
//! It runs `lib_provisioner::ControllerBuilder` with
//! `sample_provisioner::S3Provisioner`, built with the library's
//! `failpoints` feature: `OBC_FAILPOINTS=<point>[,<point>...]` makes it abort
//! right after the write a point is named for (see
//! `lib_provisioner::failpoint::POINTS`).
//!
//! Configuration, all from the environment:
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `KUBECONFIG` | (kube's defaults) | the identity it runs as |
//! | `OBC_FAILPOINTS` | unset | crash points to arm |
//! | `OBC_PROVISIONER_NAME` | `objectbucket.io/sample-s3` | the StorageClass `provisioner` it serves |
//! | `OBC_NAMESPACES` | all | comma-separated namespaces to serve |
//! | `OBC_CONCURRENCY` | `8` | claims reconciled at once |
//! | `OBC_LEADER_ELECT` | `false` | `true`: take part in leader election |
//! | `POD_NAMESPACE` | `obc-system` | namespace of the Leases (leader election, bucket names) |
//! | `OBC_LEASE_NAME` | the provisioner name, `/` → `-` | name of the Lease |
//! | `POD_NAME` | `crash-provisioner-<pid>` | identity in the Lease and in Events |
//! | `OBC_LEASE_DURATION_SECONDS` | `6` | lease duration (renewed every third) |
//! | `OBC_BACKOFF_MAX_MS` | `2000` | cap of the per-claim retry backoff (the minimum is 100 ms) |
//! | `OBC_METRICS_ADDR` | unset | serve `/metrics`, `/healthz`, `/readyz` here |
//! | `OBC_COSI_DRIVER_NAME` | unset | serve COSI too, for this driver name (the COSI crash points are `lib_provisioner::cosi::failpoint::POINTS`) |
//! | `OBC_COSI_BINDING` | `true` | `false`: COSI's driver role only |
//! | `RUST_LOG` | `info` | log filter; logs go to stdout, one line per event, no colours |
//!
//! Exit codes: 0 after SIGTERM/Ctrl-C, 2 for a configuration error, 3 when
//! leadership was lost, 1 for any other error; an armed crash point aborts
//! (SIGABRT) after printing `failpoint <point>: aborting` on stderr.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use lib_provisioner::leader::LeaderElection;
use lib_provisioner::{ControllerBuilder, RunError, names};
use sample_provisioner::S3Provisioner;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

const EXIT_CONFIG: u8 = 2;
const EXIT_LOST_LEASE: u8 = 3;

struct Config {
    provisioner_name: String,
    namespaces: Vec<String>,
    concurrency: u16,
    leader_elect: bool,
    lease_namespace: String,
    lease_name: String,
    identity: String,
    lease_duration: Duration,
    backoff_max: Duration,
    metrics_addr: Option<SocketAddr>,
    cosi: Option<lib_provisioner::cosi::CosiOptions>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn parsed<T: FromStr>(name: &str, default: T) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    match var(name) {
        None => Ok(default),
        Some(raw) => raw
            .parse()
            .map_err(|e| format!("{name}={raw:?} is not valid: {e}")),
    }
}

impl Config {
    fn from_env() -> Result<Self, String> {
        let provisioner_name =
            var("OBC_PROVISIONER_NAME").unwrap_or_else(|| "objectbucket.io/sample-s3".into());
        let namespaces = var("OBC_NAMESPACES")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let lease_secs: u64 = parsed("OBC_LEASE_DURATION_SECONDS", 6)?;
        if lease_secs < 3 {
            return Err("OBC_LEASE_DURATION_SECONDS must be at least 3".into());
        }
        let backoff_ms: u64 = parsed("OBC_BACKOFF_MAX_MS", 2000)?;
        let metrics_addr = match var("OBC_METRICS_ADDR") {
            None => None,
            Some(raw) => Some(
                raw.parse()
                    .map_err(|e| format!("OBC_METRICS_ADDR={raw:?} is not ADDR:PORT: {e}"))?,
            ),
        };
        let cosi = match var("OBC_COSI_DRIVER_NAME") {
            None => None,
            Some(driver) => {
                let options = lib_provisioner::cosi::CosiOptions::new(driver)
                    .map_err(|e| format!("OBC_COSI_DRIVER_NAME: {e}"))?;
                Some(if parsed("OBC_COSI_BINDING", true)? {
                    options
                } else {
                    options.without_binding()
                })
            }
        };
        Ok(Self {
            cosi,
            lease_name: var("OBC_LEASE_NAME")
                .unwrap_or_else(|| names::provisioner_label_value(&provisioner_name)),
            provisioner_name,
            namespaces,
            concurrency: parsed("OBC_CONCURRENCY", 8)?,
            leader_elect: parsed("OBC_LEADER_ELECT", false)?,
            lease_namespace: var("POD_NAMESPACE").unwrap_or_else(|| "obc-system".into()),
            identity: var("POD_NAME")
                .unwrap_or_else(|| format!("crash-provisioner-{}", std::process::id())),
            lease_duration: Duration::from_secs(lease_secs),
            backoff_max: Duration::from_millis(backoff_ms.max(100)),
            metrics_addr,
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = match EnvFilter::try_from_default_env() {
        Ok(filter) => filter,
        Err(_) => EnvFilter::new("info"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .init();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("crash-provisioner: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match run(config).await {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(Failure::Run(RunError::LostLease(why))) => {
            error!("lost the leader lease: {why}; exiting");
            ExitCode::from(EXIT_LOST_LEASE)
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Why the process stopped.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("could not build a client from KUBECONFIG: {0}")]
    Client(#[from] kube::Error),
    #[error(transparent)]
    Run(#[from] RunError),
}

async fn run(config: Config) -> Result<(), Failure> {
    let client = kube::Client::try_default().await?;
    info!(
        provisioner = %config.provisioner_name,
        namespaces = %if config.namespaces.is_empty() { "all".to_owned() } else { config.namespaces.join(",") },
        leader_elect = config.leader_elect,
        identity = %config.identity,
        failpoints = %std::env::var("OBC_FAILPOINTS").unwrap_or_default(),
        "crash-provisioner starting"
    );
    let mut builder = ControllerBuilder::new(
        config.provisioner_name.clone(),
        S3Provisioner::new(client.clone()),
    )
    .namespaces(config.namespaces.clone())
    .concurrency(config.concurrency)
    .backoff(Duration::from_millis(100), config.backoff_max)
    .bucket_name_records(config.lease_namespace.clone());
    if config.leader_elect {
        builder = builder.leader_election(
            LeaderElection::new(
                config.lease_namespace.clone(),
                config.lease_name.clone(),
                config.identity.clone(),
            )
            .with_lease_duration(config.lease_duration),
        );
    }
    if let Some(addr) = config.metrics_addr {
        builder = builder.serve_on(addr);
    }
    // As the sample's binary adds COSI.
    let builder = sample_provisioner::serve::with_cosi(builder, config.cosi);
    Ok(builder.run(client, shutdown_signal()).await?)
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    info!("shutting down");
}
