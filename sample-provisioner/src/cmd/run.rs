//! Wiring: the provisioner, the controller with its leader election,
//! metrics server and in-process COSI, and the COSI gRPC driver, run until
//! a signal stops them.

use std::sync::Arc;
use std::time::Duration;

use lib_provisioner::ControllerBuilder;
use lib_provisioner::leader::LeaderElection;
use sample_provisioner::S3Provisioner;
use sample_provisioner::serve::{CosiMode, with_cosi};
use tracing::{info, warn};

use super::cli::{Cli, CosiArg};
use super::logging::LOG_TARGET;
use super::signals::shutdown_signal;

/// Serves until a signal stops it; an error is what made it stop early.
pub(crate) async fn run(cli: Cli) -> Result<(), String> {
    let client = kube::Client::try_default().await.map_err(|e| {
        format!("could not build a Kubernetes client from KUBECONFIG, ~/.kube/config or the in-cluster service account: {e}")
    })?;

    let namespaces = cli.namespaces();
    info!(
        target: LOG_TARGET,
        provisioner = %cli.provisioner_name,
        namespaces = if namespaces.is_empty() { "all".to_owned() } else { namespaces.join(",") },
        concurrency = cli.concurrency,
        events = ?cli.events,
        state_bucket = %cli.state_bucket,
        leader_elect = cli.leader_elect,
        metrics = %if cli.no_metrics { "off".to_owned() } else { cli.metrics_addr.to_string() },
        version = env!("CARGO_PKG_VERSION"),
        "starting"
    );

    let provisioner = Arc::new(
        S3Provisioner::new(client.clone())
            .with_state_bucket(cli.state_bucket.clone())
            .with_intent_namespace(cli.lease_namespace.clone()),
    );
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let grpc = cosi_driver(&cli, provisioner.clone(), stopping.clone())?;
    let mut builder = ControllerBuilder::new(cli.provisioner_name.clone(), provisioner)
        .namespaces(namespaces)
        .concurrency(cli.concurrency)
        .events(cli.events.into())
        // Greenfield bucket names are held by Leases in our own namespace.
        .bucket_name_records(cli.lease_namespace.clone())
        .dead_watch_limit(Duration::from_secs(cli.dead_watch_limit_seconds))
        .config_check_interval(Duration::from_secs(cli.config_check_interval_seconds));
    builder = sweep(builder, &cli);
    if cli.leader_elect {
        let election = LeaderElection::new(
            cli.lease_namespace.clone(),
            cli.lease_name(),
            cli.identity(),
        )
        .with_lease_duration(Duration::from_secs(cli.lease_duration_seconds));
        info!(
            target: LOG_TARGET,
            lease = %format!("{}/{}", election.namespace, election.lease_name),
            identity = %election.identity,
            "leader election is on; waiting for the lease"
        );
        builder = builder.leader_election(election);
    } else {
        warn!(target: LOG_TARGET, "leader election is off: run a single replica only");
    }
    if !cli.no_metrics {
        builder = builder.serve_on(cli.metrics_addr);
    }
    let cosi = cosi_served(&cli, &client).await?;
    match &cosi {
        Some(o) => info!(
            target: LOG_TARGET,
            driver = %o.driver_name(),
            binding = o.binding(),
            "serving COSI (objectstorage.k8s.io/v1alpha2) too"
        ),
        None => {
            info!(target: LOG_TARGET, mode = ?cli.cosi, "not serving COSI (--cosi=on serves it; its CRDs are in crds/cosi/)")
        }
    }
    let builder = with_cosi(builder, cosi);

    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let controller = async {
        builder
            .run(client, stopped(stopping))
            .await
            .map_err(|e| match e {
                lib_provisioner::RunError::LostLease(_) => {
                    format!("{e}; exiting so that this replica restarts as a standby")
                }
                other => other.to_string(),
            })
    };
    match grpc {
        Some(grpc) => tokio::try_join!(controller, grpc).map(drop),
        None => controller.await,
    }
}

/// `builder` with the store sweep's timing (`--sweep-interval-seconds 0`:
/// none).
/// Whether this process serves COSI's Kubernetes side, and how (`None`:
/// it does not). The gRPC driver (--cosi-driver) serves upstream's
/// sidecar, which with upstream's controller serves the Kubernetes side:
/// auto stays off. The audit decides the same way, so that it lists what
/// serving would.
pub(super) async fn cosi_served(
    cli: &Cli,
    client: &kube::Client,
) -> Result<Option<lib_provisioner::cosi::CosiOptions>, String> {
    let options = cli.cosi_options().map_err(|e| e.to_string())?;
    let mode = match (cli.cosi, cli.cosi_driver) {
        (CosiArg::Auto, true) => CosiMode::Off,
        (arg, _) => CosiMode::from(arg),
    };
    mode.resolve(client, options)
        .await
        .map_err(|e| e.to_string())
}

pub(super) fn sweep<P: lib_provisioner::Provisioner>(
    builder: ControllerBuilder<P>,
    cli: &Cli,
) -> ControllerBuilder<P> {
    let builder = builder
        .sweep_interval(Duration::from_secs(cli.sweep_interval_seconds))
        .orphan_grace(Duration::from_secs(cli.orphan_grace_seconds));
    if cli.sweep_interval_seconds == 0 {
        warn!(target: LOG_TARGET, "the store sweep is off: a user whose owner vanished unseen (a stripped finalizer) stays in the store");
        builder.without_sweep()
    } else {
        builder
    }
}

/// Completes once `stop` says so (or its sender is gone).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// With --cosi-driver, the COSI gRPC driver over the same provisioner,
/// serving until the process stops.
fn cosi_driver(
    cli: &Cli,
    provisioner: Arc<S3Provisioner>,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<impl std::future::Future<Output = Result<(), String>>>, String> {
    use lib_provisioner::cosi::grpc::{CosiDriver, Protocol};
    if !cli.cosi_driver {
        return Ok(None);
    }
    let driver = CosiDriver::new(provisioner, cli.cosi_driver_name.clone(), [Protocol::S3])
        .map_err(|e| format!("--cosi-driver-name: {e}"))?;
    let socket = cli.cosi_endpoint.clone();
    info!(target: LOG_TARGET, socket = %socket.display(), driver = %cli.cosi_driver_name, "serving COSI");
    Ok(Some(async move {
        driver
            .serve_with_shutdown(&socket, stopped(stopping))
            .await
            .map_err(|e| e.to_string())
    }))
}
