//! Where the tests find the real agent CLIs: the pinned packages that
//! `scripts/install-agent-clis.sh` puts in a cache outside the repository
//! (`$AUTOFORGE_AGENT_CLI_CACHE`, else `~/.cache/autoforge-agent-clis`),
//! one link per CLI under `bin/`. A missing CLI is installed by running
//! that script once per test process, so `cargo test --workspace` alone
//! runs every test; if that fails the test fails with the script's output.
//! Only `AUTOFORGE_REAL_AGENTS=skip` turns a missing CLI into a skip, a loud
//! one, without trying to install.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Set to `skip` to skip the real-agent tests when the CLIs are missing.
pub const REAL_AGENTS_VAR: &str = "AUTOFORGE_REAL_AGENTS";
/// The cache directory the install script fills.
pub const CACHE_VAR: &str = "AUTOFORGE_AGENT_CLI_CACHE";

/// One of the real CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentCli {
    ClaudeCode,
    Codex,
    OpenCode,
}

impl AgentCli {
    /// The executable's name under the cache's `bin/`.
    pub fn bin(self) -> &'static str {
        match self {
            AgentCli::ClaudeCode => "claude",
            AgentCli::Codex => "codex",
            AgentCli::OpenCode => "opencode",
        }
    }

    /// The pinned npm package (keep in step with the install script).
    pub fn package(self) -> &'static str {
        match self {
            AgentCli::ClaudeCode => "@anthropic-ai/claude-code@2.1.328",
            AgentCli::Codex => "@openai/codex@0.169.0",
            AgentCli::OpenCode => "opencode-ai@1.18.33",
        }
    }
}

/// The cache directory in use.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CACHE_VAR).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/autoforge-agent-clis"))
}

/// The CLI's path, or `None` (after saying so on stderr) when it is missing
/// and `AUTOFORGE_REAL_AGENTS=skip` is set.
///
/// # Panics
/// When the CLI is missing and skipping was not asked for: a real-agent
/// test must not pass without running its CLI.
pub fn require(cli: AgentCli) -> Option<PathBuf> {
    let path = cache_dir().map(|dir| dir.join("bin").join(cli.bin()));
    if let Some(path) = path.as_ref().filter(|p| p.is_file()) {
        return Some(path.clone());
    }
    let skip = std::env::var(REAL_AGENTS_VAR).as_deref() == Ok("skip");
    if !skip && let Some(path) = path.as_ref() {
        install_once();
        if path.is_file() {
            return Some(path.clone());
        }
    }
    let shown = path.map_or_else(
        || "(HOME is not set)".to_owned(),
        |p| p.display().to_string(),
    );
    let why = format!(
        "{} ({}) is not installed at {shown}; run scripts/install-agent-clis.sh",
        cli.bin(),
        cli.package()
    );
    if skip {
        eprintln!("SKIPPED: real agent test not run: {why} ({REAL_AGENTS_VAR}=skip is set)");
        return None;
    }
    panic!("{why}, or set {REAL_AGENTS_VAR}=skip to skip the real agent tests");
}

/// Runs `scripts/install-agent-clis.sh` once per process (tests of one
/// binary run in parallel and wait here for the first one's install). The
/// script is idempotent and installs into a staging folder renamed into
/// place, so a second process running it at the same time is harmless.
fn install_once() {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut tried = INSTALLED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *tried {
        return;
    }
    *tried = true;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-agent-clis.sh");
    eprintln!("real agent CLIs missing: running {}", script.display());
    match std::process::Command::new("bash").arg(&script).status() {
        Ok(status) if status.success() => {}
        Ok(status) => eprintln!("{} failed with {status}", script.display()),
        Err(error) => eprintln!("cannot run {}: {error}", script.display()),
    }
}
