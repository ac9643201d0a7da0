//! The `autoforge` binary: a thin shell over [`autoforge::cli`].

use std::process::ExitCode;

use clap::Parser;

use autoforge::cli::{self, Cli};

fn main() -> ExitCode {
    // Both ring and aws-lc-rs are linked in through dependencies, so rustls
    // cannot pick a process-wide provider by itself and any bare
    // `ClientConfig::builder()` would panic. An error only means a provider
    // is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();

    // Usage errors exit with status 2 from inside clap.
    let cli = Cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
