//! How a worktree is prepared for the next launch: work is kept unless it
//! must go. A writing phase (IMPLEMENT, FIX) continues from whatever the
//! last launch left when that is built on the phase's start commit,
//! uncommitted changes included; a read-only phase (REVIEW, UPDATE_EPIC)
//! must see exactly its start commit, clean. Whatever is reset is said in
//! words the next prompt can quote, and the last candidate of a writing
//! phase stays reachable on a local ref of the mirror, so a reset never
//! loses commits.

use std::ffi::OsStr;

use super::worktree::Worktree;
use super::{CommitSha, WorkspaceError};
use autoforge_journal::IssueNumber;

/// At most this many `git status` entries are kept for the prompt.
pub const MAX_STATUS_ENTRIES: usize = 200;

/// What the next launch does with the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkMode {
    /// Builds on earlier work of the phase when there is any.
    Continue,
    /// Must start at the start commit with nothing changed.
    ReadOnly,
}

/// The worktree as the launch finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub head: CommitSha,
    /// `git status --short` lines of the changes left in place (at most
    /// [`MAX_STATUS_ENTRIES`]), and how many there are in all.
    pub changes: Vec<String>,
    pub change_count: usize,
    /// Set when the controller reset the worktree, saying why.
    pub reset: Option<String>,
}

impl Worktree {
    /// `git status --short` entries, untracked files one by one.
    pub async fn status_entries(&self) -> Result<Vec<String>, WorkspaceError> {
        let out = self
            .run(&[
                OsStr::new("status"),
                OsStr::new("--porcelain=v1"),
                OsStr::new("--untracked-files=all"),
            ])
            .await?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Readies the worktree for a launch that starts at `start`, keeping
    /// what `mode` allows and resetting only the rest.
    pub async fn prepare(
        &self,
        start: &CommitSha,
        mode: WorkMode,
    ) -> Result<Prepared, WorkspaceError> {
        self.clear_stale_locks().await?;
        let head = self.head().await.ok();
        let changes = self.status_entries().await?;
        let reason = match (&head, mode) {
            (None, _) => Some("its HEAD could not be read".to_owned()),
            (Some(head), WorkMode::Continue)
                if head != start && !self.mirror().is_ancestor(start, head).await? =>
            {
                Some(format!(
                    "its HEAD `{head}` was not built on the start commit `{start}`"
                ))
            }
            (Some(head), WorkMode::ReadOnly) if head != start => Some(format!(
                "its HEAD `{head}` was not the commit this phase must see"
            )),
            (Some(_), WorkMode::ReadOnly) if !changes.is_empty() => Some(format!(
                "it had {} changed paths, and this phase must see its commit unchanged",
                changes.len()
            )),
            _ => None,
        };
        let noted = self.take_note()?;
        let Some(reason) = reason else {
            let change_count = changes.len();
            return Ok(Prepared {
                head: head.unwrap_or_else(|| start.clone()),
                changes: changes.into_iter().take(MAX_STATUS_ENTRIES).collect(),
                change_count,
                reset: noted,
            });
        };
        self.reset_to(start).await?;
        let now = format!("The controller reset the worktree to `{start}`: {reason}.");
        let reset = match noted {
            Some(noted) => format!("{noted} {now}"),
            None => now,
        };
        Ok(Prepared {
            head: start.clone(),
            changes: Vec::new(),
            change_count: 0,
            reset: Some(reset),
        })
    }

    /// Resets to `start` for a reason only the caller can judge (commits
    /// touching paths the controller never pushes, say), saying so.
    pub async fn reset_for(
        &self,
        start: &CommitSha,
        reason: &str,
    ) -> Result<Prepared, WorkspaceError> {
        self.reset_to(start).await?;
        Ok(Prepared {
            head: start.clone(),
            changes: Vec::new(),
            change_count: 0,
            reset: Some(format!(
                "The controller reset the worktree to `{start}`: {reason}."
            )),
        })
    }

    /// Resets a worktree a read-only launch left other than at `start` and
    /// clean, and leaves a note that the next launch's prompt quotes.
    pub async fn restore_after_read_only(&self, start: &CommitSha) -> Result<bool, WorkspaceError> {
        let at_start = self.head().await.ok().as_ref() == Some(start);
        let changes = self.status_entries().await?;
        if at_start && changes.is_empty() {
            return Ok(false);
        }
        self.reset_to(start).await?;
        let note = format!(
            "A read-only launch (a reviewer) changed the worktree ({} changed \
             paths{}), so the controller reset it to `{start}` right after that \
             launch.",
            changes.len(),
            if at_start { "" } else { ", HEAD moved" }
        );
        std::fs::write(self.note_path(), note)
            .map_err(WorkspaceError::io("cannot write", &self.note_path()))?;
        Ok(true)
    }

    /// Points `refs/autoforge/kept/<issue>` at HEAD, so the last candidate
    /// of a writing phase survives any later reset; the commit it names.
    pub async fn keep_candidate(&self) -> Result<Option<CommitSha>, WorkspaceError> {
        let Ok(head) = self.head().await else {
            return Ok(None);
        };
        let name = kept_ref(self.issue());
        self.mirror()
            .run(&[OsStr::new("update-ref"), OsStr::new(&name), head.as_ref()])
            .await?;
        Ok(Some(head))
    }

    /// The commit `refs/autoforge/kept/<issue>` names, if any.
    pub async fn kept_candidate(&self) -> Result<Option<CommitSha>, WorkspaceError> {
        let name = format!("{}^{{commit}}", kept_ref(self.issue()));
        let args = [
            OsStr::new("--git-dir"),
            self.mirror().path().as_os_str(),
            OsStr::new("rev-parse"),
            OsStr::new("--verify"),
            OsStr::new("--quiet"),
            OsStr::new(&name),
        ];
        let output = self
            .mirror()
            .git()
            .output(self.mirror().path(), &args, None)
            .await?;
        if !output.status.success() {
            return Ok(None);
        }
        Ok(Some(CommitSha::parse(
            String::from_utf8_lossy(&output.stdout).trim(),
        )?))
    }

    /// The note a reset after a read-only launch left, removed as it is read.
    fn take_note(&self) -> Result<Option<String>, WorkspaceError> {
        let path = self.note_path();
        match std::fs::read_to_string(&path) {
            Ok(note) => {
                std::fs::remove_file(&path).map_err(WorkspaceError::io("cannot remove", &path))?;
                Ok(Some(note))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(WorkspaceError::Io {
                action: "cannot read",
                path,
                source,
            }),
        }
    }

    /// Beside the worktree, never inside it: the agent cannot write it.
    fn note_path(&self) -> std::path::PathBuf {
        self.mirror()
            .worktrees_dir()
            .join(format!("{}.reset-note", self.issue()))
    }
}

/// The local ref that keeps an issue's last candidate reachable.
pub fn kept_ref(issue: IssueNumber) -> String {
    format!("refs/autoforge/kept/{issue}")
}
