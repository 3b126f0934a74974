//! Logging: the `--log-level` filter and the `--log-format` output.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use super::cli::{Cli, LogFormat};

/// The target of the binary's events: its crate's name, as when they were
/// all in `main.rs`, so that log lines and `--log-level` directives stay
/// what they were.
pub(super) const LOG_TARGET: &str = "sample_provisioner";

/// Installs the global subscriber as `--log-level` and `--log-format` say.
pub(crate) fn init_tracing(cli: &Cli) -> Result<(), String> {
    let filter = EnvFilter::try_new(&cli.log_level).map_err(|e| {
        format!(
            "--log-level (RUST_LOG) {:?} is not a valid filter: {e}",
            cli.log_level
        )
    })?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let result = match cli.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::stdout().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
    };
    result.map_err(|e| format!("could not set up logging: {e}"))
}
