//! PLAN (SPEC §4, optional): the planner writes a plan, the controller posts
//! it as the issue's `ai-plan` comment (one per version), then
//! - `plan.mode = "post"`: IMPLEMENT starts as soon as the comment is read
//!   back, with the plan and every question at its default;
//! - `plan.mode = "approve"`: the run waits in PLAN for an operator's
//!   `/autoforge approve [answers]` (IMPLEMENT with the plan and the
//!   answers) or `/autoforge replan <notes>` (a new version, the notes shown
//!   to the planner as the operator's guidance).
//!
//! Approve and replan are accepted only while the run waits for approval:
//! a plan being written or posted has nothing to approve yet.

use super::turn::{Turn, TurnResult};
use crate::machine::agent_result::{ApprovedPlan, PlanAnswer, PlanResult};
use crate::machine::bounds::PlanMode;
use crate::machine::decision::{Decision, EffectIntent, LaunchInputs, MachineError, Refusal};
use crate::machine::event::{EffectReadBack, Event};
use crate::machine::phase::{AgentPhase, Cause, Phase};
use crate::machine::state::{Awaiting, EffectStep, OperatorGuidance, RunState};

/// Where a new issue's work begins: PLAN when the run plans first.
pub(super) fn first_phase(state: &RunState) -> Phase {
    match state.settings.plan_mode {
        PlanMode::Off => Phase::Implement,
        PlanMode::Post | PlanMode::Approve => Phase::Plan,
    }
}

/// Entry: launch the planner for the next version.
pub(super) fn enter(turn: &mut Turn) -> TurnResult {
    turn.state.plan.approved = None;
    let s = &turn.state;
    let Some(base_sha) = s.base_sha.clone() else {
        return turn.block(
            "the run has no base commit recorded; remove and add the trigger label to start it again"
                .to_owned(),
        );
    };
    let inputs = LaunchInputs::Plan {
        issue: s.issue,
        base_sha,
        version: s.plan.version + 1,
    };
    turn.launch(AgentPhase::Plan, 0, inputs)
}

/// The planner answered: post the plan as its version's comment.
pub(super) fn on_result(turn: &mut Turn, result: &PlanResult) -> TurnResult {
    let plan = &mut turn.state.plan;
    plan.version += 1;
    plan.latest = Some(result.clone());
    let version = plan.version;
    let awaits_approval = turn.state.settings.plan_mode == PlanMode::Approve;
    turn.effect(EffectIntent::PostPlanComment {
        issue: turn.state.issue,
        version,
        plan: result.clone(),
        awaits_approval,
    });
    turn.wait(Awaiting::Effects {
        step: EffectStep::PlanComment,
    });
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Effects {
                step: EffectStep::PlanComment,
            },
            Event::EffectsObserved { observed },
        ) => {
            let posted = observed
                .iter()
                .any(|o| matches!(o, EffectReadBack::Comment { .. }));
            if !posted {
                turn.block("the plan comment was not observed after posting")?;
            } else if state.settings.plan_mode == PlanMode::Approve {
                turn.wait(Awaiting::PlanApproval);
            } else {
                implement_plan(&mut turn, Vec::new(), None)?;
            }
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

/// PLAN -> IMPLEMENT with the latest plan and `answers`.
fn implement_plan(
    turn: &mut Turn,
    answers: Vec<PlanAnswer>,
    approved_by: Option<String>,
) -> TurnResult {
    let plan = &mut turn.state.plan;
    let Some(latest) = plan.latest.clone() else {
        return turn.block("no plan is recorded to implement");
    };
    plan.approved = Some(ApprovedPlan {
        version: plan.version,
        plan: latest,
        answers,
        approved_by,
    });
    // Set before the entry: IMPLEMENT's launch reads it.
    turn.enter(Phase::Implement, Cause::Ordinary)
}

fn waiting_for_approval(state: &RunState) -> Result<(), Refusal> {
    match (state.phase, &state.awaiting) {
        (Phase::Plan, Awaiting::PlanApproval) => Ok(()),
        (Phase::Plan, _) => Err(not_available(
            "the plan is still being written or posted; wait for its comment",
        )),
        (phase, _) => Err(not_available(&format!(
            "the run is in {phase}, with no plan waiting for approval"
        ))),
    }
}

fn not_available(reason: &str) -> Refusal {
    Refusal::PlanNotAvailable {
        reason: reason.to_owned(),
    }
}

/// `/autoforge approve [answers]`: every answer must name a question of
/// the posted plan. `Ok` carries the reply's detail.
pub(super) fn approve(
    turn: &mut Turn,
    actor: &str,
    answers: &[PlanAnswer],
) -> Result<Result<String, Refusal>, MachineError> {
    if let Err(refusal) = waiting_for_approval(&turn.state) {
        return Ok(Err(refusal));
    }
    let plan = &turn.state.plan;
    let Some(latest) = &plan.latest else {
        return Ok(Err(not_available("no plan is recorded to approve")));
    };
    let unknown: Vec<&str> = answers
        .iter()
        .filter(|a| !latest.questions.iter().any(|q| q.id == a.id))
        .map(|a| a.id.as_str())
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = latest.questions.iter().map(|q| q.id.as_str()).collect();
        let known = if known.is_empty() {
            "the plan asks no questions".to_owned()
        } else {
            format!("its questions are {}", known.join(", "))
        };
        return Ok(Err(not_available(&format!(
            "plan {} has no question {}; {known}",
            plan.version,
            unknown.join(", ")
        ))));
    }
    let version = plan.version;
    let defaults = latest.questions.len() - answers.len();
    let approved = ApprovedPlan {
        version,
        plan: latest.clone(),
        answers: answers.to_vec(),
        approved_by: Some(actor.to_owned()),
    };
    turn.state.plan.approved = Some(approved);
    turn.enter(Phase::Implement, Cause::Ordinary)?;
    Ok(Ok(format!(
        "plan {version} approved with {} answer(s), {defaults} question(s) at their default; \
         IMPLEMENT starts",
        answers.len()
    )))
}

/// `/autoforge replan <notes>`: a new version, the notes for the planner.
pub(super) fn replan(
    turn: &mut Turn,
    guidance: OperatorGuidance,
) -> Result<Result<String, Refusal>, MachineError> {
    if let Err(refusal) = waiting_for_approval(&turn.state) {
        return Ok(Err(refusal));
    }
    turn.state.operator_guidance = Some(guidance);
    let next = turn.state.plan.version + 1;
    turn.enter(Phase::Plan, Cause::Ordinary)?;
    Ok(Ok(format!(
        "plan {next} is being written; the planner is shown your notes"
    )))
}
