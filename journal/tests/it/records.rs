//! Launch, validation, command and audit records.

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{
    JournalError, LaunchEnd, NewCommandDecision, NewLaunch, NewValidation, ValidationOutcome,
};
use serde_json::json;

use crate::leased_run;

#[tokio::test]
async fn a_launch_is_recorded_from_start_to_end() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let launch = NewLaunch {
        phase: "IMPLEMENT".to_owned(),
        role: "implement".to_owned(),
        profile: "claude".to_owned(),
        attempt: 0,
        log_dir: "/state/logs/1/0".to_owned(),
    };
    let id = journal
        .record_launch_started(&lease, &launch)
        .await
        .unwrap();
    let end = LaunchEnd {
        exit_status: Some(0),
        duration_ms: 1234,
        tokens: Some(5000),
        outcome: "success".to_owned(),
    };
    journal
        .record_launch_finished(&lease, id, &end)
        .await
        .unwrap();
    // A repeated finish is harmless.
    journal
        .record_launch_finished(&lease, id, &end)
        .await
        .unwrap();
    let launches = journal.list_launches(run.id).await.unwrap();
    assert_eq!(launches.len(), 1);
    assert_eq!(
        (launches[0].exit_status, launches[0].tokens),
        (Some(0), Some(5000))
    );
    assert!(launches[0].ended_at.is_some());
}

#[tokio::test]
async fn a_validation_result_is_final_for_its_commit() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let sha = "a".repeat(40);
    let record = NewValidation {
        sha: sha.clone(),
        command_index: 0,
        command: "cargo test".to_owned(),
        outcome: ValidationOutcome::Fail,
        duration_ms: 10,
        output_tail: "1 failed".to_owned(),
    };
    journal.record_validation(&lease, &record).await.unwrap();
    let error = journal
        .record_validation(&lease, &record)
        .await
        .unwrap_err();
    assert!(
        matches!(error, JournalError::ValidationAlreadyRecorded { .. }),
        "{error:?}"
    );
    let mut other = record.clone();
    other.sha = "b".repeat(40);
    other.outcome = ValidationOutcome::Pass;
    journal.record_validation(&lease, &other).await.unwrap();

    let of_sha = journal.list_validations(run.id, Some(&sha)).await.unwrap();
    assert_eq!(of_sha.len(), 1);
    assert_eq!(of_sha[0].outcome, ValidationOutcome::Fail);
    assert_eq!(
        journal.list_validations(run.id, None).await.unwrap().len(),
        2
    );

    let mut bad = record.clone();
    bad.sha = "not-a-sha".to_owned();
    assert!(journal.record_validation(&lease, &bad).await.is_err());
}

#[tokio::test]
async fn command_decisions_and_audit_events_are_kept_with_or_without_a_run() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, _) = leased_run(&db, 1).await;
    for (run_id, accepted) in [(Some(run.id), true), (None, false)] {
        journal
            .record_command_decision(&NewCommandDecision {
                run_id,
                comment_id: 77,
                actor: "octocat".to_owned(),
                command: "stop".to_owned(),
                accepted,
                reason: if accepted {
                    "operator"
                } else {
                    "not an operator"
                }
                .to_owned(),
            })
            .await
            .unwrap();
    }
    journal
        .record_audit_event(Some(run.id), "poller_reconciled", &json!({"pr": 3}))
        .await
        .unwrap();
    journal
        .record_audit_event(None, "installation_added", &json!({}))
        .await
        .unwrap();
    let decisions = journal.list_command_decisions(run.id).await.unwrap();
    assert_eq!(decisions.len(), 1);
    assert!(decisions[0].accepted);
    let audit = journal.list_audit_events(run.id).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].detail, json!({"pr": 3}));
}

#[tokio::test]
async fn records_under_a_stale_lease_are_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    journal.release_lease(&lease).await.unwrap();
    let launch = NewLaunch {
        phase: "IMPLEMENT".to_owned(),
        role: "implement".to_owned(),
        profile: "claude".to_owned(),
        attempt: 0,
        log_dir: "/tmp/x".to_owned(),
    };
    let error = journal
        .record_launch_started(&lease, &launch)
        .await
        .unwrap_err();
    assert!(
        matches!(error, JournalError::StaleLease { .. }),
        "{error:?}"
    );
}
