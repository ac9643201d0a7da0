//! Operator commands against a BLOCKED run on the real `autoforge serve`:
//! who may unblock, and what is not a command at all (SPEC §2, §11).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Issue, Marker, Phase, Role, Running, Scenario};

/// A scenario whose implementer blocks at once.
async fn blocking_implementer() -> Running {
    Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await
}

/// The issue the blocking implementer works on, labelled by an operator.
async fn labelled_issue(s: &Running) -> Issue<'_> {
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    issue
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_by_a_non_operator_is_refused_and_leaves_the_run_document_byte_identical() {
    let s = blocking_implementer().await;
    let issue = labelled_issue(&s).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let before = run.snapshot().await;
    let reader = s.person("rita", "read");

    let comment = s
        .comment_as(&reader, issue, "/autoforge unblock because I say so")
        .await;
    scenario::eventually(scenario::PATIENCE, "the refusal recorded", || {
        run.decision_on(comment)
    })
    .await;
    s.comment_delivery_processed(comment).await;
    let reply = scenario::eventually(scenario::PATIENCE, "the reply saying why", || async {
        let replies = issue.comments_with(Marker::Reply).await;
        replies.into_iter().next()
    })
    .await;

    run.assert_run_state_unchanged_since(&before).await;
    let decisions = run.command_decisions().await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(!decisions[0].accepted);
    assert_eq!(decisions[0].actor, "rita");
    assert!(
        reply.body.contains(&comment.to_string()),
        "the reply answers rita's comment: {reply:?}"
    );
    assert_eq!(issue.comments_with(Marker::Reply).await.len(), 1);
    assert_eq!(s.launches(Role::Implement), 1, "nothing relaunched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_inside_a_code_block_is_no_command_and_changes_nothing() {
    let s = blocking_implementer().await;
    let issue = labelled_issue(&s).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let before = run.snapshot().await;

    let quoted = "To resume, an operator writes:\n\n```\n/autoforge unblock because\n```\n";
    let comment = s.comment_as(&s.owner, issue, quoted).await;
    s.comment_delivery_processed(comment).await;
    // A later real command shows the run has looked at its events since.
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    scenario::eventually(scenario::PATIENCE, "the status reply", || {
        run.decision_on(status)
    })
    .await;
    run.reaches(Phase::Blocked).await;

    let quoted = run.decision_on(comment).await;
    assert!(
        quoted.is_none(),
        "the quoted command was never a command: {quoted:?}"
    );
    let after = run.snapshot().await;
    assert_eq!(after.phase, before.phase);
    assert_eq!(run.state().await.blocked, before.state().blocked);
    assert_eq!(s.launches(Role::Implement), 1, "nothing relaunched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_person_fixes_what_the_gate_refused_an_unblock_resumes_in_ready_for_merge() {
    let s = Scenario::new().merge_mode("on-command").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let pr = s.pull_numbered(run.reaches(Phase::ReadyForMerge).await.pr.unwrap());
    pr.set_draft(true);
    s.comment_as(&s.owner, issue, "/autoforge merge").await;
    run.reaches(Phase::Blocked).await;

    pr.set_draft(false);
    s.comment_as(
        &s.owner,
        issue,
        "/autoforge unblock marked ready for review",
    )
    .await;
    // The operator's approval still stands for the same clean round.
    let state = run.reaches(Phase::Done).await;

    let phases = run.phase_history().await;
    let blocked = phases.iter().position(|p| *p == Phase::Blocked).unwrap();
    assert_eq!(
        phases[blocked..],
        [
            Phase::Blocked,
            Phase::ReadyForMerge,
            Phase::Merge,
            Phase::Done
        ],
        "{phases:?}"
    );
    assert_eq!(state.merged_prs, vec![pr.number]);
    pr.assert_merged_once().await;
    assert_eq!(s.launches(Role::Review), 1, "the clean review still holds");
}
