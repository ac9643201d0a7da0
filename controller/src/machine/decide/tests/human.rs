//! Human rounds, operator guidance and help through `decide`.

use super::*;

fn review_by_operator(source: &str, notes: &[(Option<&str>, &str)]) -> Event {
    Event::HumanReview(HumanFeedback {
        source: source.to_owned(),
        author: "olivia".to_owned(),
        notes: notes
            .iter()
            .map(|(location, text)| HumanNote {
                location: location.map(str::to_owned),
                text: (*text).to_owned(),
            })
            .collect(),
    })
}

fn two_inline_comments() -> Event {
    review_by_operator(
        "review-41",
        &[
            (Some("src/lib.rs:3"), "handle the empty list"),
            (Some("src/lib.rs:9"), "name the constant"),
            (None, ""),
        ],
    )
}

fn ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}

fn fixed(ids: &[&str], head: &CommitSha) -> PhaseResult {
    PhaseResult::Fix(FixResult {
        previous_head_sha: sha(2),
        head_sha: head.clone(),
        resolutions: ids
            .iter()
            .map(|id| Resolution {
                finding_id: (*id).to_owned(),
                kind: ResolutionKind::Fixed {
                    commit_sha: Some(head.clone()),
                },
            })
            .collect(),
    })
}

#[test]
fn a_review_at_ready_for_merge_sends_the_run_to_fix_with_one_finding_per_comment() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    run.apply(two_inline_comments());
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(run.state.review.clean, None, "the clean verdict is gone");
    let open = &run.state.review.open_findings;
    assert_eq!(
        ids(open),
        ["H1-F1", "H1-F2"],
        "the empty body is no finding"
    );
    assert_eq!(open[0].location, "src/lib.rs:3");
    assert!(open[0].title.contains("olivia"), "{:?}", open[0]);
    assert_eq!(open[1].required_resolution, "name the constant");
}

#[test]
fn the_same_review_seen_twice_starts_one_round() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    run.apply(two_inline_comments());
    let refusal = run.refuse(two_inline_comments());
    assert!(
        matches!(refusal, Refusal::HumanFeedbackSeen { .. }),
        "{refusal}"
    );
    assert_eq!(run.state.review.human_rounds, 1);
}

#[test]
fn human_findings_are_resolved_by_fix_and_shown_to_the_next_reviewer() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    run.apply(two_inline_comments());
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    let LaunchInputs::Fix { findings, .. } = &run.launch().inputs else {
        panic!("a FIX launch");
    };
    assert_eq!(ids(findings), ["H1-F1", "H1-F2"]);
    run.succeed(fixed(&["H1-F1", "H1-F2"], &sha(3)));
    run.validated(&sha(3), true);
    run.observed(vec![EffectReadBack::Pushed { sha: sha(3) }]);
    assert_eq!(run.state.phase, Phase::Review);
    run.bind(&sha(3));
    let LaunchInputs::Review {
        human_findings,
        last_resolutions,
        ..
    } = &run.launch().inputs
    else {
        panic!("a REVIEW launch");
    };
    assert_eq!(ids(human_findings), ["H1-F1", "H1-F2"]);
    assert_eq!(last_resolutions.len(), 2);
    run.review(Vec::new());
    run.github(facts(Some(pr_at(&sha(3), &sha(1)))));
    assert_eq!(run.state.phase, Phase::ReadyForMerge);
    assert!(run.state.review.resolved_human.is_empty());
}

#[test]
fn a_fix_that_leaves_a_human_finding_unresolved_is_corrected() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    run.apply(two_inline_comments());
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.succeed(fixed(&["H1-F1"], &sha(3)));
    let launch = run.launch();
    assert!(
        launch.correction_of.is_some(),
        "relaunched to resolve H1-F2"
    );
}

#[test]
fn a_review_while_the_reviewer_runs_waits_and_joins_the_rounds_findings() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.apply(two_inline_comments());
    assert_eq!(
        run.state.phase,
        Phase::Review,
        "the reviewer is not cut short"
    );
    assert!(matches!(run.state.awaiting, Awaiting::Agent { .. }));
    run.review(vec![finding(1, 1, "a")]);
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(
        ids(&run.state.review.open_findings),
        ["R1-F1", "H1-F1", "H1-F2"]
    );
}

#[test]
fn a_clean_round_with_human_findings_waiting_goes_to_fix_not_to_the_gate() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.apply(two_inline_comments());
    run.review(Vec::new());
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(run.state.review.clean, None);
}

