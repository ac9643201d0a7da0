//! READY_FOR_MERGE and MERGE (SPEC §10): notice a human's merge, or pass the
//! pre-merge gate and merge exactly the reviewed head; count a merge only
//! when GitHub reports it at the reviewed head into the reviewed base.

use super::turn::{Turn, TurnResult};
use crate::machine::bounds::MergeMode;
use crate::machine::decision::{Decision, EffectIntent, MachineError};
use crate::machine::event::{ChecksState, Event, MergeableState, PrFacts, PrState};
use crate::machine::phase::{Cause, Phase};
use crate::machine::review_rounds::moved;
use crate::machine::state::{Awaiting, FactsPurpose, RoundBinding, RunState};

pub(super) fn enter_ready(turn: &mut Turn) -> TurnResult {
    turn.wait(Awaiting::Facts {
        purpose: FactsPurpose::MergeGate,
    });
    Ok(())
}

/// Entry: the merge write, pinned to the reviewed head with GitHub's `sha`.
pub(super) fn enter_merge(turn: &mut Turn) -> TurnResult {
    let Some(clean) = turn.state.review.clean.clone() else {
        return turn.block("MERGE has no clean review to merge");
    };
    turn.effect(EffectIntent::MergePr {
        pr: clean.pr,
        sha: clean.head_sha,
        base_ref: clean.base_ref,
    });
    turn.wait(Awaiting::MergeOutcome);
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (state.phase, &state.awaiting, event) {
        (
            Phase::ReadyForMerge,
            Awaiting::Facts {
                purpose: FactsPurpose::MergeGate,
            },
            Event::GitHubObserved { facts },
        ) => {
            ready(&mut turn, facts.pr.as_ref())?;
        }
        (Phase::Merge, Awaiting::MergeOutcome, Event::MergeResult(report)) => {
            merged_or_not(&mut turn, Some(&report.pr))?;
        }
        (Phase::Merge, Awaiting::MergeOutcome, Event::GitHubObserved { facts }) => {
            merged_or_not(&mut turn, facts.pr.as_ref())?;
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

/// The clean binding and the fresh read of the same PR, or a block reason.
fn clean_and_pr<'a>(
    state: &RunState,
    pr: Option<&'a PrFacts>,
) -> Result<(RoundBinding, &'a PrFacts), String> {
    let Some(clean) = state.review.clean.clone() else {
        return Err("no clean review is bound to the run".to_owned());
    };
    match pr {
        Some(pr) if pr.number == clean.pr => Ok((clean, pr)),
        Some(pr) => Err(format!(
            "pull request #{} is bound but GitHub answered with #{}",
            clean.pr, pr.number
        )),
        None => Err(format!("pull request #{} could not be read", clean.pr)),
    }
}

fn merged_at(clean: &RoundBinding, pr: &PrFacts) -> bool {
    pr.head_sha == clean.head_sha && pr.base_ref == clean.base_ref
}

/// Counts a merge once, even if it is observed again after a crash.
fn count_merge(turn: &mut Turn, pr: u64) -> TurnResult {
    if !turn.state.merged_prs.contains(&pr) {
        turn.state.merged_prs.push(pr);
        if let Some(epic) = turn.state.epic.as_mut() {
            epic.merges_since_roadmap += 1;
        }
    }
    turn.enter(Phase::UpdateEpic, Cause::Ordinary)
}

fn ready(turn: &mut Turn, pr: Option<&PrFacts>) -> TurnResult {
    let (clean, pr) = match clean_and_pr(&turn.state, pr) {
        Ok(found) => found,
        Err(reason) => return turn.block(reason),
    };
    match pr.state {
        PrState::Merged if merged_at(&clean, pr) => return count_merge(turn, pr.number),
        PrState::Merged => {
            return turn.block(format!(
                "pull request #{} was merged at another revision than the reviewed one; not counted",
                pr.number
            ));
        }
        PrState::Closed => return turn.block(format!("pull request #{} was closed", pr.number)),
        PrState::Open => {}
    }
    if moved(&clean, pr) {
        return turn.enter(Phase::Review, Cause::Ordinary);
    }
    let s = &turn.state;
    let may_merge = match s.settings.merge_mode {
        MergeMode::Never => false,
        MergeMode::OnCommand => s.merge_approved,
        MergeMode::Auto => true,
    };
    if !may_merge {
        return Ok(());
    }
    match gate(pr) {
        Gate::Pass => turn.enter(Phase::Merge, Cause::Ordinary),
        Gate::Refused(reason) => turn.block(format!("the pre-merge gate refused: {reason}")),
        Gate::Inconclusive(reason) => {
            turn.state.counters.merge_checks += 1;
            let max = turn.state.settings.max_merge_checks;
            if turn.state.counters.merge_checks >= max {
                return turn.block(format!(
                    "the pre-merge gate stayed inconclusive {max} times: {reason}"
                ));
            }
            Ok(())
        }
    }
}

enum Gate {
    Pass,
    Refused(&'static str),
    Inconclusive(&'static str),
}

/// The pre-merge facts of SPEC §10, conclusive refusals first.
fn gate(pr: &PrFacts) -> Gate {
    if !pr.clean_review_intact {
        return Gate::Refused("the clean review comment is missing or changed");
    }
    if pr.draft {
        return Gate::Refused("the pull request is a draft");
    }
    if pr.protected_paths_changed {
        return Gate::Refused("a protected path changed");
    }
    if pr.checks == ChecksState::Failed {
        return Gate::Refused("a check did not succeed");
    }
    if pr.mergeable == Some(false) {
        return Gate::Refused("GitHub reports the pull request not mergeable");
    }
    match pr.mergeable_state {
        MergeableState::Behind => return Gate::Refused("the branch is behind its base"),
        MergeableState::Blocked => return Gate::Refused("branch protection blocks the merge"),
        MergeableState::Dirty => return Gate::Refused("the pull request has conflicts"),
        MergeableState::Draft => return Gate::Refused("the pull request is a draft"),
        // GitHub says `unstable` for running checks too, not only failing ones.
        MergeableState::Unstable if pr.checks == ChecksState::Pending => {
            return Gate::Inconclusive("checks are still running");
        }
        MergeableState::Unstable => return Gate::Refused("a check is failing"),
        MergeableState::Unknown => {
            return Gate::Inconclusive("GitHub is still computing mergeability");
        }
        MergeableState::Clean | MergeableState::HasHooks => {}
    }
    if pr.checks == ChecksState::Pending {
        return Gate::Inconclusive("checks are still running");
    }
    if pr.mergeable.is_none() {
        return Gate::Inconclusive("GitHub is still computing mergeability");
    }
    Gate::Pass
}

/// The merge read-back: count it, follow a drift back to REVIEW, or block.
fn merged_or_not(turn: &mut Turn, pr: Option<&PrFacts>) -> TurnResult {
    let (clean, pr) = match clean_and_pr(&turn.state, pr) {
        Ok(found) => found,
        Err(reason) => return turn.block(reason),
    };
    match pr.state {
        PrState::Merged if merged_at(&clean, pr) => count_merge(turn, pr.number),
        PrState::Merged => turn.block(format!(
            "pull request #{} was merged at another revision than the reviewed one; not counted",
            pr.number
        )),
        PrState::Open if moved(&clean, pr) => turn.enter(Phase::Review, Cause::Ordinary),
        PrState::Open => turn.block(format!(
            "the merge of pull request #{} returned but it is still open at the reviewed revision",
            pr.number
        )),
        PrState::Closed => turn.block(format!("pull request #{} was closed", pr.number)),
    }
}
