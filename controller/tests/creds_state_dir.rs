//! The state directory and everything the controller puts under it —
//! mirrors, worktrees, exports, the managed Postgres with its password — is
//! private to the controller's user (0700 directories, no file readable by
//! anyone else), even when the controller starts with a permissive umask.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use autoforge::config::DatabaseSource;
use autoforge::database::OpenDatabase;
use autoforge::workspace::{Workspaces, Worktree};
use nix::sys::stat::{Mode, umask};

// Its own binary: it changes the process umask, which would leak into
// tests running beside it.
#[path = "common/git.rs"]
mod git;
use git::Upstream;

/// Every path under `dir` that others could read, write or enter, with
/// its mode. Only `allowed` may keep group-execute (the managed cluster's
/// traversal right on the state directory).
fn exposed(dir: &Path, allowed: &Path, out: &mut Vec<(PathBuf, u32)>) {
    let meta = std::fs::symlink_metadata(dir).unwrap();
    let mode = meta.mode() & 0o777;
    let tolerated = if dir == allowed { 0o010 } else { 0 };
    if !meta.file_type().is_symlink() && mode & 0o077 & !tolerated != 0 {
        out.push((dir.to_owned(), mode));
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            exposed(&entry.unwrap().path(), allowed, out);
        }
    }
}

#[tokio::test]
async fn everything_under_the_state_directory_is_private_whatever_the_umask() {
    // The most permissive umask an operator could start us with.
    umask(Mode::empty());
    let scratch = tempfile::Builder::new()
        .prefix("aft-creds-state-")
        .tempdir_in("/tmp")
        .unwrap();
    let state = scratch.path().join("state");

    let database = OpenDatabase::open(
        &DatabaseSource::Managed {
            dir: state.join("postgres"),
        },
        autoforge_journal::DEFAULT_MAX_CONNECTIONS,
    )
    .await
    .unwrap();
    database.journal.ping().await.unwrap();

    let upstream = Upstream::new();
    let sha = upstream.commit("a.txt", "one\n", "first");
    let workspaces = Workspaces::open(&state).unwrap();
    let mirror = workspaces
        .mirror("octo", "widgets", &upstream.url())
        .await
        .unwrap();
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let worktree = Worktree::ensure(&mirror, autoforge_journal::testing::issue(5), &sha)
        .await
        .unwrap();
    std::fs::write(worktree.path().join("new.txt"), "agent output\n").unwrap();
    worktree.fingerprint().await.unwrap();
    let export = mirror.export(&sha).await.unwrap();

    assert!(state.join("postgres/password").is_file());
    assert!(worktree.path().join("a.txt").is_file());
    assert!(export.path().join("a.txt").is_file());
    let mut found = Vec::new();
    exposed(&state, &state, &mut found);
    database.shutdown().await;
    assert!(found.is_empty(), "reachable by others: {found:#?}");
    let mode = std::fs::metadata(&state).unwrap().mode() & 0o777;
    assert!(mode == 0o700 || mode == 0o710, "{mode:o}");
}
