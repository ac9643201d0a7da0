//! FIX rules: entry drift, cross-checks, validation and effect order.

use super::*;

fn to_fix(findings: Vec<Finding>) -> Run {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(&sha(2), findings, &sha(2));
    assert_eq!(run.state.phase, Phase::Fix);
    run
}

fn resolution(id: &str, kind: ResolutionKind) -> Resolution {
    Resolution {
        finding_id: id.to_owned(),
        kind,
    }
}

#[test]
fn pr_moved_before_fix_returns_to_review_without_launching() {
    let mut run = to_fix(vec![finding(1, 1, "a")]);
    run.github(facts(Some(pr_at(&sha(5), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Review);
    assert!(run.last.launches.is_empty());
    assert_eq!(run.state.review.history[0].outcome, RoundOutcome::Stale);
    let carried = run.state.review.prior_findings.clone().expect("carried");
    assert_eq!(carried.findings, vec![finding(1, 1, "a")]);
    assert!(run.state.review.open_findings.is_empty());
}

#[test]
fn fix_effects_create_follow_ups_then_append_markers_then_push_last() {
    let mut run = to_fix(vec![
        finding(1, 1, "a"),
        finding(1, 2, "b"),
        finding(1, 3, "c"),
    ]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    let draft = FollowUpDraft {
        title: "later".into(),
        body: "details".into(),
    };
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(3),
        resolutions: vec![
            resolution(
                "R1-F1",
                ResolutionKind::FollowUpExisting {
                    issue: autoforge_journal::testing::issue(90),
                },
            ),
            resolution(
                "R1-F2",
                ResolutionKind::Fixed {
                    commit_sha: Some(sha(3)),
                },
            ),
            resolution("R1-F3", ResolutionKind::FollowUpNew { draft }),
        ],
    }));
    assert!(
        run.last.effects.is_empty(),
        "nothing is written before validation"
    );
    run.validated(&sha(3), true);
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(
        kinds,
        vec![
            EffectKind::CreateIssue,
            EffectKind::AppendIssueMarkers,
            EffectKind::Push
        ]
    );
    assert!(matches!(
        &run.last.effects[2],
        EffectIntent::Push { expected_old: Some(old), .. } if *old == sha(2)
    ));
    run.observed(vec![EffectReadBack::Pushed { sha: sha(3) }]);
    assert_eq!(run.state.phase, Phase::Review);
    assert_eq!(run.state.review.last_resolutions.len(), 3);
}

#[test]
fn fix_without_a_commit_skips_validation_and_goes_to_review() {
    let mut run = to_fix(vec![finding(1, 1, "a")]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(2),
        resolutions: vec![resolution(
            "R1-F1",
            ResolutionKind::NoChangeWithRationale {
                rationale: "x".repeat(40),
            },
        )],
    }));
    assert_eq!(run.last.validation, None);
    assert_eq!(run.state.phase, Phase::Review);
}

#[test]
fn fix_missing_a_finding_gets_a_correction() {
    let mut run = to_fix(vec![finding(1, 1, "a"), finding(1, 2, "b")]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(3),
        resolutions: vec![resolution(
            "R1-F1",
            ResolutionKind::Fixed { commit_sha: None },
        )],
    }));
    assert!(run.launch().correction_of.is_some());
}

#[test]
fn fixed_without_a_commit_gets_a_correction() {
    let mut run = to_fix(vec![finding(1, 1, "a")]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(2),
        resolutions: vec![resolution(
            "R1-F1",
            ResolutionKind::Fixed { commit_sha: None },
        )],
    }));
    assert!(run.launch().correction_of.is_some());
}

#[test]
fn fix_validation_failure_relaunches_the_fixer_with_the_failure() {
    let mut run = to_fix(vec![finding(1, 1, "a")]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(3),
        resolutions: vec![resolution(
            "R1-F1",
            ResolutionKind::Fixed { commit_sha: None },
        )],
    }));
    run.validated(&sha(3), false);
    assert_eq!(run.state.phase, Phase::Fix);
    assert!(run.last.effects.is_empty());
    let LaunchInputs::Fix {
        validation_failure, ..
    } = run.launch().inputs
    else {
        panic!("fix inputs")
    };
    assert!(validation_failure.is_some());
}
