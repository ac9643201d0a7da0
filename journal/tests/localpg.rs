//! The managed local Postgres, each test with its own cluster in its own
//! temporary directory.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgError, LocalPgOptions, LocalPostgres};
use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, Uid, User};
use secrecy::ExposeSecret;
use tempfile::TempDir;

/// Persistent (fsync on) but stopped if a test panics half-way.
fn durable() -> LocalPgOptions {
    LocalPgOptions {
        stop_on_drop: true,
        ..LocalPgOptions::persistent()
    }
}

fn scratch() -> TempDir {
    // /tmp rather than $TMPDIR: the postgres user must be able to reach it.
    tempfile::Builder::new()
        .prefix("aft-localpg-")
        .tempdir_in("/tmp")
        .unwrap()
}

async fn write_marker(server: &LocalPostgres, value: &str) {
    let journal = Journal::connect(&server.database_url()).await.unwrap();
    journal.migrate().await.unwrap();
    journal
        .record_audit_event(None, "marker", &serde_json::json!({"value": value}))
        .await
        .unwrap();
    journal.close().await;
}

async fn read_markers(server: &LocalPostgres) -> Vec<String> {
    let journal = Journal::connect(&server.database_url()).await.unwrap();
    assert!(journal.migrations_current().await.unwrap());
    journal.close().await;
    let pool = pool(server).await;
    let rows: Vec<(serde_json::Value,)> =
        sqlx::query_as("SELECT detail FROM audit_events WHERE kind = 'marker' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    rows.into_iter()
        .map(|(detail,)| detail["value"].as_str().unwrap().to_owned())
        .collect()
}

async fn pool(server: &LocalPostgres) -> sqlx::PgPool {
    sqlx::PgPool::connect(server.database_url().expose_secret())
        .await
        .unwrap()
}

/// `kill` only queues the signal; wait until the process is gone or a
/// zombie, as it is by the time anyone restarts after a real crash.
async fn wait_until_dead(pid: i32) {
    for _ in 0..500 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let end = stat.rfind(')')?;
                stat[end + 1..].split_whitespace().next().map(str::to_owned)
            });
        if matches!(state.as_deref(), None | Some("Z" | "X")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("process {pid} survived SIGKILL for 5 s");
}

