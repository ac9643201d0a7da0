//! `/autoforge help` and malformed commands on the real `autoforge serve`:
//! the reply lists the commands the run's phase accepts, and a line that
//! does not parse is answered with how to write it (SPEC §2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Comment, Issue, Marker, Phase, Scenario, eventually};

/// The reply that answers `comment` on `issue`.
async fn reply_to(issue: &Issue<'_>, comment: u64) -> Comment {
    eventually(scenario::PATIENCE, "the reply", || async {
        let replies = issue.comments_with(Marker::Reply).await;
        replies
            .into_iter()
            .find(|r| r.body.contains(&comment.to_string()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_the_commands_of_the_phase_the_run_is_in() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;

    let asked = s.comment_as(&s.owner, issue, "/autoforge help").await;
    let blocked = reply_to(&issue, asked).await;
    assert!(blocked.body.contains("BLOCKED"), "{}", blocked.body);
    assert!(
        blocked.body.contains("`/autoforge unblock <reason>`"),
        "{}",
        blocked.body
    );
    assert!(
        !blocked.body.contains("`/autoforge merge`"),
        "{}",
        blocked.body
    );
    let status = issue.comments_with(Marker::Status).await;
    assert!(
        status[0].body.contains("`/autoforge help`"),
        "the status comment points to help: {}",
        status[0].body
    );
    run.reaches(Phase::Blocked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_at_ready_for_merge_offers_merge_and_fix_and_a_reader_gets_it_too() {
    let s = Scenario::new().merge_mode("on-command").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let before = run.snapshot().await;

    let reader = s.person("rita", "read");
    let asked = s.comment_as(&reader, issue, "/autoforge help").await;
    let reply = reply_to(&issue, asked).await;

    for command in [
        "`/autoforge merge`",
        "`/autoforge fix <notes>`",
        "`/autoforge stop`",
    ] {
        assert!(reply.body.contains(command), "{command}: {}", reply.body);
    }
    assert!(!reply.body.contains("unblock"), "{}", reply.body);
    run.assert_run_state_unchanged_since(&before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_a_malformed_command_is_answered_with_its_usage() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let before = run.snapshot().await;

    let typo = s.comment_as(&s.owner, issue, "/autoforge unblock").await;
    let reply = reply_to(&issue, typo).await;

    assert!(reply.body.contains("Refused"), "{}", reply.body);
    assert!(
        reply.body.contains("usage: `/autoforge unblock <reason>`"),
        "{}",
        reply.body
    );
    run.assert_run_state_unchanged_since(&before).await;
}
