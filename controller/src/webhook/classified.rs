//! What a delivery means for runs: the vocabulary the dispatcher hands on.

use crate::commands::Actor;
use autoforge_journal::{IssueNumber, PullNumber};
use std::fmt;

/// An issue or pull request in a repository (`owner/name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoIssue {
    pub repository: String,
    pub number: IssueNumber,
}

/// A pull request in a repository (`owner/name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoPull {
    pub repository: String,
    pub number: PullNumber,
}

/// One delivery translated into a run event, or the reason it is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    /// The trigger label was added; `sender` must still pass the operator check.
    TriggerLabelAdded {
        issue: RepoIssue,
        issue_open: bool,
        sender: Actor,
    },
    TriggerLabelRemoved {
        issue: RepoIssue,
        sender: Actor,
    },
    IssueClosed {
        issue: RepoIssue,
    },
    IssueReopened {
        issue: RepoIssue,
    },
    /// The title or body changed; `editor` is who changed it (the
    /// delivery's sender), to be checked like an operator.
    IssueEdited {
        issue: RepoIssue,
        title_changed: bool,
        body_changed: bool,
        editor: Actor,
    },
    /// A new comment on an issue or PR (the conversation tab).
    CommentCreated {
        issue: RepoIssue,
        on_pull_request: bool,
        comment_id: u64,
        body: String,
        author: Actor,
    },
    /// An edited comment; only commands that `new_body` adds count, and
    /// they are the `editor`'s commands: people with write access can edit
    /// other people's comments, so the author did not necessarily type them.
    CommentEdited {
        issue: RepoIssue,
        on_pull_request: bool,
        comment_id: u64,
        old_body: String,
        new_body: String,
        author: Actor,
        editor: Actor,
    },
    PrSynchronize {
        pr: RepoPull,
        head_sha: String,
        head_ref: String,
    },
    PrClosed {
        pr: RepoPull,
        merged: bool,
        merge_commit_sha: Option<String>,
        head_ref: String,
    },
    PrReopened {
        pr: RepoPull,
    },
    PrBaseChanged {
        pr: RepoPull,
        old_base: String,
        new_base: String,
    },
    /// A review was submitted or dismissed: a required review may be met.
    /// A submitted review requesting changes also names itself and its
    /// author, for a human round.
    PrReviewed {
        pr: RepoPull,
        head_sha: String,
        changes_requested: Option<ReviewBy>,
    },
    /// A check run or suite finished: merge readiness may have changed.
    CheckCompleted {
        repository: String,
        head_sha: String,
        pull_requests: Vec<PullNumber>,
    },
    /// A commit status reached a final state (`success`, `failure`,
    /// `error`): merge readiness of a pull request at that commit may have
    /// changed. The payload names no pull request, only the commit.
    StatusReported {
        repository: String,
        head_sha: String,
    },
    /// Installation created/deleted/suspended or its repository set changed.
    InstallationChanged {
        installation_id: u64,
        action: String,
        repositories_added: Vec<String>,
        repositories_removed: Vec<String>,
    },
    Ignored {
        why: IgnoreReason,
    },
}

/// Why a delivery causes no run event. Kept for logs and the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoreReason {
    /// An event we do not subscribe to, stored for the record only.
    UnhandledEvent { event: String },
    /// A known event with an action that does not affect runs.
    UnhandledAction { event: String, action: String },
    /// `ping` on hook creation.
    Ping,
    /// Reviews are logged, not acted upon.
    /// A label other than the trigger label changed.
    OtherLabel,
    /// Labels and comments on pull requests do not start runs.
    LabelOnPullRequest,
    /// Comments written or edited by bots never carry commands.
    CommentByBot { login: String },
    /// Our own comments (status, replies, reviews) and our own edits are not input.
    CommentByTheApp,
    /// An edit that did not touch the comment body.
    CommentBodyUnchanged,
    /// A PR edit that did not change its base branch.
    PrEditWithoutBaseChange,
    /// With an App: a delivery that names no installation (sent by a
    /// repository or organisation hook), so no run's token can read for it.
    NoInstallation { event: String },
    /// A finished check on a commit no pull request has: runs are bound to
    /// their pull request, so it concerns none.
    CheckWithoutPullRequest,
    /// A check (or suite) our own App wrote: the run it shows already knows
    /// what it says, and waking it would only cost reads.
    OwnCheck,
    /// A commit status still `pending`: nothing the merge gate waits for
    /// has been decided yet.
    PendingStatus,
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoreReason::UnhandledEvent { event } => write!(f, "event `{event}` is not used"),
            IgnoreReason::UnhandledAction { event, action } => {
                write!(f, "action `{event}.{action}` is not used")
            }
            IgnoreReason::Ping => f.write_str("ping"),
            IgnoreReason::OtherLabel => f.write_str("not the trigger label"),
            IgnoreReason::LabelOnPullRequest => {
                f.write_str("labels on pull requests start nothing")
            }
            IgnoreReason::CommentByBot { login } => write!(f, "comment by bot `{login}`"),
            IgnoreReason::CommentByTheApp => f.write_str("comment written by autoforge itself"),
            IgnoreReason::CommentBodyUnchanged => f.write_str("comment edit left the body as is"),
            IgnoreReason::PrEditWithoutBaseChange => {
                f.write_str("pull request edit left the base branch as is")
            }
            IgnoreReason::NoInstallation { event } => {
                write!(f, "`{event}` delivery names no installation of the App")
            }
            IgnoreReason::CheckWithoutPullRequest => {
                f.write_str("the finished check belongs to no pull request")
            }
            IgnoreReason::OwnCheck => f.write_str("the check was written by autoforge itself"),
            IgnoreReason::PendingStatus => f.write_str("the commit status is still pending"),
        }
    }
}

/// A review requesting changes: its id and who submitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewBy {
    pub review_id: u64,
    pub author: Actor,
}
