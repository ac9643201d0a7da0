//! Protected paths before the push: a candidate that changes one is never
//! pushed, in IMPLEMENT and in FIX; an unblock asks the agent again, told why.

use super::*;

const WORKFLOW: &str = ".github/workflows/x.yml";

fn pushes(decision: &Decision) -> usize {
    decision
        .effects
        .iter()
        .filter(|e| e.kind() == EffectKind::Push)
        .count()
}

fn blocked_reason(run: &Run) -> String {
    run.state.blocked.as_ref().expect("blocked").reason.clone()
}

fn unblock() -> Event {
    command(OperatorRequest::Unblock {
        reason: "the workflow is not for the agent".into(),
        facts: Box::new(facts(None)),
    })
}

#[test]
fn an_implement_candidate_changing_a_protected_path_blocks_before_the_push() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[WORKFLOW]);

    assert_eq!(run.state.phase, Phase::Blocked);
    assert_eq!(pushes(&run.last), 0, "nothing is pushed");
    assert!(
        run.last
            .effects
            .iter()
            .all(|e| e.kind() == EffectKind::EditStatusComment),
        "only the status comment is written: {:?}",
        run.last.effects
    );
    assert_eq!(run.state.candidate, None);
    assert_eq!(run.state.pending, None);
    let reason = blocked_reason(&run);
    assert!(reason.contains("`.github/workflows/x.yml`"), "{reason}");
    assert!(reason.contains("not pushed"), "{reason}");
    assert!(reason.contains("/autoforge unblock"), "{reason}");
}

#[test]
fn a_validated_candidate_without_protected_changes_goes_on_to_its_push() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[]);
    assert_eq!(
        run.state.awaiting,
        Awaiting::Facts {
            purpose: FactsPurpose::Publish
        }
    );
    run.github(facts(None));
    assert_eq!(pushes(&run.last), 1);
    assert_eq!(run.state.phase, Phase::Implement);
}

#[test]
fn a_failed_validation_of_a_protected_candidate_is_a_validation_failure() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.apply(Event::ValidationFinished {
        sha: sha(2),
        passed: false,
        failed_index: Some(0),
        summary: "command 0 failed".into(),
        protected_paths: vec![WORKFLOW.into()],
    });
    assert_eq!(run.state.phase, Phase::Implement, "relaunched, not blocked");
    assert_eq!(pushes(&run.last), 0);
}

#[test]
fn a_reason_names_a_few_protected_paths_and_counts_the_rest() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    let paths = [
        ".github/workflows/a.yml",
        ".github/workflows/b.yml",
        ".github/workflows/c.yml",
        ".github/workflows/d.yml",
        ".github/workflows/e.yml",
    ];
    run.validated_protected(&sha(2), &paths);
    let reason = blocked_reason(&run);
    assert!(
        reason.contains("`.github/workflows/c.yml` and 2 more"),
        "{reason}"
    );
    assert!(!reason.contains("d.yml"), "{reason}");
}

#[test]
fn an_unblock_after_a_protected_candidate_asks_the_implementer_again_with_the_reason() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[WORKFLOW]);
    run.apply(unblock());

    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(pushes(&run.last), 0);
    let LaunchInputs::Implement {
        validation_failure,
        start_sha,
        ..
    } = run.launch().inputs
    else {
        panic!("implement inputs")
    };
    assert_eq!(start_sha, sha(1), "the dropped candidate is not built on");
    let told = validation_failure.expect("the agent is told why");
    assert!(told.contains("protected paths"), "{told}");
    assert!(told.contains(WORKFLOW), "{told}");
}

#[test]
fn the_same_candidate_validated_again_after_an_unblock_is_still_not_pushed() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[WORKFLOW]);
    run.apply(unblock());
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[WORKFLOW]);
    assert_eq!(run.state.phase, Phase::Blocked);
    assert_eq!(pushes(&run.last), 0);
}

#[test]
fn retry_of_a_run_blocked_by_a_protected_candidate_is_refused() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated_protected(&sha(2), &[WORKFLOW]);
    let refusal = run.refuse(command(OperatorRequest::Retry { notes: None }));
    assert_eq!(refusal, Refusal::NothingToRetry);
}

fn fix_candidate(run: &mut Run) {
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(2));
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: sha(3),
        resolutions: vec![Resolution {
            finding_id: "R1-F1".into(),
            kind: ResolutionKind::FollowUpNew {
                draft: FollowUpDraft {
                    title: "later".into(),
                    body: "details".into(),
                },
            },
        }],
    }));
}

#[test]
fn a_fix_candidate_changing_a_protected_path_blocks_and_writes_nothing() {
    let mut run = Run::to_review(RunSettings::default(), None);
    fix_candidate(&mut run);
    run.validated_protected(&sha(3), &[WORKFLOW]);

    assert_eq!(run.state.phase, Phase::Blocked);
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(
        kinds,
        vec![EffectKind::EditStatusComment],
        "no push and no follow-up issue"
    );
    assert!(blocked_reason(&run).contains("not pushed"));
}

#[test]
fn a_fix_candidate_without_protected_changes_is_published_with_its_push() {
    let mut run = Run::to_review(RunSettings::default(), None);
    fix_candidate(&mut run);
    run.validated_protected(&sha(3), &[]);
    assert_eq!(pushes(&run.last), 1);
    assert_eq!(run.state.phase, Phase::Fix);
}

#[test]
fn an_unblock_after_a_protected_fix_asks_the_fixer_again_with_the_reason() {
    let mut run = Run::to_review(RunSettings::default(), None);
    fix_candidate(&mut run);
    run.validated_protected(&sha(3), &[WORKFLOW]);
    run.apply(command(OperatorRequest::Unblock {
        reason: "ask again".into(),
        facts: Box::new(facts(Some(pr_at(&sha(2), &sha(1))))),
    }));
    assert_eq!(run.state.phase, Phase::Fix);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    let LaunchInputs::Fix {
        validation_failure,
        findings,
        ..
    } = run.launch().inputs
    else {
        panic!("fix inputs")
    };
    assert_eq!(findings.len(), 1, "the findings still stand");
    assert!(
        validation_failure.is_some_and(|t| t.contains(WORKFLOW)),
        "the fixer is told why"
    );
}

#[test]
fn a_validation_finished_row_journalled_without_protected_paths_still_parses() {
    let old = serde_json::json!({
        "event": "validation_finished",
        "sha": sha(2),
        "passed": true,
        "failed_index": null,
        "summary": "ok",
    });
    let event: Event = serde_json::from_value(old).expect("an old row parses");
    let Event::ValidationFinished {
        protected_paths, ..
    } = event
    else {
        panic!("validation_finished")
    };
    assert!(protected_paths.is_empty());
}
