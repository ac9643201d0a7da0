//! Migrations and the schema's own guarantees.

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EffectKind, Journal, JournalError, TERMINAL_PHASES, is_terminal};
use secrecy::SecretString;

use crate::{leased_run, new_run, transition};

#[tokio::test]
async fn migrations_apply_on_an_empty_database_and_are_idempotent() {
    let db = TestDatabase::fresh_unmigrated().await;
    let journal = db.journal();
    assert!(!journal.migrations_current().await.unwrap());
    journal.migrate().await.unwrap();
    assert!(journal.migrations_current().await.unwrap());
    journal.migrate().await.unwrap();
    assert!(journal.migrations_current().await.unwrap());
    journal.ping().await.unwrap();
}

#[tokio::test]
async fn a_migration_unknown_to_this_build_makes_the_schema_not_current() {
    let db = TestDatabase::fresh().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from the future', true, '\\x00', 0)",
    )
    .execute(db.pool())
    .await
    .unwrap();
    assert!(!db.journal().migrations_current().await.unwrap());
}

#[tokio::test]
async fn terminal_phases_in_rust_match_the_schema() {
    let db = TestDatabase::fresh().await;
    let phases = [
        "INITIALIZING",
        "IMPLEMENT",
        "REVIEW",
        "FIX",
        "READY_FOR_MERGE",
        "MERGE",
        "UPDATE_EPIC",
        "DONE",
        "BLOCKED",
        "FAILED",
        "STOPPED",
    ];
    for (issue, phase) in (1..).zip(phases) {
        let mut run = new_run(issue);
        run.phase = phase.to_owned();
        let stored = db.journal().create_run(&run).await.unwrap();
        assert_eq!(stored.active, !is_terminal(phase), "{phase}");
    }
    assert_eq!(TERMINAL_PHASES.len(), 3);
}

#[tokio::test]
async fn every_effect_kind_is_accepted_and_an_unknown_one_is_refused() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let (run, lease) = leased_run(&db, 1).await;
    let intents: Vec<_> = EffectKind::ALL
        .iter()
        .map(|kind| crate::intent(*kind, kind.as_str()))
        .collect();
    let (_, ids) = transition(journal, &lease, run.version, "IMPLEMENT", &intents).await;
    assert_eq!(ids.len(), EffectKind::ALL.len());
    let stored: Vec<_> = journal
        .list_effects(run.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(stored, EffectKind::ALL);

    let refused = sqlx::query(
        "INSERT INTO effects (run_id, phase_entry, position, kind, identity, target, \
         precondition, payload, completion, fencing_token) \
         VALUES ($1, 99, 0, 'delete_repo', 'x', 'y', '{}', '', '{}', 1)",
    )
    .bind(run.id.0)
    .execute(db.pool())
    .await;
    assert!(
        refused.is_err(),
        "the CHECK constraint must refuse unknown kinds"
    );
}

#[tokio::test]
async fn an_invalid_url_is_refused_without_echoing_the_password() {
    let url = SecretString::from("postgres://me:hunter2@db:notaport/x".to_owned());
    let error = Journal::connect(&url).await.unwrap_err();
    assert!(matches!(error, JournalError::InvalidUrl(_)), "{error:?}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
}

/// The fixture helpers of the migration test: a database stopped at the
/// previous version takes another's rows with their bytes and ids, leaves
/// out what the newest migration added, and continues its ids after
/// them; migrating it then keeps every row.
#[tokio::test]
async fn rows_copied_into_a_database_at_the_previous_version_survive_its_migration() {
    let versions = autoforge_journal::testing::migration_versions();
    let [.., previous, _newest] = versions[..] else {
        panic!("at least two migrations: {versions:?}");
    };
    let source = TestDatabase::fresh().await;
    let (run, lease) = leased_run(&source, 7).await;
    transition(
        source.journal(),
        &lease,
        run.version,
        "IMPLEMENT",
        &[crate::intent(EffectKind::PostComment, "c-1")],
    )
    .await;
    let before = source.journal().list_effects(run.id).await.unwrap();

    let old = TestDatabase::fresh_migrated_to(previous).await;
    assert!(!old.journal().migrations_current().await.unwrap());
    let copied = source.copy_rows_to(&old).await.unwrap();
    assert!(copied >= 2, "the run and its effect at least: {copied}");
    old.journal().migrate().await.unwrap();
    assert!(old.journal().migrations_current().await.unwrap());

    let after = old.journal().list_effects(run.id).await.unwrap();
    assert_eq!(after, before, "the effect rows, byte for byte");
    let moved = old.journal().get_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (moved.phase.as_str(), &moved.state),
        (
            "IMPLEMENT",
            &source
                .journal()
                .get_run(run.id)
                .await
                .unwrap()
                .unwrap()
                .state
        )
    );
    // A new row gets an id after the copied ones, not one of theirs.
    let next = old.journal().create_run(&crate::new_run(8)).await.unwrap();
    assert!(next.id.0 > run.id.0, "{:?} after {:?}", next.id, run.id);
}

#[tokio::test]
async fn hot_large_columns_are_compressed_with_lz4_where_the_server_has_it() {
    let db = TestDatabase::fresh().await;
    // Whether this server was built with lz4 decides what the migration did.
    let has_lz4 = sqlx::query("CREATE TEMP TABLE lz4_probe (v text COMPRESSION lz4)")
        .execute(db.pool())
        .await
        .is_ok();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attname::text, a.attcompression::text \
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
         WHERE (c.relname, a.attname) IN (('deliveries', 'payload'), ('runs', 'state'), \
             ('effects', 'payload'), ('run_events', 'event')) \
         ORDER BY 1, 2",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    assert_eq!(columns.len(), 4, "{columns:?}");
    let expected = if has_lz4 { "l" } else { "" };
    for (table, column, compression) in &columns {
        assert_eq!(compression, expected, "{table}.{column}");
    }
    // A stored payload really is compressed with it.
    let delivery = autoforge_journal::NewDelivery {
        delivery_id: "lz4-probe".to_owned(),
        event: "issue_comment".to_owned(),
        action: Some("created".to_owned()),
        repository: Some("octo/widgets".to_owned()),
        installation_id: Some(1),
        payload: "{\"body\":\""
            .bytes()
            .chain(std::iter::repeat_n(b'x', 12_000))
            .collect(),
    };
    db.journal().insert_delivery(&delivery).await.unwrap();
    let method: Option<String> = sqlx::query_scalar(
        "SELECT pg_column_compression(payload) FROM deliveries WHERE delivery_id = 'lz4-probe'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(
        method.as_deref(),
        Some(if has_lz4 { "lz4" } else { "pglz" })
    );
}
