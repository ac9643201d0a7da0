//! When the `autoforge` check run is written, and what it shows: once per
//! change of what it shows, on the bound PR head, never while off.

use super::*;
use autoforge_journal::CommitSha;

fn checks_on() -> RunSettings {
    RunSettings {
        check_run: true,
        ..RunSettings::default()
    }
}

/// The check views the last decision writes.
fn check_writes(decision: &Decision) -> Vec<CheckRunView> {
    decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            EffectIntent::CheckRun { issue, view, .. } => {
                assert_eq!(*issue, ISSUE);
                Some(view.clone())
            }
            _ => None,
        })
        .collect()
}

fn in_progress(head: &CommitSha, phase: Phase, round: u32) -> CheckRunView {
    CheckRunView {
        pr: PR,
        head_sha: head.clone(),
        shows: CheckShows::InProgress { phase, round },
    }
}

fn fix_with_new_head(run: &mut Run, from: &CommitSha, to: &CommitSha) {
    run.github(facts(Some(pr_at(from, &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: from.clone(),
        head_sha: to.clone(),
        resolutions: vec![Resolution {
            finding_id: "R1-F1".to_owned(),
            kind: ResolutionKind::Fixed {
                commit_sha: Some(to.clone()),
            },
        }],
    }));
    run.validated(to, true);
    run.observed(vec![EffectReadBack::Pushed { sha: to.clone() }]);
}

#[test]
fn check_runs_are_off_unless_the_settings_turn_them_on() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    assert!(check_writes(&run.last).is_empty());
    assert_eq!(run.state.check_run, None);
}

#[test]
fn nothing_is_written_before_a_pr_head_is_bound() {
    let mut run = Run::start(checks_on(), None);
    assert!(check_writes(&run.last).is_empty());
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    run.github(facts(None));
    assert!(check_writes(&run.last).is_empty(), "publishing");
    run.observed(vec![
        EffectReadBack::Pushed { sha: sha(2) },
        EffectReadBack::PullRequest { number: PR },
    ]);
    assert!(check_writes(&run.last).is_empty(), "REVIEW before binding");
    run.bind(&sha(2));
    assert_eq!(
        check_writes(&run.last),
        [in_progress(&sha(2), Phase::Review, 1)]
    );
}

#[test]
fn a_round_with_findings_a_fix_push_and_a_clean_round_write_one_check_per_head() {
    let mut run = Run::to_review(checks_on(), None);
    run.bind(&sha(2));
    run.review(vec![finding(1, 1, "a")]);
    assert!(
        check_writes(&run.last).is_empty(),
        "the comment changes nothing shown"
    );
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(
        check_writes(&run.last),
        [in_progress(&sha(2), Phase::Fix, 1)]
    );
    fix_with_new_head(&mut run, &sha(2), &sha(3));
    assert_eq!(run.state.phase, Phase::Review);
    assert!(
        check_writes(&run.last).is_empty(),
        "the new head is not bound yet"
    );
    run.bind(&sha(3));
    let superseded = CheckRunView {
        pr: PR,
        head_sha: sha(2),
        shows: CheckShows::Superseded { by: sha(3) },
    };
    assert_eq!(
        check_writes(&run.last),
        [superseded, in_progress(&sha(3), Phase::Review, 2)]
    );
    run.review(Vec::new());
    run.github(facts(Some(pr_at(&sha(3), &sha(1)))));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    let success = CheckRunView {
        pr: PR,
        head_sha: sha(3),
        shows: CheckShows::Success,
    };
    assert_eq!(check_writes(&run.last), std::slice::from_ref(&success));
    // The merge gate's re-read (as after our own check's webhook) shows
    // nothing new and writes nothing.
    run.github(facts(Some(pr_at(&sha(3), &sha(1)))));
    assert!(check_writes(&run.last).is_empty());
    assert_eq!(run.state.check_run, Some(success));
}

