//! An EPIC driven to DONE by one run: labelling the EPIC starts on its
//! first open sub-issue; after each merge UPDATE_EPIC posts one progress
//! comment, splices the roadmap section (people's bytes kept), and the
//! verified next pick continues the run until the agent reports the EPIC
//! complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge::effects::markers::{ROADMAP_END, ROADMAP_START};
use autoforge::machine::MergeMode;
use common::{REPOSITORY, World, epic_catalog};

const LIMIT: Duration = Duration::from_secs(120);
const HUMAN: &str = "# Widgets EPIC\n\nPeople wrote this part; keep it.\n";

#[tokio::test]
async fn an_epic_of_two_issues_is_driven_to_done_with_one_progress_comment_per_merge() {
    let world = World::new(3).await;
    autoforge::github::writes::update_issue_body(
        &world.api,
        &world.repo,
        autoforge_journal::testing::issue(1),
        HUMAN,
    )
    .await
    .unwrap();
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(2),
        )
        .await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(3),
        )
        .await;
    let state_dir = tempfile::tempdir().unwrap();
    let counter = state_dir.path().join("epic-launches");
    let next = "https://github.com/octo/widgets/issues/3";
    let driver = world.loop_driver(
        "epic",
        state_dir.path(),
        MergeMode::Auto,
        epic_catalog(&counter, &[next]),
    );
    // The EPIC itself is labelled.
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED", "FAILED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(
        state.issue,
        autoforge_journal::testing::issue(3),
        "the run ended on the second child"
    );
    assert_eq!(
        state.epic.as_ref().unwrap().epic,
        autoforge_journal::testing::issue(1)
    );
    assert_eq!(state.merged_prs.len(), 2);
    for pr in &state.merged_prs {
        let read = world.api.pull_request(&world.repo, *pr).await.unwrap();
        assert_eq!(read.merged, Some(true));
        assert_eq!(world.merge_requests(*pr), 1);
    }
    // The first child's PR closes #2, the second's #3.
    let first = world
        .api
        .pull_request(&world.repo, state.merged_prs[0])
        .await
        .unwrap();
    assert!(first.body.unwrap().contains("Closes #2"));
    assert_eq!(
        world
            .comments_with(autoforge_journal::testing::issue(1), "ai-epic-progress")
            .await,
        2
    );
    let body = world
        .api
        .issue(&world.repo, autoforge_journal::testing::issue(1))
        .await
        .unwrap()
        .body
        .unwrap();
    assert!(body.starts_with(HUMAN), "people's bytes kept: {body:?}");
    assert_eq!(body.matches(ROADMAP_START).count(), 1, "{body}");
    assert_eq!(body.matches(ROADMAP_END).count(), 1, "{body}");
    assert!(body.contains("- step 2 of the EPIC is done"), "{body}");
    assert!(
        !body.contains("- step 1 of"),
        "the section was replaced: {body}"
    );
}

#[tokio::test]
async fn labelling_a_sub_issue_makes_the_run_know_its_epic() {
    let world = World::new(3).await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(2),
        )
        .await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(3),
        )
        .await;
    let driver = world.driver("scope");
    let run = world.start_run(autoforge_journal::testing::issue(3)).await;

    driver.drive_due_runs(1).await.unwrap();

    let state = world.state(run).await;
    assert_eq!(state.issue, autoforge_journal::testing::issue(3));
    assert_eq!(
        state.epic.unwrap().epic,
        autoforge_journal::testing::issue(1)
    );
}

#[tokio::test]
async fn a_rejected_next_issue_pick_is_asked_again_without_progress_and_the_epic_continues() {
    let world = World::new(4).await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(2),
        )
        .await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(3),
        )
        .await;
    world
        .close_issue(autoforge_journal::testing::issue(4))
        .await;
    let state_dir = tempfile::tempdir().unwrap();
    let counter = state_dir.path().join("epic-launches");
    // The first pick is a closed issue: refused on the fresh read, asked again.
    let picks = [
        "https://github.com/octo/widgets/issues/4",
        "https://github.com/octo/widgets/issues/3",
    ];
    let driver = world.loop_driver(
        "repick",
        state_dir.path(),
        MergeMode::Auto,
        epic_catalog(&counter, &picks),
    );
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED", "FAILED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(state.issue, autoforge_journal::testing::issue(3));
    assert_eq!(state.merged_prs.len(), 2);
    // Full request, re-request, full request: three EPIC launches, and the
    // re-request posted no second progress comment for issue #2.
    let log = std::fs::read_to_string(counter.with_extension("log")).unwrap();
    assert_eq!(log, "full\nagain\nfull\n");
    assert_eq!(
        world
            .comments_with(autoforge_journal::testing::issue(1), "ai-epic-progress")
            .await,
        2
    );
}

#[tokio::test]
async fn an_epic_run_moves_its_row_to_the_child_and_a_second_run_on_that_epic_blocks() {
    let world = World::new(3).await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(2),
        )
        .await;
    world
        .add_sub_issue(
            autoforge_journal::testing::issue(1),
            autoforge_journal::testing::issue(3),
        )
        .await;
    let driver = world.driver("scope-row");

    // Labelling the EPIC: the run row follows the state to child #2, so
    // commands on #2's thread reach the run.
    let epic_run = world.start_run(autoforge_journal::testing::issue(1)).await;
    driver.drive_due_runs(1).await.unwrap();
    let row = world.db.journal().get_run(epic_run).await.unwrap().unwrap();
    assert_eq!(
        (row.current_issue.get(), row.epic.map(|e| e.get())),
        (2, Some(1))
    );
    let found = world
        .db
        .journal()
        .active_run_for_object(REPOSITORY, autoforge_journal::testing::issue(2))
        .await
        .unwrap();
    assert_eq!(found, Some(epic_run));

    // Someone labels child #3 too: its run belongs to the same EPIC, which
    // the first run holds, so it blocks and says so; the first is untouched.
    let second = world.start_run(autoforge_journal::testing::issue(3)).await;
    // The first run may be due again too; drive until the second decided.
    world
        .drive_until(&driver, second, &["BLOCKED"], Duration::from_secs(30))
        .await;
    let state = world.state(second).await;
    assert_eq!(state.phase.as_str(), "BLOCKED", "{state:?}");
    let reason = &state.blocked.as_ref().unwrap().reason;
    assert!(
        reason.contains("EPIC #1 already has another active run"),
        "{reason}"
    );
    let row = world.db.journal().get_run(epic_run).await.unwrap().unwrap();
    assert_eq!(
        (row.current_issue.get(), row.epic.map(|e| e.get())),
        (2, Some(1))
    );
}
