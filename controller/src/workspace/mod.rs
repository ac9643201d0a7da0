//! Mirror clones, per-issue worktrees, clean exports and credential-safe git
//! transport (SPEC §13 "Worktrees", §12 "fresh export").
//!
//! Layout under the state directory:
//!
//! ```text
//! <state_dir>/repos/<owner>/<repo>.git          bare mirror, one per repository
//! <state_dir>/worktrees/<owner>/<repo>/<issue>  detached worktree, one per issue
//! <state_dir>/exports/export-*                  temporary exports, removed on drop
//! <state_dir>/git-home/                         empty HOME for every git process
//! ```
//!
//! The mirror has no remote and no branches: fetches name the URL and exact
//! SHAs, so objects arrive and nothing else changes. Worktrees keep the
//! fetched commits reachable, and `refs/autoforge/kept/<issue>` keeps an
//! agent's last candidate reachable across a worktree reset (it is never
//! pushed: pushes name a SHA and one remote branch). Every directory here is created private
//! to the controller's user (0700), whatever the umask.

mod continuation;
mod git;
mod mirror;
mod pin;
mod worktree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use continuation::{MAX_STATUS_ENTRIES, Prepared, WorkMode, kept_ref};
pub use git::{Git, GitError};
pub use mirror::{CommitMessage, Mirror};
pub use worktree::{Worktree, WorktreeFingerprint};

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("`{0}` is not a usable repository owner or name")]
    InvalidName(String),
    #[error(transparent)]
    InvalidSha(#[from] autoforge_journal::GithubIdError),
    #[error("the remote URL carries credentials; pass the token separately")]
    UrlHasCredentials,
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("commit {0} is not in the mirror after fetching it")]
    MissingCommit(CommitSha),
    #[error("{} is no longer a worktree of its mirror", .0.display())]
    NotOurWorktree(PathBuf),
    #[error("export of {sha} failed: {reason}")]
    Export { sha: CommitSha, reason: String },
}

impl WorkspaceError {
    fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }
}

/// The one commit-id type, defined with GitHub's other identities.
pub use autoforge_journal::CommitSha;

/// An owner or repository name safe to use as one path component: GitHub's
/// alphabet, and never `.`/`..` or a leading dot.
fn check_name(name: &str) -> Result<&str, WorkspaceError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(name)
    } else {
        Err(WorkspaceError::InvalidName(
            name.chars().take(100).collect(),
        ))
    }
}

/// Creates `dir` and any missing parents with mode 0700, and narrows an
/// existing `dir` to 0700: a directory only this user may enter keeps
/// mirrors, worktrees and their histories from other local accounts.
pub(crate) fn private_dir(dir: &Path) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(WorkspaceError::io("cannot create", dir))?;
    // The mode above is filtered through the umask (and skipped for a
    // directory that already existed); set it outright.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(WorkspaceError::io("cannot restrict", dir))
}

/// Creates the state directory if needed (its parents with ordinary
/// permissions), narrows it to 0700, and sets this process's umask to 077
/// so that everything created from now on — by the controller or by the git
/// and agent processes it starts, which inherit the umask — is 0700/0600
/// whatever umask the operator started it with. The one bit kept is group-execute:
/// the managed Postgres grants it to its server account's group when that
/// account differs from ours, so the server can reach its own data
/// directory by name while listing and reading nothing else here. Any
/// other group keeps nothing.
pub fn restrict_state_dir(dir: &Path) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    // Parents are created under the operator's umask: the managed cluster's
    // server account may have to pass through them.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(WorkspaceError::io("cannot create", parent))?;
    }
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(WorkspaceError::io("cannot create", dir)(e));
        }
        _ => {}
    }
    let meta = std::fs::metadata(dir).map_err(WorkspaceError::io("cannot inspect", dir))?;
    let server_group = autoforge_journal::localpg::server_group();
    let keep = if server_group == Some(meta.gid()) {
        meta.mode() & 0o010
    } else {
        0
    };
    let mode = 0o700 | keep;
    if meta.mode() & 0o7777 != mode {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(WorkspaceError::io("cannot restrict", dir))?;
    }
    Ok(())
}

/// The root of all git state under the controller's state directory.
#[derive(Debug, Clone)]
pub struct Workspaces {
    root: PathBuf,
    git: Git,
    /// One lock per mirror, shared by every clone of this value: creating
    /// a mirror and registering a worktree in it must not interleave (a
    /// `git worktree prune` of one run deletes the half-made entry of
    /// another run's `git worktree add`).
    locks: Arc<std::sync::Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Workspaces {
    /// Creates the directory layout if needed, each directory 0700.
    pub fn open(state_dir: &Path) -> Result<Self, WorkspaceError> {
        restrict_state_dir(state_dir)?;
        for sub in ["repos", "worktrees", "exports", "git-home"] {
            private_dir(&state_dir.join(sub))?;
        }
        Ok(Self {
            root: state_dir.to_owned(),
            git: Git::new(state_dir.join("git-home")),
            locks: Arc::default(),
        })
    }

    /// The lock of the mirror at `path` (see [`Workspaces::locks`]).
    pub(super) fn mirror_lock(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(path.to_owned()).or_default())
    }

    pub fn state_dir(&self) -> &Path {
        &self.root
    }

    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The mirror of `owner/repo`, created on first use.
    pub async fn mirror(
        &self,
        owner: &str,
        repo: &str,
        url: &str,
    ) -> Result<Mirror, WorkspaceError> {
        Mirror::ensure(self, owner, repo, url).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shas_are_forty_hex_digits_stored_lower_case() {
        let upper = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
        assert_eq!(
            CommitSha::parse(upper).unwrap().as_str(),
            upper.to_ascii_lowercase()
        );
        for bad in ["", "abc", &"g".repeat(40), &"a".repeat(41)] {
            assert!(CommitSha::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_cannot_escape_their_directory() {
        assert!(check_name("rust-lang").is_ok());
        assert!(check_name("my.repo_1").is_ok());
        for bad in ["", ".", "..", ".git", "a/b", "a b", "x\0"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
