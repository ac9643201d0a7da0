//! The end of a run without an EPIC: from READY_FOR_MERGE through the
//! pre-merge gate (SPEC §10) to DONE, in each `merge.mode`, with the
//! scripted implementer and a clean reviewer, real git, Postgres and
//! fakehub. The gate reads the clean review comment back by the id and
//! bytes the journal recorded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge::intake::RunSignal;
use autoforge::machine::MergeMode;
use common::World;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn auto_merge_merges_the_reviewed_head_once_and_the_run_is_done() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("merger", state_dir.path(), MergeMode::Auto);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    let pr_number = state.pr.unwrap();
    let clean = state.review.clean.clone().unwrap();
    let pr = world
        .api
        .pull_request(&world.repo, pr_number)
        .await
        .unwrap();
    assert_eq!(pr.merged, Some(true));
    assert_eq!(pr.head.sha, clean.head_sha, "merged at the reviewed head");
    assert_eq!(world.merge_requests(pr_number), 1, "merged exactly once");
    assert_eq!(state.merged_prs, vec![pr_number]);
    // Driving again changes nothing: the run is terminal.
    driver.drive_due_runs(5).await.unwrap();
    assert_eq!(world.merge_requests(pr_number), 1);
}

#[tokio::test]
async fn a_failing_check_makes_the_gate_refuse_and_the_run_blocks_without_merging() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("gate", state_dir.path(), MergeMode::OnCommand);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world
        .drive_until(&driver, run, &["READY_FOR_MERGE"], LIMIT)
        .await;
    let state = world.state(run).await;
    let pr = state.pr.unwrap();
    let head = state.review.clean.unwrap().head_sha;
    world.add_check(head.as_str(), "ci", "failure");

    world
        .command(run, autoforge_journal::testing::issue(1), "merge")
        .await;
    world
        .drive_until(&driver, run, &["BLOCKED", "DONE"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "BLOCKED");
    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("a check did not succeed"), "{reason}");
    assert_eq!(world.merge_requests(pr), 0);
    let read = world.api.pull_request(&world.repo, pr).await.unwrap();
    assert_eq!(read.state, "open");
}

#[tokio::test]
async fn on_command_waits_for_the_merge_command_then_merges() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("commanded", state_dir.path(), MergeMode::OnCommand);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world
        .drive_until(&driver, run, &["READY_FOR_MERGE"], LIMIT)
        .await;
    // Mergeability settles and the run is looked at again: still no merge.
    tokio::time::sleep(Duration::from_millis(400)).await;
    driver.drive_due_runs(5).await.unwrap();
    let pr = world.state(run).await.pr.unwrap();
    assert_eq!(world.phase(run).await, "READY_FOR_MERGE");
    assert_eq!(world.merge_requests(pr), 0);

    world
        .command(run, autoforge_journal::testing::issue(1), "merge")
        .await;
    world
        .drive_until(&driver, run, &["DONE", "BLOCKED"], LIMIT)
        .await;

    assert_eq!(world.phase(run).await, "DONE");
    assert_eq!(world.merge_requests(pr), 1);
}

#[tokio::test]
async fn an_edited_clean_review_comment_makes_the_gate_refuse() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("edited", state_dir.path(), MergeMode::OnCommand);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world
        .drive_until(&driver, run, &["READY_FOR_MERGE"], LIMIT)
        .await;
    let pr = world.state(run).await.pr.unwrap();
    let review = world
        .api
        .issue_comments(&world.repo, pr.as_issue())
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.body.contains("ai-review-result"))
        .unwrap();
    let edited = format!("{}\n\nLGTM, ship it", review.body);
    autoforge::github::writes::update_comment(&world.api, &world.repo, review.id, &edited)
        .await
        .unwrap();

    world
        .command(run, autoforge_journal::testing::issue(1), "merge")
        .await;
    world
        .drive_until(&driver, run, &["BLOCKED", "DONE"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "BLOCKED");
    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("clean review comment"), "{reason}");
    assert_eq!(world.merge_requests(pr), 0);
}

#[tokio::test]
async fn with_merge_mode_never_a_human_merge_is_noticed_and_the_run_is_done() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("watcher", state_dir.path(), MergeMode::Never);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world
        .drive_until(&driver, run, &["READY_FOR_MERGE"], LIMIT)
        .await;
    let state = world.state(run).await;
    let pr = state.pr.unwrap();
    let head = state.review.clean.unwrap().head_sha;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let merged = autoforge::github::writes::merge_pull_request(
        &world.api,
        &world.repo,
        pr,
        &head,
        autoforge::machine::MergeMethod::Merge,
        None,
    )
    .await
    .unwrap();

    world
        .signal(
            run,
            "closed:pr",
            RunSignal::PrClosed {
                pr,
                merged: true,
                merge_commit_sha: Some(merged.sha.to_string()),
            },
        )
        .await;
    world
        .drive_until(&driver, run, &["DONE", "BLOCKED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(state.merged_prs, vec![pr]);
    assert_eq!(world.merge_requests(pr), 1, "only the human's merge");
}

#[tokio::test]
async fn running_checks_are_looked_at_again_within_seconds_and_merged_once_they_pass() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let driver = world.merging_driver("patient", state_dir.path(), MergeMode::OnCommand);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world
        .drive_until(&driver, run, &["READY_FOR_MERGE"], LIMIT)
        .await;
    let state = world.state(run).await;
    let pr = state.pr.unwrap();
    let head = state.review.clean.unwrap().head_sha;
    world
        .hub
        .add_check(&fakehub::control::CheckSpec {
            owner: common::OWNER.into(),
            repo: common::NAME.into(),
            sha: head.to_string(),
            name: "ci".into(),
            status: Some("in_progress".into()),
            conclusion: None,
        })
        .unwrap();

    // The approved merge meets running checks: inconclusive, so the run
    // asks to be looked at again in 2 s instead of the 30 s idle re-check.
    world
        .command(run, autoforge_journal::testing::issue(1), "merge")
        .await;
    world.db.journal().wake_run(run).await.unwrap();
    let ended = driver.drive_due_runs(1).await.unwrap();
    assert_eq!(
        ended,
        vec![(
            run,
            autoforge::driver::RunEnd::RecheckAfter(Duration::from_secs(2))
        )]
    );
    assert_eq!(world.state(run).await.phase.as_str(), "READY_FOR_MERGE");
    assert_eq!(world.merge_requests(pr), 0);

    world.add_check(head.as_str(), "ci", "success");
    world
        .drive_until(&driver, run, &["DONE", "BLOCKED"], LIMIT)
        .await;
    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(world.merge_requests(pr), 1);
}
