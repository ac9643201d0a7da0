//! REVIEW rules: binding, stale rounds, cap and stagnation.

use super::*;

#[test]
fn round_is_bound_to_pr_head_base_and_merge_base() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    let expected = RoundBinding {
        pr: PR,
        head_sha: sha(2),
        base_ref: "main".into(),
        merge_base_sha: sha(1),
    };
    assert_eq!(run.state.review.binding, Some(expected.clone()));
    let LaunchInputs::Review { binding, .. } = run.launch().inputs else {
        panic!("review inputs")
    };
    assert_eq!(binding, expected);
}

#[test]
fn review_comment_is_an_effect_intent_bound_to_the_round() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    let head = sha(2);
    run.succeed(PhaseResult::Review(ReviewResult {
        round: 1,
        reviewed_head_sha: head,
        findings: vec![finding(1, 1, "x")],
        sections: ReviewSections::default(),
    }));
    assert!(matches!(
        run.last.effects[..],
        [
            EffectIntent::PostReviewComment {
                round: 1,
                pr: PR,
                ..
            },
            EffectIntent::PostReview {
                round: 1,
                pr: PR,
                ..
            }
        ]
    ));
}

#[test]
fn stale_round_carries_findings_to_next_round() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(
        &sha(2),
        vec![finding(1, 1, "a"), finding(1, 2, "b")],
        &sha(3),
    );
    assert_eq!(run.state.phase, Phase::Review);
    assert_eq!(run.last.transitions, vec![(Phase::Review, Phase::Review)]);
    assert_eq!(run.state.review.round, 1, "a stale round counts");
    let carried = run.state.review.prior_findings.clone().expect("carried");
    assert_eq!((carried.round, carried.findings.len()), (1, 2));
    assert_eq!(run.bind(&sha(3)), 2);
    let LaunchInputs::Review { prior_findings, .. } = run.launch().inputs else {
        panic!("review inputs")
    };
    assert_eq!(prior_findings, Some(carried));
}

#[test]
fn carried_findings_are_replaced_by_the_next_stale_round() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(
        &sha(2),
        vec![finding(1, 1, "a"), finding(1, 2, "b")],
        &sha(3),
    );
    run.round(&sha(3), vec![finding(2, 1, "c")], &sha(4));
    let carried = run.state.review.prior_findings.clone().expect("carried");
    assert_eq!(carried.findings, vec![finding(2, 1, "c")]);
}

#[test]
fn completed_round_of_the_actual_revision_clears_carried_findings() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(3));
    run.round(&sha(3), vec![finding(2, 1, "b")], &sha(3));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(run.state.review.prior_findings, None);
}

#[test]
fn clean_round_goes_to_ready_for_merge() {
    let run = Run::to_ready(RunSettings::default(), None);
    assert_eq!(run.state.review.clean, run.state.review.binding);
    assert_eq!(run.state.review.history[0].outcome, RoundOutcome::Clean);
}

#[test]
fn findings_go_to_fix() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(2));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(run.state.review.open_findings.len(), 1);
}

#[test]
fn stale_round_counts_against_the_cap() {
    let settings = RunSettings {
        max_review_rounds: 2,
        ..RunSettings::default()
    };
    let mut run = Run::to_review(settings, None);
    run.round(&sha(2), Vec::new(), &sha(3));
    run.round(&sha(3), Vec::new(), &sha(4));
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("review cap")
    );
}

#[test]
fn findings_at_the_cap_block() {
    let settings = RunSettings {
        max_review_rounds: 1,
        ..RunSettings::default()
    };
    let mut run = Run::to_review(settings, None);
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(2));
    assert_eq!(run.state.phase, Phase::Blocked);
    assert_eq!(run.state.review.open_findings.len(), 1);
}

#[test]
fn clean_round_at_the_cap_proceeds() {
    let settings = RunSettings {
        max_review_rounds: 1,
        ..RunSettings::default()
    };
    let mut run = Run::to_review(settings, None);
    run.round(&sha(2), Vec::new(), &sha(2));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
}

#[test]
fn identical_findings_two_rounds_in_a_row_block_for_stagnation() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.round(&sha(2), vec![finding(1, 1, "Handle the error")], &sha(2));
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(2),
        resolutions: vec![Resolution {
            finding_id: "R1-F1".into(),
            kind: ResolutionKind::NoChangeWithRationale {
                rationale: "r".repeat(40),
            },
        }],
    }));
    assert_eq!(run.state.phase, Phase::Review);
    run.round(&sha(2), vec![finding(2, 1, "handle  the error")], &sha(2));
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("stagnated")
    );
}

#[test]
fn reviewer_round_mismatch_gets_a_correction() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.succeed(PhaseResult::Review(ReviewResult {
        round: 5,
        reviewed_head_sha: sha(2),
        findings: Vec::new(),
        sections: ReviewSections::default(),
    }));
    let launch = run.launch();
    assert_eq!((launch.round, launch.correction_of.is_some()), (1, true));
}

#[test]
fn crash_in_review_consumes_no_round() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.finish_agent(AgentOutcome::Crashed {
        detail: "oom".to_owned(),
    });
    assert_eq!((run.state.review.round, run.launch().round), (0, 1));
}

#[test]
fn closed_pr_at_binding_blocks() {
    let mut run = Run::to_review(RunSettings::default(), None);
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.state = PrState::Closed;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn finding_ids_of_another_round_get_a_correction() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.succeed(PhaseResult::Review(ReviewResult {
        round: 1,
        reviewed_head_sha: sha(2),
        findings: vec![finding(4, 1, "x")],
        sections: ReviewSections::default(),
    }));
    assert!(run.launch().correction_of.is_some());
    assert!(
        run.last.effects.is_empty(),
        "nothing is posted for a malformed review"
    );
}
