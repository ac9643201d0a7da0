//! The effect stage machine.

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EffectKind, JournalError, MAX_ATTEMPTS, MAX_UNANSWERED_SENDS, Stage};
use serde_json::json;

use crate::{intent, leased_run, transition};

#[tokio::test]
async fn stages_move_forward_through_attempted_to_observed() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let (_, ids) = transition(
        journal,
        &lease,
        0,
        "IMPLEMENT",
        &[intent(EffectKind::Push, "p")],
    )
    .await;
    assert_eq!(journal.mark_attempted(&lease, ids[0]).await.unwrap(), 1);
    journal
        .mark_observed(&lease, ids[0], &json!({"sha": "abc"}))
        .await
        .unwrap();
    let effect = journal.get_effect(ids[0]).await.unwrap().unwrap();
    assert_eq!(effect.stage, Stage::Observed);
    assert_eq!(effect.observed, Some(json!({"sha": "abc"})));
    assert!(journal.pending_effects(run.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn illegal_stage_moves_are_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    let intents = [
        intent(EffectKind::PostComment, "a"),
        intent(EffectKind::PostComment, "b"),
    ];
    let (_, ids) = transition(journal, &lease, 0, "REVIEW", &intents).await;
    let (observed, conflicted) = (ids[0], ids[1]);
    journal
        .mark_observed(&lease, observed, &json!({}))
        .await
        .unwrap();
    journal
        .mark_conflict(&lease, conflicted, "two objects")
        .await
        .unwrap();

    let cases = [
        (
            journal.mark_attempted(&lease, observed).await,
            Stage::Observed,
            Stage::Attempted,
        ),
        (
            journal
                .mark_conflict(&lease, observed, "x")
                .await
                .map(|_| 0),
            Stage::Observed,
            Stage::Conflict,
        ),
        (
            journal
                .mark_observed(&lease, observed, &json!({}))
                .await
                .map(|_| 0),
            Stage::Observed,
            Stage::Observed,
        ),
        (
            journal.mark_attempted(&lease, conflicted).await,
            Stage::Conflict,
            Stage::Attempted,
        ),
        (
            journal
                .mark_observed(&lease, conflicted, &json!({}))
                .await
                .map(|_| 0),
            Stage::Conflict,
            Stage::Observed,
        ),
    ];
    for (result, from, to) in cases {
        match result {
            Err(JournalError::IllegalStage { from: f, to: t, .. }) => {
                assert_eq!((f, t), (from, to))
            }
            other => panic!("{from} -> {to} must be refused, got {other:?}"),
        }
    }
    let mut tx = journal.begin().await.unwrap();
    let error = tx.reopen_conflict(&lease, observed).await.unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::IllegalStage {
                from: Stage::Observed,
                to: Stage::Intended,
                ..
            }
        ),
        "{error:?}"
    );
}

/// A leased run with one `merge_pr` intent.
async fn one_merge_intent() -> (
    TestDatabase,
    autoforge_journal::Lease,
    Vec<autoforge_journal::EffectId>,
) {
    let db = TestDatabase::fresh().await;
    let (_, lease) = leased_run(&db, 1).await;
    let (_, ids) = transition(
        db.journal(),
        &lease,
        0,
        "MERGE",
        &[intent(EffectKind::MergePr, "m")],
    )
    .await;
    (db, lease, ids)
}

