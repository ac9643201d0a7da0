//! READY_FOR_MERGE and MERGE (SPEC §10): notice a human's merge, or pass the
//! pre-merge gate and merge exactly the reviewed head by a method the
//! repository allows; count a merge only when GitHub reports it at the
//! reviewed head into the reviewed base.
//!
//! The gate tells waiting from refusing: checks still running, a required
//! check that has not reported yet and a required review not yet given are
//! waits (re-read on the next delivery
//! or poll, shown in the status comment); what no wait can change blocks.

use super::turn::{Turn, TurnResult};
use crate::inline_code::code_span;
use crate::machine::bounds::{MergeMethod, MergeMode};
use crate::machine::decision::{Decision, EffectIntent, MachineError, StatusSnapshot};
use crate::machine::event::{
    AllowedMergeMethods, ChecksState, Event, MergeableState, PrFacts, PrState,
};
use crate::machine::phase::{Cause, Phase};
use crate::machine::review_rounds::moved;
use crate::machine::state::{Awaiting, FactsPurpose, MergePlan, RoundBinding, RunState};
use autoforge_journal::PullNumber;

/// GitHub's files listing of a pull request stops after this many files.
pub const FILES_LISTING_CAP: u64 = 3000;

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
    // A run recorded before the gate chose a method merges as GitHub does
    // when no method is named.
    let plan = turn.state.merging.clone().unwrap_or(MergePlan {
        method: MergeMethod::default(),
        pr_title: String::new(),
    });
    turn.effect(EffectIntent::MergePr {
        pr: clean.pr,
        sha: clean.head_sha,
        base_ref: clean.base_ref,
        method: plan.method,
        pr_title: plan.pr_title,
        issue: turn.state.issue,
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
fn count_merge(turn: &mut Turn, pr: PullNumber) -> TurnResult {
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
    let method = match merge_method(&turn.state, &pr.merge_methods) {
        Ok(method) => method,
        Err(reason) => return turn.block(reason),
    };
    match gate(pr) {
        Gate::Pass => {
            turn.state.merge_wait = None;
            turn.state.merging = Some(MergePlan {
                method,
                pr_title: pr.title.clone(),
            });
            turn.enter(Phase::Merge, Cause::Ordinary)
        }
        Gate::Refused(reason) => {
            turn.state.merge_wait = None;
            turn.block(format!("the pre-merge gate refused: {reason}"))
        }
        // A person's review may take days: waiting for it spends no
        // inconclusive read, and each review delivery re-reads the gate.
        Gate::Waiting(reason) => {
            show_wait(turn, reason);
            Ok(())
        }
        Gate::Inconclusive(reason) => {
            turn.state.counters.merge_checks += 1;
            let max = turn.state.settings.max_merge_checks;
            if turn.state.counters.merge_checks >= max {
                turn.state.merge_wait = None;
                return turn.block(format!(
                    "the pre-merge gate stayed inconclusive {max} times: {reason}"
                ));
            }
            show_wait(turn, reason);
            Ok(())
        }
    }
}

/// Records what the gate waits for; a new reason edits the status comment
/// (the same one again writes nothing).
fn show_wait(turn: &mut Turn, reason: String) {
    if turn.state.merge_wait.as_deref() == Some(reason.as_str()) {
        return;
    }
    turn.state.merge_wait = Some(reason);
    turn.effect(EffectIntent::EditStatusComment {
        issue: turn.state.issue,
        run_id: turn.state.run_id.clone(),
        status: StatusSnapshot::of(&turn.state),
    });
}

/// The method to merge by: the repository's `.github/autoforge.toml`
/// choice, else the operator's `merge.method`, else the first of
/// [`MergeMethod::PREFERRED`] the repository allows. A chosen method the
/// repository does not allow is a block naming both settings.
fn merge_method(state: &RunState, allowed: &AllowedMergeMethods) -> Result<MergeMethod, String> {
    let chosen = match (
        state.repository_settings.merge.method,
        state.settings.merge_method,
    ) {
        (Some(method), _) => Some((method, "`merge.method` in `.github/autoforge.toml`")),
        (None, Some(method)) => Some((method, "the configuration's `merge.method`")),
        (None, None) => None,
    };
    match chosen {
        Some((method, _)) if allowed.allows(method) => Ok(method),
        Some((method, source)) => Err(format!(
            "{source} is `{method}`, but the repository does not allow {method} merges \
             (its `{}` setting is off); allow it in the repository's settings or choose \
             another method, then unblock",
            method.repository_setting()
        )),
        None => MergeMethod::PREFERRED
            .into_iter()
            .find(|method| allowed.allows(*method))
            .ok_or_else(|| {
                "the repository allows no merge method (`allow_merge_commit`, \
                 `allow_squash_merge` and `allow_rebase_merge` are all off)"
                    .to_owned()
            }),
    }
}

enum Gate {
    Pass,
    Refused(String),
    /// Waits that spend an inconclusive read (checks, mergeability).
    Inconclusive(String),
    /// Waits for a person (an approving review): unbounded.
    Waiting(String),
}

/// The pre-merge facts of SPEC §10, conclusive refusals first.
fn gate(pr: &PrFacts) -> Gate {
    let refused = |reason: &str| Gate::Refused(reason.to_owned());
    if !pr.clean_review_intact {
        return refused("the clean review comment is missing or changed");
    }
    if pr.draft {
        return refused("the pull request is a draft");
    }
    if let Some(reason) = unseen_files(pr) {
        return Gate::Refused(reason);
    }
    if pr.protected_paths_changed {
        return refused("a protected path changed");
    }
    if pr.checks == ChecksState::Failed {
        return refused("a check did not succeed");
    }
    if pr.mergeable == Some(false) {
        return refused("GitHub reports the pull request not mergeable");
    }
    let running = || Gate::Inconclusive("checks are still running".to_owned());
    match pr.mergeable_state {
        MergeableState::Behind => return refused("the branch is behind its base"),
        MergeableState::Blocked => return blocked(pr),
        MergeableState::Dirty => return refused("the pull request has conflicts"),
        MergeableState::Draft => return refused("the pull request is a draft"),
        // GitHub says `unstable` for running checks too, not only failing ones.
        MergeableState::Unstable if pr.checks == ChecksState::Pending => return running(),
        MergeableState::Unstable => return refused("a check is failing"),
        MergeableState::Unknown => {
            return Gate::Inconclusive("GitHub is still computing mergeability".to_owned());
        }
        MergeableState::Clean | MergeableState::HasHooks => {}
    }
    if pr.checks == ChecksState::Pending {
        return running();
    }
    if pr.mergeable.is_none() {
        return Gate::Inconclusive("GitHub is still computing mergeability".to_owned());
    }
    Gate::Pass
}

/// `blocked`: GitHub names no cause, so the gate tells the waits it can
/// see (a missing approving review, checks still running) from a block no
/// wait will lift.
fn blocked(pr: &PrFacts) -> Gate {
    if let Some(reviews) = pr.reviews.filter(|r| r.approvals < r.required) {
        return Gate::Waiting(format!(
            "waiting for an approving review ({} of {} required)",
            reviews.approvals, reviews.required
        ));
    }
    if !pr.required_checks_missing.is_empty() && pr.checks != ChecksState::Failed {
        let names: Vec<String> = pr
            .required_checks_missing
            .iter()
            .map(|name| code_span(name))
            .collect();
        return Gate::Waiting(format!(
            "waiting for required checks that have not reported yet: {}",
            names.join(", ")
        ));
    }
    if pr.checks == ChecksState::Pending {
        return Gate::Inconclusive("required checks are still running".to_owned());
    }
    Gate::Refused(
        "branch protection or a ruleset blocks the merge, with no check pending and \
         no approving review missing"
            .to_owned(),
    )
}

/// Every changed file must have been listed, or the protected-path check
/// passed paths it never saw.
fn unseen_files(pr: &PrFacts) -> Option<String> {
    if pr.listed_files >= FILES_LISTING_CAP {
        return Some(format!(
            "GitHub lists at most {FILES_LISTING_CAP} changed files and the pull request \
             reaches that, so the protected-path check cannot see every path"
        ));
    }
    (pr.listed_files != pr.changed_files).then(|| {
        format!(
            "GitHub counts {} changed files but listed {}, so the protected-path check \
             cannot see every path",
            pr.changed_files, pr.listed_files
        )
    })
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
