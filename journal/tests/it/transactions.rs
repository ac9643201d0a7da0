//! Transitions and transaction boundaries.

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EffectKind, JournalError, NewCommandDecision, Stage};
use serde_json::json;

use crate::{intent, leased_run, new_run};

#[tokio::test]
async fn a_transition_stores_state_intents_and_an_audit_event_together() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let intents = [
        intent(EffectKind::Push, "refs/heads/autoforge/1"),
        intent(EffectKind::CreatePr, "ai-implementation"),
        intent(EffectKind::EditStatusComment, "autoforge-status"),
    ];
    let mut tx = journal.begin().await.unwrap();
    let (version, ids) = tx
        .commit_transition(&lease, 0, "REVIEW", &json!({"round": 1}), &intents)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!((version, ids.len()), (1, 3));
    let stored = journal.get_run(run.id).await.unwrap().unwrap();
    assert_eq!((stored.phase.as_str(), stored.version), ("REVIEW", 1));
    assert_eq!(stored.state, json!({"round": 1}));
    let effects = journal.pending_effects(run.id).await.unwrap();
    let got: Vec<_> = effects
        .iter()
        .map(|e| (e.id, e.position, e.phase_entry, e.stage))
        .collect();
    assert_eq!(
        got,
        vec![
            (ids[0], 0, 1, Stage::Intended),
            (ids[1], 1, 1, Stage::Intended),
            (ids[2], 2, 1, Stage::Intended),
        ]
    );
    assert_eq!(effects[0].payload, intents[0].payload);
    assert!(
        effects
            .iter()
            .all(|e| e.fencing_token == lease.fencing_token)
    );
    let audit = journal.list_audit_events(run.id).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].detail["from"], json!("INITIALIZING"));
    assert_eq!(audit[0].detail["to"], json!("REVIEW"));
    assert_eq!(audit[0].detail["effects"], json!(3));
}

#[tokio::test]
async fn a_stale_version_is_refused_and_writes_nothing() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    crate::transition(journal, &lease, 0, "IMPLEMENT", &[]).await;
    let mut tx = journal.begin().await.unwrap();
    let error = tx
        .commit_transition(
            &lease,
            0,
            "REVIEW",
            &json!({}),
            &[intent(EffectKind::Push, "p")],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::VersionConflict {
                expected: 0,
                actual: 1,
                ..
            }
        ),
        "{error:?}"
    );
    tx.commit().await.unwrap();
    assert!(journal.list_effects(run.id).await.unwrap().is_empty());
    assert_eq!(
        journal.get_run(run.id).await.unwrap().unwrap().phase,
        "IMPLEMENT"
    );
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_nothing() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let before = journal.get_run(run.id).await.unwrap().unwrap();

    let decision = NewCommandDecision {
        run_id: Some(run.id),
        comment_id: 9,
        actor: "octocat".to_owned(),
        command: "retry".to_owned(),
        accepted: true,
        reason: "operator".to_owned(),
    };
    {
        let mut tx = journal.begin().await.unwrap();
        tx.commit_transition(
            &lease,
            0,
            "IMPLEMENT",
            &json!({"x": 1}),
            &[intent(EffectKind::Push, "p")],
        )
        .await
        .unwrap();
        tx.record_command_decision(&decision).await.unwrap();
        tx.set_scope(&lease, autoforge_journal::testing::issue(2), None)
            .await
            .unwrap();
        // Dropped without commit.
    }
    let mut tx = journal.begin().await.unwrap();
    tx.commit_transition(
        &lease,
        0,
        "IMPLEMENT",
        &json!({}),
        &[intent(EffectKind::Push, "q")],
    )
    .await
    .unwrap();
    tx.record_audit_event(Some(run.id), "note", &json!({}))
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert_eq!(journal.get_run(run.id).await.unwrap().unwrap(), before);
    assert!(journal.list_effects(run.id).await.unwrap().is_empty());
    assert!(journal.list_audit_events(run.id).await.unwrap().is_empty());
    assert!(
        journal
            .list_command_decisions(run.id)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn moving_to_an_issue_with_an_active_run_is_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, lease) = leased_run(&db, 1).await;
    journal.create_run(&new_run(2)).await.unwrap();
    let mut tx = journal.begin().await.unwrap();
    let error = tx
        .set_scope(&lease, autoforge_journal::testing::issue(2), None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, JournalError::ActiveRunExists { .. }),
        "{error:?}"
    );
    let mut tx = journal.begin().await.unwrap();
    tx.set_scope(&lease, autoforge_journal::testing::issue(3), None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let run = journal
        .active_run_for_issue("acme/widgets", autoforge_journal::testing::issue(3))
        .await
        .unwrap();
    assert_eq!(run.map(|r| r.id), Some(lease.run_id));
}

#[tokio::test]
async fn an_epic_run_moving_to_its_child_holds_the_epic_against_a_second_run() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (_, first) = leased_run(&db, 9).await;
    let mut tx = journal.begin().await.unwrap();
    tx.set_scope(
        &first,
        autoforge_journal::testing::issue(5),
        Some(autoforge_journal::testing::issue(9)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let moved = journal.get_run(first.run_id).await.unwrap().unwrap();
    assert_eq!(
        (moved.current_issue.get(), moved.epic.map(|e| e.get())),
        (5, Some(9))
    );

    // Another run (on issue 6) cannot join the same EPIC while it is active.
    let (_, second) = leased_run(&db, 6).await;
    let mut tx = journal.begin().await.unwrap();
    let error = tx
        .set_scope(
            &second,
            autoforge_journal::testing::issue(6),
            Some(autoforge_journal::testing::issue(9)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::ActiveRunExists {
                scope: autoforge_journal::ActiveRunScope::Epic(n),
                ..
            } if n.get() == 9
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_pool_of_the_configured_size_never_opens_more_connections() {
    let db = TestDatabase::fresh().await;
    let journal = autoforge_journal::Journal::connect_with_pool(db.url(), 1)
        .await
        .unwrap();
    assert_eq!(journal.max_connections(), 1);
    let first = journal.begin().await.unwrap();
    let second = tokio::time::timeout(std::time::Duration::from_millis(500), journal.begin()).await;
    assert!(
        second.is_err(),
        "a second connection while the only one is held"
    );
    drop(first);
    let second = tokio::time::timeout(std::time::Duration::from_secs(5), journal.begin()).await;
    assert!(
        matches!(second, Ok(Ok(_))),
        "the returned connection serves the next"
    );
    assert_eq!(
        autoforge_journal::Journal::connect(db.url())
            .await
            .unwrap()
            .max_connections(),
        autoforge_journal::DEFAULT_MAX_CONNECTIONS
    );
}
