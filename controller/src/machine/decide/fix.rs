//! FIX: check the PR is still at the reviewed revision, launch the fixer,
//! validate a moved head, then create follow-ups, append markers and push
//! last (SPEC §4 FIX); a moved head changing a protected path blocks and
//! writes nothing.

use super::common::protected_candidate;
use super::human::human_only;
use super::review::open_pr;
use super::turn::{Turn, TurnResult};
use crate::machine::agent_result::{FixResult, PhaseResult, ResolutionKind};
use crate::machine::decision::{Decision, EffectIntent, LaunchInputs, MachineError};
use crate::machine::event::{Event, GitHubFacts};
use crate::machine::phase::{AgentPhase, Cause, Phase};
use crate::machine::review_rounds::{carry_stale, moved};
use crate::machine::state::{
    Awaiting, EffectStep, FactsPurpose, RoundOutcome, RunState, is_human_finding,
};
use std::collections::BTreeMap;

use autoforge_journal::IssueNumber;

pub(super) fn enter(turn: &mut Turn) -> TurnResult {
    turn.state.candidate = None;
    turn.state.pending = None;
    turn.wait(Awaiting::Facts {
        purpose: FactsPurpose::FixEntry,
    });
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Facts {
                purpose: FactsPurpose::FixEntry,
            },
            Event::GitHubObserved { facts },
        ) => {
            entry_check(&mut turn, facts)?;
        }
        (
            Awaiting::Validation { sha },
            Event::ValidationFinished {
                sha: got,
                passed,
                summary,
                protected_paths,
                ..
            },
        ) => {
            if sha != got {
                return Ok(Turn::stale_validation(state, got));
            }
            if *passed && !protected_paths.is_empty() {
                protected_candidate(&mut turn, got, protected_paths)?;
            } else if *passed {
                publish(&mut turn)?;
            } else {
                validation_failed(&mut turn, summary)?;
            }
        }
        (
            Awaiting::Effects {
                step: EffectStep::FixPublish,
            },
            Event::EffectsObserved { .. },
        ) => {
            finish(&mut turn)?;
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

/// A PR that moved off the reviewed revision makes the round stale: back to
/// REVIEW without launching, the findings carried as prior findings.
fn entry_check(turn: &mut Turn, facts: &GitHubFacts) -> TurnResult {
    let pr = match open_pr(&turn.state, facts) {
        Ok(pr) => pr,
        Err(reason) => return turn.block(reason),
    };
    let Some(binding) = turn.state.review.binding.clone() else {
        return turn.block("FIX has no reviewed revision to start from");
    };
    if moved(&binding, pr) {
        let review = &mut turn.state.review;
        let round = review.round;
        if let Some(last) = review.history.last_mut().filter(|r| r.round == round) {
            last.outcome = RoundOutcome::Stale;
        }
        let (human, findings): (Vec<_>, Vec<_>) = std::mem::take(&mut review.open_findings)
            .into_iter()
            .partition(|f| is_human_finding(&f.id));
        // A person's findings are not the stale round's to re-check: they
        // wait for the next round's end and its FIX.
        review.pending_human.splice(0..0, human);
        carry_stale(review, round, &binding.head_sha, findings);
        return turn.enter(Phase::Review, Cause::Ordinary);
    }
    launch(turn)
}

fn launch(turn: &mut Turn) -> TurnResult {
    let s = &turn.state;
    let Some(binding) = s.review.binding.clone() else {
        return turn.block("FIX has no reviewed revision to start from");
    };
    let inputs = LaunchInputs::Fix {
        binding,
        comment_url: s.review.comment_url.clone(),
        findings: s.review.open_findings.clone(),
        validation_failure: s.last_validation_failure.clone(),
    };
    let round = s.review.round;
    turn.launch(AgentPhase::Fix, round, inputs)
}

/// Cross-checks the parser cannot make without the run's own state.
fn diagnose(turn: &Turn, result: &FixResult) -> Option<String> {
    let s = &turn.state;
    let reviewed = s.review.binding.as_ref().map(|b| b.head_sha.as_str());
    if reviewed != Some(result.previous_head_sha.as_str()) {
        return Some("previous_head_sha is not the reviewed head".to_owned());
    }
    let mut open: Vec<&str> = s
        .review
        .open_findings
        .iter()
        .map(|f| f.id.as_str())
        .collect();
    let mut resolved: Vec<&str> = result
        .resolutions
        .iter()
        .map(|r| r.finding_id.as_str())
        .collect();
    open.sort_unstable();
    resolved.sort_unstable();
    if open != resolved {
        return Some("resolutions must name each open finding exactly once".to_owned());
    }
    let head_moved = result.head_sha != result.previous_head_sha;
    for resolution in &result.resolutions {
        match &resolution.kind {
            ResolutionKind::Fixed { .. } if !head_moved => {
                return Some(format!(
                    "{} is marked fixed but no commit was made",
                    resolution.finding_id
                ));
            }
            ResolutionKind::FollowUpExisting { issue } if *issue == s.issue => {
                return Some(format!(
                    "{} defers to the run's own issue",
                    resolution.finding_id
                ));
            }
            _ => {}
        }
    }
    None
}

pub(super) fn on_result(turn: &mut Turn, result: &FixResult) -> TurnResult {
    if let Some(diagnosis) = diagnose(turn, result) {
        return turn.correct(&diagnosis);
    }
    turn.state.pending = Some(PhaseResult::Fix(result.clone()));
    if result.head_sha != result.previous_head_sha {
        turn.validate(&result.head_sha);
        Ok(())
    } else {
        publish(turn)
    }
}

fn validation_failed(turn: &mut Turn, summary: &str) -> TurnResult {
    if turn.count_validation_failure(summary)? {
        launch(turn)?;
    }
    Ok(())
}

/// Follow-up issues first, marker appends next, the push last: a crash in
/// between never leaves a pushed fix whose deferrals are missing.
fn publish(turn: &mut Turn) -> TurnResult {
    let (Some(PhaseResult::Fix(result)), Some(pr)) = (turn.state.pending.clone(), turn.state.pr)
    else {
        return turn.block("no validated fix is pending publication");
    };
    let mut appends: BTreeMap<IssueNumber, Vec<String>> = BTreeMap::new();
    for resolution in &result.resolutions {
        match &resolution.kind {
            ResolutionKind::FollowUpNew { draft } => {
                turn.effect(EffectIntent::CreateFollowUpIssue {
                    pr,
                    finding_id: resolution.finding_id.clone(),
                    title: draft.title.clone(),
                    body: draft.body.clone(),
                })
            }
            ResolutionKind::FollowUpExisting { issue } => {
                appends
                    .entry(*issue)
                    .or_default()
                    .push(resolution.finding_id.clone());
            }
            ResolutionKind::Fixed { .. } | ResolutionKind::NoChangeWithRationale { .. } => {}
        }
    }
    for (issue, finding_ids) in appends {
        turn.effect(EffectIntent::AppendFollowUpMarkers {
            issue,
            pr,
            finding_ids,
        });
    }
    let head_moved = result.head_sha != result.previous_head_sha;
    if head_moved {
        turn.effect(EffectIntent::Push {
            branch: turn.state.branch.clone(),
            sha: result.head_sha.clone(),
            expected_old: Some(result.previous_head_sha.clone()),
        });
    }
    let nothing_to_write = !head_moved
        && result.resolutions.iter().all(|r| {
            matches!(
                r.kind,
                ResolutionKind::Fixed { .. } | ResolutionKind::NoChangeWithRationale { .. }
            )
        });
    if nothing_to_write {
        return finish(turn);
    }
    turn.wait(Awaiting::Effects {
        step: EffectStep::FixPublish,
    });
    Ok(())
}

fn finish(turn: &mut Turn) -> TurnResult {
    if let Some(PhaseResult::Fix(result)) = turn.state.pending.take() {
        turn.state.review.last_resolutions = result.resolutions;
    }
    turn.state.review.resolved_human = human_only(&turn.state.review.open_findings);
    turn.state.review.open_findings.clear();
    turn.state.candidate = None;
    turn.state.last_validation_failure = None;
    turn.enter(Phase::Review, Cause::Ordinary)
}
