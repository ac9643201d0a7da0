//! `decide(state, event)`: the one pure function behind every transition.
//!
//! Events that mean the same in every phase (stop, label removed, retries,
//! corrections, conflicts, operator commands) are handled here; the rest is
//! routed to one file per phase family. Every edge taken is checked against
//! the table in [`super::phase`]; an illegal one is returned as an error.

mod check_run;
mod common;
mod epic;
mod fix;
mod help;
mod human;
mod implement;
mod merge;
mod operator;
mod plan;
mod review;
mod running;
mod trust;
mod turn;

pub use trust::unaccepted_text_in;

use super::agent_result::{AgentOutcome, AgentResult, PhaseResult};
use super::decision::{Decision, MachineError, Refusal};
use super::event::Event;
use super::phase::Phase;
use super::state::{Awaiting, LastValidation, RunState};
use turn::Turn;

/// Decides what `event` does to the run in `state`.
///
/// Long by design: one arm per event, each handing it to the rule module
/// that owns it.
///
/// A refusal returns `next` equal to `state` (operator commands also get a
/// reply effect). `Err` means the rules tried an edge the table forbids,
/// which is a defect in the machine, never a consequence of input.
pub fn decide(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    match event {
        Event::Operator(command) => return operator::decide(state, command),
        Event::LocalOperator(command) => return operator::decide_local(state, command),
        Event::CommandRefused(refused) => return Ok(operator::refused_before(state, refused)),
        Event::LabelRemovalRefused(refused) => {
            return Ok(trust::label_removal_refused(state, refused));
        }
        Event::HumanReview(feedback) => return human::review(state, feedback),
        _ => {}
    }
    if let Event::LaunchRunning {
        launch,
        profile,
        elapsed_seconds,
        output_bytes,
    } = event
        && !state.phase.is_terminal()
    {
        return Ok(running::launch_running(
            state,
            event,
            (*launch, profile),
            (*elapsed_seconds, *output_bytes),
        ));
    }
    if state.phase.is_terminal() {
        return Ok(Turn::refuse(
            state,
            Refusal::Terminal { phase: state.phase },
        ));
    }
    let mut turn = Turn::new(state);
    match event {
        Event::LabelRemoved => turn.stop()?,
        Event::RepositoryAccessLost { reason } => {
            turn.state.failure = Some(reason.clone());
            turn.stop()?;
            return Ok(turn.finish_without_writes());
        }
        Event::IssueTextChanged {
            issue,
            digest,
            editor,
            by_operator,
        } => {
            return trust::text_changed(state, *issue, digest, editor.as_deref(), *by_operator);
        }
        Event::GitHubObserved { facts } if trust::unaccepted_text_in(state, facts) => {
            turn.block(trust::edit_reason(None))?;
        }
        Event::EffectConflict { identity, reason } if state.phase != Phase::Blocked => {
            turn.block(format!("effect {identity} ended in conflict: {reason}"))?;
        }
        Event::TransientFailure { .. } => return common::transient_failure(state),
        Event::AgentFinished {
            launch,
            outcome,
            tokens,
            cost_micros,
        } => {
            let failed = matches!(
                outcome,
                AgentOutcome::Crashed { .. }
                    | AgentOutcome::TimedOut
                    | AgentOutcome::NonZeroExit { .. }
            );
            let mut counted = state.clone();
            crate::machine::budget::charge(&mut counted.counters, *tokens, *cost_micros);
            let mut decision = agent_finished(&counted, *launch, outcome)?;
            // The operator's guidance was for the launch that just answered
            // (a correction relaunch of it is shown the guidance again).
            let correcting = matches!(
                &decision.next.awaiting,
                Awaiting::Agent { launch } if launch.correction_of.is_some()
            );
            if !failed && !correcting && decision.refusal.is_none() {
                decision.next.operator_guidance = None;
            }
            let decision = running::ended(state, decision);
            return Ok(if failed {
                decision
            } else {
                progress_resets_retries(state, decision)
            });
        }
        Event::IssueClosed { issue } => return common::issue_closed(state, *issue),
        Event::ValidationFinished {
            sha,
            passed,
            failed_index,
            ..
        } if state.awaiting == (Awaiting::Validation { sha: sha.clone() }) => {
            // Remembered before the phase rules run, so the status comment
            // of the transition it causes already shows it.
            let mut seen = state.clone();
            seen.last_validation = Some(LastValidation {
                sha: sha.clone(),
                passed: *passed,
                failed_index: *failed_index,
            });
            return by_phase(&seen, event).map(|d| progress_resets_retries(state, d));
        }
        _ => return by_phase(state, event).map(|d| progress_resets_retries(state, d)),
    }
    Ok(turn.finish())
}

