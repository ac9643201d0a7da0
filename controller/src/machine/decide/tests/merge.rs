//! READY_FOR_MERGE and MERGE rules per `merge.mode`.

use super::*;

fn settings(mode: MergeMode) -> RunSettings {
    RunSettings {
        merge_mode: mode,
        ..RunSettings::default()
    }
}

fn merged(head: &CommitSha) -> PrFacts {
    let mut pr = pr_at(head, &sha(1));
    pr.state = PrState::Merged;
    pr.merge_commit = Some(sha(99));
    pr
}

#[test]
fn never_mode_waits_then_notices_a_human_merge() {
    let mut run = Run::to_ready(settings(MergeMode::Never), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    assert!(run.last.effects.is_empty(), "never mode never merges");
    run.github(facts(Some(merged(&sha(2)))));
    // Without an EPIC, UPDATE_EPIC chains straight to DONE.
    assert_eq!(
        run.last.transitions,
        vec![
            (Phase::ReadyForMerge, Phase::UpdateEpic),
            (Phase::UpdateEpic, Phase::Done)
        ]
    );
    assert_eq!(run.state.merged_prs, vec![PR]);
}

#[test]
fn on_command_mode_merges_only_after_the_merge_command() {
    let mut run = Run::to_ready(settings(MergeMode::OnCommand), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    run.apply(command(OperatorRequest::Merge));
    assert!(run.state.merge_approved);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Merge);
}

#[test]
fn auto_mode_merges_the_reviewed_head() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Merge);
    assert!(run.last.effects.contains(&EffectIntent::MergePr {
        pr: PR,
        sha: sha(2),
        base_ref: "main".into(),
        method: MergeMethod::Squash,
        pr_title: "Add the widget".into(),
        issue: ISSUE,
    }));
    run.apply(Event::MergeResult(MergeReport {
        pr: merged(&sha(2)),
    }));
    assert_eq!(run.state.phase, Phase::Done);
}

#[test]
fn drift_in_ready_for_merge_returns_to_review() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    run.github(facts(Some(pr_at(&sha(3), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Review);
}

#[test]
fn merge_base_drift_under_the_same_base_name_returns_to_review() {
    let mut run = Run::to_ready(settings(MergeMode::Never), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(8)))));
    assert_eq!(run.state.phase, Phase::Review);
}

#[test]
fn failing_check_blocks() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.checks = ChecksState::Failed;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn pending_checks_are_rechecked_then_block_at_the_bound() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.checks = ChecksState::Pending;
    for _ in 1..60 {
        run.github(facts(Some(pr.clone())));
        assert_eq!(run.state.phase, Phase::ReadyForMerge);
    }
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn unstable_because_checks_are_still_running_waits_instead_of_refusing() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.checks = ChecksState::Pending;
    pr.mergeable_state = MergeableState::Unstable;
    run.github(facts(Some(pr.clone())));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    assert_eq!(run.state.counters.merge_checks, 1);
    pr.checks = ChecksState::Success;
    run.github(facts(Some(pr)));
    assert_eq!(
        run.state.phase,
        Phase::Blocked,
        "unstable with every check passed"
    );
}

#[test]
fn merge_at_another_head_is_never_counted() {
    let mut run = Run::to_ready(settings(MergeMode::Never), None);
    run.github(facts(Some(merged(&sha(6)))));
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(run.state.merged_prs.is_empty());
}

#[test]
fn merge_that_left_the_pr_open_at_the_reviewed_head_blocks() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.apply(Event::MergeResult(MergeReport {
        pr: pr_at(&sha(2), &sha(1)),
    }));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn merge_refused_by_a_push_returns_to_review() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.apply(Event::MergeResult(MergeReport {
        pr: pr_at(&sha(3), &sha(1)),
    }));
    assert_eq!(run.state.phase, Phase::Review);
}

#[test]
fn merge_command_in_never_mode_is_refused_and_changes_nothing() {
    let mut run = Run::to_ready(settings(MergeMode::Never), None);
    let refusal = run.refuse(command(OperatorRequest::Merge));
    assert_eq!(
        refusal,
        Refusal::MergeNotAvailable {
            mode: MergeMode::Never,
            phase: Phase::ReadyForMerge
        }
    );
}

/// The method of the merge the run asked for, after one gate read of `pr`.
fn merged_by(settings: RunSettings, repository: Option<MergeMethod>, pr: PrFacts) -> Run {
    let mut run = Run::to_ready(settings, None);
    run.state.repository_settings.merge.method = repository;
    run.github(facts(Some(pr)));
    run
}

fn method_of(run: &Run) -> Option<MergeMethod> {
    run.last.effects.iter().find_map(|e| match e {
        EffectIntent::MergePr { method, .. } => Some(*method),
        _ => None,
    })
}

fn allowing(merge: bool, squash: bool, rebase: bool) -> PrFacts {
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.merge_methods = AllowedMergeMethods {
        merge,
        squash,
        rebase,
    };
    pr
}

#[test]
fn without_a_chosen_method_the_first_the_repository_allows_is_used_squash_first() {
    let auto = || settings(MergeMode::Auto);
    let cases = [
        ((true, true, true), MergeMethod::Squash),
        ((true, false, true), MergeMethod::Merge),
        ((false, false, true), MergeMethod::Rebase),
    ];
    for ((merge, squash, rebase), expected) in cases {
        let run = merged_by(auto(), None, allowing(merge, squash, rebase));
        assert_eq!(method_of(&run), Some(expected), "{merge} {squash} {rebase}");
    }
}

