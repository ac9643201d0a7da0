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
//! The mirror has no remote and no refs of its own: fetches name the URL and
//! exact SHAs, so objects arrive and nothing else changes. Worktrees keep
//! the fetched commits reachable.

mod git;
mod mirror;
mod worktree;

use std::fmt;
use std::path::{Path, PathBuf};

pub use git::{Git, GitError};
pub use mirror::{CommitMessage, Mirror};
pub use worktree::{Worktree, WorktreeFingerprint};

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("`{0}` is not a usable repository owner or name")]
    InvalidName(String),
    #[error("`{0}` is not a 40-hex commit SHA")]
    InvalidSha(String),
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

/// A full commit id: 40 hex digits, stored lower-case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitSha(String);

impl CommitSha {
    pub fn parse(text: &str) -> Result<Self, WorkspaceError> {
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(text.to_ascii_lowercase()))
        } else {
            Err(WorkspaceError::InvalidSha(text.chars().take(64).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<std::ffi::OsStr> for CommitSha {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

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

/// The root of all git state under the controller's state directory.
#[derive(Debug, Clone)]
pub struct Workspaces {
    root: PathBuf,
    git: Git,
}

impl Workspaces {
    /// Creates the directory layout if needed.
    pub fn open(state_dir: &Path) -> Result<Self, WorkspaceError> {
        for sub in ["repos", "worktrees", "exports", "git-home"] {
            let dir = state_dir.join(sub);
            std::fs::create_dir_all(&dir).map_err(WorkspaceError::io("cannot create", &dir))?;
        }
        Ok(Self {
            root: state_dir.to_owned(),
            git: Git::new(state_dir.join("git-home")),
        })
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
