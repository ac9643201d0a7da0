//! Leases and fencing.

use std::collections::HashSet;
use std::time::Duration;

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{ActiveRunScope, EffectKind, Journal, JournalError};
use serde_json::json;

use crate::{LONG, OWNER, intent, leased_run, new_run, transition};

#[tokio::test]
async fn two_connections_cannot_hold_one_lease() {
    let db = TestDatabase::fresh().await;
    let run = db.journal().create_run(&new_run(1)).await.unwrap();
    let replica_a = Journal::connect(db.url()).await.unwrap();
    let replica_b = Journal::connect(db.url()).await.unwrap();
    let (a, b) = tokio::join!(
        replica_a.acquire_lease_for(run.id, "a", LONG),
        replica_b.acquire_lease_for(run.id, "b", LONG)
    );
    let held: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
    assert_eq!(held.len(), 1, "exactly one replica holds the run: {held:?}");
    assert!(
        replica_a
            .acquire_lease(OWNER, LONG)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn concurrent_acquirers_each_get_a_different_run() {
    let db = TestDatabase::fresh().await;
    for issue in 1..=3 {
        db.journal().create_run(&new_run(issue)).await.unwrap();
    }
    let attempts = (0..8).map(|n| {
        let journal = db.journal().clone();
        tokio::spawn(async move { journal.acquire_lease(&format!("w{n}"), LONG).await })
    });
    let mut leased = Vec::new();
    for attempt in attempts {
        if let Some(lease) = attempt.await.unwrap().unwrap() {
            leased.push(lease.run_id);
        }
    }
    let distinct: HashSet<_> = leased.iter().collect();
    assert_eq!(leased.len(), 3, "{leased:?}");
    assert_eq!(distinct.len(), 3, "{leased:?}");
}

/// Lets a lease run out now, without sleeping through a real TTL (which
/// a loaded machine could overrun while the test is still using it).
async fn expire(journal: &Journal, lease: &autoforge_journal::Lease) {
    journal.renew_lease(lease, Duration::ZERO).await.unwrap();
}

#[tokio::test]
async fn expired_lease_is_taken_over_with_higher_fencing_token_and_old_holder_is_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, old) = leased_run(&db, 1).await;
    let (_, effects) = transition(
        journal,
        &old,
        0,
        "IMPLEMENT",
        &[intent(EffectKind::Push, "p")],
    )
    .await;
    assert!(
        journal
            .acquire_lease_for(run.id, "new", LONG)
            .await
            .unwrap()
            .is_none()
    );

    expire(journal, &old).await;
    let new = journal.acquire_lease("new", LONG).await.unwrap().unwrap();
    assert_eq!(new.run_id, run.id);
    assert!(new.fencing_token > old.fencing_token);

    let mut tx = journal.begin().await.unwrap();
    let refused = tx
        .commit_transition(&old, 1, "REVIEW", &json!({}), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(refused, JournalError::StaleLease { .. }),
        "{refused:?}"
    );
    drop(tx);
    let refused = journal.mark_attempted(&old, effects[0]).await.unwrap_err();
    assert!(
        matches!(refused, JournalError::StaleLease { .. }),
        "{refused:?}"
    );
    assert!(matches!(
        journal.renew_lease(&old, LONG).await.unwrap_err(),
        JournalError::StaleLease { .. }
    ));
    assert!(matches!(
        journal.release_lease(&old).await.unwrap_err(),
        JournalError::StaleLease { .. }
    ));

    // The new holder is unaffected and its writes carry its token.
    transition(journal, &new, 1, "REVIEW", &[]).await;
    assert_eq!(journal.mark_attempted(&new, effects[0]).await.unwrap(), 1);
    let effect = journal.get_effect(effects[0]).await.unwrap().unwrap();
    assert_eq!(effect.fencing_token, new.fencing_token);
}

#[tokio::test]
async fn begun_work_is_leased_before_runs_due_earlier_that_never_started() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let queued = journal.create_run(&new_run(1)).await.unwrap();
    // A released lease puts the run back in the queue in `wake_at` order…
    let (released, lease) = leased_run(&db, 2).await;
    journal.release_lease(&lease).await.unwrap();
    // …unless it left a write unfinished;
    let (unfinished, lease) = leased_run(&db, 3).await;
    transition(
        journal,
        &lease,
        0,
        "IMPLEMENT",
        &[intent(EffectKind::Push, "p")],
    )
    .await;
    journal.release_lease(&lease).await.unwrap();
    // and a run whose holder died (its lease ran out unreleased) comes first.
    let (abandoned, dead) = leased_run(&db, 4).await;
    expire(journal, &dead).await;

    let mut order = Vec::new();
    while let Some(lease) = journal.acquire_lease("new", LONG).await.unwrap() {
        order.push(lease.run_id);
    }
    assert_eq!(order, [abandoned.id, unfinished.id, queued.id, released.id]);
}

#[tokio::test]
async fn a_lease_that_expired_really_is_taken_over_by_time() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let run = journal.create_run(&new_run(1)).await.unwrap();
    let old = journal
        .acquire_lease_for(run.id, "old", Duration::from_millis(100))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let new = journal
        .acquire_lease_for(run.id, "new", LONG)
        .await
        .unwrap()
        .unwrap();
    assert!(new.fencing_token > old.fencing_token);
}

