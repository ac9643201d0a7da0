//! The journal's error type. Callers branch on the domain variants
//! (`StaleLease`, `VersionConflict`, `IllegalStage`, …); database failures are
//! wrapped in an opaque type so no `sqlx` type leaks out of this crate.

use std::fmt;

use crate::effects::Stage;
use crate::github_ids::IssueNumber;
use crate::ids::{AnswerId, EffectId, RunId};

/// Everything a journal call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The lease presented is no longer the run's current lease: another
    /// holder took the run over (higher fencing token), it was released, or
    /// it expired. The caller must stop driving the run.
    #[error("lease on run {run_id} with fencing token {fencing_token} is no longer held")]
    StaleLease { run_id: RunId, fencing_token: i64 },

    /// Optimistic concurrency: the run moved on since the caller read it.
    #[error("run {run_id} is at version {actual}, not the expected {expected}")]
    VersionConflict {
        run_id: RunId,
        expected: i64,
        actual: i64,
    },

    /// An effect stage move that the write-ahead protocol forbids.
    #[error("effect {effect_id} cannot move from {from} to {to}")]
    IllegalStage {
        effect_id: EffectId,
        from: Stage,
        to: Stage,
    },

    /// The effect was already attempted the maximum number of times.
    #[error("effect {effect_id} already has {attempts} attempts, the maximum")]
    AttemptsExhausted { effect_id: EffectId, attempts: i32 },

    /// Creating a run would give an issue or an EPIC a second active run.
    #[error("{repository} already has an active run for {scope}")]
    ActiveRunExists {
        repository: String,
        scope: ActiveRunScope,
    },

    /// A validation record for this command and commit already exists.
    #[error("validation command {command_index} of {sha} is already recorded")]
    ValidationAlreadyRecorded { sha: String, command_index: i32 },

    /// The sender's claim on an answer expired or another sender took it
    /// over; the caller must leave the answer alone.
    #[error("the claim on answer {answer_id} with token {claim_token} is no longer held")]
    AnswerClaimLost {
        answer_id: AnswerId,
        claim_token: i64,
    },

    /// A row the caller named does not exist.
    #[error("{what} {id} does not exist")]
    NotFound { what: &'static str, id: i64 },

    /// The caller passed something the journal cannot store.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The database holds a value this build does not understand, e.g. a
    /// stage or kind written by a newer version.
    #[error("unexpected value in the database: {0}")]
    Corrupt(String),

    /// The connection string could not be parsed. The URL itself is never
    /// part of the message because it may carry a password.
    #[error("the database URL is not valid: {0}")]
    InvalidUrl(String),

    /// Postgres or the connection failed.
    #[error("database error: {0}")]
    Database(#[from] DatabaseError),
}

/// Which uniqueness rule a new run broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveRunScope {
    Issue(IssueNumber),
    Epic(IssueNumber),
}

impl fmt::Display for ActiveRunScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Issue(n) => write!(f, "issue #{n}"),
            Self::Epic(n) => write!(f, "EPIC #{n}"),
        }
    }
}

/// An opaque database failure (connection, query, migration).
#[derive(Debug)]
pub struct DatabaseError(Box<dyn std::error::Error + Send + Sync>);

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl DatabaseError {
    /// A failure known only by its description (one error answered to
    /// several waiters, or a timeout of our own).
    pub(crate) fn message(text: String) -> DatabaseError {
        DatabaseError(text.into())
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl From<sqlx::Error> for JournalError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(DatabaseError(Box::new(error)))
    }
}

impl From<sqlx::migrate::MigrateError> for JournalError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Self::Database(DatabaseError(Box::new(error)))
    }
}

/// The name of the unique constraint a statement violated, if that is why it
/// failed.
pub(crate) fn unique_violation(error: &sqlx::Error) -> Option<&str> {
    match error {
        sqlx::Error::Database(db) if db.is_unique_violation() => db.constraint(),
        _ => None,
    }
}

pub(crate) type Result<T, E = JournalError> = std::result::Result<T, E>;
