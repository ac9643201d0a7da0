//! The bare mirror of one repository: fetching exact commits, reading
//! ancestry and commit messages, and exporting a commit's tree.
//!
//! Agents commit inside worktrees whose common git directory is this mirror,
//! so an agent can write to its `config`, hooks and `info/attributes`. The
//! mirror's [`Git`] pins the mirror (see [`super::pin`]) right before every
//! command it runs — fetches, pushes, and the `git status` of its worktrees
//! alike — so a planted proxy, hook, filter or `export-ignore` rule never
//! changes what the controller sends, checks out or exports.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use secrecy::SecretString;
use tempfile::TempDir;

use super::git::{Git, GitError, failure};
use super::pin::pin;
use super::{CommitSha, WorkspaceError, Workspaces, check_name};

/// One commit of a range, for the commit-message policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMessage {
    pub sha: CommitSha,
    pub message: String,
}

/// A bare mirror under `<state_dir>/repos/<owner>/<repo>.git`.
#[derive(Debug, Clone)]
pub struct Mirror {
    owner: String,
    repo: String,
    url: String,
    path: PathBuf,
    worktrees: PathBuf,
    exports: PathBuf,
    git: Git,
    /// Held while the mirror is created and while a worktree is
    /// registered in it (see [`Workspaces::mirror_lock`]).
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Mirror {
    /// Opens the mirror of `owner/repo`, creating it if absent. `url` must
    /// not carry credentials; the token goes to [`Mirror::fetch_shas`].
    pub async fn ensure(
        workspaces: &Workspaces,
        owner: &str,
        repo: &str,
        url: &str,
    ) -> Result<Self, WorkspaceError> {
        let (owner, repo) = (check_name(owner)?, check_name(repo)?);
        if url_has_userinfo(url) {
            return Err(WorkspaceError::UrlHasCredentials);
        }
        let root = workspaces.state_dir();
        let parent = root.join("repos").join(owner);
        super::private_dir(&parent)?;
        let path = parent.join(format!("{repo}.git"));
        let mirror = Self {
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            url: url.to_owned(),
            worktrees: root.join("worktrees").join(owner).join(repo),
            exports: root.join("exports"),
            git: workspaces.git().pinning(&path),
            lock: workspaces.mirror_lock(&path),
            path,
        };
        let creating = mirror.locked().await;
        if !mirror.path.join("HEAD").is_file() {
            let args = [
                OsStr::new("init"),
                OsStr::new("--bare"),
                OsStr::new("--quiet"),
                mirror.path.as_os_str(),
            ];
            // Not pinned: there is nothing to pin before `init`.
            workspaces.git().run(&parent, &args, None).await?;
        }
        mirror.restore_config()?;
        drop(creating);
        Ok(mirror)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for the mirror's lock (worktree registration holds it).
    pub(super) async fn locked(&self) -> tokio::sync::OwnedMutexGuard<()> {
        Arc::clone(&self.lock).lock_owned().await
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// The runner bound to this mirror: every command it starts pins the
    /// mirror first.
    pub fn git(&self) -> &Git {
        &self.git
    }

    pub(crate) fn worktrees_dir(&self) -> &Path {
        &self.worktrees
    }

    /// Rewrites the mirror's config and deletes hooks and planted files,
    /// undoing anything an agent wrote through its worktree. Every command
    /// of [`Mirror::git`] does this by itself; this is for callers that
    /// touch the mirror's files directly.
    pub fn restore_config(&self) -> Result<(), WorkspaceError> {
        pin(&self.path).map_err(|source| {
            WorkspaceError::Git(GitError::Pin {
                command: "(restore)".to_owned(),
                source,
            })
        })
    }

    /// Runs git against the bare mirror.
    pub(crate) async fn run(&self, args: &[&OsStr]) -> Result<Vec<u8>, WorkspaceError> {
        let mut full = vec![OsStr::new("--git-dir"), self.path.as_os_str()];
        full.extend_from_slice(args);
        Ok(self.git.run(&self.path, &full, None).await?)
    }

    /// Whether the mirror holds commit `sha`.
    pub async fn has_commit(&self, sha: &CommitSha) -> Result<bool, WorkspaceError> {
        let object = format!("{sha}^{{commit}}");
        let args = [
            OsStr::new("--git-dir"),
            self.path.as_os_str(),
            OsStr::new("cat-file"),
            OsStr::new("-e"),
            OsStr::new(&object),
        ];
        let output = self.git.output(&self.path, &args, None).await?;
        Ok(output.status.success())
    }

    /// Fetches the objects of exactly these commits (objects only: no ref
    /// is created or moved, no tags follow). Commits already present are not
    /// fetched again. GitHub serves any reachable SHA.
    pub async fn fetch_shas(
        &self,
        shas: &[CommitSha],
        credential: Option<&SecretString>,
    ) -> Result<(), WorkspaceError> {
        let mut missing = Vec::new();
        for sha in shas {
            if !self.has_commit(sha).await? && !missing.contains(sha) {
                missing.push(sha.clone());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let mut args = vec![
            OsStr::new("--git-dir"),
            self.path.as_os_str(),
            OsStr::new("fetch"),
            OsStr::new("--quiet"),
            OsStr::new("--no-tags"),
            OsStr::new("--no-write-fetch-head"),
            OsStr::new("--no-recurse-submodules"),
            OsStr::new(&self.url),
        ];
        args.extend(missing.iter().map(|sha| OsStr::new(sha.as_str())));
        let output = self.git.output(&self.path, &args, credential).await?;
        if !output.status.success() {
            return Err(failure(&args, &output, credential).into());
        }
        for sha in &missing {
            if !self.has_commit(sha).await? {
                return Err(WorkspaceError::MissingCommit(sha.clone()));
            }
        }
        Ok(())
    }

    /// The text of the regular file `name` at the root of `sha`'s tree, cut
    /// to `max_bytes`; `None` when there is no such file.
    pub async fn file_at(
        &self,
        sha: &CommitSha,
        name: &str,
        max_bytes: usize,
    ) -> Result<Option<String>, WorkspaceError> {
        let listing = self
            .run(&[
                OsStr::new("ls-tree"),
                OsStr::new("-z"),
                sha.as_ref(),
                OsStr::new("--"),
                OsStr::new(name),
            ])
            .await?;
        // `<mode> blob <oid>\t<name>`: only a regular file counts, never a
        // symlink whose target the agent's tree could choose.
        let entry = String::from_utf8_lossy(&listing);
        if !(entry.starts_with("100644 blob ") || entry.starts_with("100755 blob ")) {
            return Ok(None);
        }
        let object = format!("{sha}:{name}");
        let mut bytes = self
            .run(&[
                OsStr::new("cat-file"),
                OsStr::new("blob"),
                OsStr::new(&object),
            ])
            .await?;
        bytes.truncate(max_bytes);
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors. A missing
    /// object is an error, never a "no".
    pub async fn is_ancestor(
        &self,
        ancestor: &CommitSha,
        descendant: &CommitSha,
    ) -> Result<bool, WorkspaceError> {
        let args = [
            OsStr::new("--git-dir"),
            self.path.as_os_str(),
            OsStr::new("merge-base"),
            OsStr::new("--is-ancestor"),
            ancestor.as_ref(),
            descendant.as_ref(),
        ];
        let output = self.git.output(&self.path, &args, None).await?;
        match output.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(failure(&args, &output, None).into()),
        }
    }

    /// Commits reachable from `head` but not from `base`, oldest first.
    pub async fn new_commits(
        &self,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<Vec<CommitSha>, WorkspaceError> {
        let range = format!("{base}..{head}");
        let out = self
            .run(&[
                OsStr::new("rev-list"),
                OsStr::new("--reverse"),
                OsStr::new(&range),
            ])
            .await?;
        String::from_utf8_lossy(&out)
            .lines()
            .map(|line| CommitSha::parse(line).map_err(WorkspaceError::from))
            .collect()
    }

    /// Every path `head` changes since its merge base with `base`: what a
    /// push of `head` would add to the branch's diff against `base`, the
    /// commits already on the branch included. A rename lists its old and
    /// its new path, so a protected file cannot leave unnoticed.
    pub async fn changed_paths(
        &self,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<Vec<String>, WorkspaceError> {
        let range = format!("{base}...{head}");
        let out = self
            .run(&[
                OsStr::new("diff"),
                OsStr::new("--name-only"),
                OsStr::new("-z"),
                OsStr::new("--no-renames"),
                OsStr::new("--no-ext-diff"),
                OsStr::new("--no-textconv"),
                OsStr::new(&range),
                OsStr::new("--"),
            ])
            .await?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|path| !path.is_empty())
            .map(|path| String::from_utf8_lossy(path).into_owned())
            .collect())
    }

    /// The full message of every commit in `base..head`, oldest first.
    pub async fn commit_messages(
        &self,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<Vec<CommitMessage>, WorkspaceError> {
        let range = format!("{base}..{head}");
        let out = self
            .run(&[
                OsStr::new("log"),
                OsStr::new("-z"),
                OsStr::new("--reverse"),
                OsStr::new("--no-show-signature"),
                OsStr::new("--format=%H%n%B"),
                OsStr::new(&range),
            ])
            .await?;
        String::from_utf8_lossy(&out)
            .split('\0')
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let (sha, message) = entry.split_once('\n').unwrap_or((entry, ""));
                Ok(CommitMessage {
                    sha: CommitSha::parse(sha)?,
                    message: message.to_owned(),
                })
            })
            .collect()
    }

    /// The tree of `sha` and nothing else — no `.git`, no untracked or
    /// ignored files, no build outputs — in a temporary directory removed
    /// when the returned value drops.
    ///
    /// The tree is checked out through a throw-away index rather than
    /// `git archive`, because `archive` honours `export-ignore` and
    /// `export-subst` from the commit's own `.gitattributes`: a candidate
    /// could drop its failing tests from what validation sees while pushing
    /// them. The restored mirror config defines no filter driver, so only
    /// the conversions any checkout performs (line endings) apply.
    pub async fn export(&self, sha: &CommitSha) -> Result<TempDir, WorkspaceError> {
        if !self.has_commit(sha).await? {
            return Err(WorkspaceError::MissingCommit(sha.clone()));
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("export-{}-", &sha.as_str()[..12]))
            .tempdir_in(&self.exports)
            .map_err(WorkspaceError::io("cannot create export in", &self.exports))?;
        let index = tempfile::Builder::new()
            .prefix("export-index-")
            .tempdir_in(&self.exports)
            .map_err(WorkspaceError::io("cannot create export in", &self.exports))?;
        let index_file = index.path().join("index");
        let tree = format!("{sha}^{{tree}}");
        let steps: [Vec<&OsStr>; 2] = [
            vec![
                OsStr::new("--git-dir"),
                self.path.as_os_str(),
                OsStr::new("read-tree"),
                OsStr::new(&tree),
            ],
            vec![
                OsStr::new("--git-dir"),
                self.path.as_os_str(),
                OsStr::new("--work-tree"),
                dir.path().as_os_str(),
                OsStr::new("checkout-index"),
                OsStr::new("--all"),
                OsStr::new("--force"),
            ],
        ];
        for args in &steps {
            let output = self
                .git
                .command(&self.path, args, None)?
                .env("GIT_INDEX_FILE", &index_file)
                .output()
                .await
                .map_err(|e| WorkspaceError::Export {
                    sha: sha.clone(),
                    reason: format!("cannot run git: {e}"),
                })?;
            if !output.status.success() {
                return Err(failure(args, &output, None).into());
            }
        }
        Ok(dir)
    }
}

/// Whether a URL has a `user@` or `user:password@` part before its host.
fn url_has_userinfo(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_userinfo_are_recognised() {
        assert!(url_has_userinfo(
            "https://x-access-token:t@github.com/o/r.git"
        ));
        assert!(url_has_userinfo("https://token@github.com/o/r.git"));
        assert!(!url_has_userinfo("https://github.com/o/r.git"));
        assert!(!url_has_userinfo("https://github.com/o/r@main"));
        assert!(!url_has_userinfo("file:///tmp/remote.git"));
    }
}
