//! Postgres schema, migrations and the typed journal API of autoforge, plus
//! the managed local Postgres used when no database is configured.
//!
//! This crate is the only place that talks to Postgres. Its public API uses
//! its own types only (no `sqlx` types), except in [`testing`].
//!
//! How the controller uses it:
//! - Start: [`Journal::connect`] (with `DATABASE_URL`, or the URL of a
//!   [`localpg::LocalPostgres`] started under `<state_dir>/postgres`), then
//!   [`Journal::migrate`]. `/readyz` asks [`Journal::migrations_current`].
//! - Ingress: a [`DeliveryCommitter`] ([`Journal::delivery_committer`]),
//!   which shares one commit among deliveries arriving together; workers
//!   [`Journal::claim_deliveries`], then mark them processed or failed.
//! - A driver holds a run through a [`Lease`] ([`Journal::acquire_lease`],
//!   renewed well before `expires_at`). Every write for the run takes the
//!   lease and fails with [`JournalError::StaleLease`] once another replica
//!   took the run over; the driver must then stop.
//! - A decision commits through [`JournalTx::commit_transition`]: the new
//!   phase and state plus the effect intents, in one transaction, before
//!   anything is sent.
//! - The executor drives each of [`Journal::pending_effects`]:
//!   [`Journal::mark_attempted`] before the send, then
//!   [`Journal::mark_observed`] or [`Journal::mark_conflict`] after reading
//!   back. Only [`JournalTx::reopen_conflict`] moves a stage backwards.
//! - A comment that belongs to no run (an answer to a refused labelling or
//!   to a command where no run is) is written with the change it answers
//!   ([`JournalTx::insert_answer`]) and sent under a claim
//!   ([`Journal::claim_answer`]) through the same stages.

mod answers;
mod deliveries;
mod effects;
mod error;
mod github_ids;
mod group_commit;
mod holdings;
mod ids;
mod journal;
mod launches;
pub mod localpg;
mod operator;
mod rate_limits;
mod records;
mod run_events;
mod runs;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod views;

pub use answers::{Answer, AnswerClaim, NewAnswer};
pub use deliveries::{Delivery, DeliveryRetry, InsertOutcome, NewDelivery};
pub use effects::{
    Effect, EffectKind, MAX_ATTEMPTS, MAX_EFFECTS_PER_TRANSITION, MAX_UNANSWERED_SENDS, NewEffect,
    Stage, UnknownValue,
};
pub use error::{ActiveRunScope, DatabaseError, JournalError};
pub use github_ids::{CommitSha, GithubIdError, IssueNumber, PullNumber};
pub use group_commit::{DeliveryCommitter, MAX_BATCH};
pub use holdings::LeaseHolding;
pub use ids::{AnswerId, DeliveryId, EffectId, LaunchId, RunId};
pub use journal::{DEFAULT_MAX_CONNECTIONS, Journal, JournalTx};
pub use launches::{
    LOST_OUTCOME, LaunchProgress, LaunchTotals, LaunchUsage, LostLaunch, RunningLaunch,
};
pub use operator::{NewOperatorCommand, QueuedCommand};
pub use rate_limits::RateLimitReading;
pub use records::{
    AgentLaunch, AuditEvent, CommandDecision, LaunchEnd, NewCommandDecision, NewLaunch,
    NewValidation, ValidationOutcome, ValidationRecord,
};
pub use run_events::{ChangeClaim, EventSource, NewRunEvent, RunEvent};
pub use runs::{Lease, NewRun, Run, RunFilter, TERMINAL_PHASES, is_terminal};
pub use views::{DeliveryBacklog, EffectBacklog, PhaseCount, RunListRow, RunQuery, StatusSummary};
