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
    let root = private.join("postgres");
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
