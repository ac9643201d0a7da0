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
    run.apply(command(Command::Merge));
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
        base_ref: "main".into()
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
    let refusal = run.refuse(command(Command::Merge));
    assert_eq!(
        refusal,
        Refusal::MergeNotAvailable {
            mode: MergeMode::Never,
            phase: Phase::ReadyForMerge
        }
    );
}