#[test]
fn the_repositorys_file_chooses_over_the_operators_method() {
    let operator = RunSettings {
        merge_method: Some(MergeMethod::Merge),
        ..settings(MergeMode::Auto)
    };
    let run = merged_by(operator.clone(), None, allowing(true, true, true));
    assert_eq!(method_of(&run), Some(MergeMethod::Merge));
    let run = merged_by(
        operator,
        Some(MergeMethod::Rebase),
        allowing(true, true, true),
    );
    assert_eq!(method_of(&run), Some(MergeMethod::Rebase));
}

#[test]
fn a_chosen_method_the_repository_does_not_allow_blocks_naming_method_and_setting() {
    let operator = RunSettings {
        merge_method: Some(MergeMethod::Squash),
        ..settings(MergeMode::Auto)
    };
    let run = merged_by(operator, None, allowing(true, false, true));
    assert_eq!(run.state.phase, Phase::Blocked);
    assert_eq!(method_of(&run), None, "nothing is sent");
    let reason = run.state.blocked.unwrap().reason;
    assert!(
        reason.contains("`squash`") && reason.contains("`allow_squash_merge`"),
        "{reason}"
    );
}

#[test]
fn a_repository_allowing_no_method_blocks() {
    let run = merged_by(
        settings(MergeMode::Auto),
        None,
        allowing(false, false, false),
    );
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = run.state.blocked.unwrap().reason;
    assert!(reason.contains("allows no merge method"), "{reason}");
}

#[test]
fn blocked_while_required_checks_run_waits_and_says_so_once() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.mergeable_state = MergeableState::Blocked;
    pr.checks = ChecksState::Pending;
    run.github(facts(Some(pr.clone())));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    assert_eq!(
        run.state.merge_wait.as_deref(),
        Some("required checks are still running")
    );
    assert_eq!(run.status_edits(), 1, "the wait is shown");
    run.github(facts(Some(pr.clone())));
    assert_eq!(run.status_edits(), 0, "the same wait is not shown again");
    assert_eq!(run.state.counters.merge_checks, 2);
    pr.mergeable_state = MergeableState::Clean;
    pr.checks = ChecksState::Success;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Merge);
    assert_eq!(run.state.merge_wait, None);
}

#[test]
fn blocked_with_no_check_pending_and_no_review_missing_blocks_with_the_reason() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.mergeable_state = MergeableState::Blocked;
    pr.reviews = Some(ReviewRequirement {
        required: 1,
        approvals: 1,
    });
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = run.state.blocked.unwrap().reason;
    assert!(reason.contains("no check pending"), "{reason}");
}

#[test]
fn a_missing_approving_review_is_an_unbounded_wait_until_it_is_given() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.mergeable_state = MergeableState::Blocked;
    pr.reviews = Some(ReviewRequirement {
        required: 1,
        approvals: 0,
    });
    for _ in 0..100 {
        run.github(facts(Some(pr.clone())));
        assert_eq!(run.state.phase, Phase::ReadyForMerge);
    }
    assert_eq!(
        run.state.counters.merge_checks, 0,
        "no inconclusive read spent"
    );
    let waiting = run.state.merge_wait.clone().unwrap();
    assert!(
        waiting.contains("waiting for an approving review"),
        "{waiting}"
    );
    pr.mergeable_state = MergeableState::Clean;
    pr.reviews = None;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Merge);
}

#[test]
fn a_required_check_that_never_reported_is_a_wait_shown_in_the_status_not_a_block() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.mergeable_state = MergeableState::Blocked;
    pr.checks = ChecksState::Success;
    pr.required_checks_missing = vec!["ci/build".into()];
    for _ in 0..50 {
        run.github(facts(Some(pr.clone())));
        assert_eq!(run.state.phase, Phase::ReadyForMerge);
    }
    assert_eq!(run.state.counters.merge_checks, 0);
    let waiting = run.state.merge_wait.clone().unwrap();
    assert_eq!(
        waiting,
        "waiting for required checks that have not reported yet: `ci/build`"
    );
    // Once the check reported (and passed), the gate lets the merge go.
    pr.mergeable_state = MergeableState::Clean;
    pr.required_checks_missing.clear();
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Merge);
}

#[test]
fn a_failed_check_refuses_even_while_another_required_one_has_not_reported() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.mergeable_state = MergeableState::Blocked;
    pr.checks = ChecksState::Failed;
    pr.required_checks_missing = vec!["ci/build".into()];
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn a_files_listing_short_of_the_changed_count_refuses_rather_than_pass_unseen_paths() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.changed_files = 3500;
    pr.listed_files = 3000;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = run.state.blocked.unwrap().reason;
    assert!(
        reason.contains("3000") && reason.contains("protected-path"),
        "{reason}"
    );
}

#[test]
fn a_listing_that_disagrees_with_the_count_refuses() {
    let mut run = Run::to_ready(settings(MergeMode::Auto), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.changed_files = 4;
    pr.listed_files = 3;
    run.github(facts(Some(pr)));
    let reason = run.state.blocked.unwrap().reason;
    assert!(
        reason.contains("counts 4 changed files but listed 3"),
        "{reason}"
    );
}