#[test]
fn the_merge_and_done_keep_the_success_without_another_write() {
    let settings = RunSettings {
        merge_mode: MergeMode::Auto,
        ..checks_on()
    };
    let mut run = Run::to_ready(settings, None);
    assert_eq!(check_writes(&run.last).len(), 1);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Merge);
    assert!(check_writes(&run.last).is_empty());
    let mut merged = pr_at(&sha(2), &sha(1));
    merged.state = PrState::Merged;
    run.github(facts(Some(merged)));
    assert_eq!(run.state.phase, Phase::Done);
    assert!(check_writes(&run.last).is_empty());
    assert_eq!(
        run.state.check_run.map(|c| c.shows),
        Some(CheckShows::Success)
    );
}

#[test]
fn a_clean_review_of_a_head_the_controller_did_not_validate_is_not_a_success() {
    let mut run = Run::to_review(checks_on(), None);
    // Someone pushed sha(9) before the round was bound.
    run.round(&sha(9), Vec::new(), &sha(9));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    let [view] = check_writes(&run.last).try_into().expect("one write");
    assert!(
        matches!(view.shows, CheckShows::Neutral { ref reason } if reason.contains("did not validate")),
        "{view:?}"
    );
}

#[test]
fn a_block_is_neutral_with_the_reason_and_an_unblock_resumes_in_progress() {
    let mut run = Run::to_review(checks_on(), None);
    run.bind(&sha(2));
    run.finish_agent(AgentOutcome::Result {
        result: AgentResult::Blocked {
            message: "the issue contradicts itself".into(),
        },
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    let [view] = check_writes(&run.last).try_into().expect("one write");
    assert_eq!(view.head_sha, sha(2));
    assert!(
        matches!(view.shows, CheckShows::Neutral { ref reason } if reason.contains("contradicts itself")),
        "{view:?}"
    );
    let status = run.last.effects.iter().find_map(|e| match e {
        EffectIntent::CheckRun { status, .. } => Some(status.clone()),
        _ => None,
    });
    assert_eq!(status.map(|s| s.phase), Some(Phase::Blocked));
    run.apply(command(OperatorRequest::Unblock {
        reason: "clarified the issue".into(),
        facts: Box::new(facts(Some(pr_at(&sha(2), &sha(1))))),
    }));
    assert_eq!(run.state.phase, Phase::Review);
    assert!(check_writes(&run.last).is_empty(), "not bound again yet");
    run.bind(&sha(2));
    let writes = check_writes(&run.last);
    assert!(
        matches!(writes.as_slice(), [CheckRunView { head_sha, shows: CheckShows::InProgress { .. }, .. }] if *head_sha == sha(2)),
        "{writes:?}"
    );
}

#[test]
fn a_failed_run_shows_failure_and_a_stopped_one_cancelled() {
    let mut failed = Run::to_review(checks_on(), None);
    failed.bind(&sha(2));
    failed.finish_agent(AgentOutcome::Result {
        result: AgentResult::Failure {
            message: "cannot be done".into(),
        },
    });
    assert_eq!(failed.state.phase, Phase::Failed);
    let [view] = check_writes(&failed.last).try_into().expect("one write");
    assert_eq!(
        view.shows,
        CheckShows::Failure {
            reason: "cannot be done".into()
        }
    );
    let mut stopped = Run::to_review(checks_on(), None);
    stopped.bind(&sha(2));
    stopped.apply(Event::LabelRemoved);
    assert_eq!(stopped.state.phase, Phase::Stopped);
    let [view] = check_writes(&stopped.last).try_into().expect("one write");
    assert_eq!(view.shows, CheckShows::Cancelled);
}

#[test]
fn a_refused_event_writes_no_check() {
    let mut run = Run::to_review(checks_on(), None);
    run.bind(&sha(2));
    let shown = run.state.check_run.clone();
    run.refuse(Event::EffectsObserved {
        observed: Vec::new(),
    });
    assert_eq!(run.state.check_run, shown);
}

#[test]
fn a_run_that_lost_its_repository_writes_no_check_and_remembers_none() {
    let mut run = Run::to_review(checks_on(), None);
    run.bind(&sha(2));
    let shown = run.state.check_run.clone();
    run.apply(Event::RepositoryAccessLost {
        reason: "the repository left the installation".into(),
    });
    assert_eq!(run.state.phase, Phase::Stopped);
    assert!(run.last.effects.is_empty());
    assert_eq!(run.state.check_run, shown);
}
