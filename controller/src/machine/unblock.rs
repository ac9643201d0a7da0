//! The unblock decision table of SPEC §11: the controller, not the
//! operator, picks the phase a BLOCKED run resumes in, from fresh GitHub
//! facts only. The operator's reason is recorded, never evidence.

use super::bounds::{launch_allowed, round_allowed};
use super::budget::budget_spent;
use super::decision::UnblockRefusal;
use super::event::{GitHubFacts, PrState};
use super::phase::Phase;
use super::review_rounds::moved;
use super::state::RunState;

/// The phase an unblock leads to, or why it is refused.
pub fn unblock_target(state: &RunState, facts: &GitHubFacts) -> Result<Phase, UnblockRefusal> {
    if state.phase != Phase::Blocked {
        return Err(UnblockRefusal::NotBlocked { phase: state.phase });
    }
    // Blocked before it started (unusable repository settings, an EPIC
    // labelled as its own issue): nothing was set up to resume, and the
    // settings are read only at the start, so a new run is the way on.
    if state
        .blocked
        .as_ref()
        .is_some_and(|b| b.from == Phase::Initializing)
    {
        return Err(UnblockRefusal::NeverStarted);
    }
    let target = target_from_facts(state, facts)?;
    let launches_agent = match target {
        Phase::ReadyForMerge => false,
        Phase::UpdateEpic => state.epic.is_some(),
        _ => true,
    };
    if launches_agent && !launch_allowed(&state.settings, &state.counters) {
        return Err(UnblockRefusal::LaunchBudgetExhausted {
            max_launches: state.settings.max_launches,
        });
    }
    if launches_agent && let Some(spent) = budget_spent(&state.settings, &state.counters) {
        return Err(UnblockRefusal::BudgetSpent {
            unit: spent.unit,
            used: spent.used,
            max: spent.max,
        });
    }
    Ok(target)
}

