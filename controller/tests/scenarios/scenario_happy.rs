//! The whole loop for one issue on the real `autoforge serve`: the
//! happy path through webhooks, and the same loop with every webhook lost
//! so only the poller drives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::EffectKind;
use scenario::{Agents, FaultRule, Phase, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_issue_with_auto_merge_is_merged_once_with_one_status_and_one_review_comment() {
    let s = Scenario::new()
        .agents(Agents::scripted())
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;

    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::Done).await;

    let pr = s.the_pull().await;
    let number = pr["number"].as_u64().unwrap();
    assert_eq!(state.merged_prs, vec![number]);
    s.assert_pr_merged_once(number).await;
    s.assert_one_comment_with_marker(issue, "autoforge-status")
        .await;
    s.assert_one_comment_with_marker(number, "ai-review-result")
        .await;
    assert_eq!(
        run.phases().await,
        ["IMPLEMENT", "REVIEW", "READY_FOR_MERGE", "MERGE", "DONE"]
    );
    assert_eq!((s.launches("implement"), s.launches("review")), (1, 1));
    assert_eq!(run.effect_count(EffectKind::MergePr).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_webhook_dropped_the_poller_still_drives_the_loop_to_done() {
    let s = Scenario::new()
        .merge_mode("auto")
        .faults(vec![FaultRule::drop_all_webhooks()])
        .start()
        .await;
    let issue = s.open_issue("a widget nobody hears about").await;
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
    let pr = s.the_pull().await["number"].as_u64().unwrap();
    s.assert_pr_merged_once(pr).await;
    s.assert_one_comment_with_marker(pr, "ai-review-result")
        .await;
}
