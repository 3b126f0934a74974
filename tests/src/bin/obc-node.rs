//! Starts the node environment (`obc_tests::testenv::node::Node`: a real
//! single-node cluster on this host, root only) and keeps it until
//! stdin closes, Ctrl-C or SIGTERM; then undoes everything it changed.
//!
//! ```text
//! sudo -E cargo run -p obc-tests --bin obc-node
//! ```
//!
//! Prints `ready kubeconfig=<path>` on stdout once the Node is Ready, then
//! waits. The node tests run it as a child to check the lock and the
//! clean-up after a crash (they SIGKILL it).

use std::process::ExitCode;

use anyhow::Result;
use obc_tests::testenv::node::Node;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("obc-node: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    // Logs to stderr: stdout carries only the `ready` line.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let node = Node::start().await?;
    println!("ready kubeconfig={}", node.kubeconfig_path().display());
    eprintln!(
        "obc-node: Node Ready in {:.1?}; logs in {}; stop with Ctrl-C",
        node.timings().total,
        node.dir().display()
    );
    let mut term = signal(SignalKind::terminate())?;
    let mut stdin = tokio::io::stdin();
    let mut sink = Vec::new();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = stdin.read_to_end(&mut sink) => {}
    }
    let took = node.shutdown().await?;
    eprintln!("obc-node: stopped and cleaned up in {took:.1?}");
    Ok(())
}
