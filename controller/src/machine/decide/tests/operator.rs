//! Stop, label removal, status and unblock as seen through `decide`.

use super::*;

fn blocked_in_fix() -> Run {
    let settings = RunSettings {
        max_retries: 0,
        ..RunSettings::default()
    };
    let mut run = Run::to_review(settings, None);
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(2));
    run.github(facts(Some(pr_at(&sha(2), &sha(1)))));
    run.finish_agent(AgentOutcome::Result {
        result: AgentResult::Blocked {
            message: "stuck".into(),
        },
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    run
}

fn unblock(facts: GitHubFacts) -> Event {
    command(OperatorRequest::Unblock {
        reason: "fixed the branch".into(),
        facts: Box::new(facts),
    })
}

#[test]
fn stop_answers_the_command_and_otherwise_writes_only_the_status_comment() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.apply(command(OperatorRequest::Stop));
    assert_eq!(run.state.phase, Phase::Stopped);
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(
        kinds,
        vec![
            EffectKind::AddReaction,
            EffectKind::PostComment,
            EffectKind::EditStatusComment
        ]
    );
    assert!(run.last.launches.is_empty());
}

#[test]
fn removing_the_label_writes_only_the_status_comment() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.apply(Event::LabelRemoved);
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(kinds, vec![EffectKind::EditStatusComment]);
}

#[test]
fn a_command_refused_upstream_is_answered_and_changes_nothing() {
    let run = blocked_in_fix();
    let refused = Event::CommandRefused(RefusedCommand {
        thread: autoforge_journal::testing::issue(3),
        comment_id: 77,
        actor: "rory".into(),
        command: "unblock".into(),
        reason: "rory has `read` permission".into(),
    });
    let decision = decide(&run.state, &refused).expect("legal");
    assert_eq!(decision.next, run.state);
    assert!(decision.transitions.is_empty());
    assert_eq!(
        decision.effects,
        vec![EffectIntent::PostCommandReply {
            thread: autoforge_journal::testing::issue(3),
            comment_id: 77,
            reply: Reply::Refused {
                command: "unblock".into(),
                reason: "rory has `read` permission".into(),
            },
        }]
    );
}

#[test]
fn a_command_refused_upstream_on_a_finished_run_is_still_answered() {
    let mut run = Run::default_run();
    run.apply(Event::LabelRemoved);
    let refused = Event::CommandRefused(RefusedCommand {
        thread: autoforge_journal::testing::issue(1),
        comment_id: 5,
        actor: "rory".into(),
        command: "malformed".into(),
        reason: "unknown command".into(),
    });
    let decision = decide(&run.state, &refused).expect("legal");
    assert_eq!(decision.next, run.state);
    assert_eq!(decision.effects.len(), 1);
}

#[test]
fn removing_the_label_stops_the_run() {
    let mut run = Run::default_run();
    run.apply(Event::LabelRemoved);
    assert_eq!(run.state.phase, Phase::Stopped);
    assert_eq!(
        run.refuse(Event::LabelRemoved),
        Refusal::Terminal {
            phase: Phase::Stopped
        }
    );
}

#[test]
fn status_replies_without_changing_state() {
    let mut run = Run::to_review(RunSettings::default(), None);
    let before = run.state.clone();
    run.apply(command(OperatorRequest::Status));
    assert_eq!(run.state, before);
    assert!(matches!(
        run.last.effects[..],
        [
            EffectIntent::AddReaction { .. },
            EffectIntent::PostCommandReply {
                reply: Reply::Status { .. },
                ..
            }
        ]
    ));
}

#[test]
fn unblock_refusal_leaves_state_byte_identical() {
    let mut run = blocked_in_fix();
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.state = PrState::Closed;
    let refusal = run.refuse(unblock(facts(Some(pr))));
    assert_eq!(
        refusal,
        Refusal::Unblock(UnblockRefusal::PrClosed { pr: PR })
    );
}

#[test]
fn unblock_at_the_reviewed_revision_with_findings_resumes_fix() {
    let mut run = blocked_in_fix();
    run.apply(unblock(facts(Some(pr_at(&sha(2), &sha(1))))));
    assert_eq!(run.last.transitions, vec![(Phase::Blocked, Phase::Fix)]);
    assert_eq!(run.state.blocked, None);
}

#[test]
fn unblock_at_another_revision_resumes_review_with_carried_findings() {
    let mut run = blocked_in_fix();
    run.apply(unblock(facts(Some(pr_at(&sha(4), &sha(1))))));
    assert_eq!(run.state.phase, Phase::Review);
    let carried = run.state.review.prior_findings.clone().expect("carried");
    assert_eq!(carried.findings, vec![finding(1, 1, "a")]);
    assert!(run.state.review.open_findings.is_empty());
}

#[test]
fn unblock_of_a_run_that_is_not_blocked_is_refused() {
    let mut run = Run::to_review(RunSettings::default(), None);
    let refusal = run.refuse(unblock(facts(None)));
    assert_eq!(
        refusal,
        Refusal::Unblock(UnblockRefusal::NotBlocked {
            phase: Phase::Review
        })
    );
}

#[test]
fn commands_on_a_finished_run_are_refused_with_a_reply() {
    let mut run = Run::default_run();
    run.apply(Event::LabelRemoved);
    let decision =
        decide(&run.state, &command(OperatorRequest::Retry { notes: None })).expect("legal");
    assert_eq!(
        decision.refusal,
        Some(Refusal::Terminal {
            phase: Phase::Stopped
        })
    );
    assert_eq!(decision.effects.len(), 1);
}

#[test]
fn effect_conflict_blocks_naming_the_effect() {
    let mut run = Run::default_run();
    run.apply(Event::EffectConflict {
        identity: "ai-implementation:issue=7".into(),
        reason: "foreign".into(),
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("ai-implementation")
    );
}

#[test]
fn refusal_replies_say_why_in_operator_words() {
    let mut run = Run::to_ready(RunSettings::default(), None);
    let decision = decide(&run.state, &command(OperatorRequest::Merge)).expect("legal");
    let [
        EffectIntent::PostCommandReply {
            reply: Reply::Refused { reason, .. },
            ..
        },
    ] = &decision.effects[..]
    else {
        panic!("one refusal reply expected")
    };
    assert_eq!(
        reason,
        "merge is not available: merge.mode is never in READY_FOR_MERGE"
    );
    run.refuse(command(OperatorRequest::Merge));
}

#[test]
fn losing_access_to_the_repository_stops_the_run_and_writes_nothing() {
    let mut run = blocked_in_fix();
    let decision = run
        .apply(Event::RepositoryAccessLost {
            reason: "acme/widgets is no longer served".into(),
        })
        .clone();
    assert_eq!(run.state.phase, Phase::Stopped);
    assert_eq!(
        run.state.failure.as_deref(),
        Some("acme/widgets is no longer served")
    );
    assert!(decision.effects.is_empty(), "{:?}", decision.effects);
    assert!(decision.launches.is_empty());
}
