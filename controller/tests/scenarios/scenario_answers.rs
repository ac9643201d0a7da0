//! Answers outside any run, on the real `autoforge serve` with signed
//! webhooks: a trigger label added by someone who may not start runs is
//! answered once per labelling (a duplicate delivery or a poll of the same
//! labelling posts nothing new), and a command on a thread with no run is
//! answered too — that there is no run for an operator, the refusal for
//! anyone else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::scenario;

use autoforge_journal::{RunFilter, Stage};
use scenario::{Comment, FaultKind, FaultRule, Marker, POLL_SECONDS, Running, Scenario, Thread};

/// Waits until `thread` shows `count` answers, then returns them.
async fn answers(s: &Running, thread: impl Thread + Copy, count: usize) -> Vec<Comment> {
    scenario::eventually(scenario::PATIENCE, &format!("{count} answers"), || async {
        let found = s.comments_with(thread, Marker::Notice).await;
        (found.len() >= count).then_some(found)
    })
    .await
}

/// Long enough for the duplicate delivery and two poll passes.
async fn quiet_period() {
    tokio::time::sleep(Duration::from_secs(2 * POLL_SECONDS + 1)).await;
}

async fn runs(s: &Running) -> usize {
    s.world
        .db
        .journal()
        .list_runs(RunFilter::All, 10)
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_label_from_a_non_operator_is_answered_once_per_labelling() {
    let s = Scenario::new()
        .faults(vec![
            FaultRule::on_webhook("issues", FaultKind::WebhookDuplicate).times(1),
        ])
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    let tia = s.person("tia", "triage");
    s.labels_as(&tia, issue).await;

    let told = answers(&s, issue, 1).await;
    let body = &told[0].body;
    assert!(
        body.starts_with("`tia` added the `autoforge` label, but no run starts:"),
        "{body}"
    );
    assert!(body.contains("`triage`"), "the reason says why: {body}");
    quiet_period().await;
    assert_eq!(
        issue.comments_with(Marker::Notice).await.len(),
        1,
        "the duplicate delivery and the poller saw the same labelling"
    );
    assert_eq!(runs(&s).await, 0);

    // A new labelling is a new event, answered on its own.
    s.unlabels_as(&tia, issue).await;
    s.labels_as(&tia, issue).await;
    answers(&s, issue, 2).await;
    quiet_period().await;
    assert_eq!(issue.comments_with(Marker::Notice).await.len(), 2);
    let journalled = s
        .world
        .db
        .journal()
        .answers_on(&s.world.repository(), issue.number)
        .await
        .unwrap();
    assert_eq!(journalled.len(), 2);
    assert!(
        journalled
            .iter()
            .all(|a| a.stage == Stage::Observed && a.attempts == 1)
    );
    assert_eq!(runs(&s).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_where_no_run_is_is_answered_with_how_to_start_one() {
    let s = Scenario::new().start().await;
    let issue = s.new_issue("a widget").await;
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    let told = answers(&s, issue, 1).await;
    let body = &told[0].body;
    assert!(
        body.starts_with("There is no autoforge run on this thread, so `/autoforge status`"),
        "{body}"
    );
    assert!(body.contains("adding the `autoforge` label"), "{body}");

    let tia = s.person("tia", "triage");
    s.comment_as(&tia, issue, "/autoforge stop\n/autoforge retry")
        .await;
    let told = answers(&s, issue, 2).await;
    let refused = &told[1].body;
    assert!(
        refused.starts_with("Refused `/autoforge stop` and `/autoforge retry`:"),
        "{refused}"
    );
    assert!(refused.contains("`triage`"), "{refused}");

    quiet_period().await;
    assert_eq!(
        issue.comments_with(Marker::Notice).await.len(),
        2,
        "one answer per comment, and none to the controller's own answers"
    );
    let journalled = s
        .world
        .db
        .journal()
        .answers_on(&s.world.repository(), issue.number)
        .await
        .unwrap();
    assert_eq!(journalled.len(), 2);
    assert!(journalled[0].dedupe_key.contains(&format!(":{status}@")));
    assert_eq!(runs(&s).await, 0);
}
