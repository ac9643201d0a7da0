//! fakehub: a GitHub-compatible simulator for autoforge's tests and demo.
//!
//! It serves GitHub's REST API (the subset in
//! `tests/fixtures/github/openapi-subset.json`), real git repositories over
//! smart HTTP, signed webhooks, and a control API under `/_fakehub/` for
//! setup and fault injection. Start it with [`start`]; the returned
//! [`Handle`] knows the URLs and exposes the control API as methods.

#![recursion_limit = "256"]

pub mod app_manifests;
pub mod auth;
pub mod control;
mod control_http;
pub mod faults;
pub mod faults_windows;
pub mod git;
mod git_http;
mod git_memo;
pub mod http;
mod middleware;
pub mod profiles;
pub mod render;
mod routes;
mod suspension;
mod webhooks;
pub mod world;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use control::{
    CheckSpec, CreatedApp, CreatedUser, MergeRules, NewApp, NewInstallation, RepoSpec, StatusSpec,
};
pub use faults::{FaultKind, FaultRule};
use world::World;

/// How to run a fakehub.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address; port 0 picks a free one.
    pub addr: SocketAddr,
    /// JSON snapshot loaded at start (when present) and saved while running.
    pub state_file: Option<PathBuf>,
    /// Seed of the fault RNG.
    pub seed: u64,
    /// Primary rate limit per token and hour (GitHub: 5,000; anonymous callers get 60).
    pub rate_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            state_file: None,
            seed: 0,
            rate_limit: 5000,
        }
    }
}

/// State shared by every request handler.
pub struct Shared {
    world: Mutex<World>,
    /// Base URL (`http://127.0.0.1:PORT`), no trailing slash.
    pub base: String,
    /// Directory holding the bare repositories (`<owner>/<name>.git`).
    pub repos_dir: PathBuf,
    faults: Mutex<faults::Faults>,
    /// Where requests matched by a hold fault wait until released.
    gates: faults::Gates,
    client: reqwest::Client,
    state_file: Option<PathBuf>,
    rate_limit: u64,
    dirty: AtomicBool,
    /// Milliseconds every smart-HTTP git request waits before it is served,
    /// so a test can look at the client's processes mid-transfer.
    git_latency_ms: AtomicU64,
    /// Manifests awaiting confirmation and codes awaiting conversion.
    manifest_flows: Mutex<app_manifests::Flows>,
    _tmp: Option<tempfile::TempDir>,
}

impl Shared {
    /// Lock the world. A poisoned lock is recovered: a panicking handler
    /// must not take the whole simulator down.
    pub fn lock(&self) -> MutexGuard<'_, World> {
        self.world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn manifest_flows(&self) -> MutexGuard<'_, app_manifests::Flows> {
        self.manifest_flows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn faults(&self) -> MutexGuard<'_, faults::Faults> {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long each git request is held before it is served.
    fn git_latency(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.git_latency_ms.load(Ordering::Relaxed))
    }

    fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Write the snapshot if anything changed since the last save.
    pub fn save_if_dirty(&self) -> anyhow::Result<()> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let text = serde_json::to_vec_pretty(&*self.lock())?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
        Ok(())
    }
}

/// A running fakehub. Dropping it stops the server.
pub struct Handle {
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Start a fakehub server and return once it accepts connections.
pub async fn start(config: Config) -> anyhow::Result<Handle> {
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding {}", config.addr))?;
    let addr = listener.local_addr()?;
    let base = format!("http://{addr}");
    let (world, repos_dir, tmp) = match &config.state_file {
        Some(path) => {
            let world = if path.exists() {
                let bytes =
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("parsing state snapshot {}", path.display()))?
            } else {
                World::default()
            };
            let mut dir = path.clone().into_os_string();
            dir.push(".repos");
            (world, PathBuf::from(dir), None)
        }
        None => {
            let tmp = tempfile::Builder::new().prefix("fakehub-").tempdir()?;
            (World::default(), tmp.path().to_path_buf(), Some(tmp))
        }
    };
    std::fs::create_dir_all(&repos_dir)
        .with_context(|| format!("creating {}", repos_dir.display()))?;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .user_agent(format!(
            "GitHub-Hookshot/fakehub-{}",
            env!("CARGO_PKG_VERSION")
        ))
        .build()?;
    let shared = Arc::new(Shared {
        world: Mutex::new(world),
        base,
        repos_dir,
        faults: Mutex::new(faults::Faults::new(config.seed)),
        gates: faults::Gates::default(),
        client,
        state_file: config.state_file.clone(),
        rate_limit: config.rate_limit,
        dirty: AtomicBool::new(false),
        git_latency_ms: AtomicU64::new(0),
        manifest_flows: Mutex::new(app_manifests::Flows::default()),
        _tmp: tmp,
    });
    let app = routes::router(shared.clone());
    let (tx, rx) = oneshot::channel::<()>();
    let saver = shared.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = rx.await;
        });
        let ticker = async {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                if let Err(e) = saver.save_if_dirty() {
                    tracing::warn!("saving fakehub state failed: {e:#}");
                }
            }
        };
        tokio::select! {
            r = serve => if let Err(e) = r { tracing::error!("fakehub server stopped: {e}") },
            () = ticker => {}
        }
        if let Err(e) = saver.save_if_dirty() {
            tracing::warn!("saving fakehub state failed: {e:#}");
        }
    });
    Ok(Handle {
        shared,
        shutdown: Some(tx),
        task: Some(task),
    })
}

impl Handle {
    /// Base URL of the REST API (pass to octocrab's `base_uri`).
    pub fn base_url(&self) -> &str {
        &self.shared.base
    }

    /// Clone URL of a repository (smart HTTP, on the same server).
    pub fn git_url(&self, owner: &str, repo: &str) -> String {
        format!("{}/{owner}/{repo}.git", self.shared.base)
    }

    /// The shared state, for in-process inspection.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stop serving and save the snapshot (when configured).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.context("fakehub server task panicked")?;
        }
        self.shared.mark_dirty();
        self.shared.save_if_dirty()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