#[test]
fn human_findings_survive_a_pr_that_moved_before_the_fixer() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    run.apply(two_inline_comments());
    run.github(facts(Some(pr_at(&sha(5), &sha(1)))));
    assert_eq!(run.state.phase, Phase::Review);
    assert_eq!(ids(&run.state.review.pending_human), ["H1-F1", "H1-F2"]);
    assert!(
        run.state.review.prior_findings.is_none(),
        "not for re-checking"
    );
}

#[test]
fn fix_command_at_the_gate_block_starts_a_round_and_elsewhere_is_refused() {
    let mut run = Run::default_run();
    let refusal = run.refuse(command(OperatorRequest::Fix { notes: "x".into() }));
    assert!(matches!(refusal, Refusal::HumanRoundNotAvailable { .. }));

    let mut run = Run::to_ready(
        RunSettings {
            merge_mode: MergeMode::Auto,
            ..RunSettings::default()
        },
        None,
    );
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.checks = ChecksState::Failed;
    run.github(facts(Some(pr)));
    assert_eq!(run.state.phase, Phase::Blocked);
    run.apply(command(OperatorRequest::Fix {
        notes: "rename the flag".into(),
    }));
    assert_eq!(run.state.phase, Phase::Fix);
    assert_eq!(run.state.blocked, None);
    assert_eq!(ids(&run.state.review.open_findings), ["H1-F1"]);
    assert!(run.last.effects.iter().any(|e| matches!(
        e,
        EffectIntent::PostCommandReply {
            reply: Reply::Accepted { detail, .. },
            ..
        } if detail.contains("H1-F1")
    )));
}

#[test]
fn an_unblock_reason_is_the_next_launchs_guidance_until_it_answers() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.bind(&sha(2));
    run.finish_agent(AgentOutcome::Result {
        result: AgentResult::Blocked {
            message: "unclear".into(),
        },
    });
    run.apply(command(OperatorRequest::Unblock {
        reason: "the second wish wins".into(),
        facts: Box::new(facts(Some(pr_at(&sha(2), &sha(1))))),
    }));
    let guidance = run.state.operator_guidance.clone().expect("kept");
    assert_eq!(
        (guidance.actor.as_str(), guidance.command.as_str()),
        ("op", "unblock")
    );
    assert_eq!(guidance.text, "the second wish wins");
    run.bind(&sha(2));
    assert!(
        run.state.operator_guidance.is_some(),
        "the launch is given it"
    );
    run.review(Vec::new());
    assert_eq!(run.state.operator_guidance, None, "answered, so dropped");
}

#[test]
fn help_lists_what_the_phase_accepts() {
    let mut run = Run::to_ready(
        RunSettings {
            merge_mode: MergeMode::OnCommand,
            ..RunSettings::default()
        },
        None,
    );
    run.apply(command(OperatorRequest::Help));
    let detail = run
        .last
        .effects
        .iter()
        .find_map(|e| match e {
            EffectIntent::PostCommandReply {
                reply: Reply::Accepted { detail, .. },
                ..
            } => Some(detail.clone()),
            _ => None,
        })
        .expect("a reply");
    assert!(detail.contains("`/autoforge merge`"), "{detail}");
    assert!(detail.contains("`/autoforge fix <notes>`"), "{detail}");
    assert!(!detail.contains("unblock"), "{detail}");
    assert_eq!(
        run.state.phase,
        Phase::ReadyForMerge,
        "help changes nothing"
    );
}

#[test]
fn help_texts_at_two_phases_are_pinned() {
    let blocked = {
        let mut run = Run::to_review(RunSettings::default(), None);
        run.bind(&sha(2));
        run.finish_agent(AgentOutcome::Result {
            result: AgentResult::Blocked {
                message: "unclear".into(),
            },
        });
        run.state
    };
    let ready = Run::to_ready(
        RunSettings {
            merge_mode: MergeMode::OnCommand,
            ..RunSettings::default()
        },
        None,
    )
    .state;
    insta::assert_snapshot!(
        "help_when_blocked",
        crate::machine::decide::help::help_text(&blocked)
    );
    insta::assert_snapshot!(
        "help_at_ready_for_merge",
        crate::machine::decide::help::help_text(&ready)
    );
}

#[test]
fn retry_notes_are_the_next_launchs_guidance() {
    let mut run = Run::to_review(
        RunSettings {
            max_retries: 0,
            ..RunSettings::default()
        },
        None,
    );
    run.bind(&sha(2));
    run.finish_agent(AgentOutcome::TimedOut);
    assert!(matches!(run.state.awaiting, Awaiting::OperatorRetry { .. }));
    run.apply(command(OperatorRequest::Retry {
        notes: Some("the mirror is back".into()),
    }));
    let guidance = run.state.operator_guidance.clone().expect("kept");
    assert_eq!(
        (guidance.command.as_str(), guidance.text.as_str()),
        ("retry", "the mirror is back")
    );
}
