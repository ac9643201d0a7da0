//! The whole loop for one issue on the real `autoforge serve`: the
//! happy path through webhooks, and the same loop with every webhook lost
//! so only the poller drives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::EffectKind;
use scenario::{Agents, FaultRule, Marker, Phase, Role, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_issue_with_auto_merge_is_merged_once_with_one_status_and_one_review_comment() {
    let s = Scenario::new()
        .agents(Agents::scripted())
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;

    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::Done).await;

    let pr = s.pull().await;
    assert_eq!(state.merged_prs, vec![pr.number]);
    pr.assert_merged_once().await;
    issue.assert_one_comment_with(Marker::Status).await;
    pr.assert_one_comment_with(Marker::ReviewResult).await;
    assert_eq!(
        run.phase_history().await,
        [
            Phase::Implement,
            Phase::Review,
            Phase::ReadyForMerge,
            Phase::Merge,
            Phase::Done
        ]
    );
    assert_eq!(
        (s.launches(Role::Implement), s.launches(Role::Review)),
        (1, 1)
    );
    assert_eq!(run.effect_count(EffectKind::MergePr).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_webhook_dropped_the_poller_still_drives_the_loop_to_done() {
    let s = Scenario::new()
        .merge_mode("auto")
        .faults(vec![FaultRule::drop_all_webhooks()])
        .start()
        .await;
    let issue = s.new_issue("a widget nobody hears about").await;
    s.operator_labels(issue).await;

    let run = s.run_of(issue).await;
    run.reaches(Phase::Done).await;

    let delivered: Vec<String> = s
        .world
        .hub
        .deliveries()
        .iter()
        .filter(|d| {
            !["installation", "ping"].contains(&d.event.as_str())
                && (200..300).contains(&d.status_code)
        })
        .map(|d| d.event.clone())
        .collect::<Vec<_>>();
    assert!(
        delivered.is_empty(),
        "no webhook reached serve: {delivered:?}"
    );
    let pr = s.pull().await;
    pr.assert_merged_once().await;
    pr.assert_one_comment_with(Marker::ReviewResult).await;
}
