//! `sample-provisioner`: serves ObjectBucketClaims of StorageClasses naming
//! it, creating buckets on an S3-compatible store. See
//! `docs/sample-provisioner.md`.

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use tracing::{error, info};

use crate::cmd::audit::audit;
use crate::cmd::cli::{Cli, Command};
use crate::cmd::logging::init_tracing;
use crate::cmd::run::run;

/// Exit code for a usage or configuration error.
const EXIT_CONFIG: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = cli.validate().and_then(|()| init_tracing(&cli)) {
        eprintln!("sample-provisioner: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let result = match cli.command {
        Some(Command::Audit { json }) => audit(cli, json).await,
        None => run(cli).await,
    };
    match result {
        Ok(()) => {
            info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}
