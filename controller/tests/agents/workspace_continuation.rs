//! Work kept across launches, against real git: a writing phase continues
//! from commits and files an earlier launch left on its start commit, a
//! tree it cannot build on is reset with its candidate kept on a local ref,
//! and a tree a read-only launch changed is reset and the reset reported
//! to the next launch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::workspace::{CommitSha, Mirror, WorkMode, Workspaces, Worktree, kept_ref};
use tempfile::TempDir;

use crate::common;
use common::{Upstream, git};

async fn worktree_at_first_of_two() -> (Upstream, TempDir, Mirror, Worktree, CommitSha, CommitSha) {
    let upstream = Upstream::new();
    let state = tempfile::tempdir().unwrap();
    let workspaces = Workspaces::open(state.path()).unwrap();
    let mirror = workspaces
        .mirror("octo", "widgets", &upstream.url())
        .await
        .unwrap();
    let first = upstream.commit("a.txt", "one\n", "first");
    let second = upstream.commit("a.txt", "two\n", "second");
    mirror
        .fetch_shas(&[first.clone(), second.clone()], None)
        .await
        .unwrap();
    let worktree = Worktree::ensure(&mirror, autoforge_journal::testing::issue(4), &first)
        .await
        .unwrap();
    (upstream, state, mirror, worktree, first, second)
}

/// An agent's commit on top of the worktree's HEAD.
fn agent_commit(worktree: &Worktree, file: &str) -> CommitSha {
    std::fs::write(worktree.path().join(file), "agent work\n").unwrap();
    git(worktree.path(), &["add", file]);
    git(worktree.path(), &["commit", "-q", "-m", "agent work"]);
    CommitSha::parse(&git(worktree.path(), &["rev-parse", "HEAD"])).unwrap()
}

#[tokio::test]
async fn a_writing_phase_keeps_commits_and_uncommitted_files_built_on_its_start() {
    let (_up, _state, _mirror, worktree, first, _) = worktree_at_first_of_two().await;
    let candidate = agent_commit(&worktree, "feature.txt");
    std::fs::write(worktree.path().join("notes.txt"), "half done\n").unwrap();

    let prepared = worktree.prepare(&first, WorkMode::Continue).await.unwrap();

    assert_eq!(prepared.head, candidate);
    assert_eq!(prepared.reset, None);
    assert_eq!(prepared.change_count, 1);
    assert_eq!(prepared.changes, ["?? notes.txt"]);
    assert!(worktree.path().join("notes.txt").exists(), "left in place");
}

#[tokio::test]
async fn a_head_not_built_on_the_start_is_reset_and_the_candidate_stays_on_a_ref() {
    let (_up, _state, mirror, worktree, _, second) = worktree_at_first_of_two().await;
    let candidate = agent_commit(&worktree, "feature.txt");
    assert_eq!(
        worktree.keep_candidate().await.unwrap(),
        Some(candidate.clone())
    );

    let prepared = worktree.prepare(&second, WorkMode::Continue).await.unwrap();

    assert_eq!(worktree.head().await.unwrap(), second);
    let reason = prepared.reset.expect("a reset is reported");
    assert!(
        reason.contains(&format!("its HEAD `{candidate}` was not built on")),
        "{reason}"
    );
    assert!(!worktree.path().join("feature.txt").exists());
    assert_eq!(
        worktree.kept_candidate().await.unwrap(),
        Some(candidate.clone())
    );
    let kept = git(
        mirror.path(),
        &["rev-parse", &kept_ref(autoforge_journal::testing::issue(4))],
    );
    assert_eq!(kept, candidate.as_str());
}

#[tokio::test]
async fn a_tree_a_read_only_launch_changed_is_reset_and_the_next_launch_is_told_once() {
    let (_up, _state, _mirror, worktree, first, _) = worktree_at_first_of_two().await;
    assert!(
        !worktree.restore_after_read_only(&first).await.unwrap(),
        "clean: nothing to do"
    );
    std::fs::write(
        worktree.path().join("scribble.txt"),
        "a reviewer was here\n",
    )
    .unwrap();

    assert!(worktree.restore_after_read_only(&first).await.unwrap());
    assert!(!worktree.path().join("scribble.txt").exists());

    let next = worktree.prepare(&first, WorkMode::ReadOnly).await.unwrap();
    let reason = next.reset.expect("the next launch hears of the reset");
    assert!(
        reason.contains("A read-only launch (a reviewer) changed the worktree (1 changed paths)"),
        "{reason}"
    );
    let after = worktree.prepare(&first, WorkMode::ReadOnly).await.unwrap();
    assert_eq!(after.reset, None, "the note is told once");
}

#[tokio::test]
async fn a_read_only_phase_never_keeps_changes() {
    let (_up, _state, _mirror, worktree, first, _) = worktree_at_first_of_two().await;
    std::fs::write(worktree.path().join("a.txt"), "edited\n").unwrap();

    let prepared = worktree.prepare(&first, WorkMode::ReadOnly).await.unwrap();

    let reason = prepared.reset.expect("reset");
    assert!(reason.contains("it had 1 changed paths"), "{reason}");
    assert_eq!(
        std::fs::read_to_string(worktree.path().join("a.txt")).unwrap(),
        "one\n"
    );
}

/// A launch killed while git held the index lock (SIGKILL of the controller
/// mid-commit) leaves `index.lock` behind; the next launch's preparation
/// removes it, so its own `git add` works instead of failing every relaunch.
#[tokio::test]
async fn a_stale_index_lock_of_a_killed_launch_is_removed_before_the_next_launch() {
    let (_up, _state, _mirror, worktree, first, _) = worktree_at_first_of_two().await;
    let admin = git(worktree.path(), &["rev-parse", "--absolute-git-dir"]);
    let lock = std::path::Path::new(&admin).join("index.lock");
    std::fs::write(&lock, b"").unwrap();

    let prepared = worktree.prepare(&first, WorkMode::Continue).await.unwrap();

    assert_eq!(prepared.head, first);
    assert!(!lock.exists(), "the stale lock is gone");
    agent_commit(&worktree, "feature.txt");
}
