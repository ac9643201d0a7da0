//! `autoforge migrate`, run as the real binary: against an external server
//! named by `DATABASE_URL`, and with no database configured at all, where it
//! starts, migrates and stops the managed local cluster.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use autoforge_journal::testing::TestDatabase;
use secrecy::ExposeSecret;

const BIN: &str = env!("CARGO_BIN_EXE_autoforge");

fn migrate(state_dir: &Path, vars: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(["--state-dir"])
        .arg(state_dir)
        .arg("migrate")
        .env_clear()
        .env("HOME", state_dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars.iter().copied())
        .output()
        .expect("run autoforge migrate")
}

fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A state directory the unprivileged Postgres account can traverse.
fn state_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("af-migrate")
        .tempdir_in("/tmp")
        .expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

#[tokio::test]
async fn migrate_brings_an_external_database_up_to_date_and_is_idempotent() {
    let db = TestDatabase::fresh_unmigrated().await;
    assert!(
        !db.journal()
            .migrations_current()
            .await
            .expect("read migrations")
    );
    let state = state_dir();
    let url = db.url().expose_secret().to_owned();

    assert_ok(&migrate(state.path(), &[("DATABASE_URL", &url)]));
    assert!(
        db.journal()
            .migrations_current()
            .await
            .expect("read migrations")
    );

    let again = migrate(state.path(), &[("DATABASE_URL", &url)]);
    assert_ok(&again);
    assert!(String::from_utf8_lossy(&again.stdout).contains("migrations are current"));
    assert!(
        !state.path().join("postgres").exists(),
        "an external database must not start the managed cluster"
    );
}

#[tokio::test]
async fn migrate_without_a_database_url_uses_the_managed_cluster_and_stops_it() {
    let state = state_dir();
    let first = migrate(state.path(), &[]);
    assert_ok(&first);
    assert!(String::from_utf8_lossy(&first.stdout).contains("managed local PostgreSQL"));
    let cluster = state.path().join("postgres");
    assert!(
        cluster.join("data/PG_VERSION").is_file(),
        "cluster initialised under the state dir"
    );
    assert!(
        !cluster.join("data/postmaster.pid").exists(),
        "the managed server is stopped when the command ends"
    );

    // The schema survives: a second run finds it current, and so does a
    // direct look at the same cluster.
    assert_ok(&migrate(state.path(), &[]));
    let server = tokio::task::spawn_blocking({
        let cluster = cluster.clone();
        move || LocalPostgres::start(&cluster, LocalPgOptions::persistent())
    })
    .await
    .expect("join")
    .expect("restart the managed cluster");
    let journal = Journal::connect(&server.database_url())
        .await
        .expect("connect");
    assert!(journal.migrations_current().await.expect("read migrations"));
    journal.close().await;
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .expect("join")
        .expect("stop");
}

#[test]
fn migrate_with_an_unreachable_database_url_fails_without_echoing_it() {
    let state = state_dir();
    let url = "postgres://someone:pa55word-canary@127.0.0.1:1/nothing";
    let output = migrate(state.path(), &[("DATABASE_URL", url)]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(
        !stderr.contains("pa55word-canary"),
        "the URL's password leaked: {stderr}"
    );
}
