//! Why a step of a run failed, and which failures are transient (retried
//! with backoff) rather than defects (recorded and parked).

use std::time::SystemTime;

use autoforge_journal::{JournalError, RunId};

use super::run_task::ObservedShapeError;
use crate::effects::{EffectError, PlanError};
use crate::github::GitHubError;
use crate::machine::MachineError;

/// Why a step of a run could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("the lease of run {0} is no longer ours")]
    LostLease(RunId),
    #[error(transparent)]
    Journal(JournalError),
    #[error(transparent)]
    Effect(EffectError),
    #[error("the machine rejected its own decision: {0}")]
    Machine(#[from] MachineError),
    #[error("an effect intent could not be planned: {0}")]
    Plan(#[from] PlanError),
    #[error("reading GitHub failed: {0}")]
    Read(#[from] GitHubError),
    #[error("run {run} has an unreadable state document: {detail}")]
    CorruptState { run: RunId, detail: String },
    #[error("run {0} vanished from the journal")]
    MissingRun(RunId),
    #[error("no GitHub access is configured for repository {0}")]
    NoAccess(String),
    /// GitHub says the repository is no longer served (checked just now).
    #[error("repository {0} is no longer served by this controller")]
    NotServed(String),
    /// The repository's installation is suspended: nothing may be read or
    /// written there until it is unsuspended; the run waits.
    #[error("repository {repository} waits: {reason}")]
    Suspended { repository: String, reason: String },
    #[error(transparent)]
    ObservedShape(#[from] ObservedShapeError),
    #[error("an effect was sent but is not visible yet")]
    Unsettled,
    #[error("git workspace: {0}")]
    Workspace(String),
    #[error("the agent phase could not be run: {0}")]
    Agent(String),
    #[error("the candidate could not be validated: {0}")]
    Validation(String),
    #[error("not supported by this driver yet: {0}")]
    Unsupported(&'static str),
}

impl From<JournalError> for DriverError {
    fn from(error: JournalError) -> Self {
        match error {
            JournalError::StaleLease { run_id, .. } => DriverError::LostLease(run_id),
            other => DriverError::Journal(other),
        }
    }
}

impl From<EffectError> for DriverError {
    fn from(error: EffectError) -> Self {
        match error {
            EffectError::Journal(journal) => journal.into(),
            other => DriverError::Effect(other),
        }
    }
}

impl DriverError {
    /// Failures that go away by themselves (GitHub or the database being
    /// briefly unreachable, a write not yet visible): retried with backoff.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            DriverError::Unsettled
                | DriverError::Read(_)
                | DriverError::Workspace(_)
                | DriverError::Journal(JournalError::Database(_))
                | DriverError::Effect(EffectError::Read(_) | EffectError::Git(_))
        )
    }

    /// When the installation's GitHub budget comes back, if the step
    /// stopped at the rate-limit gate (which sent nothing): the run waits
    /// for that moment rather than retrying on a backoff, which would only
    /// meet the same closed gate again and again until the reset.
    pub(crate) fn rate_limited_until(&self) -> Option<SystemTime> {
        match self {
            DriverError::Read(error) | DriverError::Effect(EffectError::Read(error)) => {
                error.held_until()
            }
            _ => None,
        }
    }
}
