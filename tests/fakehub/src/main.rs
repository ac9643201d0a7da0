//! `fakehub serve`: run the GitHub simulator until killed, printing its base
//! URL as the first line of stdout.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fakehub",
    about = "A GitHub-compatible simulator: REST, git over HTTP, webhooks, faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve until killed.
    Serve {
        /// Listen address; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// JSON snapshot to load at start and keep saved (repositories live beside it).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Seed of the fault-injection RNG.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Primary rate limit per token and hour.
        #[arg(long, default_value_t = 5000)]
        rate_limit: u64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let Command::Serve {
        addr,
        state,
        seed,
        rate_limit,
    } = Cli::parse().command;
    let handle = fakehub::start(fakehub::Config {
        addr,
        state_file: state,
        seed,
        rate_limit,
    })
    .await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", handle.base_url()).context("writing the base URL")?;
    out.flush()?;
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    handle.stop().await
}
