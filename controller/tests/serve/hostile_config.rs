//! A broken configuration stops `autoforge serve` before anything starts:
//! the message names the key, the exit is non-zero, no listener was bound
//! (no "listening" line) and the database was not touched (not even
//! migrated, so no row anywhere).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use autoforge_journal::testing::TestDatabase;
use secrecy::ExposeSecret;

use crate::common::{WEBHOOK_SECRET, serve_command};

/// One broken configuration: the file, extra environment, and what the
/// message must name.
struct Broken {
    toml: &'static str,
    env: &'static [(&'static str, &'static str)],
    names: &'static [&'static str],
}

const BROKEN: &[Broken] = &[
    Broken {
        toml: "[github]\nbogus = 1\n",
        env: &[],
        names: &["github.bogus", "unknown key"],
    },
    Broken {
        toml: "[poll]\ninterval_seconds = \"often\"\n",
        env: &[],
        names: &["poll.interval_seconds"],
    },
    Broken {
        toml: "",
        env: &[("AUTOFORGE_DRIVER_CONCURRENCY", "lots")],
        names: &["driver.concurrency", "AUTOFORGE_DRIVER_CONCURRENCY"],
    },
    Broken {
        toml: "[webhook]\nmax_body_bytes = 999999999\n",
        env: &[],
        names: &["webhook.max_body_bytes"],
    },
    Broken {
        toml: "[agents.roles]\nimplement = \"ghost\"\n",
        env: &[],
        names: &["ghost"],
    },
    Broken {
        toml: "[merge]\nmode = \"yolo\"\n",
        env: &[],
        names: &["merge.mode"],
    },
];

/// Whether the database is still as created: no migration applied, so no
/// table (and no row) of the journal exists.
async fn untouched(db: &TestDatabase) -> bool {
    let journal = db.journal();
    !journal.migrations_current().await.unwrap()
        && journal
            .list_runs(autoforge_journal::RunFilter::All, 1)
            .await
            .is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_broken_configurations_name_the_key_exit_non_zero_and_start_nothing() {
    let db = TestDatabase::fresh_unmigrated().await;
    assert!(untouched(&db).await);
    for broken in BROKEN {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("autoforge.toml"), broken.toml).unwrap();
        let mut command = serve_command(state.path());
        command
            .env("DATABASE_URL", db.url().expose_secret())
            .env("AUTOFORGE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("AUTOFORGE_SERVER_LISTEN", "127.0.0.1:0")
            .env("AUTOFORGE_SERVER_ADMIN_LISTEN", "127.0.0.1:0")
            .envs(broken.env.iter().copied())
            .stderr(Stdio::piped());
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .expect("run autoforge serve");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{}: {stderr}", broken.toml);
        assert!(
            output.status.code().is_some(),
            "exited, not killed: {stderr}"
        );
        for name in broken.names {
            assert!(stderr.contains(name), "{name:?} not named: {stderr}");
        }
        assert!(
            !stdout.contains("listening"),
            "a listener was bound: {stdout}"
        );
        assert!(
            untouched(&db).await,
            "{}: the database was touched",
            broken.toml
        );
    }
}
