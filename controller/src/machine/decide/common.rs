//! Events whose meaning does not depend on the phase's own rules, and the
//! refusal of a protected-path candidate that IMPLEMENT and FIX share.

use super::turn::{Turn, TurnResult};
use crate::machine::decision::{Decision, MachineError};
use crate::machine::event::Event;
use crate::machine::phase::Phase;
use crate::machine::protected::describe_paths;
use crate::machine::state::{Awaiting, RunState};
use autoforge_journal::{CommitSha, IssueNumber};

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
/// (`Closes #n`), so the merge read-back decides instead. The close of
/// another issue (an earlier issue of the EPIC, closed by its merge and
/// heard late) changes nothing.
pub(super) fn issue_closed(state: &RunState, issue: IssueNumber) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    if issue != state.issue {
        return Ok(turn.finish());
    }
    match state.phase {
        Phase::Initializing | Phase::Plan | Phase::Implement | Phase::Review | Phase::Fix => {
            turn.block("the issue was closed while the run worked on it")?;
        }
        Phase::ReadyForMerge | Phase::Merge | Phase::UpdateEpic | Phase::Blocked => {}
        Phase::Done | Phase::Failed | Phase::Stopped => {}
    }
    Ok(turn.finish())
}

/// A validated candidate that changes protected paths is never pushed:
/// pushing to a branch of the repository can already start its `on: push`
/// workflows, so the merge gate would be too late. The run blocks; after
/// `/autoforge unblock` the phase's agent runs again and is told, like
/// after a failed validation, why its commit was dropped.
pub(super) fn protected_candidate(
    turn: &mut Turn,
    sha: &CommitSha,
    paths: &[String],
) -> TurnResult {
    let named = describe_paths(paths);
    let s = &mut turn.state;
    s.candidate = None;
    s.pending = None;
    s.last_validation_failure = Some(format!(
        "it changes protected paths (merge.protected_paths): {named}; the controller never \
         pushes a change to them, so leave them as they are on the default branch"
    ));
    let short = sha.abbreviated(12);
    turn.block(format!(
        "candidate `{short}` changes protected paths (merge.protected_paths): {named}; it was \
         not pushed. `/autoforge unblock <reason>` asks the agent again without that change; \
         a change to those paths is for a person to make"
    ))
}
