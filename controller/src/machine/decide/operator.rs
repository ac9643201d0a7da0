//! Operator commands (SPEC §2, §11), already authorised by the commands
//! layer. An accepted command gets a 👀 reaction and a reply; a refused one
//! gets a reply saying why and leaves the state byte-identical. The text of
//! an accepted unblock or retry becomes the operator's guidance for the
//! next launch; `fix` starts a human round (see `human`); `approve` and
//! `replan` answer a posted plan (see `plan`).

use super::help::help_text;
use super::human::{self, Taken};
use super::plan;
use super::turn::Turn;
use crate::machine::bounds::MergeMode;
use crate::machine::decision::{
    Decision, EffectIntent, MachineError, Refusal, Reply, StatusSnapshot,
};
use crate::machine::event::{
    HumanFeedback, HumanNote, LocalOperatorCommand, OperatorCommand, OperatorRequest,
    RefusedCommand,
};
use crate::machine::phase::{Cause, Phase};
use crate::machine::review_rounds::carry_stale;
use crate::machine::state::{Awaiting, OperatorGuidance, RunState};
use crate::machine::unblock::unblock_target;

fn command_name(command: &OperatorRequest) -> &'static str {
    match command {
        OperatorRequest::Unblock { .. } => "unblock",
        OperatorRequest::Retry { .. } => "retry",
        OperatorRequest::Stop => "stop",
        OperatorRequest::Merge => "merge",
        OperatorRequest::Status => "status",
        OperatorRequest::Fix { .. } => "fix",
        OperatorRequest::Help => "help",
        OperatorRequest::Approve { .. } => "approve",
        OperatorRequest::Replan { .. } => "replan",
    }
}

/// The operator's text, kept for the next launch (empty text is none).
fn guidance(command: &OperatorCommand, text: Option<&str>) -> Option<OperatorGuidance> {
    let text = text.map(str::trim).filter(|t| !t.is_empty())?;
    Some(OperatorGuidance {
        actor: command.actor.clone(),
        command: command_name(&command.command).to_owned(),
        text: text.to_owned(),
    })
}

/// `/autoforge fix <notes>`: a human round with one finding from the notes.
fn fix(state: &RunState, command: &OperatorCommand, notes: &str) -> Decision {
    let feedback = HumanFeedback {
        source: format!("comment-{}", command.comment_id),
        author: command.actor.clone(),
        notes: vec![HumanNote {
            location: None,
            text: notes.to_owned(),
        }],
    };
    let mut turn = Turn::new(state);
    match human::take(&mut turn, &feedback) {
        Ok(Taken::Started { round, .. }) => accepted(
            turn,
            command,
            format!("human round {round} started: the fixer resolves `H{round}-F1` next"),
        ),
        Ok(Taken::Queued { round, .. }) => accepted(
            turn,
            command,
            format!(
                "human round {round} recorded: `H{round}-F1` goes to the fixer when the \
                 agent round in progress ends"
            ),
        ),
        Err(refusal) => refused(state, command, refusal),
    }
}

fn reply(command: &OperatorCommand, reply: Reply) -> EffectIntent {
    EffectIntent::PostCommandReply {
        thread: command.thread,
        comment_id: command.comment_id,
        reply,
    }
}

fn refused(state: &RunState, command: &OperatorCommand, refusal: Refusal) -> Decision {
    let mut decision = Turn::refuse(state, refusal.clone());
    decision.effects.push(reply(
        command,
        Reply::Refused {
            command: command_name(&command.command).to_owned(),
            reason: refusal.to_string(),
        },
    ));
    decision
}

fn accepted(mut turn: Turn, command: &OperatorCommand, detail: String) -> Decision {
    turn.effect(EffectIntent::AddReaction {
        comment_id: command.comment_id,
    });
    turn.effect(reply(
        command,
        Reply::Accepted {
            command: command_name(&command.command).to_owned(),
            detail,
        },
    ));
    turn.finish()
}

/// A command refused before it reached the machine (not an operator, or
/// malformed): the reply says why; the state is left exactly as it was.
pub(super) fn refused_before(state: &RunState, refused: &RefusedCommand) -> Decision {
    let mut turn = Turn::new(state);
    turn.effect(EffectIntent::PostCommandReply {
        thread: refused.thread,
        comment_id: refused.comment_id,
        reply: Reply::Refused {
            command: refused.command.clone(),
            reason: refused.reason.clone(),
        },
    });
    turn.finish()
}

