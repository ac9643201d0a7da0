//! A run from its trigger to READY_FOR_MERGE through the driver, with a
//! scripted well-behaved implementer (`tests/agents/phase_implement.sh
//! good`) and reviewer (`tests/agents/phase_review.sh clean 1`), real
//! git (mirror, worktree, export, push to fakehub's git server), real
//! validation commands, Postgres and fakehub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge::driver::{Driver, DriverConfig, RunEnd};
use autoforge::github::PullRequest;
use autoforge::machine::RunState;
use autoforge::validation::ValidationCommand;
use autoforge_journal::Stage;
use common::{NAME, OWNER, World, agent_runtime, git_access};

#[tokio::test]
async fn a_run_goes_from_the_trigger_through_validation_publishing_and_review_to_ready_for_merge() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.publishing_driver("publisher", state_dir.path());
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    let ended = driver.drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    assert_eq!(world.phase(run).await, "READY_FOR_MERGE");
    let state: RunState = serde_json::from_value(
        world
            .db
            .journal()
            .get_run(run)
            .await
            .unwrap()
            .unwrap()
            .state,
    )
    .unwrap();
    let journal = world.db.journal();
    let launches = journal.list_launches(run).await.unwrap();
    assert_eq!(launches.len(), 2, "implementer and reviewer: {launches:?}");
    let validations = journal.list_validations(run, None).await.unwrap();
    assert_eq!(validations.len(), 1);
    let candidate = validations[0].sha.clone();
    for effect in journal.list_effects(run).await.unwrap() {
        assert_eq!(effect.stage, Stage::Observed, "{effect:?}");
    }

    // On GitHub: the branch at the validated candidate and one marked PR.
    let pulls: Vec<PullRequest> = world
        .api
        .pull_requests_by_head(&world.repo, OWNER, "autoforge/1")
        .await
        .unwrap();
    assert_eq!(pulls.len(), 1);
    let pr = &pulls[0];
    assert_eq!(pr.head.sha, candidate);
    assert_eq!(pr.base.ref_name, "main");
    assert!(pr.body.as_deref().unwrap().contains("ai-implementation"));
    assert_eq!(state.pr, Some(pr.number));
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn a_task_that_outlives_its_lease_ttl_keeps_the_run_by_renewing_it() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    // Validation alone sleeps three lease lifetimes; without renewals the
    // journal would refuse the validation record as written by a stale
    // holder and the task would end with `LostLease`.
    let mut runtime = agent_runtime(state_dir.path());
    runtime
        .validation_commands
        .push(ValidationCommand::Shell("sleep 1".into()));
    let config = DriverConfig {
        lease_ttl: Duration::from_millis(300),
        ..world.config("short-lease")
    };
    let access = git_access(
        world.api.clone(),
        world.hub.git_url(OWNER, NAME),
        world.token.clone(),
    );
    let driver = Driver::new(config, world.db.journal().clone(), [access]).with_agents(runtime);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    let ended = driver.drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    assert_eq!(world.phase(run).await, "READY_FOR_MERGE");
    let validations = world
        .db
        .journal()
        .list_validations(run, None)
        .await
        .unwrap();
    assert_eq!(validations.len(), 2);
}

#[tokio::test]
async fn a_clean_first_review_posts_one_review_comment_and_reaches_ready_for_merge() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let runtime = agent_runtime(state_dir.path());
    let access = git_access(
        world.api.clone(),
        world.hub.git_url(OWNER, NAME),
        world.token.clone(),
    );
    let driver = Driver::new(
        world.config("reviewer"),
        world.db.journal().clone(),
        [access],
    )
    .with_agents(runtime);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    let ended = driver.drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    let state: RunState = serde_json::from_value(
        world
            .db
            .journal()
            .get_run(run)
            .await
            .unwrap()
            .unwrap()
            .state,
    )
    .unwrap();
    // merge.mode is `never`: the run waits at the gate for a human merge.
    assert_eq!(state.phase.as_str(), "READY_FOR_MERGE");
    assert_eq!(state.awaiting.name(), "github_facts");
    let journal = world.db.journal();
    assert_eq!(journal.list_launches(run).await.unwrap().len(), 2);
    for effect in journal.list_effects(run).await.unwrap() {
        assert_eq!(effect.stage, Stage::Observed, "{effect:?}");
    }
    let pr = state.pr.expect("a PR is bound");
    assert_eq!(
        world.comments_with(pr.as_issue(), "ai-review-result").await,
        1
    );
    assert_eq!(state.review.round, 1);
    assert!(state.review.clean.is_some(), "the round was clean");
}
