//! Issue 36, item 2: while every watch failed with a TLS error, the sample
//! logged "the watches are back" at each retry (kube's watcher announces
//! `Init` before every attempt to list, and that counted as a recovery),
//! and `/healthz` never saw the watches dead. The controller here talks to
//! the apiserver through a proxy that first answers every connection with
//! plain HTTP (a TLS error), then forwards: no reconnect line and a failing
//! `/healthz` while it is broken; a few lines (at most one per watch), a
//! bound claim and `/healthz` ok once it forwards.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use lib_provisioner::ControllerBuilder;
use lib_provisioner::api::{ClaimPhase, ObjectBucketClaimSpec};
use obc_tests::recording::{
    PROVISIONER, Recorder, RunningController, create_claim, create_class_for, wait_phase,
};
use obc_tests::scoped_tracing;
use obc_tests::setup::{healthz, start_with_crds};
use obc_tests::wait_for;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(30);
/// Long enough for several watch retries (capped at 2 s).
const BROKEN: Duration = Duration::from_secs(7);
const DEAD_LIMIT: Duration = Duration::from_secs(3);
/// The OBC family's watches: StorageClass, ObjectBucket, claims, Secrets,
/// ConfigMaps.
const WATCHES: usize = 5;
/// The log target of the reconnect retry.
const RECONNECT: &str = "obc::wiring::reconnect";

/// Everything logged, for counting.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// A subscriber writing here, for [`scoped_tracing::block_on`].
    fn dispatch(&self) -> tracing::Dispatch {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish()
            .into()
    }

    fn lines(&self, target: &str) -> Vec<String> {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| l.contains(target))
            .map(str::to_owned)
            .collect()
    }
}

/// Answers plain HTTP to TLS while `broken`, else forwards to `upstream`.
async fn proxy(upstream: SocketAddr, broken: Arc<AtomicBool>) -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let broken = broken.load(Ordering::SeqCst);
            tokio::spawn(async move {
                if broken {
                    let _ = client
                        .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                        .await;
                    return;
                }
                if let Ok(mut server) = TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    Ok(addr)
}

#[test]
fn watches_failing_tls_are_not_reported_back_until_they_are() -> Result<()> {
    // This test's log only: the other tests of the binary log beside it.
    let logs = Logs::default();
    scoped_tracing::block_on(logs.dispatch(), 2, reconnects_logged_once(logs))
}

async fn reconnects_logged_once(logs: Logs) -> Result<()> {
    let env = start_with_crds().await?;
    let admin = env.admin_client();
    env.ensure_namespace("r").await?;
    create_class_for(&admin, "c", PROVISIONER, "Delete", &[]).await?;
    let upstream: SocketAddr = env
        .apiserver_url()
        .trim_start_matches("https://")
        .parse()
        .context("the apiserver's address")?;
    let broken = Arc::new(AtomicBool::new(true));
    let proxied = proxy(upstream, broken.clone()).await?;
    let via = env
        .admin_client_via(proxied, "via-tls-breaking-proxy")
        .await?;
    let port = obc_tests::testenv::free_port().expect("free port");
    let controller = RunningController::start_with(
        via,
        ControllerBuilder::new(PROVISIONER, Recorder::default())
            .serve_on(([127, 0, 0, 1], port).into())
            .dead_watch_limit(DEAD_LIMIT),
    );
    let spec = ObjectBucketClaimSpec {
        storage_class_name: "c".into(),
        generate_bucket_name: Some("r".into()),
        ..Default::default()
    };
    create_claim(&admin, "r", "waits", spec).await?;

    tokio::time::sleep(BROKEN).await;
    let while_broken = logs.lines(RECONNECT);
    let health_while_broken = healthz(port).await.map(|(status, _)| status);
    broken.store(false, Ordering::SeqCst);
    wait_phase(&admin, "r", "waits", ClaimPhase::Bound, T)
        .await
        .context("the claim binds once the proxy forwards")?;
    wait_for(T, "/healthz to answer ok", || async {
        Ok(healthz(port).await.filter(|(status, _)| *status == 200))
    })
    .await?;
    // The retry is logged a moment after a watch comes back; once one line
    // is, a watch retry period more shows any later ones.
    wait_for(T, "a reconnect line", || async {
        Ok(Some(()).filter(|()| !logs.lines(RECONNECT).is_empty()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let back = logs.lines(RECONNECT);
    controller.stop().await?;

    println!(
        "while broken: /healthz {health_while_broken:?}, {while_broken:#?}\nin all: {back:#?}"
    );
    ensure!(
        while_broken.is_empty(),
        "{} reconnect lines while every watch failed TLS",
        while_broken.len()
    );
    ensure!(
        health_while_broken == Some(503),
        "/healthz answered {health_while_broken:?} after {BROKEN:?} of failed watches (limit {DEAD_LIMIT:?})"
    );
    ensure!(
        (1..=WATCHES).contains(&back.len()),
        "{} reconnect lines once the watches came back (1 to {WATCHES} expected)",
        back.len()
    );
    Ok(())
}
