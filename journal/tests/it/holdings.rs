//! The lease history: every acquisition recorded with its time range on
//! the database's clock, and the writes refused to a holder that lost the
//! run counted on its row.

use autoforge_journal::JournalError;
use autoforge_journal::testing::TestDatabase;
use serde_json::json;

use crate::{LONG, intent, leased_run, transition};

#[tokio::test]
async fn every_acquisition_is_recorded_and_a_takeover_starts_after_the_previous_holding_ended() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, first) = leased_run(&db, 1).await;
    journal.renew_lease(&first, LONG).await.unwrap();
    journal.release_lease(&first).await.unwrap();
    let second = journal
        .acquire_lease_for(run.id, "b", LONG)
        .await
        .unwrap()
        .unwrap();
    // Expired, not released: the third holder takes it over by time.
    journal
        .renew_lease(&second, std::time::Duration::ZERO)
        .await
        .unwrap();
    let third = journal.acquire_lease("c", LONG).await.unwrap().unwrap();
    assert_eq!(third.run_id, run.id);

    let holdings = journal.lease_holdings(run.id).await.unwrap();
    let owners: Vec<(&str, i64)> = holdings
        .iter()
        .map(|h| (h.owner.as_str(), h.fencing_token))
        .collect();
    assert_eq!(
        owners,
        [
            (first.owner.as_str(), first.fencing_token),
            ("b", second.fencing_token),
            ("c", third.fencing_token)
        ]
    );
    assert!(holdings[0].released_at.is_some());
    assert!(holdings[1].released_at.is_none());
    assert_eq!(holdings[2].expires_at, third.expires_at);
    for pair in holdings.windows(2) {
        assert!(
            pair[0].ended_at() <= pair[1].acquired_at,
            "holdings overlap: {pair:?}"
        );
    }
}

#[tokio::test]
async fn writes_refused_to_a_holder_that_lost_the_run_are_counted_on_its_holding() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, old) = leased_run(&db, 1).await;
    let (_, effects) = transition(
        journal,
        &old,
        0,
        "IMPLEMENT",
        &[intent(autoforge_journal::EffectKind::Push, "p")],
    )
    .await;
    journal
        .renew_lease(&old, std::time::Duration::ZERO)
        .await
        .unwrap();
    let new = journal
        .acquire_lease_for(run.id, "new", LONG)
        .await
        .unwrap()
        .unwrap();

    // Inside a transaction that rolls back, and outside one.
    let mut tx = journal.begin().await.unwrap();
    let refused = tx
        .commit_transition(&old, 1, "REVIEW", &json!({}), &[])
        .await
        .unwrap_err();
    assert!(matches!(refused, JournalError::StaleLease { .. }));
    drop(tx);
    let refused = journal.mark_attempted(&old, effects[0]).await.unwrap_err();
    assert!(matches!(refused, JournalError::StaleLease { .. }));
    let refused = journal.renew_lease(&old, LONG).await.unwrap_err();
    assert!(matches!(refused, JournalError::StaleLease { .. }));

    let holdings = journal.lease_holdings(run.id).await.unwrap();
    let refused: Vec<(i64, i32)> = holdings
        .iter()
        .map(|h| (h.fencing_token, h.refused_writes))
        .collect();
    assert_eq!(refused, [(old.fencing_token, 3), (new.fencing_token, 0)]);
    assert!(holdings[0].last_refused_at.is_some());
}
