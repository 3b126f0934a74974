//! The library with COSI on (both roles) and the file-backed
//! [`CosiRecorder`](obc_tests::cosi_recording::CosiRecorder), as a process the COSI
//! crash-point test can abort and restart (`tests/tests/cosi_crash_points.rs`).
//!
//! Environment: `KUBECONFIG`; `COSI_STORE_FILE` (the recorder's state,
//! kept across restarts); `OBC_FAILPOINTS` (the points to arm, with the
//! library's `failpoints` feature); `RUST_LOG`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lib_provisioner::ControllerBuilder;
use lib_provisioner::cosi::CosiOptions;
use obc_tests::cosi_recording::{CosiRecorder, DRIVER};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::from_default_env())
        .with_ansi(false)
        .init();
    let Some(file) = std::env::var_os("COSI_STORE_FILE").map(PathBuf::from) else {
        eprintln!("COSI_STORE_FILE is not set: name the file the recorder keeps its store in");
        return ExitCode::from(2);
    };
    let run = async {
        let recorder = CosiRecorder::in_file(file)?;
        let client = kube::Client::try_default().await?;
        let options = CosiOptions::new(DRIVER)?;
        ControllerBuilder::new("test.objectbucket.io/cosi-crash", recorder)
            .cosi(options)
            .backoff(Duration::from_millis(100), Duration::from_secs(1))
            .run(client, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        anyhow::Ok(())
    };
    match run.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cosi-crash: {e:#}");
            ExitCode::FAILURE
        }
    }
}
