//! The crash matrix through the driver (docs/reliability.md): a child
//! process (this test binary, re-run on one ignored test) drives the due
//! runs with `AUTOFORGE_CRASH_AT` set and aborts at the named window; the
//! parent then lets the dead holder's lease expire, drives the runs with a
//! fresh driver, and checks that GitHub holds every intended object exactly
//! once and that the run reached the phase a crash-free run reaches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use autoforge::driver::{Driver, DriverConfig, RepositoryAccess};
use autoforge::github::{GitHubAuth, GitHubClient};
use autoforge::machine::MergeMode;
use autoforge_journal::{Journal, RunId, Stage};
use common::{NAME, OWNER, REPOSITORY, World, agent_runtime, git_access};
use secrecy::{ExposeSecret, SecretString};

const CHILD: &str = "DRIVER_CRASH_CHILD";
/// The dead child's lease must expire before the parent can recover. Long
/// enough that a child starved of CPU on a loaded machine still renews it
/// before its crash point (at 800 ms such a child lost the run instead).
const CHILD_LEASE: Duration = Duration::from_secs(3);

/// The windows of the write-ahead protocol the driver passes for every
/// effect it sends (`after_observed` only exists where the run awaits its
/// effects; a merge awaits its own read-back instead).
const POINTS: [&str; 4] = [
    "after_intent",
    "after_attempted",
    "after_send",
    "after_read_back",
];

#[tokio::test]
#[ignore = "started by the crash matrix tests of this file"]
async fn crash_child_drives_due_runs() {
    let var = |name: &str| std::env::var(format!("{CHILD}_{name}")).expect(name);
    let journal = Journal::connect(&SecretString::from(var("DB")))
        .await
        .unwrap();
    let api = GitHubClient::new(
        &var("HUB"),
        GitHubAuth::Token(SecretString::from(var("TOKEN"))),
    )
    .unwrap()
    .installation(0)
    .unwrap();
    let api_for_child = api.clone();
    let access = RepositoryAccess {
        api,
        repo: REPOSITORY.parse().unwrap(),
        login: common::OWNER.into(),
        html_base: "https://github.com".into(),
        git: None,
    };
    let mut config = DriverConfig {
        lease_ttl: CHILD_LEASE,
        ..DriverConfig::new("doomed-child")
    };
    let merging = std::env::var(format!("{CHILD}_AUTO_MERGE")).is_ok();
    if merging {
        config.settings.merge_mode = MergeMode::Auto;
    }
    // With a state directory the child also runs agents, validates and pushes.
    let driver = match std::env::var(format!("{CHILD}_STATE")) {
        Ok(state_dir) => {
            let access = git_access(api_for_child, var("GIT"), SecretString::from(var("TOKEN")));
            Driver::new(config, journal, [access])
                .with_agents(agent_runtime(std::path::Path::new(&state_dir)))
        }
        Err(_) => Driver::new(config, journal, [access]),
    };
    let mut ended = driver.drive_due_runs(10).await.unwrap();
    // A merging run waits for GitHub's mergeability between tasks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while merging && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        ended = driver.drive_due_runs(10).await.unwrap();
    }
    panic!("the crash point did not fire; the runs ended {ended:?}");
}

/// Runs the child with `crash_at` and requires it to abort.
async fn crash_child(world: &World, crash_at: &str, state_dir: Option<&std::path::Path>) {
    crash_child_with(world, crash_at, state_dir, false).await;
}

