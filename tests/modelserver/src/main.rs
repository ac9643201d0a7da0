//! `modelserver serve` runs the scripted model server until killed, printing
//! its base URL as the first line of stdout; `modelserver bridge` runs a
//! command in a loopback-only network namespace with its model traffic
//! carried to a server's Unix socket.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "modelserver",
    about = "A scripted model server (Anthropic Messages, OpenAI Responses, Chat Completions)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve until killed.
    Serve {
        /// Loopback listen address; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// Also serve on this Unix socket.
        #[arg(long)]
        unix_socket: Option<PathBuf>,
        /// A JSON file holding an array of scripts to load at start.
        #[arg(long)]
        scripts: Option<PathBuf>,
    },
    /// Run a command, carrying connections to a loopback port over to a
    /// server's Unix socket until the command exits (with its status).
    Bridge {
        /// Loopback address to listen on (inside the namespace).
        #[arg(long)]
        listen: SocketAddr,
        /// The server's Unix socket.
        #[arg(long)]
        to: PathBuf,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve {
            addr,
            unix_socket,
            scripts,
        } => serve(addr, unix_socket, scripts).await,
        Command::Bridge {
            listen,
            to,
            mut command,
        } => {
            let program = command.remove(0);
            let code = modelserver::bridge::run(listen, to, program, command).await?;
            std::process::exit(code);
        }
    }
}

async fn serve(
    addr: SocketAddr,
    unix_socket: Option<PathBuf>,
    scripts: Option<PathBuf>,
) -> anyhow::Result<()> {
    let handle = modelserver::start(modelserver::Config { addr, unix_socket }).await?;
    if let Some(path) = scripts {
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let scripts: Vec<modelserver::Script> = serde_json::from_slice(&text)
            .with_context(|| format!("parsing the scripts in {}", path.display()))?;
        for script in scripts {
            handle.load(script)?;
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", handle.base_url()).context("writing the base URL")?;
    out.flush()?;
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    handle.stop().await;
    Ok(())
}