/// Retries are counted per failure episode: once the awaited step moves on
/// for a reason other than a failure, the next failure starts afresh.
fn progress_resets_retries(state: &RunState, mut decision: Decision) -> Decision {
    if decision.refusal.is_none() && decision.next.awaiting != state.awaiting {
        decision.next.counters.retries = 0;
    }
    decision
}

fn by_phase(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    match state.phase {
        Phase::Initializing => implement::on_initializing(state, event),
        Phase::Plan => plan::on_event(state, event),
        Phase::Implement => implement::on_event(state, event),
        Phase::Review => review::on_event(state, event),
        Phase::Fix => fix::on_event(state, event),
        Phase::ReadyForMerge | Phase::Merge => merge::on_event(state, event),
        Phase::UpdateEpic => epic::on_event(state, event),
        Phase::Blocked | Phase::Done | Phase::Failed | Phase::Stopped => {
            Ok(Turn::unexpected(state, event))
        }
    }
}

/// Agent outcomes: failures and corrections are the same in every agent
/// phase; a success goes to the phase's own rules.
fn agent_finished(
    state: &RunState,
    launch: u32,
    outcome: &AgentOutcome,
) -> Result<Decision, MachineError> {
    let Awaiting::Agent { launch: running } = &state.awaiting else {
        return Ok(Turn::refuse(
            state,
            Refusal::StaleLaunch {
                expected: None,
                got: launch,
            },
        ));
    };
    if running.id != launch {
        return Ok(Turn::refuse(
            state,
            Refusal::StaleLaunch {
                expected: Some(running.id),
                got: launch,
            },
        ));
    }
    let mut turn = Turn::new(state);
    match outcome {
        AgentOutcome::Crashed { .. }
        | AgentOutcome::TimedOut
        | AgentOutcome::NonZeroExit { .. } => {
            turn.retry_or_park()?;
        }
        AgentOutcome::Malformed { diagnosis } => turn.correct(diagnosis)?,
        AgentOutcome::Result {
            result: AgentResult::Failure { message },
        } => turn.fail(message)?,
        AgentOutcome::Result {
            result: AgentResult::Blocked { message },
        } => {
            turn.block(format!("the agent reported blocked: {message}"))?;
        }
        AgentOutcome::Result {
            result: AgentResult::Success { result },
        } => match (state.phase, result) {
            (Phase::Plan, PhaseResult::Plan(r)) => plan::on_result(&mut turn, r)?,
            (Phase::Implement, PhaseResult::Implement(r)) => implement::on_result(&mut turn, r)?,
            (Phase::Review, PhaseResult::Review(r)) => review::on_result(&mut turn, r)?,
            (Phase::Fix, PhaseResult::Fix(r)) => fix::on_result(&mut turn, r)?,
            (Phase::UpdateEpic, PhaseResult::UpdateEpic(r)) => epic::on_result(&mut turn, r)?,
            (phase, _) => turn.correct(&format!("the result is not a {phase} result"))?,
        },
    }
    Ok(turn.finish())
}

#[cfg(test)]
mod tests;
