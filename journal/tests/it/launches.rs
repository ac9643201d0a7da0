//! Launch rows while their process runs: written at the spawn, refreshed
//! by heartbeats, ended as lost by the next lease holder, summed for cost.

use std::time::Duration;

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{
    JournalError, LOST_OUTCOME, LaunchEnd, LaunchProgress, LaunchUsage, NewLaunch,
};

use crate::{LONG, leased_run};

fn implement(attempt: i32) -> NewLaunch {
    NewLaunch {
        phase: "IMPLEMENT".to_owned(),
        role: "implement".to_owned(),
        profile: "claude".to_owned(),
        attempt,
        log_dir: format!("/state/launches/1/attempt-{}", attempt + 1),
    }
}

fn beat(elapsed_ms: i64, tokens: Option<i64>) -> LaunchProgress {
    LaunchProgress {
        elapsed_ms,
        output_bytes: elapsed_ms * 10,
        usage: LaunchUsage {
            tokens,
            input_tokens: tokens.map(|t| t - 10),
            output_tokens: tokens.map(|_| 10),
            cached_tokens: None,
            cost_micros: tokens.map(|t| t * 3),
        },
    }
}

#[tokio::test]
async fn a_spawned_launch_is_running_and_its_heartbeats_refresh_it_until_it_ends() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let id = journal
        .record_launch_spawned(&lease, &implement(0), 4242)
        .await
        .unwrap();
    let running = journal.running_launch(run.id).await.unwrap().unwrap();
    assert_eq!((running.id, running.pid), (id, Some(4242)));
    assert_eq!(
        (running.elapsed_ms, running.output_bytes),
        (Some(0), Some(0))
    );

    journal
        .record_launch_progress(&lease, id, &beat(30_000, None))
        .await
        .unwrap();
    journal
        .record_launch_progress(&lease, id, &beat(60_000, Some(500)))
        .await
        .unwrap();
    // A later heartbeat without usage keeps the tokens already seen.
    journal
        .record_launch_progress(&lease, id, &beat(90_000, None))
        .await
        .unwrap();
    let running = journal.running_launch(run.id).await.unwrap().unwrap();
    assert_eq!(running.elapsed_ms, Some(90_000));
    assert_eq!(running.output_bytes, Some(900_000));
    assert_eq!(running.tokens, Some(500));

    let end = LaunchEnd {
        exit_status: Some(0),
        duration_ms: 95_000,
        tokens: Some(600),
        outcome: "success".to_owned(),
    };
    journal
        .record_launch_finished(&lease, id, &end)
        .await
        .unwrap();
    assert_eq!(journal.running_launch(run.id).await.unwrap(), None);
    // A heartbeat arriving after the end changes nothing.
    journal
        .record_launch_progress(&lease, id, &beat(99_000, Some(1)))
        .await
        .unwrap();
    let totals = journal.launch_totals(&[run.id]).await.unwrap();
    assert_eq!(totals.launches, 1);
    assert_eq!(totals.tokens, 600);
    assert_eq!((totals.input_tokens, totals.output_tokens), (490, 10));
    assert_eq!(totals.cost_micros, Some(1_500));
}

#[tokio::test]
async fn the_next_lease_holder_ends_an_unended_launch_as_lost_and_the_old_one_is_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, old) = leased_run(&db, 1).await;
    let id = journal
        .record_launch_spawned(&old, &implement(0), 4242)
        .await
        .unwrap();
    journal
        .record_launch_progress(&old, id, &beat(31_000, None))
        .await
        .unwrap();

    journal.renew_lease(&old, Duration::ZERO).await.unwrap();
    let new = journal.acquire_lease("new", LONG).await.unwrap().unwrap();
    let stale = journal
        .record_launch_progress(&old, id, &beat(62_000, None))
        .await
        .unwrap_err();
    assert!(
        matches!(stale, JournalError::StaleLease { .. }),
        "{stale:?}"
    );
    assert!(matches!(
        journal.end_lost_launches(&old).await.unwrap_err(),
        JournalError::StaleLease { .. }
    ));

    let lost = journal.end_lost_launches(&new).await.unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].id, lost[0].pid), (id, Some(4242)));
    assert_eq!(lost[0].log_dir, "/state/launches/1/attempt-1");
    let row = &journal.list_launches(run.id).await.unwrap()[0];
    assert_eq!(row.outcome.as_deref(), Some(LOST_OUTCOME));
    assert_eq!(row.duration_ms, Some(31_000), "as long as it was last seen");
    assert!(row.ended_at.is_some());
    assert!(
        journal.end_lost_launches(&new).await.unwrap().is_empty(),
        "nothing is lost twice"
    );
}

#[tokio::test]
async fn totals_without_any_priced_launch_have_no_cost() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let totals = journal.launch_totals(&[run.id]).await.unwrap();
    assert_eq!(
        (totals.launches, totals.tokens, totals.cost_micros),
        (0, 0, None)
    );
    let id = journal
        .record_launch_spawned(&lease, &implement(0), 7)
        .await
        .unwrap();
    journal
        .record_launch_progress(&lease, id, &beat(1_000, None))
        .await
        .unwrap();
    let totals = journal.launch_totals(&[run.id]).await.unwrap();
    assert_eq!((totals.launches, totals.cost_micros), (1, None));
}
