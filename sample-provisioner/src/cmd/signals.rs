//! Stopping on SIGTERM or Ctrl-C: gracefully on the first, at once on the
//! second.

use tokio::signal::unix::{SignalKind, signal};
use tracing::{info, warn};

use super::logging::LOG_TARGET;

/// Completes on the first SIGTERM or Ctrl-C; a second one exits at once.
pub(super) async fn shutdown_signal() {
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(target: LOG_TARGET, error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the provisioner");
            None
        }
    };
    let received = next_signal(&mut term).await;
    info!(
        target: LOG_TARGET,
        "received {received}: finishing in-flight reconciles, then releasing the lease (send it again to exit at once)"
    );
    tokio::spawn(async move {
        let again = next_signal(&mut term).await;
        eprintln!("sample-provisioner: received {again} again; exiting without waiting");
        std::process::exit(130);
    });
}

async fn next_signal(term: &mut Option<tokio::signal::unix::Signal>) -> &'static str {
    let sigterm = async {
        match term {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                // No Ctrl-C handler: wait for SIGTERM only.
                std::future::pending::<()>().await;
            }
            "Ctrl-C"
        }
        () = sigterm => "SIGTERM",
    }
}
