//! REVIEW: bind the round to the PR's revision, launch the reviewer, post
//! its comment, then re-read the revision to judge the round: stale, clean
//! or with findings (SPEC §4 REVIEW, §8).

use super::human;
use super::turn::{Turn, TurnResult};
use crate::machine::agent_result::{PhaseResult, ReviewResult};
use crate::machine::bounds::round_allowed;
use crate::machine::decision::{Decision, EffectIntent, LaunchInputs, MachineError};
use crate::machine::event::{EffectReadBack, Event, GitHubFacts, PrFacts, PrState};
use crate::machine::phase::{AgentPhase, Cause, Phase};
use crate::machine::review_rounds::{bind, carry_stale, moved, record, stagnation};
use crate::machine::state::{Awaiting, EffectStep, FactsPurpose, RoundOutcome, RunState};

/// Entry: refuse a round past the cap before anything is bound or launched.
pub(super) fn enter(turn: &mut Turn) -> TurnResult {
    let max = turn.state.settings.max_review_rounds;
    if !round_allowed(&turn.state.settings, turn.state.review.round) {
        return turn.block(format!("the review cap of {max} rounds is reached"));
    }
    turn.state.merge_approved = false;
    turn.wait(Awaiting::Facts {
        purpose: FactsPurpose::BindRound,
    });
    Ok(())
}

/// The run's PR as freshly read, if it is still the open bound PR.
pub(super) fn open_pr<'a>(state: &RunState, facts: &'a GitHubFacts) -> Result<&'a PrFacts, String> {
    let Some(bound) = state.pr else {
        return Err("no pull request is bound to the run".to_owned());
    };
    match &facts.pr {
        None => Err(format!("pull request #{bound} could not be read")),
        Some(pr) if pr.number != bound => Err(format!(
            "pull request #{bound} is bound but GitHub answered with #{}",
            pr.number
        )),
        Some(pr) if pr.state == PrState::Closed => Err(format!("pull request #{bound} was closed")),
        Some(pr) if pr.state == PrState::Merged => Err(format!(
            "pull request #{bound} was merged outside the controller's merge step"
        )),
        Some(pr) => Ok(pr),
    }
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Facts {
                purpose: FactsPurpose::BindRound,
            },
            Event::GitHubObserved { facts },
        ) => {
            bind_and_launch(&mut turn, facts)?;
        }
        (
            Awaiting::Effects {
                step: EffectStep::ReviewComment,
            },
            Event::EffectsObserved { observed },
        ) => {
            let url = observed.iter().find_map(|o| match o {
                EffectReadBack::Comment { url } => Some(url.clone()),
                _ => None,
            });
            turn.state.review.comment_url = url;
            turn.wait(Awaiting::Facts {
                purpose: FactsPurpose::AfterReviewComment,
            });
        }
        (
            Awaiting::Facts {
                purpose: FactsPurpose::AfterReviewComment,
            },
            Event::GitHubObserved { facts },
        ) => {
            conclude_round(&mut turn, facts)?;
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

fn bind_and_launch(turn: &mut Turn, facts: &GitHubFacts) -> TurnResult {
    let pr = match open_pr(&turn.state, facts) {
        Ok(pr) => pr,
        Err(reason) => return turn.block(reason),
    };
    let binding = bind(pr);
    let review = &mut turn.state.review;
    review.binding = Some(binding.clone());
    // A new round supersedes any earlier clean verdict.
    review.clean = None;
    let inputs = LaunchInputs::Review {
        binding,
        previous_comment_url: review.comment_url.clone(),
        prior_findings: review.prior_findings.clone(),
        last_resolutions: review.last_resolutions.clone(),
        human_findings: review.resolved_human.clone(),
    };
    let round = review.round + 1;
    turn.launch(AgentPhase::Review, round, inputs)
}

pub(super) fn on_result(turn: &mut Turn, result: &ReviewResult) -> TurnResult {
    let round = turn.state.review.round + 1;
    let Some(binding) = turn.state.review.binding.clone() else {
        return turn.block("a review result arrived without a bound round");
    };
    if result.round != round {
        return turn.correct(&format!(
            "round is {}, the controller launched round {round}",
            result.round
        ));
    }
    if result.reviewed_head_sha != binding.head_sha {
        return turn.correct("reviewed_head_sha is not the bound head");
    }
    let prefix = format!("R{round}-F");
    if let Some(bad) = result
        .findings
        .iter()
        .position(|f| !f.id.starts_with(&prefix))
    {
        return turn.correct(&format!(
            "findings[{bad}].id does not belong to round {round}"
        ));
    }
    turn.state.pending = Some(PhaseResult::Review(result.clone()));
    turn.effect(EffectIntent::PostReviewComment {
        pr: binding.pr,
        round,
        binding: binding.clone(),
        findings: result.findings.clone(),
        sections: result.sections.clone(),
    });
    // After the comment, which is the round's record: a conflict on the
    // comment leaves the review unsent.
    turn.effect(EffectIntent::PostReview {
        pr: binding.pr,
        round,
        binding,
        findings: result.findings.clone(),
    });
    turn.wait(Awaiting::Effects {
        step: EffectStep::ReviewComment,
    });
    Ok(())
}

/// After the comment was read back: the round counts whatever happens next.
fn conclude_round(turn: &mut Turn, facts: &GitHubFacts) -> TurnResult {
    let (Some(PhaseResult::Review(result)), Some(binding)) =
        (turn.state.pending.take(), turn.state.review.binding.clone())
    else {
        return turn.block("no posted review is pending its re-read");
    };
    let round = turn.state.review.round + 1;
    turn.state.review.round = round;
    let findings = result.findings;
    let pr = match open_pr(&turn.state, facts) {
        Ok(pr) => pr,
        Err(reason) => {
            turn.state.review.open_findings = findings;
            return turn.block(reason);
        }
    };
    let review = &mut turn.state.review;
    if moved(&binding, pr) {
        review.history.push(record(
            round,
            &binding.head_sha,
            RoundOutcome::Stale,
            &findings,
        ));
        carry_stale(review, round, &binding.head_sha, findings);
        return turn.enter(Phase::Review, Cause::Ordinary);
    }
    review.prior_findings = None;
    // This round's reviewer has seen the resolved human findings.
    review.resolved_human.clear();
    let ai_clean = findings.is_empty();
    review.history.push(record(
        round,
        &binding.head_sha,
        if ai_clean {
            RoundOutcome::Clean
        } else {
            RoundOutcome::NeedsFix
        },
        &findings,
    ));
    review.open_findings = findings;
    // Human findings that arrived while the round ran go to this FIX too.
    let human_waiting = human::join_pending(&mut turn.state);
    let review = &mut turn.state.review;
    if ai_clean && !human_waiting {
        review.open_findings.clear();
        review.clean = Some(binding);
        return turn.enter(Phase::ReadyForMerge, Cause::Ordinary);
    }
    if !ai_clean && let Some(stuck) = stagnation(&review.history, &turn.state.settings) {
        return turn.block(stuck.reason());
    }
    if !round_allowed(&turn.state.settings, round) {
        let max = turn.state.settings.max_review_rounds;
        return turn.block(format!(
            "round {round} of {max} ended with findings; the review cap is reached"
        ));
    }
    turn.enter(Phase::Fix, Cause::Ordinary)
}
