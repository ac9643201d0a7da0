//! The throw-away repository one probe works in, with its random marker,
//! and the git reads that judge what the agent did there. It lives in a
//! temporary directory under the state directory (beside where real
//! worktrees live, outside `/tmp`, which each launch replaces with its own)
//! and is removed with everything the launch left when dropped.
//!
//! Its git calls go through the controller's hardened runner
//! ([`crate::workspace::Git`]): the agent wrote this repository, and its
//! `.git/config` (hooks, fsmonitor) must not run anything as the controller.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::workspace::Git;

/// The file a read probe must read the marker from.
pub const MARKER_FILE: &str = "autoforge-probe.txt";

/// One probe's directories: `repo/` (the agent's working directory) and
/// `launch/` (logs, HOME and TMPDIR of the launch, outside the repository).
pub struct ProbeRepo {
    dir: tempfile::TempDir,
    git: Git,
    pub marker: String,
}

impl ProbeRepo {
    /// A repository with one commit holding a README and the marker file.
    pub async fn create(parent: &Path) -> anyhow::Result<ProbeRepo> {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        let dir = tempfile::Builder::new()
            .prefix("probe-")
            .tempdir_in(parent)
            .with_context(|| format!("cannot create a probe directory in {}", parent.display()))?;
        let marker = format!("probe-{}", uuid::Uuid::new_v4().simple());
        // git's HOME: an empty directory of ours, outside the repository.
        let git_home = dir.path().join("git-home");
        std::fs::create_dir(&git_home).context("cannot create the probe's git home")?;
        let probe = ProbeRepo {
            dir,
            git: Git::new(git_home),
            marker,
        };
        let repo = probe.repo();
        std::fs::create_dir(&repo).context("cannot create the probe repository")?;
        probe.git(&["init", "-q", "-b", "main"]).await?;
        // The launch's HOME is fresh, so without a local identity any
        // agent's commit would fail for a reason the probe is not about;
        // the probe's own first commit uses it too.
        probe
            .git(&["config", "user.name", "autoforge-probe"])
            .await?;
        probe
            .git(&["config", "user.email", "probe@autoforge.invalid"])
            .await?;
        std::fs::write(
            repo.join("README.md"),
            "A throw-away repository for `autoforge doctor --probe`.\n",
        )
        .context("cannot write the probe README")?;
        std::fs::write(repo.join(MARKER_FILE), format!("{}\n", probe.marker))
            .context("cannot write the marker file")?;
        probe.git(&["add", "-A"]).await?;
        probe.git(&["commit", "-qm", "Probe repository"]).await?;
        Ok(probe)
    }

    pub fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    pub fn launch_dir(&self) -> PathBuf {
        self.dir.path().join("launch")
    }

    /// The file a write probe must create and commit.
    pub fn written_file(&self) -> String {
        format!("{}.txt", self.marker)
    }

    /// HEAD, the tracked and untracked paths and their status: what a read
    /// probe must leave as it found it.
    pub async fn fingerprint(&self) -> anyhow::Result<String> {
        let head = self.git(&["rev-parse", "HEAD"]).await?;
        let status = self.git(&["status", "--porcelain", "--ignored"]).await?;
        Ok(format!("{head}\n{status}"))
    }

    /// What the write probe left: whether HEAD holds the file with the
    /// marker in a commit of its own, else whether the file is at least
    /// in the work tree.
    pub async fn written(&self) -> anyhow::Result<Written> {
        let repo = self.repo();
        let commits: u32 = self
            .git(&["rev-list", "--count", "HEAD"])
            .await?
            .parse()
            .context("git rev-list printed no count")?;
        let file = self.written_file();
        if commits > 1 {
            let spec = format!("HEAD:{file}");
            if let Ok(text) = self.git(&["show", &spec]).await
                && text.trim() == self.marker
            {
                return Ok(Written::Committed);
            }
        }
        Ok(match std::fs::read_to_string(repo.join(&file)) {
            Ok(_) => Written::NotCommitted,
            Err(_) if commits > 1 => Written::OtherCommit,
            Err(_) => Written::Nothing,
        })
    }

    /// git in the repository; its trimmed stdout.
    async fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        Ok(self.git.run_text(&self.repo(), &args).await?)
    }

    /// Removes the directory now, reporting a failure instead of ignoring it.
    pub fn remove(self) -> anyhow::Result<()> {
        let path = self.dir.path().to_path_buf();
        self.dir
            .close()
            .with_context(|| format!("cannot remove the probe directory {}", path.display()))
    }
}

/// What a write probe found in the repository afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file, with the marker, is in a new commit at HEAD.
    Committed,
    /// The file is there but was not committed.
    NotCommitted,
    /// A new commit, but without the file and marker asked for.
    OtherCommit,
    /// Neither file nor commit.
    Nothing,
}