fn target_from_facts(state: &RunState, facts: &GitHubFacts) -> Result<Phase, UnblockRefusal> {
    let Some(bound) = state.pr else {
        if !facts.issue_open {
            return Err(UnblockRefusal::IssueClosed);
        }
        if facts.adoptable_prs.len() > 1 {
            return Err(UnblockRefusal::SeveralAdoptablePrs {
                count: facts.adoptable_prs.len(),
            });
        }
        return Ok(Phase::Implement);
    };
    let pr = match &facts.pr {
        Some(pr) if pr.number == bound => pr,
        other => {
            return Err(UnblockRefusal::PrMismatch {
                bound,
                found: other.as_ref().map(|p| p.number),
            });
        }
    };
    let review = &state.review;
    let cap_refusal = UnblockRefusal::ReviewCapReached {
        max_review_rounds: state.settings.max_review_rounds,
    };
    match pr.state {
        PrState::Closed => Err(UnblockRefusal::PrClosed { pr: bound }),
        PrState::Merged => {
            if state.merged_prs.contains(&bound) {
                return Ok(Phase::UpdateEpic);
            }
            // Merged but not yet counted: READY_FOR_MERGE re-reads it and
            // counts it only at the clean-reviewed head into the reviewed base.
            match &review.clean {
                Some(clean) if clean.head_sha == pr.head_sha && clean.base_ref == pr.base_ref => {
                    Ok(Phase::ReadyForMerge)
                }
                _ => Err(UnblockRefusal::MergedWithoutCleanReview { pr: bound }),
            }
        }
        PrState::Open => {
            let at_reviewed = review.binding.as_ref().is_some_and(|b| !moved(b, pr));
            // Human findings that waited for an agent round are still to be
            // fixed: a clean AI verdict does not let the run skip them.
            let human_waiting = !review.pending_human.is_empty();
            if at_reviewed
                && review.clean.is_some()
                && review.clean == review.binding
                && !human_waiting
            {
                Ok(Phase::ReadyForMerge)
            } else if !round_allowed(&state.settings, review.round) {
                // FIX would be followed by a round past the cap, and any
                // other revision needs a new round.
                Err(cap_refusal)
            } else if at_reviewed && (!review.open_findings.is_empty() || human_waiting) {
                Ok(Phase::Fix)
            } else {
                Ok(Phase::Review)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::agent_result::{Classification, Finding};
    use crate::machine::bounds::RunSettings;
    use crate::machine::event::{AllowedMergeMethods, ChecksState, MergeableState, PrFacts};
    use crate::machine::state::{BlockedInfo, RoundBinding};

    fn blocked_state() -> RunState {
        let mut s = RunState::new(
            "run-1",
            autoforge_journal::testing::issue(7),
            RunSettings::default(),
        );
        s.phase = Phase::Blocked;
        s.blocked = Some(BlockedInfo {
            from: Phase::Review,
            reason: "x".to_owned(),
        });
        s.issue = autoforge_journal::testing::issue(7);
        s
    }

    fn binding() -> RoundBinding {
        RoundBinding {
            pr: autoforge_journal::testing::pull(3),
            head_sha: autoforge_journal::testing::sha("h1"),
            base_ref: "main".into(),
            merge_base_sha: autoforge_journal::testing::sha("m1"),
        }
    }

    fn pr(state: PrState, head: &str) -> PrFacts {
        PrFacts {
            number: autoforge_journal::testing::pull(3),
            state,
            head_sha: autoforge_journal::testing::sha(head),
            base_ref: "main".into(),
            merge_base_sha: autoforge_journal::testing::sha("m1"),
            draft: false,
            merge_commit: None,
            checks: ChecksState::Success,
            mergeable: Some(true),
            mergeable_state: MergeableState::Clean,
            clean_review_intact: true,
            protected_paths_changed: false,
            title: "Add the widget".into(),
            merge_methods: AllowedMergeMethods::default(),
            reviews: None,
            changed_files: 1,
            listed_files: 1,
            required_checks_missing: Vec::new(),
        }
    }

    fn facts(pr: Option<PrFacts>) -> GitHubFacts {
        GitHubFacts {
            issue_open: true,
            branch_head: None,
            pr,
            adoptable_prs: Vec::new(),
            issue_text: None,
        }
    }

    fn with_pr(mut s: RunState) -> RunState {
        s.pr = Some(autoforge_journal::testing::pull(3));
        s.review.round = 2;
        s.review.binding = Some(binding());
        s
    }

    #[test]
    fn no_pr_and_open_issue_resumes_implement() {
        assert_eq!(
            unblock_target(&blocked_state(), &facts(None)),
            Ok(Phase::Implement)
        );
    }

    #[test]
    fn a_spent_token_budget_refuses_a_resume_that_would_launch_an_agent() {
        let mut state = blocked_state();
        state.settings.max_tokens = Some(50);
        state.counters.tokens = 80;
        assert_eq!(
            unblock_target(&state, &facts(None)),
            Err(UnblockRefusal::BudgetSpent {
                unit: crate::machine::budget::BudgetUnit::Tokens,
                used: 80,
                max: 50
            })
        );
    }

    #[test]
    fn no_pr_with_two_adoptable_prs_is_refused() {
        let mut f = facts(None);
        f.adoptable_prs = vec![
            autoforge_journal::testing::pull(4),
            autoforge_journal::testing::pull(5),
        ];
        assert_eq!(
            unblock_target(&blocked_state(), &f),
            Err(UnblockRefusal::SeveralAdoptablePrs { count: 2 })
        );
    }

    #[test]
    fn closed_issue_without_pr_is_refused() {
        let mut f = facts(None);
        f.issue_open = false;
        assert_eq!(
            unblock_target(&blocked_state(), &f),
            Err(UnblockRefusal::IssueClosed)
        );
    }

    #[test]
    fn clean_review_at_reviewed_revision_resumes_ready_for_merge() {
        let mut s = with_pr(blocked_state());
        s.review.clean = Some(binding());
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Open, "h1")))),
            Ok(Phase::ReadyForMerge)
        );
    }

    #[test]
    fn open_findings_at_reviewed_revision_resume_fix() {
        let mut s = with_pr(blocked_state());
        s.review.open_findings = vec![Finding {
            id: "R2-F1".into(),
            classification: Classification::Blocked,
            title: "t".into(),
            location: "l".into(),
            required_resolution: "r".into(),
        }];
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Open, "h1")))),
            Ok(Phase::Fix)
        );
    }

    #[test]
    fn another_revision_resumes_review() {
        let s = with_pr(blocked_state());
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Open, "h2")))),
            Ok(Phase::Review)
        );
    }

    #[test]
    fn review_past_the_cap_is_refused() {
        let mut s = with_pr(blocked_state());
        s.review.round = s.settings.max_review_rounds;
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Open, "h2")))),
            Err(UnblockRefusal::ReviewCapReached {
                max_review_rounds: 8
            })
        );
    }

    #[test]
    fn merged_and_counted_resumes_update_epic() {
        let mut s = with_pr(blocked_state());
        s.merged_prs = vec![autoforge_journal::testing::pull(3)];
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Merged, "h1")))),
            Ok(Phase::UpdateEpic)
        );
    }

    #[test]
    fn merged_elsewhere_without_clean_review_is_refused() {
        let s = with_pr(blocked_state());
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Merged, "h9")))),
            Err(UnblockRefusal::MergedWithoutCleanReview {
                pr: autoforge_journal::testing::pull(3)
            })
        );
    }

    #[test]
    fn closed_pr_is_refused() {
        let s = with_pr(blocked_state());
        assert_eq!(
            unblock_target(&s, &facts(Some(pr(PrState::Closed, "h1")))),
            Err(UnblockRefusal::PrClosed {
                pr: autoforge_journal::testing::pull(3)
            })
        );
    }

    #[test]
    fn another_pr_answering_is_refused() {
        let s = with_pr(blocked_state());
        let mut other = pr(PrState::Open, "h1");
        other.number = autoforge_journal::testing::pull(9);
        assert_eq!(
            unblock_target(&s, &facts(Some(other))),
            Err(UnblockRefusal::PrMismatch {
                bound: autoforge_journal::testing::pull(3),
                found: Some(autoforge_journal::testing::pull(9))
            })
        );
    }
}