/// What an authorised operator command does to the run.
///
/// Long by design: one arm per command, each stating its rule in full.
pub(super) fn decide(
    state: &RunState,
    command: &OperatorCommand,
) -> Result<Decision, MachineError> {
    if let OperatorRequest::Help = command.command {
        let mut turn = Turn::new(state);
        turn.effect(EffectIntent::AddReaction {
            comment_id: command.comment_id,
        });
        turn.effect(reply(
            command,
            Reply::Accepted {
                command: "help".to_owned(),
                detail: help_text(state),
            },
        ));
        return Ok(turn.finish());
    }
    if let OperatorRequest::Status = command.command {
        let mut turn = Turn::new(state);
        turn.effect(EffectIntent::AddReaction {
            comment_id: command.comment_id,
        });
        turn.effect(reply(
            command,
            Reply::Status {
                status: StatusSnapshot::of(state),
            },
        ));
        return Ok(turn.finish());
    }
    if state.phase.is_terminal() {
        return Ok(refused(
            state,
            command,
            Refusal::Terminal { phase: state.phase },
        ));
    }
    let mut turn = Turn::new(state);
    match &command.command {
        // Besides answering the command, stopping writes nothing but the
        // status update; the driver kills a running agent.
        OperatorRequest::Stop => {
            turn.stop()?;
            Ok(accepted(
                turn,
                command,
                "the run is stopped; a running agent is killed".to_owned(),
            ))
        }
        OperatorRequest::Retry { notes } => {
            let Awaiting::OperatorRetry { resume } = &state.awaiting else {
                return Ok(refused(state, command, Refusal::NothingToRetry));
            };
            turn.state.counters.retries = 0;
            let given = guidance(command, notes.as_deref());
            let told = given.is_some();
            if given.is_some() {
                turn.state.operator_guidance = given;
            }
            match resume.as_ref() {
                Awaiting::Agent { launch } => turn.relaunch(launch.as_ref().clone())?,
                other => turn.wait(other.clone()),
            }
            let shown = if told {
                "; the next agent is shown your notes"
            } else {
                ""
            };
            Ok(accepted(
                turn,
                command,
                format!("retrying the current step of {}{shown}", state.phase),
            ))
        }
        OperatorRequest::Merge => match (state.phase, state.settings.merge_mode) {
            (Phase::ReadyForMerge, MergeMode::OnCommand) => {
                turn.state.merge_approved = true;
                Ok(accepted(
                    turn,
                    command,
                    "merge approved; the pre-merge gate runs next".to_owned(),
                ))
            }
            (Phase::ReadyForMerge, MergeMode::Auto) => Ok(accepted(
                turn,
                command,
                "merge.mode is auto; the gate merges when it passes".to_owned(),
            )),
            (phase, mode) => Ok(refused(
                state,
                command,
                Refusal::MergeNotAvailable { mode, phase },
            )),
        },
        // The reason is recorded by the driver with the actor; it is never
        // evidence and never echoed into a GitHub body. The next agent is
        // shown it as the operator's guidance.
        OperatorRequest::Unblock { facts, reason } => match unblock_target(state, facts) {
            Err(refusal) => Ok(refused(state, command, Refusal::Unblock(refusal))),
            Ok(target) => {
                turn.state.blocked = None;
                turn.state.operator_guidance = guidance(command, Some(reason));
                // The operator looked at the issue as it is now: its text
                // is the one the run works from from here on.
                if let Some(read) = &facts.issue_text {
                    turn.state.issue_text = Some(read.clone());
                }
                if target == Phase::Fix && human::join_pending(&mut turn.state) {
                    // The waiting human findings are this FIX's to resolve.
                    turn.state.review.clean = None;
                }
                let merged = facts
                    .pr
                    .as_ref()
                    .is_some_and(|pr| pr.state == crate::machine::event::PrState::Merged);
                if merged {
                    // Someone merged the pull request while human findings
                    // waited: that merge decided, there is nothing left to fix.
                    turn.state.review.pending_human.clear();
                }
                let review = &mut turn.state.review;
                let bound_head = review.binding.as_ref().map(|b| b.head_sha.clone());
                if let (Phase::Review, Some(head)) = (target, bound_head)
                    && !review.open_findings.is_empty()
                {
                    let (round, findings) =
                        (review.round, std::mem::take(&mut review.open_findings));
                    carry_stale(review, round, &head, findings);
                }
                turn.enter(target, Cause::Unblock)?;
                Ok(accepted(
                    turn,
                    command,
                    format!(
                        "resumed in {target}, chosen from GitHub's current state; \
                         the next agent is shown your reason"
                    ),
                ))
            }
        },
        OperatorRequest::Fix { notes } => Ok(fix(state, command, notes)),
        OperatorRequest::Approve { answers } => {
            match plan::approve(&mut turn, &command.actor, answers)? {
                Ok(detail) => Ok(accepted(turn, command, detail)),
                Err(refusal) => Ok(refused(state, command, refusal)),
            }
        }
        OperatorRequest::Replan { notes } => {
            let Some(given) = guidance(command, Some(notes)) else {
                return Ok(refused(
                    state,
                    command,
                    Refusal::PlanNotAvailable {
                        reason: "a replan needs notes saying what to change".to_owned(),
                    },
                ));
            };
            match plan::replan(&mut turn, given)? {
                Ok(detail) => Ok(accepted(turn, command, detail)),
                Err(refusal) => Ok(refused(state, command, refusal)),
            }
        }
        OperatorRequest::Status | OperatorRequest::Help => Ok(turn.finish()),
    }
}

/// The comment id a local command is decided under: GitHub's ids start at
/// 1, so no real comment's reaction or reply can be mistaken for it.
const NO_COMMENT: u64 = 0;

/// A command from the controller's own command line: exactly the decision
/// of the comment command, without the reaction and the reply, which would
/// address a comment that does not exist. The status comment still tells
/// the issue what changed.
pub(super) fn decide_local(
    state: &RunState,
    command: &LocalOperatorCommand,
) -> Result<Decision, MachineError> {
    let as_comment = OperatorCommand {
        thread: state.issue,
        comment_id: NO_COMMENT,
        actor: command.actor.clone(),
        command: command.command.clone(),
    };
    let mut decision = decide(state, &as_comment)?;
    decision.effects.retain(|intent| {
        !matches!(
            intent,
            EffectIntent::AddReaction {
                comment_id: NO_COMMENT
            } | EffectIntent::PostCommandReply {
                comment_id: NO_COMMENT,
                ..
            }
        )
    });
    Ok(decision)
}