/// [`crash_child`], with runs started in `merge.mode = auto` if `merging`.
async fn crash_child_with(
    world: &World,
    crash_at: &str,
    state_dir: Option<&std::path::Path>,
    merging: bool,
) {
    // Asynchronously: fakehub runs on this test's runtime and must keep
    // answering the child.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
    if merging {
        child.env(format!("{CHILD}_AUTO_MERGE"), "1");
    }
    if let Some(dir) = state_dir {
        child
            .env(format!("{CHILD}_STATE"), dir)
            .env(format!("{CHILD}_GIT"), world.hub.git_url(OWNER, NAME));
    }
    let out = child
        .args([
            "--exact",
            crate::common::test_in(module_path!(), "crash_child_drives_due_runs").as_str(),
            "--ignored",
            "--nocapture",
        ])
        .env("AUTOFORGE_CRASH_AT", crash_at)
        .env(format!("{CHILD}_DB"), world.db.url().expose_secret())
        .env(format!("{CHILD}_HUB"), world.hub.base_url())
        .env(format!("{CHILD}_TOKEN"), world.token.expose_secret())
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{crash_at}: the child must abort, it ended with {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits out the dead child's lease, then recovers with a fresh driver.
async fn recover(world: &World) {
    tokio::time::sleep(CHILD_LEASE + Duration::from_millis(200)).await;
    world.driver("recoverer").drive_due_runs(10).await.unwrap();
}

async fn all_effects_observed(world: &World, run: RunId, cell: &str) {
    for effect in world.db.journal().list_effects(run).await.unwrap() {
        assert_eq!(effect.stage, Stage::Observed, "{cell}: {effect:?}");
    }
}

#[tokio::test]
async fn a_crash_while_starting_a_run_leaves_one_status_comment_and_reaches_implement() {
    for point in POINTS {
        let cell = format!("{point}:edit_status_comment");
        let world = World::new(1).await;
        let run = world.start_run(autoforge_journal::testing::issue(1)).await;

        crash_child(&world, &cell, None).await;
        recover(&world).await;

        assert_eq!(world.phase(run).await, "IMPLEMENT", "{cell}");
        assert_eq!(
            world
                .status_comments(autoforge_journal::testing::issue(1))
                .await
                .len(),
            1,
            "{cell}"
        );
        assert_eq!(world.unconsumed_events(run).await, 0, "{cell}");
        all_effects_observed(&world, run, &cell).await;
    }
}

#[tokio::test]
async fn a_crash_while_answering_a_command_leaves_one_reaction_and_one_reply() {
    for kind in ["add_reaction", "post_comment"] {
        for point in POINTS {
            let cell = format!("{point}:{kind}");
            let world = World::new(1).await;
            let run = world.start_run(autoforge_journal::testing::issue(1)).await;
            world.driver("setup").drive_due_runs(10).await.unwrap();
            let comment = world
                .command(run, autoforge_journal::testing::issue(1), "status")
                .await;
            tokio::time::sleep(Duration::from_millis(60)).await;

            crash_child(&world, &cell, None).await;
            recover(&world).await;

            assert_eq!(world.phase(run).await, "IMPLEMENT", "{cell}");
            assert_eq!(world.reactions_on(comment).await, 1, "{cell}");
            assert_eq!(
                world
                    .comments_with(autoforge_journal::testing::issue(1), "autoforge-reply")
                    .await,
                1,
                "{cell}"
            );
            assert_eq!(
                world
                    .status_comments(autoforge_journal::testing::issue(1))
                    .await
                    .len(),
                1,
                "{cell}"
            );
            assert_eq!(world.unconsumed_events(run).await, 0, "{cell}");
            all_effects_observed(&world, run, &cell).await;
        }
    }
}

/// Crashes a run on its way to READY_FOR_MERGE at `point` for `kind`,
/// recovers it with a driver sharing the dead process's state directory,
/// and checks the end state a crash-free run reaches: one branch at the
/// validated candidate, one PR, one review comment, one status comment.
async fn crash_on_the_way_to_ready_for_merge(point: &str, kind: &str) {
    let cell = format!("{point}:{kind}");
    let world = World::new(1).await;
    // One state directory for the dead process and its successor, as on a
    // real host: the mirror holds the candidate commit.
    let state_dir = tempfile::tempdir().unwrap();
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    crash_child(&world, &cell, Some(state_dir.path())).await;
    tokio::time::sleep(CHILD_LEASE + Duration::from_millis(200)).await;
    world
        .publishing_driver("recoverer", state_dir.path())
        .drive_due_runs(10)
        .await
        .unwrap();

    assert_eq!(world.phase(run).await, "READY_FOR_MERGE", "{cell}");
    let journal = world.db.journal();
    // The implementer ran once (in the child), the reviewer once.
    assert_eq!(journal.list_launches(run).await.unwrap().len(), 2, "{cell}");
    let candidate = journal.list_validations(run, None).await.unwrap()[0]
        .sha
        .clone();
    let pulls = world
        .api
        .pull_requests_by_head(&world.repo, OWNER, "autoforge/1")
        .await
        .unwrap();
    assert_eq!(pulls.len(), 1, "{cell}");
    assert_eq!(pulls[0].head.sha, candidate, "{cell}");
    let pr = pulls[0].number;
    assert_eq!(
        world.comments_with(pr.as_issue(), "ai-review-result").await,
        1,
        "{cell}"
    );
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1,
        "{cell}"
    );
    all_effects_observed(&world, run, &cell).await;
}

const EVERY_POINT: [&str; 5] = [
    "after_intent",
    "after_attempted",
    "after_send",
    "after_read_back",
    "after_observed",
];

#[tokio::test]
async fn a_crash_while_publishing_leaves_one_branch_and_one_pr_and_reaches_ready_for_merge() {
    for kind in ["push", "create_pr"] {
        for point in EVERY_POINT {
            crash_on_the_way_to_ready_for_merge(point, kind).await;
        }
    }
}

#[tokio::test]
async fn a_crash_while_posting_the_review_leaves_one_review_comment() {
    for point in EVERY_POINT {
        crash_on_the_way_to_ready_for_merge(point, "post_comment").await;
    }
}

#[tokio::test]
async fn a_crash_while_merging_merges_once_at_the_reviewed_head_and_the_run_is_done() {
    for point in POINTS {
        let cell = format!("{point}:merge_pr");
        let world = World::new(1).await;
        let state_dir = tempfile::tempdir().unwrap();
        let run = world.start_run(autoforge_journal::testing::issue(1)).await;

        crash_child_with(&world, &cell, Some(state_dir.path()), true).await;
        tokio::time::sleep(CHILD_LEASE + Duration::from_millis(200)).await;
        let recoverer = world.merging_driver("recoverer", state_dir.path(), MergeMode::Auto);
        world
            .drive_until(
                &recoverer,
                run,
                &["DONE", "BLOCKED"],
                Duration::from_secs(60),
            )
            .await;

        let state = world.state(run).await;
        assert_eq!(state.phase.as_str(), "DONE", "{cell}: {:?}", state.blocked);
        let pr = state.pr.unwrap();
        let read = world.api.pull_request(&world.repo, pr).await.unwrap();
        assert_eq!(read.merged, Some(true), "{cell}");
        assert_eq!(
            read.head.sha,
            state.review.clean.unwrap().head_sha,
            "{cell}"
        );
        assert_eq!(world.merge_requests(pr), 1, "{cell}");
        all_effects_observed(&world, run, &cell).await;
    }
}
