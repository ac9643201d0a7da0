//! The `autoforge` binary: a thin shell over [`autoforge::cli`].

use std::process::ExitCode;

use clap::Parser;

use autoforge::cli::{self, Cli};

/// mimalloc rather than glibc's allocator: the controller allocates and
/// frees many small buffers (JSON, HTTP, SQL rows) across tokio's worker
/// threads, where glibc's per-arena locking and consolidation took a
/// quarter of serve's CPU per run on the cycle bench.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
