//! Operator commands against a BLOCKED run on the real `autoforge serve`:
//! who may unblock, and what is not a command at all (SPEC §2, §11).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, OWNER, Phase, REPO, Running, Scenario};

/// A run that the implementer blocks at once; the issue number.
async fn blocked_run() -> (Running, u64) {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.open_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    (s, issue)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_by_a_non_operator_is_refused_and_leaves_the_run_document_byte_identical() {
    let (s, issue) = blocked_run().await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let before = run.snapshot().await;
    let reader = s.person("rita", "read");

    let comment = s
        .comment_as(&reader, issue, "/autoforge unblock because I say so")
        .await;
    scenario::eventually(scenario::PATIENCE, "the refusal recorded", || async {
        let decisions = run.command_decisions().await;
        decisions
            .into_iter()
            .find(|d| d.comment_id == i64::try_from(comment).unwrap())
    })
    .await;
    s.comment_delivery_processed(comment).await;
    let reply = scenario::eventually(scenario::PATIENCE, "the reply saying why", || async {
        let replies = s.comments_with_marker(issue, "autoforge-reply").await;
        replies.into_iter().next()
    })
    .await;

    run.assert_run_state_unchanged_since(&before).await;
    let decisions = run.command_decisions().await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(!decisions[0].accepted);
    assert_eq!(decisions[0].actor, "rita");
    assert!(
        reply["body"]
            .as_str()
            .unwrap()
            .contains(&comment.to_string()),
        "the reply answers rita's comment: {reply}"
    );
    assert_eq!(
        s.comments_with_marker(issue, "autoforge-reply").await.len(),
        1
    );
    assert_eq!(s.launches("implement"), 1, "nothing relaunched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_inside_a_code_block_is_no_command_and_changes_nothing() {
    let (s, issue) = blocked_run().await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let before = run.snapshot().await;

    let quoted = "To resume, an operator writes:\n\n```\n/autoforge unblock because\n```\n";
    let comment = s.comment_as(&s.owner, issue, quoted).await;
    s.comment_delivery_processed(comment).await;
    // A later real command shows the run has looked at its events since.
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    scenario::eventually(scenario::PATIENCE, "the status reply", || async {
        let decisions = run.command_decisions().await;
        decisions
            .into_iter()
            .find(|d| d.comment_id == i64::try_from(status).unwrap())
    })
    .await;
    run.reaches(Phase::Blocked).await;

    let decisions = run.command_decisions().await;
    assert!(
        decisions
            .iter()
            .all(|d| d.comment_id != i64::try_from(comment).unwrap()),
        "the quoted command was never a command: {decisions:?}"
    );
    let after = run.snapshot().await;
    assert_eq!(after.phase, before.phase);
    assert_eq!(
        run.state().await.blocked,
        serde_json::from_str::<autoforge::machine::RunState>(&before.state)
            .unwrap()
            .blocked
    );
    assert_eq!(s.launches("implement"), 1, "nothing relaunched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_person_fixes_what_the_gate_refused_an_unblock_resumes_in_ready_for_merge() {
    let s = Scenario::new().merge_mode("on-command").start().await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let pr = run.reaches(Phase::ReadyForMerge).await.pr.unwrap();
    set_draft(&s, pr, true);
    s.comment_as(&s.owner, issue, "/autoforge merge").await;
    run.reaches(Phase::Blocked).await;

    set_draft(&s, pr, false);
    s.comment_as(
        &s.owner,
        issue,
        "/autoforge unblock marked ready for review",
    )
    .await;
    // The operator's approval still stands for the same clean round.
    let state = run.reaches(Phase::Done).await;

    let phases = run.phases().await;
    let blocked = phases.iter().position(|p| p == "BLOCKED").unwrap();
    assert_eq!(
        phases[blocked..],
        ["BLOCKED", "READY_FOR_MERGE", "MERGE", "DONE"],
        "{phases:?}"
    );
    assert_eq!(state.merged_prs, vec![pr]);
    s.assert_pr_merged_once(pr).await;
    assert_eq!(s.launches("review"), 1, "the clean review still holds");
}

/// GitHub flips a PR's draft flag through GraphQL only, which fakehub does
/// not serve: set it in fakehub's world directly.
fn set_draft(s: &Running, pr: u64, draft: bool) {
    let mut world = s.world.hub.shared().lock();
    let repo = world.repo_id_by_name(OWNER, REPO).unwrap();
    let pull = world.issue_mut(repo, pr).unwrap().pull.as_mut().unwrap();
    pull.draft = draft;
}
