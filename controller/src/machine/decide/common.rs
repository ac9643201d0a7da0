//! Events whose meaning does not depend on the phase's own rules.

use super::turn::Turn;
use crate::machine::decision::{Decision, MachineError};
use crate::machine::event::Event;
use crate::machine::phase::Phase;
use crate::machine::state::{Awaiting, RunState};

/// A transient GitHub (or validation-runner) failure while the driver did
/// the awaited step: the phase stays and no round is consumed.
pub(super) fn transient_failure(state: &RunState) -> Result<Decision, MachineError> {
    let retryable = matches!(
        state.awaiting,
        Awaiting::Facts { .. }
            | Awaiting::Effects { .. }
            | Awaiting::Validation { .. }
            | Awaiting::MergeOutcome
            | Awaiting::NextIssueCheck { .. }
    );
    if !retryable {
        let event = Event::TransientFailure {
            detail: String::new(),
        };
        return Ok(Turn::unexpected(state, &event));
    }
    let mut turn = Turn::new(state);
    turn.retry_or_park()?;
    Ok(turn.finish())
}

/// The run's issue was closed. While work on it is under way that needs an
/// operator; once the PR is ready or merged, closing is what a merge does
/// (`Closes #n`), so the merge read-back decides instead.
pub(super) fn issue_closed(state: &RunState) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match state.phase {
        Phase::Initializing | Phase::Implement | Phase::Review | Phase::Fix => {
            turn.block("the issue was closed while the run worked on it")?;
        }
        Phase::ReadyForMerge | Phase::Merge | Phase::UpdateEpic | Phase::Blocked => {}
        Phase::Done | Phase::Failed | Phase::Stopped => {}
    }
    Ok(turn.finish())
}
