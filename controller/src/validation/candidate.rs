//! Validation of a candidate commit with every outcome journalled.
//!
//! A validation result is final for its commit (SPEC §12): once a command
//! has failed or timed out on a SHA, that SHA is never validated again, and
//! asking again answers from the journal. Each command's record is written
//! as soon as the command ends, so a controller that crashes halfway resumes
//! with the first command that has no record instead of re-running the ones
//! that already passed.

use autoforge_journal::{
    Journal, JournalError, Lease, NewValidation, ValidationOutcome as JournalOutcome,
};

use crate::redact::Redactor;
use crate::workspace::{CommitSha, Mirror, WorkspaceError};

use super::{ValidationCommand, ValidationLimits, ValidationOutcome, run_validation_with};

/// What validation says about a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CandidateVerdict {
    /// Every configured command passed on this commit.
    Passed,
    /// The command at `index` did not pass; the commit is rejected for good.
    Failed {
        index: usize,
        outcome: ValidationOutcome,
    },
}

/// Why a candidate could not be validated at all (as opposed to failing).
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    #[error("cannot export the candidate commit: {0}")]
    Export(#[from] WorkspaceError),
    #[error("the journal refused a validation record: {0}")]
    Journal(#[from] JournalError),
    /// The journal holds records of a different command list for this
    /// commit. Commands are frozen when a run starts, so this means the
    /// records belong to something else; guessing would be unsafe.
    #[error(
        "validation record {index} for {sha} names another command than the configured one; \
         the configured validation commands changed during the run"
    )]
    CommandsChanged { sha: String, index: usize },
}

/// Everything one candidate validation needs.
#[derive(Debug)]
pub struct CandidateValidation<'a> {
    pub journal: &'a Journal,
    pub lease: &'a Lease,
    pub mirror: &'a Mirror,
    pub sha: &'a CommitSha,
    pub commands: &'a [ValidationCommand],
    pub limits: ValidationLimits,
    pub redactor: &'a Redactor,
}

/// Validates `candidate.sha`, answering from the journal where it already
/// knows the outcome and running (and recording) only the rest.
pub async fn validate_candidate(
    candidate: CandidateValidation<'_>,
) -> Result<CandidateVerdict, CandidateError> {
    let sha = candidate.sha.as_str();
    let recorded = candidate
        .journal
        .list_validations(candidate.lease.run_id, Some(sha))
        .await?;
    for (position, record) in recorded.iter().enumerate() {
        let index = usize::try_from(record.command_index).unwrap_or(usize::MAX);
        let configured = candidate.commands.get(index).map(ToString::to_string);
        if index != position || configured.as_deref() != Some(record.command.as_str()) {
            return Err(CandidateError::CommandsChanged {
                sha: sha.to_owned(),
                index: position,
            });
        }
        if record.outcome != JournalOutcome::Pass {
            return Ok(CandidateVerdict::Failed {
                index,
                outcome: from_journal(record.outcome),
            });
        }
    }
    let first_unrecorded = recorded.len();
    if first_unrecorded >= candidate.commands.len() {
        return Ok(CandidateVerdict::Passed);
    }

    // A fresh export of the commit's tree: nothing the agent left in its
    // worktree can make a check pass.
    let export = candidate.mirror.export(candidate.sha).await?;
    for index in first_unrecorded..candidate.commands.len() {
        let one = std::slice::from_ref(&candidate.commands[index]);
        let results =
            run_validation_with(one, export.path(), &candidate.limits, candidate.redactor).await;
        // One command in, one record out; an empty answer would be a bug in
        // run_validation_with, so it is treated as a failure, never a pass.
        let Some(result) = results.into_iter().next() else {
            return Ok(CandidateVerdict::Failed {
                index,
                outcome: ValidationOutcome::Fail,
            });
        };
        candidate
            .journal
            .record_validation(
                candidate.lease,
                &NewValidation {
                    sha: sha.to_owned(),
                    command_index: i32::try_from(index).unwrap_or(i32::MAX),
                    command: result.command.clone(),
                    outcome: to_journal(result.outcome),
                    duration_ms: i64::try_from(result.duration.as_millis()).unwrap_or(i64::MAX),
                    output_tail: result.output_tail.clone(),
                },
            )
            .await?;
        if result.outcome != ValidationOutcome::Pass {
            return Ok(CandidateVerdict::Failed {
                index,
                outcome: result.outcome,
            });
        }
    }
    Ok(CandidateVerdict::Passed)
}

fn to_journal(outcome: ValidationOutcome) -> JournalOutcome {
    match outcome {
        ValidationOutcome::Pass => JournalOutcome::Pass,
        ValidationOutcome::Fail => JournalOutcome::Fail,
        ValidationOutcome::Timeout => JournalOutcome::Timeout,
    }
}

fn from_journal(outcome: JournalOutcome) -> ValidationOutcome {
    match outcome {
        JournalOutcome::Pass => ValidationOutcome::Pass,
        JournalOutcome::Fail => ValidationOutcome::Fail,
        JournalOutcome::Timeout => ValidationOutcome::Timeout,
    }
}