#[tokio::test]
async fn a_takeover_cannot_slip_in_while_a_transition_is_being_committed() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let run = journal.create_run(&new_run(1)).await.unwrap();
    let ttl = Duration::from_secs(2);
    let holder = journal
        .acquire_lease_for(run.id, "holder", ttl)
        .await
        .unwrap()
        .unwrap();
    let mut tx = journal.begin().await.unwrap();
    tx.commit_transition(
        &holder,
        0,
        "IMPLEMENT",
        &json!({}),
        &[intent(EffectKind::Push, "p")],
    )
    .await
    .unwrap();
    // The lease runs out while the transaction still holds the run row:
    // other replicas skip the locked row instead of taking it over.
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let replica = Journal::connect(db.url()).await.unwrap();
    assert!(
        replica
            .acquire_lease_for(run.id, "other", LONG)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        replica
            .acquire_lease("other", LONG)
            .await
            .unwrap()
            .is_none()
    );
    tx.commit().await.unwrap();

    let other = replica
        .acquire_lease_for(run.id, "other", LONG)
        .await
        .unwrap()
        .unwrap();
    assert!(other.fencing_token > holder.fencing_token);
    assert_eq!(replica.get_run(run.id).await.unwrap().unwrap().version, 1);
}

#[tokio::test]
async fn an_expired_lease_nobody_took_can_be_renewed() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    expire(journal, &lease).await;
    let mut tx = journal.begin().await.unwrap();
    let refused = tx
        .commit_transition(&lease, 0, "IMPLEMENT", &json!({}), &[])
        .await;
    assert!(
        matches!(refused, Err(JournalError::StaleLease { .. })),
        "expired leases write nothing"
    );
    drop(tx);
    let renewed = journal.renew_lease(&lease, LONG).await.unwrap();
    assert_eq!(renewed.fencing_token, lease.fencing_token);
    transition(journal, &renewed, 0, "IMPLEMENT", &[]).await;
}

#[tokio::test]
async fn a_released_run_is_leased_again_with_a_higher_token() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, first) = leased_run(&db, 1).await;
    journal.release_lease(&first).await.unwrap();
    let second = journal.acquire_lease("b", LONG).await.unwrap().unwrap();
    assert!(second.fencing_token > first.fencing_token);
}

#[tokio::test]
async fn runs_that_are_not_due_or_are_finished_are_not_picked() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (sleeping, lease) = leased_run(&db, 1).await;
    journal
        .schedule_wake(&lease, chrono::Utc::now() + chrono::Duration::hours(1))
        .await
        .unwrap();
    journal.release_lease(&lease).await.unwrap();

    let (_, finished) = leased_run(&db, 2).await;
    transition(journal, &finished, 0, "DONE", &[]).await;
    journal.release_lease(&finished).await.unwrap();

    assert!(journal.acquire_lease("w", LONG).await.unwrap().is_none());
    journal.wake_run(sleeping.id).await.unwrap();
    let woken = journal.acquire_lease("w", LONG).await.unwrap().unwrap();
    assert_eq!(woken.run_id, sleeping.id);
}

#[tokio::test]
async fn an_issue_or_epic_has_at_most_one_active_run() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let mut first = new_run(7);
    first.epic = Some(autoforge_journal::testing::issue(100));
    journal.create_run(&first).await.unwrap();

    let error = journal.create_run(&new_run(7)).await.unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::ActiveRunExists {
                scope: ActiveRunScope::Issue(n),
                ..
            } if n.get() == 7
        ),
        "{error:?}"
    );
    let mut same_epic = new_run(8);
    same_epic.epic = Some(autoforge_journal::testing::issue(100));
    let error = journal.create_run(&same_epic).await.unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::ActiveRunExists {
                scope: ActiveRunScope::Epic(n),
                ..
            } if n.get() == 100
        ),
        "{error:?}"
    );
    let mut other_repo = new_run(7);
    other_repo.repository = "acme/gadgets".to_owned();
    journal.create_run(&other_repo).await.unwrap();
}

#[tokio::test]
async fn a_finished_run_frees_its_issue() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 7).await;
    transition(journal, &lease, 0, "STOPPED", &[]).await;
    let again = journal.create_run(&new_run(7)).await.unwrap();
    assert!(again.active);
    let active = journal
        .active_run_for_issue("acme/widgets", autoforge_journal::testing::issue(7))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(active.id, again.id);
}

#[tokio::test]
async fn a_finished_run_is_leased_again_only_while_its_last_writes_are_pending() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    // The terminal transition commits with its status update still to send,
    // then the holder dies.
    let (_, ids) = transition(
        journal,
        &lease,
        0,
        "DONE",
        &[intent(
            EffectKind::EditStatusComment,
            "autoforge-status:run=1",
        )],
    )
    .await;
    expire(journal, &lease).await;

    let again = journal
        .acquire_lease("recoverer", LONG)
        .await
        .unwrap()
        .expect("the finished run with a pending write is due");
    assert_eq!(again.run_id, lease.run_id);
    journal
        .mark_observed(&again, ids[0], &json!({}))
        .await
        .unwrap();
    journal.release_lease(&again).await.unwrap();

    assert!(
        journal
            .acquire_lease("recoverer", LONG)
            .await
            .unwrap()
            .is_none(),
        "a finished run with every write settled is never leased"
    );
}
