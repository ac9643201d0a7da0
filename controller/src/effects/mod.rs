//! The effect executor: the only code that writes to GitHub or pushes git refs (SPEC §6).
//!
//! Two halves:
//! - [`plan`] turns a machine [`crate::machine::EffectIntent`] into the
//!   journal row ([`autoforge_journal::NewEffect`]) with the exact bytes to
//!   send, once, when the intent is committed — so a retry after a crash
//!   sends the same bytes, and read-back compares against them.
//! - [`EffectExecutor::drive`] moves one journalled effect forward:
//!   reconcile by a complete identity read → observe, send, or refuse →
//!   `attempted` is persisted *before* the one send → reconcile again →
//!   `observed`, or stay `attempted` for the next drive. An unknown outcome
//!   (timeout, 5xx, dropped connection) is never re-sent without a
//!   reconcile in between.
//!
//! Each kind family lives in its own file (`comments`, `issues`, `pulls`,
//! `epic`, `merge`, `push`, `reactions`, `labels`, `check_run`, `reviews`;
//! `diff_lines` places a review's findings on its diff) with its row's column
//! types, its planner, a `reconcile` (what GitHub shows for the effect's
//! identity) and a `send` (the one write). What they share: `protocol`
//! (what a reconcile and a send may conclude), `row` (the typed columns),
//! `planning` (the context and nonce of a row being planned) and
//! `executor` (the handle the kinds read). Markers — how the executor
//! recognises its own objects — are in [`markers`]; the identity scheme is
//! documented there. `answers` is the one write outside any run: a
//! comment answering an observed change, journalled with it and sent under
//! a claim of its own instead of a run's lease.

#[cfg(feature = "crash-points")]
pub mod crashpoint;
mod diff_lines;
mod drive;
mod executor;
pub mod markers;
pub mod plan;
mod planning;
mod protocol;
mod row;

mod answers;
mod check_run;
mod comments;
mod epic;
mod issues;
mod labels;
mod merge;
mod pulls;
mod push;
mod reactions;
mod reviews;
mod texts;

#[cfg(feature = "crash-points")]
pub(crate) use answers::crash_identity as answer_crash_identity;
pub use answers::{AnswerOutcome, AnswerTo, Answering, answer_text, plan_answer, send_answer};
pub use check_run::CHECK_NAME;
pub use comments::{RecordedComment, recorded_progress_comment, recorded_review_comment};
pub use drive::DriveOutcome;
pub use epic::{outside_digest, splice_roadmap};
pub use executor::{EffectExecutor, PushTransport};
pub use issues::{RecordedFollowUp, recorded_follow_up};
pub use plan::plan;
pub use planning::{NO_DIFFS, PlanContext, PlanError, ReviewDiffs};
pub use push::{PUSH_NAMESPACE, refused_ref};
pub use texts::{check_run_text, notice_text, reply_text, status_text};

use crate::github::GitHubError;
use autoforge_journal::{EffectKind, JournalError};

/// Why driving an effect failed without reaching a verdict. The effect's
/// stage is unchanged (or `attempted`), so driving it again is safe.
#[derive(Debug, thiserror::Error)]
pub enum EffectError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A reconcile read failed; nothing can be decided without it.
    #[error("reading GitHub to reconcile the effect failed: {0}")]
    Read(#[source] GitHubError),
    /// Local git (the fast-forward proof, the push process) failed to run.
    #[error("local git failed: {0}")]
    Git(String),
    /// The journal row does not have the shape this build writes.
    #[error("effect {id} ({kind}) has an unreadable {field}: {detail}")]
    CorruptRow {
        id: i64,
        kind: EffectKind,
        field: &'static str,
        detail: String,
    },
    /// The executor was not given what this kind needs (e.g. a git transport).
    #[error("{kind} effects need {what}, which this executor was not given")]
    Missing {
        kind: EffectKind,
        what: &'static str,
    },
    /// The effect is not `intended` or `attempted`.
    #[error("effect {id} is already {stage} and cannot be driven")]
    AlreadyFinal { id: i64, stage: String },
}
