//! `modelserver bridge`: runs a command inside a network namespace that has
//! only loopback, while the modelserver itself runs outside it. The bridge
//! listens on a loopback TCP port inside the namespace and carries each
//! connection to the server's Unix socket (a filesystem path, which crosses
//! the namespace boundary where TCP cannot). It exits with the command's
//! status once the command ends, so nothing of it outlives the launch.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use tokio::net::{TcpListener, UnixStream};

/// Carries connections to `listen` over to `socket` while `program` runs;
/// returns the exit code to leave with (128 + signal when it was killed).
pub async fn run(
    listen: SocketAddr,
    socket: PathBuf,
    program: OsString,
    args: Vec<OsString>,
) -> anyhow::Result<i32> {
    anyhow::ensure!(
        listen.ip().is_loopback(),
        "the bridge listens on loopback only"
    );
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen} (is loopback up in this namespace?)"))?;
    let mut child = tokio::process::Command::new(&program)
        .args(&args)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.context("waiting for the command")?,
            accepted = listener.accept() => {
                let Ok((mut tcp, _)) = accepted else { continue };
                let socket = socket.clone();
                tokio::spawn(async move {
                    match UnixStream::connect(&socket).await {
                        Ok(mut unix) => {
                            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                        }
                        Err(e) => tracing::warn!("bridge: connecting {}: {e}", socket.display()),
                    }
                });
            }
        }
    };
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
