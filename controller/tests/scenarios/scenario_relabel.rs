//! A label removal that reaches the controller after the issue was
//! labelled again, on the real `autoforge serve` with signed webhooks: the
//! removal ended the earlier run's claim to the issue, not the new run's,
//! so the new run goes on (removals are ordered against the labelling that
//! started the run by their issue event ids).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{FaultKind, FaultRule, Phase, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_removal_delivered_after_a_relabel_does_not_stop_the_new_run() {
    let s = Scenario::new().start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let first = s.run_of(issue).await;
    first.reaches(Phase::ReadyForMerge).await;

    // The removal's webhook arrives late, after the stop and the relabel.
    s.world.hub.set_faults(vec![
        FaultRule::on_webhook("issues", FaultKind::WebhookDelay { ms: 10_000 }).times(1),
    ]);
    s.operator_unlabels(issue).await;
    s.comment_as(&s.owner, issue, "/autoforge stop").await;
    first.reaches(Phase::Stopped).await;
    s.operator_labels(issue).await;
    let second = s.run_after(issue.number, first.id).await;
    second.reaches(Phase::ReadyForMerge).await;

    s.issue_delivery_processed(issue.number, "unlabeled").await;
    let predating = s
        .world
        .db
        .journal()
        .list_audit_events_of_kind("trigger_removal_predates_run", 10)
        .await
        .unwrap();
    assert_eq!(predating.len(), 1, "{predating:?}");
    assert_eq!(predating[0].run_id, Some(second.id));
    // Several poll passes later the new run is still parked, not stopped.
    tokio::time::sleep(std::time::Duration::from_secs(scenario::POLL_SECONDS + 1)).await;
    assert_eq!(
        second.reaches(Phase::ReadyForMerge).await.phase,
        Phase::ReadyForMerge
    );
    assert!(
        second
            .phase_history()
            .await
            .iter()
            .all(|p| *p != Phase::Stopped),
        "the new run was never stopped"
    );
}
