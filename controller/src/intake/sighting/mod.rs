//! From a [`Sighting`] — one change seen by a webhook or by the poller, in
//! one vocabulary — to the [`ChangeEntries`](super::entries::ChangeEntries)
//! of journal writes it causes. This is where authorization happens (SPEC
//! §2): the trigger label's actor and every command's author or editor are
//! checked against fresh permission reads, and every decision is journalled.
//!
//! `keys`: the dedupe keys that make a webhook's sighting and a poll's the
//! same change; `outcome`: what each kind of sighting writes
//! ([`entries_for`]); `decisions`: the operator decisions behind a
//! labelling, a label removal, a review and a comment's commands.

mod decisions;
mod keys;
mod outcome;
#[cfg(test)]
mod tests;

use autoforge_journal::{IssueNumber, PullNumber};

use crate::commands::{Actor, Command, CommandParseError};
use crate::webhook::ReviewBy;

pub use keys::{body_digest, comment_key, comment_key_prefix, labeling_of_event};
pub use outcome::entries_for;

/// One change, whoever saw it. Each variant builds the same dedupe key from
/// a webhook payload and from a poll read.
#[derive(Debug, Clone, PartialEq)]
pub enum Sighting {
    /// The trigger label was added; `labeling` identifies this labelling
    /// (the `labeled` issue event id, or the delivery when none is found).
    TriggerLabeled {
        repository: String,
        issue: IssueNumber,
        actor: Actor,
        labeling: String,
    },
    /// The trigger label was removed by `actor` (`None` when no
    /// `unlabeled` event names who did); `removal` identifies this removal
    /// like `labeling` does a labelling.
    TriggerRemoved {
        repository: String,
        issue: IssueNumber,
        actor: Option<Actor>,
        removal: String,
    },
    IssueClosed {
        repository: String,
        issue: IssueNumber,
        closed_at: String,
    },
    IssueReopened {
        repository: String,
        issue: IssueNumber,
        updated_at: String,
    },
    IssueEdited {
        repository: String,
        issue: IssueNumber,
        updated_at: String,
        editor: Actor,
    },
    /// Commands of a new comment (all of them), or those an edit added
    /// (then `actor` is the editor).
    Commands {
        repository: String,
        issue: IssueNumber,
        comment_id: u64,
        updated_at: String,
        /// Digest of the body version the commands come from.
        body_digest: String,
        actor: Actor,
        commands: Vec<Result<Command, CommandParseError>>,
    },
    PrHead {
        repository: String,
        pr: PullNumber,
        head_sha: String,
    },
    PrClosed {
        repository: String,
        pr: PullNumber,
        merged: bool,
        merge_commit_sha: Option<String>,
        closed_at: String,
    },
    PrReopened {
        repository: String,
        pr: PullNumber,
        updated_at: String,
    },
    PrBase {
        repository: String,
        pr: PullNumber,
        new_base: String,
    },
    ChecksCompleted {
        repository: String,
        head_sha: String,
        pull_requests: Vec<PullNumber>,
        delivery: String,
    },
    /// A commit status reached a final state on `head_sha`; it names no
    /// pull request, so every run bound to one in the repository is told
    /// and the driver compares heads when it re-reads.
    StatusReported {
        repository: String,
        head_sha: String,
        delivery: String,
    },
    /// A review of `pr` was submitted or dismissed; a submitted review
    /// requesting changes names itself (a human round if its author is an
    /// operator) and is keyed by its id, not by the delivery.
    PrReviewed {
        repository: String,
        pr: PullNumber,
        head_sha: String,
        delivery: String,
        changes_requested: Option<ReviewBy>,
    },
}