#[tokio::test]
async fn an_effect_is_attempted_at_most_twice() {
    let (db, lease, ids) = one_merge_intent().await;
    let journal = db.journal();
    assert_eq!(journal.mark_attempted(&lease, ids[0]).await.unwrap(), 1);
    assert_eq!(
        journal.mark_attempted(&lease, ids[0]).await.unwrap(),
        MAX_ATTEMPTS
    );
    let error = journal.mark_attempted(&lease, ids[0]).await.unwrap_err();
    assert!(
        matches!(error, JournalError::AttemptsExhausted { attempts: 2, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn sends_answered_with_an_error_do_not_spend_attempts_but_have_their_own_bound() {
    let (db, lease, ids) = one_merge_intent().await;
    let journal = db.journal();
    // Nothing sent yet: there is no send to call unanswered.
    let error = journal
        .mark_unanswered(&lease, ids[0], "502 Bad Gateway")
        .await
        .unwrap_err();
    assert!(
        matches!(error, JournalError::IllegalStage { .. }),
        "{error:?}"
    );
    for send in 1..=MAX_UNANSWERED_SENDS {
        assert_eq!(journal.mark_attempted(&lease, ids[0]).await.unwrap(), send);
        journal
            .mark_unanswered(&lease, ids[0], "502 Bad Gateway")
            .await
            .unwrap();
        // One send is recorded as unanswered once.
        assert!(
            journal
                .mark_unanswered(&lease, ids[0], "502 Bad Gateway")
                .await
                .is_err()
        );
    }
    let error = journal.mark_attempted(&lease, ids[0]).await.unwrap_err();
    assert!(
        matches!(error, JournalError::AttemptsExhausted { attempts, .. } if attempts == MAX_UNANSWERED_SENDS),
        "{error:?}"
    );
    let effect = journal.get_effect(ids[0]).await.unwrap().unwrap();
    assert_eq!((effect.attempts, effect.unanswered), (5, 5));
    assert_eq!(effect.reason.as_deref(), Some("502 Bad Gateway"));
    assert!(effect.sends_exhausted());
}

#[tokio::test]
async fn an_answered_send_after_unanswered_ones_still_leaves_one_attempt_in_doubt() {
    let (db, lease, ids) = one_merge_intent().await;
    let journal = db.journal();
    journal.mark_attempted(&lease, ids[0]).await.unwrap();
    journal
        .mark_unanswered(&lease, ids[0], "502 Bad Gateway")
        .await
        .unwrap();
    journal.mark_attempted(&lease, ids[0]).await.unwrap();
    journal.mark_attempted(&lease, ids[0]).await.unwrap();
    let error = journal.mark_attempted(&lease, ids[0]).await.unwrap_err();
    assert!(
        matches!(error, JournalError::AttemptsExhausted { attempts: 3, .. }),
        "{error:?}"
    );
    let effect = journal.get_effect(ids[0]).await.unwrap().unwrap();
    assert_eq!(effect.attempts - effect.unanswered, MAX_ATTEMPTS);
}

#[tokio::test]
async fn reopening_a_conflict_is_explicit_and_audited() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let (_, ids) = transition(
        journal,
        &lease,
        0,
        "FIX",
        &[intent(EffectKind::CreateIssue, "f")],
    )
    .await;
    journal.mark_attempted(&lease, ids[0]).await.unwrap();
    journal.mark_attempted(&lease, ids[0]).await.unwrap();
    journal
        .mark_conflict(&lease, ids[0], "422 from GitHub")
        .await
        .unwrap();

    let mut tx = journal.begin().await.unwrap();
    tx.reopen_conflict(&lease, ids[0]).await.unwrap();
    tx.commit().await.unwrap();

    let effect = journal.get_effect(ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (effect.stage, effect.attempts, effect.reason),
        (Stage::Intended, 0, None)
    );
    let audit = journal.list_audit_events(run.id).await.unwrap();
    let reopened = audit.iter().find(|e| e.kind == "effect_reopened").unwrap();
    assert_eq!(reopened.detail["previous_reason"], json!("422 from GitHub"));
    assert_eq!(reopened.detail["previous_attempts"], json!(2));
}

#[tokio::test]
async fn the_database_refuses_a_backwards_move_even_from_raw_sql() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    let (_, ids) = transition(
        journal,
        &lease,
        0,
        "IMPLEMENT",
        &[intent(EffectKind::Push, "p")],
    )
    .await;
    journal
        .mark_observed(&lease, ids[0], &json!({}))
        .await
        .unwrap();
    let moved = sqlx::query("UPDATE effects SET stage = 'intended' WHERE id = $1")
        .bind(ids[0].0)
        .execute(db.pool())
        .await;
    assert!(moved.is_err());
    let edited = sqlx::query("UPDATE effects SET payload = 'x' WHERE id = $1")
        .bind(ids[0].0)
        .execute(db.pool())
        .await;
    assert!(edited.is_err(), "observed effects are immutable");
}

#[tokio::test]
async fn pending_effects_come_in_commit_order_and_skip_finished_ones() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let first = [
        intent(EffectKind::CreateIssue, "a"),
        intent(EffectKind::AppendIssueMarkers, "b"),
    ];
    let (v1, ids1) = transition(journal, &lease, 0, "FIX", &first).await;
    let (_, ids2) = transition(journal, &lease, v1, "FIX", &[intent(EffectKind::Push, "c")]).await;
    journal
        .mark_observed(&lease, ids1[0], &json!({}))
        .await
        .unwrap();
    let pending: Vec<_> = journal
        .pending_effects(run.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.id, e.identity))
        .collect();
    assert_eq!(
        pending,
        vec![(ids1[1], "b".to_owned()), (ids2[0], "c".to_owned())]
    );
}

