//! Real git, the scripted agents under `tests/agents/`, and child runs of
//! the test binary itself.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use autoforge::workspace::CommitSha;
use tempfile::TempDir;

/// The path of a scripted agent in `tests/agents/`.
pub fn agent_script(script: &str) -> String {
    format!("{}/../tests/agents/{script}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs git in `dir` with a fixed identity and returns its trimmed stdout;
/// a failure fails the test with git's stderr.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = StdCommand::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A repository playing GitHub, with helpers to commit to it. `path` is a
/// working repository; with [`Upstream::bare`] every commit is also pushed
/// to a bare repository, which is then what [`Upstream::url`] serves.
pub struct Upstream {
    _dir: TempDir,
    pub path: PathBuf,
    bare: Option<PathBuf>,
}

impl Upstream {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("upstream");
        std::fs::create_dir(&path).unwrap();
        git(&path, &["init", "-q", "-b", "main"]);
        Self {
            _dir: dir,
            path,
            bare: None,
        }
    }

    /// An upstream served from a `git init --bare` repository.
    pub fn bare() -> Self {
        let mut upstream = Self::new();
        let bare = upstream._dir.path().join("remote.git");
        git(
            upstream._dir.path(),
            &["init", "-q", "--bare", "-b", "main", "remote.git"],
        );
        git(
            &upstream.path,
            &["remote", "add", "origin", bare.to_str().unwrap()],
        );
        upstream.bare = Some(bare);
        upstream
    }

    pub fn url(&self) -> String {
        format!(
            "file://{}",
            self.bare.as_ref().unwrap_or(&self.path).display()
        )
    }

    pub fn commit(&self, file: &str, content: &str, message: &str) -> CommitSha {
        let full = self.path.join(file);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
        git(&self.path, &["add", file]);
        git(&self.path, &["commit", "-q", "-m", message]);
        if self.bare.is_some() {
            git(
                &self.path,
                &["push", "-q", "origin", "HEAD:refs/heads/main"],
            );
        }
        CommitSha::parse(&git(&self.path, &["rev-parse", "HEAD"])).unwrap()
    }
}

/// Controller credentials a child test process is started with, so that an
/// agent launched there could leak them if the allow-list failed.
pub const LEAKABLE_CREDENTIALS: [(&str, &str); 5] = [
    ("GITHUB_TOKEN", "ghs_leakedtokenvalue000000000000"),
    ("GH_TOKEN", "leaked-gh-token-value"),
    ("AUTOFORGE_GITHUB_TOKEN", "leaked-autoforge-token"),
    ("AUTOFORGE_WEBHOOK_SECRET", "leaked-webhook-secret"),
    ("DATABASE_URL", "postgres://u:leakedpassword@db/x"),
];

/// The name libtest gives the test `name` of the module `module` (pass
/// `module_path!()`): the path below the binary's crate root. A child run of
/// this binary must use it with `--exact`, since the tests of one area share
/// a binary and live in modules.
pub fn test_in(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, below)) => format!("{below}::{name}"),
        None => name.to_owned(),
    }
}

/// Runs the ignored test `name` (as [`test_in`] spells it) of this test binary in a child process
/// with `flag` and `env` set for that process alone (changing the
/// environment of the threads running the other tests is not sound), and
/// fails unless it ran and passed.
pub fn run_child_test(name: &str, flag: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let out = StdCommand::new(exe)
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(flag, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run: {stdout}"
    );
}
