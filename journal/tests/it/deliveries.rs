//! The webhook inbox.

use std::collections::HashSet;
use std::time::Duration;

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{DeliveryRetry, InsertOutcome, NewDelivery};

const VISIBLE: Duration = Duration::from_secs(60);

fn delivery(id: &str) -> NewDelivery {
    NewDelivery {
        delivery_id: id.to_owned(),
        event: "issues".to_owned(),
        action: Some("labeled".to_owned()),
        repository: Some("acme/widgets".to_owned()),
        installation_id: Some(42),
        payload: b"{\"action\":\"labeled\"}\n".to_vec(),
    }
}

#[tokio::test]
async fn a_redelivered_id_is_stored_once() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let first = journal.insert_delivery(&delivery("d-1")).await.unwrap();
    assert!(matches!(first, InsertOutcome::Inserted(_)));
    let mut changed = delivery("d-1");
    changed.payload = b"other".to_vec();
    assert_eq!(
        journal.insert_delivery(&changed).await.unwrap(),
        InsertOutcome::Duplicate
    );
    let stored = journal.get_delivery("d-1").await.unwrap().unwrap();
    assert_eq!(
        stored.payload,
        delivery("d-1").payload,
        "the first body is kept byte for byte"
    );
}

#[tokio::test]
async fn concurrent_workers_claim_disjoint_deliveries() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    for n in 0..20 {
        journal
            .insert_delivery(&delivery(&format!("d-{n}")))
            .await
            .unwrap();
    }
    let (a, b) = tokio::join!(
        journal.claim_deliveries("a", 15, VISIBLE),
        journal.claim_deliveries("b", 15, VISIBLE)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.len() + b.len(), 20);
    let ids: HashSet<_> = a.iter().chain(&b).map(|d| d.id).collect();
    assert_eq!(ids.len(), 20, "no delivery claimed twice");
    assert!(
        journal
            .claim_deliveries("c", 10, VISIBLE)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_abandoned_claim_becomes_due_again() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    journal.insert_delivery(&delivery("d-1")).await.unwrap();
    let first = journal
        .claim_deliveries("dies", 10, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let again = journal.claim_deliveries("next", 10, VISIBLE).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 2);
    assert_eq!(again[0].claimed_by.as_deref(), Some("next"));
}

#[tokio::test]
async fn failures_retry_later_or_are_given_up_and_listed() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    for id in ["retry", "give-up", "done"] {
        journal.insert_delivery(&delivery(id)).await.unwrap();
    }
    let claimed = journal.claim_deliveries("w", 10, VISIBLE).await.unwrap();
    let by_name = |name: &str| claimed.iter().find(|d| d.delivery_id == name).unwrap().id;
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    assert!(
        journal
            .record_delivery_failure(by_name("retry"), "GitHub 502", DeliveryRetry::At(later))
            .await
            .unwrap()
    );
    assert!(
        journal
            .record_delivery_failure(
                by_name("give-up"),
                "malformed payload",
                DeliveryRetry::GiveUp
            )
            .await
            .unwrap()
    );
    assert!(
        journal
            .mark_delivery_processed(by_name("done"))
            .await
            .unwrap()
    );
    assert!(
        !journal
            .mark_delivery_processed(by_name("done"))
            .await
            .unwrap()
    );
    assert!(
        !journal
            .mark_delivery_processed(by_name("give-up"))
            .await
            .unwrap()
    );

    assert!(
        journal
            .claim_deliveries("w", 10, VISIBLE)
            .await
            .unwrap()
            .is_empty()
    );
    let failed = journal.list_failed_deliveries(10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].delivery_id, "give-up");
    assert_eq!(failed[0].error.as_deref(), Some("malformed payload"));
    let retry = journal.get_delivery("retry").await.unwrap().unwrap();
    assert_eq!(retry.error.as_deref(), Some("GitHub 502"));
    assert!(retry.next_attempt_at > chrono::Utc::now());
}

#[tokio::test]
async fn a_delivery_without_an_id_is_refused() {
    let db = TestDatabase::fresh().await;
    let error = db
        .journal()
        .insert_delivery(&delivery(""))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("delivery id"), "{error}");
}
