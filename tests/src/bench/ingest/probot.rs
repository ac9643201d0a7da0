//! The Probot reference: `tests/bench-tools/probot-server.mjs` run by Node
//! from a folder whose `node_modules` is the pinned Probot install
//! (`scripts/install-bench-tools.sh`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The Probot release the figures are measured against (kept equal to the
/// install script's pin).
pub const PROBOT_VERSION: &str = "14.3.2";

/// A running Probot server; killed when dropped.
pub struct Probot {
    pub url: String,
    _child: Child,
    _folder: tempfile::TempDir,
}

/// Where the install script keeps the bench tools.
fn tools_cache() -> PathBuf {
    std::env::var_os("AUTOFORGE_BENCH_TOOLS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/autoforge-bench-tools"))
        })
        .unwrap_or_else(|| PathBuf::from(".cache/autoforge-bench-tools"))
}

impl Probot {
    /// Starts Probot on a free port of 127.0.0.1 with `secret`, taking
    /// deliveries at `path`; returns once it listens.
    pub async fn start(secret: &str, path: &str) -> anyhow::Result<Probot> {
        let modules = tools_cache()
            .join(format!("probot@{PROBOT_VERSION}"))
            .join("node_modules");
        if !modules.join("probot/package.json").is_file() {
            bail!(
                "Probot {PROBOT_VERSION} is not installed in {}: run scripts/install-bench-tools.sh",
                modules.display()
            );
        }
        let folder = tempfile::tempdir()?;
        std::os::unix::fs::symlink(&modules, folder.path().join("node_modules"))?;
        let server = folder.path().join("probot-server.mjs");
        std::fs::copy(
            crate::repo_root().join("tests/bench-tools/probot-server.mjs"),
            &server,
        )?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut child = Command::new("node")
            .arg(&server)
            .env("BENCH_PORT", port.to_string())
            .env("BENCH_SECRET", secret)
            .env("BENCH_PATH", path)
            .env("NODE_ENV", "production")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting node for the Probot reference")?;
        let stdout = child.stdout.take().context("Probot's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if line.trim() == "listening" {
                    return anyhow::Ok(());
                }
            }
            bail!("Probot exited before it listened")
        });
        ready.await.context("Probot did not start within 30 s")??;
        // Keep reading, so a line Probot prints later never blocks it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Probot {
            url: format!("http://127.0.0.1:{port}{path}"),
            _child: child,
            _folder: folder,
        })
    }
}
