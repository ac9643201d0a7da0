//! The per-issue worktree: created detached at a commit, reused across
//! phases, reset on request, and fingerprinted so a read-only phase that
//! changed anything is caught.

use autoforge_journal::IssueNumber;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::mirror::Mirror;
use super::{CommitSha, WorkspaceError};

/// Files larger than this are fingerprinted by size and modification time
/// instead of content, so a stray multi-gigabyte artefact cannot stall us.
const HASH_CONTENT_LIMIT: u64 = 64 * 1024 * 1024;

/// The observable state of a worktree: HEAD, the index entries, and the
/// status with the content of every changed or untracked file. Two equal
/// fingerprints mean nobody changed tracked state, the index or any
/// non-ignored file in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeFingerprint {
    /// HEAD's commit, or `None` when HEAD cannot be resolved.
    pub head: Option<CommitSha>,
    /// SHA-256 over the index listing, the status and the changed files.
    pub digest: String,
}

/// A detached worktree under `<state_dir>/worktrees/<owner>/<repo>/<issue>`.
#[derive(Debug, Clone)]
pub struct Worktree {
    mirror: Mirror,
    issue: IssueNumber,
    path: PathBuf,
}

impl Worktree {
    /// The worktree of `issue`, created detached at `sha` if it does not
    /// exist. An existing worktree is reused as it is (earlier work of the
    /// run lives there); use [`Worktree::reset_to`] to move it.
    pub async fn ensure(
        mirror: &Mirror,
        issue: IssueNumber,
        sha: &CommitSha,
    ) -> Result<Self, WorkspaceError> {
        // Another run of this repository may be adding its worktree now.
        let _registering = mirror.locked().await;
        mirror.restore_config()?;
        let path = mirror.worktrees_dir().join(issue.to_string());
        let worktree = Self {
            mirror: mirror.clone(),
            issue,
            path,
        };
        if worktree.is_registered().await? {
            return Ok(worktree);
        }
        if worktree.path.exists() {
            // A directory that is not a working worktree of this mirror is
            // leftover state of ours (e.g. a crash mid-creation).
            std::fs::remove_dir_all(&worktree.path).map_err(WorkspaceError::io(
                "cannot remove stale worktree",
                &worktree.path,
            ))?;
        }
        let parent = mirror.worktrees_dir();
        std::fs::create_dir_all(parent).map_err(WorkspaceError::io("cannot create", parent))?;
        mirror
            .run(&[OsStr::new("worktree"), OsStr::new("prune")])
            .await?;
        mirror
            .run(&[
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                OsStr::new("--detach"),
                OsStr::new("--force"),
                worktree.path.as_os_str(),
                sha.as_ref(),
            ])
            .await?;
        Ok(worktree)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn issue(&self) -> IssueNumber {
        self.issue
    }

    pub(super) fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Whether `path` is a working worktree of this mirror.
    async fn is_registered(&self) -> Result<bool, WorkspaceError> {
        if !self.path.join(".git").is_file() {
            return Ok(false);
        }
        let args = [OsStr::new("rev-parse"), OsStr::new("--git-common-dir")];
        let output = self.mirror.git().output(&self.path, &args, None).await?;
        if !output.status.success() {
            return Ok(false);
        }
        let common = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let common = self.path.join(common);
        Ok(same_path(&common, self.mirror.path()))
    }

    pub(super) async fn run(&self, args: &[&OsStr]) -> Result<Vec<u8>, WorkspaceError> {
        Ok(self.mirror.git().run(&self.path, args, None).await?)
    }

    /// Removes the lock files git leaves in the worktree's admin folder
    /// when it is killed mid-command (`index.lock`, `HEAD.lock`). They are
    /// stale whenever the controller prepares a launch: no process of an
    /// earlier launch outlives it (the sandbox's PID namespace dies with
    /// the launch or the controller), and a lock left in place fails every
    /// later git command of every relaunch.
    pub async fn clear_stale_locks(&self) -> Result<(), WorkspaceError> {
        let args = [OsStr::new("rev-parse"), OsStr::new("--absolute-git-dir")];
        let out = self.run(&args).await?;
        let admin = PathBuf::from(String::from_utf8_lossy(&out).trim());
        for name in ["index.lock", "HEAD.lock"] {
            let lock = admin.join(name);
            match std::fs::remove_file(&lock) {
                Ok(()) => tracing::info!(path = %lock.display(), "removed a stale git lock"),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(WorkspaceError::io("cannot remove a stale git lock", &lock)(
                        error,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Moves the detached HEAD to `sha` and discards every change, tracked,
    /// untracked and ignored.
    pub async fn reset_to(&self, sha: &CommitSha) -> Result<(), WorkspaceError> {
        self.mirror.restore_config()?;
        self.run(&[
            OsStr::new("checkout"),
            OsStr::new("--quiet"),
            OsStr::new("--force"),
            OsStr::new("--detach"),
            sha.as_ref(),
        ])
        .await?;
        self.run(&[
            OsStr::new("reset"),
            OsStr::new("--quiet"),
            OsStr::new("--hard"),
            sha.as_ref(),
        ])
        .await?;
        self.run(&[OsStr::new("clean"), OsStr::new("-ffdxq")])
            .await?;
        Ok(())
    }

    /// Refuses to read a worktree whose `.git` link no longer leads to our
    /// mirror: an agent could point it at a repository of its making and
    /// have us report whatever HEAD it likes.
    async fn ensure_linked(&self) -> Result<(), WorkspaceError> {
        if self.is_registered().await? {
            Ok(())
        } else {
            Err(WorkspaceError::NotOurWorktree(self.path.clone()))
        }
    }

    /// The commit HEAD points at.
    pub async fn head(&self) -> Result<CommitSha, WorkspaceError> {
        self.ensure_linked().await?;
        self.linked_head().await
    }

    /// [`Self::head`] once the caller has checked the link itself.
    async fn linked_head(&self) -> Result<CommitSha, WorkspaceError> {
        let out = self
            .run(&[
                OsStr::new("rev-parse"),
                OsStr::new("--verify"),
                OsStr::new("HEAD^{commit}"),
            ])
            .await?;
        Ok(CommitSha::parse(String::from_utf8_lossy(&out).trim())?)
    }

    /// The current fingerprint; compare two to detect changes.
    pub async fn fingerprint(&self) -> Result<WorktreeFingerprint, WorkspaceError> {
        self.ensure_linked().await?;
        let head = self.linked_head().await.ok();
        let index = self
            .run(&[
                OsStr::new("ls-files"),
                OsStr::new("--stage"),
                OsStr::new("-z"),
            ])
            .await?;
        let status = self
            .run(&[
                OsStr::new("status"),
                OsStr::new("--porcelain=v1"),
                OsStr::new("-z"),
                OsStr::new("--untracked-files=all"),
                OsStr::new("--ignore-submodules=none"),
            ])
            .await?;
        let mut hasher = Sha256::new();
        for part in [&index, &status] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        // Status names a changed file but not its content: a second edit of
        // an already modified file would go unseen without this.
        for path in status_paths(&status) {
            hasher.update(path);
            hasher.update(b"\0");
            let full = self.path.join(bytes_to_path(path));
            hash_file(&full, &mut hasher);
        }
        Ok(WorktreeFingerprint {
            head,
            digest: hex::encode(hasher.finalize()),
        })
    }
}

/// Paths named by `git status --porcelain=v1 -z`: entries are `XY path`,
/// and renames or copies are followed by their source path.
fn status_paths(status: &[u8]) -> Vec<&[u8]> {
    let mut paths = Vec::new();
    let mut entries = status.split(|&b| b == 0).filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        if entry.len() < 4 {
            continue;
        }
        paths.push(&entry[3..]);
        if matches!(entry[0], b'R' | b'C') {
            entries.next();
        }
    }
    paths
}

fn bytes_to_path(bytes: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(OsStr::from_bytes(bytes))
}

/// Feeds the file's kind and content (or symlink target) into `hasher`.
/// Unreadable or vanished files contribute a marker so that state counts too.
fn hash_file(path: &Path, hasher: &mut Sha256) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        hasher.update(b"missing");
        return;
    };
    if meta.file_type().is_symlink() {
        hasher.update(b"link:");
        if let Ok(target) = std::fs::read_link(path) {
            use std::os::unix::ffi::OsStrExt;
            hasher.update(target.as_os_str().as_bytes());
        }
    } else if meta.is_file() && meta.len() <= HASH_CONTENT_LIMIT {
        hasher.update(b"file:");
        use std::os::unix::fs::PermissionsExt;
        hasher.update(meta.permissions().mode().to_le_bytes());
        match std::fs::File::open(path) {
            Ok(mut file) => {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => hasher.update(&buf[..n]),
                        Err(_) => {
                            hasher.update(b"unreadable");
                            break;
                        }
                    }
                }
            }
            Err(_) => hasher.update(b"unreadable"),
        }
    } else {
        use std::os::unix::fs::MetadataExt;
        hasher.update(b"other:");
        hasher.update(meta.len().to_le_bytes());
        hasher.update(meta.mtime().to_le_bytes());
        hasher.update(meta.mtime_nsec().to_le_bytes());
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_paths_skip_rename_sources() {
        let status = b" M a.txt\0R  new.txt\0old.txt\0?? dir/u.txt\0";
        let paths = status_paths(status);
        assert_eq!(paths, vec![&b"a.txt"[..], b"new.txt", b"dir/u.txt"]);
    }
}
