//! modelserver: a scripted stand-in for the model APIs that coding-agent
//! CLIs call, so real Claude Code, Codex CLI and OpenCode binaries can run
//! offline in tests.
//!
//! It speaks the Anthropic Messages API (`POST /v1/messages`), the OpenAI
//! Responses API (`POST /v1/responses`) and OpenAI Chat Completions
//! (`POST /v1/chat/completions`), streaming or not. A test loads one
//! [`Script`] per conversation role; a request is answered by the first
//! script whose marker appears in its user messages, at the step given by
//! the number of tool results it carries. Every request is logged, every
//! other route gets a 404, and the usage claimed in each reply is kept per
//! script. Start it with [`start`]; the [`Handle`] loads scripts, releases
//! holds and reads the log, as does the HTTP control API under
//! `/_modelserver/`. [`bridge`] carries a CLI's connections out of a
//! network namespace that has nothing but loopback.

mod anthropic;
pub mod bridge;
mod chat;
pub mod clis;
mod control;
mod conversation;
mod responses;
pub mod script;
mod state;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use conversation::Wire;
pub use script::{
    Action, Capture, CaptureSource, Fault, FaultKind, Script, ScriptError, Step, Usage,
};
use state::Shared;
pub use state::{Claim, Outcome, RequestRecord, SIDE_REPLY};

/// How to run a modelserver.
#[derive(Debug, Clone)]
pub struct Config {
    /// TCP listen address; must be a loopback address. Port 0 picks one.
    pub addr: SocketAddr,
    /// Also serve on this Unix socket (what [`bridge`] connects to).
    pub unix_socket: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            unix_socket: None,
        }
    }
}

/// A running modelserver. Dropping it stops the server.
pub struct Handle {
    shared: Arc<Shared>,
    base: String,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Starts a server and returns once it accepts connections.
pub async fn start(config: Config) -> anyhow::Result<Handle> {
    anyhow::ensure!(
        config.addr.ip().is_loopback(),
        "the modelserver listens on loopback only, not {}",
        config.addr
    );
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding {}", config.addr))?;
    let base = format!("http://{}", listener.local_addr()?);
    let shared = Arc::new(Shared::default());
    let app = control::router(shared.clone());
    let (shutdown, _) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut stop = shutdown.subscribe();
    let tcp_app = app.clone();
    tasks.push(tokio::spawn(async move {
        let serve = axum::serve(listener, tcp_app)
            .with_graceful_shutdown(async move { drop(stop.wait_for(|s| *s).await) });
        if let Err(e) = serve.await {
            tracing::error!("modelserver stopped: {e}");
        }
    }));
    if let Some(path) = &config.unix_socket {
        let unix = tokio::net::UnixListener::bind(path)
            .with_context(|| format!("binding the Unix socket {}", path.display()))?;
        let mut stop = shutdown.subscribe();
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(unix, app)
                .with_graceful_shutdown(async move { drop(stop.wait_for(|s| *s).await) });
            if let Err(e) = serve.await {
                tracing::error!("modelserver (Unix socket) stopped: {e}");
            }
        }));
    }
    Ok(Handle {
        shared,
        base,
        shutdown,
        tasks,
    })
}

impl Handle {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Loads a script; names must be unique.
    pub fn load(&self, script: Script) -> Result<(), ScriptError> {
        self.shared.load(script)
    }

    /// Lets every request held by a `Hang` fault of `script` go on (and any
    /// later one: a released hold stays open). False when no such script.
    pub fn release(&self, script: &str) -> bool {
        self.shared.release(script)
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.requests()
    }

    /// The replies `script` sent whole, with the usage each claimed.
    pub fn claims(&self, script: &str) -> Vec<Claim> {
        self.shared.claims().remove(script).unwrap_or_default()
    }

    /// The usage `script` claimed in its step replies, cut ones included
    /// for what they carried (side replies, such as OpenCode's title
    /// request, are left out: the CLIs do not count them).
    pub fn claimed(&self, script: &str) -> Usage {
        self.claims(script)
            .iter()
            .filter(|c| !c.side)
            .fold(Usage::default(), |sum, c| sum.plus(c.usage))
    }

    /// Stops serving.
    pub async fn stop(mut self) {
        self.shutdown.send_replace(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}
