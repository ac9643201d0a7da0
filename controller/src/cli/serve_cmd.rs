//! `autoforge serve`: run ingress, dispatcher and poller until SIGTERM/SIGINT.

use std::process::ExitCode;

use anyhow::Context;

use crate::config::Config;

/// Builds the multi-threaded runtime and runs the server in it.
pub fn run(config: &Config) -> anyhow::Result<ExitCode> {
    // Refuse before starting anything (database included) without a secret.
    config.require_webhook_secret()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(crate::serve::run(config))?;
    Ok(ExitCode::SUCCESS)
}