fn server_uid(pid: i32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn starts_socket_only_and_as_root_runs_the_server_as_postgres() {
    let dir = scratch();
    let root = dir.path().join("postgres");
    let server = tokio::task::spawn_blocking({
        let root = root.clone();
        move || LocalPostgres::start(&root, durable())
    })
    .await
    .unwrap()
    .unwrap();
    let expected_uid = if Uid::effective().is_root() {
        User::from_name("postgres").unwrap().unwrap().uid.as_raw()
    } else {
        Uid::effective().as_raw()
    };
    assert_eq!(server_uid(server.postmaster_pid()), expected_uid);
    assert_eq!(server.socket_dir(), root.join("run"));
    assert!(server.socket_dir().join(".s.PGSQL.5432").exists());
    let mode = std::fs::metadata(server.socket_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "only the owner may reach the socket");

    let journal = Journal::connect(&server.database_url()).await.unwrap();
    journal.ping().await.unwrap();
    journal.close().await;
    let pool = pool(&server).await;
    let (listen, fsync): (String, String) =
        sqlx::query_as("SELECT current_setting('listen_addresses'), current_setting('fsync')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((listen.as_str(), fsync.as_str()), ("", "on"));
    pool.close().await;
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn data_survives_a_restart() {
    // A clean stop checkpoints, so fsync does not matter here; skipping it
    // keeps initdb fast.
    let dir = scratch();
    let root = dir.path().join("postgres");
    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    write_marker(&server, "before restart").await;
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();

    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    assert_eq!(read_markers(&server).await, ["before restart"]);
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn recovers_after_the_server_was_killed() {
    let dir = scratch();
    let root = dir.path().join("postgres");
    let server = start(&root).await;
    write_marker(&server, "committed").await;
    kill(Pid::from_raw(server.postmaster_pid()), Signal::SIGKILL).unwrap();
    wait_until_dead(server.postmaster_pid()).await;
    // postmaster.pid is left behind, naming a dead (or zombie) process.
    assert!(root.join("data/postmaster.pid").exists());

    let restarted = start(&root).await;
    assert_ne!(restarted.postmaster_pid(), server.postmaster_pid());
    // Dropping the old handle must not stop the new server.
    drop(server);
    assert_eq!(read_markers(&restarted).await, ["committed"]);
    tokio::task::spawn_blocking(move || restarted.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_data_root_the_server_user_cannot_reach_is_a_clear_error() {
    if !Uid::effective().is_root() {
        // Only root hands the cluster to another user.
        return;
    }
    let dir = scratch();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The data root's own parent (the state directory) is opened to the
    // server's group; anything further up is the operator's to fix.
    let root = private.join("state").join("postgres");
    let error = tokio::task::spawn_blocking(move || LocalPostgres::start(&root, durable()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(error, LocalPgError::Unreachable { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("DATABASE_URL"), "{error}");
}

/// The URL without its password, and with a wrong one.
fn urls_without_the_password(server: &LocalPostgres) -> [String; 2] {
    let socket = server.socket_dir().display();
    [
        format!("postgres://postgres@localhost:5432/postgres?host={socket}"),
        format!("postgres://postgres:wrong@localhost:5432/postgres?host={socket}"),
    ]
}

#[tokio::test]
async fn only_the_generated_password_opens_the_cluster_and_nothing_is_trusted() {
    let dir = scratch();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let root = state.join("postgres");
    let server = start_with(&root, LocalPgOptions::ephemeral()).await;

    let hba = std::fs::read_to_string(root.join("data/pg_hba.conf")).unwrap();
    assert!(!hba.contains("trust"), "{hba}");
    assert!(
        hba.lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .all(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["local", "all", "all", "scram-sha-256"]),
        "{hba}"
    );
    let password_file = std::fs::metadata(root.join("password")).unwrap();
    assert_eq!(password_file.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&password_file),
        Uid::effective().as_raw()
    );
    let password = std::fs::read_to_string(root.join("password")).unwrap();
    let password = password.trim();
    assert_eq!(password.len(), 64);
    assert!(
        !format!("{server:?}").contains(password),
        "the handle's Debug shows the password"
    );
    assert!(server.database_url().expose_secret().contains(password));
    assert!(!root.join("initdb-password").exists());
    if Uid::effective().is_root() {
        // The state directory lets only the server's group through.
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o710);
    }

    for url in urls_without_the_password(&server) {
        let refused = sqlx::PgPool::connect(&url).await;
        assert!(refused.is_err(), "connected with {url}");
    }
    let pool = pool(&server).await;
    let (encryption, verifier): (String, bool) = sqlx::query_as(
        "SELECT current_setting('password_encryption'), \
         (SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = 'postgres')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((encryption.as_str(), verifier), ("scram-sha-256", true));
    pool.close().await;
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_trusting_cluster_from_an_earlier_version_gets_a_password_and_keeps_its_data() {
    let dir = scratch();
    let root = dir.path().join("postgres");
    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    write_marker(&server, "from the old version").await;
    // Turn it into what an earlier autoforge left: a superuser without a
    // password, a `trust` rule for the socket, no password file.
    let pool = pool(&server).await;
    sqlx::query("ALTER ROLE postgres PASSWORD NULL")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
    std::fs::write(root.join("data/pg_hba.conf"), "local all all trust\n").unwrap();
    std::fs::remove_file(root.join("password")).unwrap();

    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    assert_eq!(read_markers(&server).await, ["from the old version"]);
    let hba = std::fs::read_to_string(root.join("data/pg_hba.conf")).unwrap();
    assert!(!hba.contains("trust"), "{hba}");
    assert!(root.join("password").is_file());
    for url in urls_without_the_password(&server) {
        assert!(
            sqlx::PgPool::connect(&url).await.is_err(),
            "connected with {url}"
        );
    }
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_running_trusting_server_is_stopped_migrated_and_restarted() {
    let dir = scratch();
    let root = dir.path().join("postgres");
    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    write_marker(&server, "still running").await;
    let old_pid = server.postmaster_pid();
    std::fs::write(root.join("data/pg_hba.conf"), "local all all trust\n").unwrap();
    std::fs::remove_file(root.join("password")).unwrap();
    // The handle is forgotten, as when an earlier controller crashed and
    // left its server running.
    std::mem::forget(server);

    let server = start_with(&root, LocalPgOptions::ephemeral()).await;
    assert_ne!(server.postmaster_pid(), old_pid);
    assert_eq!(read_markers(&server).await, ["still running"]);
    for url in urls_without_the_password(&server) {
        assert!(
            sqlx::PgPool::connect(&url).await.is_err(),
            "connected with {url}"
        );
    }
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
}

async fn start(root: &Path) -> LocalPostgres {
    start_with(root, durable()).await
}

async fn start_with(root: &Path, options: LocalPgOptions) -> LocalPostgres {
    let root = root.to_path_buf();
    tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || LocalPostgres::start(&root, options)),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap()
}