#[tokio::test]
async fn an_effect_of_another_run_cannot_be_moved_with_this_lease() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease_a) = leased_run(&db, 1).await;
    let (_, lease_b) = leased_run(&db, 2).await;
    let (_, ids) = transition(
        journal,
        &lease_a,
        0,
        "IMPLEMENT",
        &[intent(EffectKind::Push, "p")],
    )
    .await;
    let error = journal.mark_attempted(&lease_b, ids[0]).await.unwrap_err();
    assert!(matches!(error, JournalError::InvalidInput(_)), "{error:?}");
    let missing = journal
        .mark_attempted(&lease_a, autoforge_journal::EffectId(i64::MAX))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, JournalError::NotFound { .. }),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_reconcile_can_settle_an_intent_without_sending() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    let intents = [
        intent(EffectKind::CreatePr, "present"),
        intent(EffectKind::CreatePr, "foreign"),
    ];
    let (_, ids) = transition(journal, &lease, 0, "IMPLEMENT", &intents).await;
    journal
        .mark_observed(&lease, ids[0], &json!({"pr": 5}))
        .await
        .unwrap();
    journal
        .mark_conflict(&lease, ids[1], "a foreign marked PR")
        .await
        .unwrap();
    let present = journal.get_effect(ids[0]).await.unwrap().unwrap();
    let foreign = journal.get_effect(ids[1]).await.unwrap().unwrap();
    assert_eq!((present.stage, present.attempts), (Stage::Observed, 0));
    assert_eq!(foreign.stage, Stage::Conflict);
    assert_eq!(foreign.reason.as_deref(), Some("a foreign marked PR"));
}

#[tokio::test]
async fn an_oversized_batch_of_intents_is_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let intents = vec![
        intent(EffectKind::AddReaction, "r");
        autoforge_journal::MAX_EFFECTS_PER_TRANSITION + 1
    ];
    let mut tx = journal.begin().await.unwrap();
    let error = tx
        .commit_transition(&lease, 0, "REVIEW", &json!({}), &intents)
        .await
        .unwrap_err();
    assert!(matches!(error, JournalError::InvalidInput(_)), "{error:?}");
    drop(tx);
    assert_eq!(journal.get_run(run.id).await.unwrap().unwrap().version, 0);
}

#[tokio::test]
async fn a_released_or_taken_over_lease_is_refused_as_stale_on_every_stage_move() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let (_, ids) = transition(
        journal,
        &lease,
        0,
        "REVIEW",
        &[intent(EffectKind::PostComment, "c")],
    )
    .await;
    journal.release_lease(&lease).await.unwrap();
    // Released: the run has no lease owner at all.
    for error in [
        journal.mark_attempted(&lease, ids[0]).await.unwrap_err(),
        journal
            .mark_observed(&lease, ids[0], &json!({}))
            .await
            .unwrap_err(),
        journal
            .mark_conflict(&lease, ids[0], "x")
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(error, JournalError::StaleLease { .. }),
            "{error:?}"
        );
    }
    // Taken over by another worker: a newer token.
    journal
        .acquire_lease_for(run.id, "other", std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .expect("takeover");
    let error = journal.mark_attempted(&lease, ids[0]).await.unwrap_err();
    assert!(
        matches!(error, JournalError::StaleLease { .. }),
        "{error:?}"
    );
}
