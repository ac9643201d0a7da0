//! Launch records land in the journal with exit, duration and tokens, under
//! the run's lease (real Postgres).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use autoforge::agents::journal::record_finished_launch;
use autoforge::agents::supervisor::{LaunchExit, LaunchRecord};
use autoforge::machine::AgentPhase;
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{JournalError, NewRun};

fn record(exit: LaunchExit, tokens: Option<u64>) -> LaunchRecord {
    LaunchRecord {
        profile: "claude".into(),
        role: AgentPhase::Review,
        started_at: chrono::Utc::now(),
        duration: Duration::from_millis(1_250),
        exit,
        output_bytes: 42,
        tokens,
        usage: None,
        cost_micros: None,
        log_dir: PathBuf::from("/state/launches/1"),
        descendants_killed: false,
        group_survived: false,
    }
}

#[tokio::test]
async fn finished_launches_are_listed_with_exit_duration_and_tokens() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let run = journal
        .create_run(&NewRun {
            repository: "o/r".into(),
            epic: None,
            issue: autoforge_journal::testing::issue(3),
            phase: "REVIEW".into(),
            state: serde_json::json!({}),
        })
        .await
        .unwrap();
    let lease = journal
        .acquire_lease_for(run.id, "w", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();

    record_finished_launch(
        journal,
        &lease,
        "REVIEW",
        0,
        &record(LaunchExit::Exited(0), Some(1_234)),
    )
    .await
    .unwrap();
    record_finished_launch(
        journal,
        &lease,
        "REVIEW",
        1,
        &record(LaunchExit::IdleTimeout, None),
    )
    .await
    .unwrap();

    let launches = journal.list_launches(run.id).await.unwrap();
    assert_eq!(launches.len(), 2);
    assert_eq!(launches[0].role, "review");
    assert_eq!(launches[0].profile, "claude");
    assert_eq!(launches[0].exit_status, Some(0));
    assert_eq!(launches[0].duration_ms, Some(1_250));
    assert_eq!(launches[0].tokens, Some(1_234));
    assert_eq!(launches[0].outcome.as_deref(), Some("success"));
    assert_eq!(launches[1].attempt, 1);
    assert_eq!(launches[1].exit_status, None);
    assert_eq!(launches[1].outcome.as_deref(), Some("idle-timeout"));
    assert!(launches.iter().all(|l| l.ended_at.is_some()));

    journal.release_lease(&lease).await.unwrap();
    let stale = record_finished_launch(
        journal,
        &lease,
        "REVIEW",
        2,
        &record(LaunchExit::Exited(1), None),
    )
    .await;
    assert!(
        matches!(stale, Err(JournalError::StaleLease { .. })),
        "{stale:?}"
    );
    assert_eq!(journal.list_launches(run.id).await.unwrap().len(), 2);
}
