//! Commands given on the controller's host: the comment commands' rules,
//! without a reaction or a reply (there is no comment to answer).

use super::*;

/// The same person as the comment commands' author, so that the state a
/// local command leaves can be compared with the comment's byte for byte
/// (the operator's guidance names who gave it).
fn local(command: OperatorRequest) -> Event {
    Event::LocalOperator(LocalOperatorCommand {
        actor: "op".into(),
        command,
    })
}

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

fn kinds(run: &Run) -> Vec<EffectKind> {
    run.last.effects.iter().map(EffectIntent::kind).collect()
}

#[test]
fn a_local_stop_stops_and_writes_only_the_status_comment() {
    let mut run = Run::to_review(RunSettings::default(), None);
    run.apply(local(OperatorRequest::Stop));
    assert_eq!(run.state.phase, Phase::Stopped);
    assert_eq!(kinds(&run), vec![EffectKind::EditStatusComment]);
}

#[test]
fn a_local_unblock_resumes_where_the_comment_would_without_answering_a_comment() {
    let mut by_comment = blocked_in_fix();
    let mut by_cli = blocked_in_fix();
    let unblock = || OperatorRequest::Unblock {
        reason: "fixed the branch".into(),
        facts: Box::new(facts(Some(pr_at(&sha(2), &sha(1))))),
    };
    by_comment.apply(command(unblock()));
    by_cli.apply(local(unblock()));
    assert_eq!(by_cli.state.phase, Phase::Fix);
    assert_eq!(by_cli.state, by_comment.state);
    assert!(
        !kinds(&by_cli)
            .iter()
            .any(|k| matches!(k, EffectKind::AddReaction | EffectKind::PostComment)),
        "{:?}",
        kinds(&by_cli)
    );
}

#[test]
fn a_refused_local_unblock_changes_nothing_and_writes_nothing() {
    let mut run = blocked_in_fix();
    let mut pr = pr_at(&sha(2), &sha(1));
    pr.state = PrState::Closed;
    let closed = || {
        local(OperatorRequest::Unblock {
            reason: "try".into(),
            facts: Box::new(facts(Some(pr.clone()))),
        })
    };
    assert_eq!(
        run.refuse(closed()),
        Refusal::Unblock(UnblockRefusal::PrClosed { pr: PR })
    );
    let decision = decide(&run.state, &closed()).expect("legal");
    assert!(decision.effects.is_empty(), "{:?}", decision.effects);
}
