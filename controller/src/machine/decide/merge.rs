//! READY_FOR_MERGE and MERGE (SPEC §10): notice a human's merge, or pass the
//! pre-merge gate and merge exactly the reviewed head; count a merge only
//! when GitHub reports it at the reviewed head into the reviewed base.

use super::step::{Step, StepResult};
use crate::machine::bounds::MergeMode;
use crate::machine::decision::{Decision, EffectIntent, MachineError};
use crate::machine::event::{ChecksState, Event, MergeableState, PrFacts, PrState};
use crate::machine::phase::{Cause, Phase};
use crate::machine::review_rounds::moved;
use crate::machine::state::{Awaiting, FactsPurpose, RoundBinding, RunState};

pub(super) fn enter_ready(step: &mut Step) -> StepResult {
    step.wait(Awaiting::Facts {
        purpose: FactsPurpose::MergeGate,
    });
    Ok(())
}

/// Entry: the merge write, pinned to the reviewed head with GitHub's `sha`.
pub(super) fn enter_merge(step: &mut Step) -> StepResult {
    let Some(clean) = step.state.review.clean.clone() else {
        return step.block("MERGE has no clean review to merge");
    };
    step.effect(EffectIntent::MergePr {
        pr: clean.pr,
        sha: clean.head_sha,
        base_ref: clean.base_ref,
    });
    step.wait(Awaiting::MergeOutcome);
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut step = Step::new(state);
    match (state.phase, &state.awaiting, event) {
        (
            Phase::ReadyForMerge,
            Awaiting::Facts {
                purpose: FactsPurpose::MergeGate,
            },
            Event::GitHubObserved { facts },
        ) => {
            ready(&mut step, facts.pr.as_ref())?;
        }
        (Phase::Merge, Awaiting::MergeOutcome, Event::MergeResult(report)) => {
            merged_or_not(&mut step, Some(&report.pr))?;
        }
        (Phase::Merge, Awaiting::MergeOutcome, Event::GitHubObserved { facts }) => {
            merged_or_not(&mut step, facts.pr.as_ref())?;
        }
        _ => return Ok(Step::unexpected(state, event)),
    }
    Ok(step.finish())
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
fn count_merge(step: &mut Step, pr: u64) -> StepResult {
    if !step.state.merged_prs.contains(&pr) {
        step.state.merged_prs.push(pr);
        if let Some(epic) = step.state.epic.as_mut() {
            epic.merges_since_roadmap += 1;
        }
    }
    step.enter(Phase::UpdateEpic, Cause::Ordinary)
}

fn ready(step: &mut Step, pr: Option<&PrFacts>) -> StepResult {
    let (clean, pr) = match clean_and_pr(&step.state, pr) {
        Ok(found) => found,
        Err(reason) => return step.block(reason),
    };
    match pr.state {
        PrState::Merged if merged_at(&clean, pr) => return count_merge(step, pr.number),
        PrState::Merged => {
            return step.block(format!(
                "pull request #{} was merged at another revision than the reviewed one; not counted",
                pr.number
            ));
        }
        PrState::Closed => return step.block(format!("pull request #{} was closed", pr.number)),
        PrState::Open => {}
    }
    if moved(&clean, pr) {
        return step.enter(Phase::Review, Cause::Ordinary);
    }
    let s = &step.state;
    let may_merge = match s.settings.merge_mode {
        MergeMode::Never => false,
        MergeMode::OnCommand => s.merge_approved,
        MergeMode::Auto => true,
    };
    if !may_merge {
        return Ok(());
    }
    match gate(pr) {
        Gate::Pass => step.enter(Phase::Merge, Cause::Ordinary),
        Gate::Refused(reason) => step.block(format!("the pre-merge gate refused: {reason}")),
        Gate::Inconclusive(reason) => {
            step.state.counters.merge_checks += 1;
            let max = step.state.settings.max_merge_checks;
            if step.state.counters.merge_checks >= max {
                return step.block(format!(
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
fn merged_or_not(step: &mut Step, pr: Option<&PrFacts>) -> StepResult {
    let (clean, pr) = match clean_and_pr(&step.state, pr) {
        Ok(found) => found,
        Err(reason) => return step.block(reason),
    };
    match pr.state {
        PrState::Merged if merged_at(&clean, pr) => count_merge(step, pr.number),
        PrState::Merged => step.block(format!(
            "pull request #{} was merged at another revision than the reviewed one; not counted",
            pr.number
        )),
        PrState::Open if moved(&clean, pr) => step.enter(Phase::Review, Cause::Ordinary),
        PrState::Open => step.block(format!(
            "the merge of pull request #{} returned but it is still open at the reviewed revision",
            pr.number
        )),
        PrState::Closed => step.block(format!("pull request #{} was closed", pr.number)),
    }
}
