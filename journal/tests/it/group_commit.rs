//! The inbox's group commit: deliveries arriving together share a commit,
//! each is answered for itself, and a failure costs only what it must.

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{InsertOutcome, MAX_BATCH, NewDelivery};

fn delivery(id: &str) -> NewDelivery {
    NewDelivery {
        delivery_id: id.to_owned(),
        event: "issue_comment".to_owned(),
        action: Some("created".to_owned()),
        repository: Some("acme/widgets".to_owned()),
        installation_id: Some(42),
        payload: format!("{{\"id\":\"{id}\"}}").into_bytes(),
    }
}

/// The transactions the rows of `ids` were committed in (their `xmin`).
async fn commits_holding(db: &TestDatabase, ids: &[String]) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT DISTINCT xmin::text FROM deliveries WHERE delivery_id = ANY($1) ORDER BY 1",
    )
    .bind(ids)
    .fetch_all(db.pool())
    .await
    .unwrap()
}

// The test's runtime has one thread: the first insert finds nothing
// queued or committing and commits alone; every other one is queued while
// it is in flight, so the next batch is exactly what arrived meanwhile.
#[tokio::test]
async fn deliveries_arriving_together_share_one_commit_and_each_is_stored() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    let ids: Vec<String> = (0..32).map(|n| format!("g-{n}")).collect();
    let outcomes =
        futures_util::future::join_all(ids.iter().map(|id| committer.insert(delivery(id)))).await;
    for (id, outcome) in ids.iter().zip(&outcomes) {
        assert!(
            matches!(outcome, Ok(InsertOutcome::Inserted(_))),
            "{id}: {outcome:?}"
        );
        let row = db.journal().get_delivery(id).await.unwrap().unwrap();
        assert_eq!(
            row.payload,
            delivery(id).payload,
            "{id}: the body byte for byte"
        );
        assert_eq!(row.action.as_deref(), Some("created"));
        assert_eq!(row.installation_id, Some(42));
    }
    assert_eq!(
        commits_holding(&db, &ids[..1]).await.len(),
        1,
        "the first alone"
    );
    assert_eq!(
        commits_holding(&db, &ids[1..]).await.len(),
        1,
        "one commit for all that arrived while it was in flight"
    );
    assert_eq!(commits_holding(&db, &ids).await.len(), 2);
}

#[tokio::test]
async fn a_burst_larger_than_a_batch_is_split_and_fully_stored() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    let ids: Vec<String> = (0..MAX_BATCH * 3 + 5).map(|n| format!("b-{n}")).collect();
    let outcomes =
        futures_util::future::join_all(ids.iter().map(|id| committer.insert(delivery(id)))).await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Ok(InsertOutcome::Inserted(_))))
    );
    let commits = commits_holding(&db, &ids).await.len();
    assert!(
        (4..=8).contains(&commits),
        "{commits} commits for 4 batches' worth"
    );
}

#[tokio::test]
async fn copies_of_one_id_in_a_batch_store_one_row_and_the_rest_are_duplicates() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    committer.insert(delivery("before")).await.unwrap();
    let mut changed = delivery("twice");
    changed.payload = b"the second copy".to_vec();
    let (first, second, earlier) = tokio::join!(
        committer.insert(delivery("twice")),
        committer.insert(changed),
        committer.insert(delivery("before")),
    );
    assert!(matches!(first.unwrap(), InsertOutcome::Inserted(_)));
    assert_eq!(second.unwrap(), InsertOutcome::Duplicate);
    assert_eq!(earlier.unwrap(), InsertOutcome::Duplicate);
    let kept = db.journal().get_delivery("twice").await.unwrap().unwrap();
    assert_eq!(
        kept.payload,
        delivery("twice").payload,
        "the first copy's body"
    );
}

#[tokio::test]
async fn a_row_postgres_refuses_fails_alone_and_its_batch_is_stored() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    // Postgres text cannot hold a NUL, so this row is refused.
    let mut bad = delivery("bad");
    bad.action = Some("crea\0ted".to_owned());
    let (a, refused, b) = tokio::join!(
        committer.insert(delivery("a")),
        committer.insert(bad),
        committer.insert(delivery("b")),
    );
    assert!(matches!(a.unwrap(), InsertOutcome::Inserted(_)));
    assert!(matches!(b.unwrap(), InsertOutcome::Inserted(_)));
    let error = refused.unwrap_err().to_string();
    assert!(error.contains("database error"), "{error}");
    assert!(db.journal().get_delivery("bad").await.unwrap().is_none());
}

#[tokio::test]
async fn a_delivery_without_ids_is_refused_before_it_is_queued() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    let error = committer.insert(delivery("")).await.unwrap_err();
    assert!(error.to_string().contains("delivery id"), "{error}");
}

#[tokio::test]
async fn a_committer_whose_connection_was_cut_reconnects_and_stores_the_next_delivery() {
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    committer.insert(delivery("first")).await.unwrap();
    // Cut every other session of this database: the committers' too.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(db.pool())
    .await
    .unwrap();
    for id in ["second", "third"] {
        let outcome = committer.insert(delivery(id)).await.unwrap();
        assert!(matches!(outcome, InsertOutcome::Inserted(_)), "{id}");
    }
}

#[tokio::test]
async fn a_delivery_whose_request_gave_up_before_its_commit_is_not_stored() {
    use futures_util::FutureExt;
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    // A commit in flight, so the next delivery is queued rather than
    // committed by its own request.
    let mut kept = std::pin::pin!(committer.insert(delivery("kept")));
    assert!((&mut kept).now_or_never().is_none());
    // Queued, then abandoned before a committer ran (as ingress does when
    // its store timeout passes and it answers 503): GitHub delivers it again.
    assert!(
        committer
            .insert(delivery("gave-up"))
            .now_or_never()
            .is_none()
    );
    assert!(matches!(kept.await.unwrap(), InsertOutcome::Inserted(_)));
    // Whether the abandoned one still waits or a committer already passed
    // it over, this one is answered only after it has been.
    let after = committer.insert(delivery("after")).await.unwrap();
    assert!(matches!(after, InsertOutcome::Inserted(_)));
    assert!(
        db.journal()
            .get_delivery("gave-up")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_request_dropped_in_the_middle_of_its_own_commit_leaves_the_inbox_working() {
    use futures_util::FutureExt;
    let db = TestDatabase::fresh().await;
    let committer = db.journal().delivery_committer();
    // An open connection first, so the dropped request is mid-query, not
    // mid-connect, when it goes.
    committer.insert(delivery("warm")).await.unwrap();
    assert!(committer.insert(delivery("cut")).now_or_never().is_none());
    for id in ["next", "then"] {
        let outcome = committer.insert(delivery(id)).await.unwrap();
        assert!(matches!(outcome, InsertOutcome::Inserted(_)), "{id}");
    }
    // The cut one may have committed before it was dropped; GitHub's
    // redelivery of it is then a duplicate, never a second row.
    let again = committer.insert(delivery("cut")).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE delivery_id = 'cut'")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 1, "{again:?}");
}
