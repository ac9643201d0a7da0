//! FIX rounds through the driver: a review with one finding, the scripted
//! fixer (`tests/agents/phase_fix.sh`), validation of the fixed head, the
//! push, a clean second round and the merge; and a finding deferred to a
//! follow-up issue the controller creates once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge::machine::MergeMode;
use autoforge_journal::{EffectKind, Stage};
use common::{World, loop_catalog};

const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_finding_is_fixed_validated_pushed_reviewed_clean_and_merged() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let catalog = loop_catalog("findings", "good", "good");
    let driver = world.loop_driver("fixer", state_dir.path(), MergeMode::Auto, catalog);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED", "FAILED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(state.review.round, 2);
    let pr = state.pr.unwrap();
    assert_eq!(
        world.comments_with(pr.as_issue(), "ai-review-result").await,
        2
    );
    let journal = world.db.journal();
    let launches = journal.list_launches(run).await.unwrap();
    assert_eq!(
        launches.len(),
        4,
        "implement, review, fix, review: {launches:?}"
    );
    // Both candidates were validated; the fixed one is what was merged.
    let validations = journal.list_validations(run, None).await.unwrap();
    assert_eq!(validations.len(), 2);
    let fixed = &validations[1].sha;
    let merged = world.api.pull_request(&world.repo, pr).await.unwrap();
    assert_eq!(merged.merged, Some(true));
    assert_eq!(&merged.head.sha, fixed);
    assert_eq!(&state.review.clean.unwrap().head_sha, fixed);
    let pushes = journal
        .list_effects(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EffectKind::Push)
        .inspect(|e| assert_eq!(e.stage, Stage::Observed))
        .count();
    assert_eq!(pushes, 2, "the candidate, then the fix");
    assert_eq!(world.merge_requests(pr), 1);
}

#[tokio::test]
async fn a_finding_deferred_to_a_new_follow_up_creates_exactly_one_marked_issue() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let catalog = loop_catalog("findings", "follow_up", "good");
    let driver = world.loop_driver("deferrer", state_dir.path(), MergeMode::Auto, catalog);
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED", "FAILED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    let follow_ups: Vec<_> = world
        .api
        .get_all::<serde_json::Value>(&world.repo.api_path("/issues?state=all"))
        .await
        .unwrap()
        .into_iter()
        .filter(|i| {
            i["body"]
                .as_str()
                .is_some_and(|b| b.contains("<!-- ai-follow-up"))
        })
        .collect();
    assert_eq!(follow_ups.len(), 1, "{follow_ups:?}");
    let body = follow_ups[0]["body"].as_str().unwrap();
    assert!(body.contains("R1-F1"), "{body}");
    assert!(
        follow_ups[0]["title"]
            .as_str()
            .unwrap()
            .contains("Add a test")
    );
    // No fix commit: the reviewed head is what was merged.
    let validations = world
        .db
        .journal()
        .list_validations(run, None)
        .await
        .unwrap();
    assert_eq!(validations.len(), 1);
    let created = world
        .db
        .journal()
        .list_effects(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == EffectKind::CreateIssue)
        .count();
    assert_eq!(created, 1);
}

#[tokio::test]
async fn a_later_finding_deferred_to_the_listed_follow_up_appends_its_marker_to_that_issue() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let human = "Edge cases the review raised, tracked here.";
    let driver = world.loop_driver(
        "appender",
        state_dir.path(),
        MergeMode::Auto,
        common::deferring_catalog(),
    );
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    world
        .drive_until(&driver, run, &["DONE", "BLOCKED", "FAILED"], LIMIT)
        .await;

    let state = world.state(run).await;
    assert_eq!(state.phase.as_str(), "DONE", "{:?}", state.blocked);
    assert_eq!(state.review.round, 3);
    // The one follow-up issue was created in round 1; round 2 appended its
    // marker below the body as it was, the bytes before it untouched.
    let marked: Vec<_> = world
        .api
        .get_all::<serde_json::Value>(&world.repo.api_path("/issues?state=all"))
        .await
        .unwrap()
        .into_iter()
        .filter(|i| {
            i["body"]
                .as_str()
                .is_some_and(|b| b.contains("<!-- ai-follow-up"))
        })
        .collect();
    assert_eq!(marked.len(), 1, "{marked:?}");
    let body = marked[0]["body"].as_str().unwrap();
    assert!(body.contains(human), "{body}");
    assert_eq!(body.matches("<!-- ai-follow-up").count(), 2, "{body}");
    let (first, second) = (body.find("R1-F1").unwrap(), body.find("R2-F1").unwrap());
    assert!(first < second, "appended after: {body}");
    let journal = world.db.journal();
    let effects = journal.list_effects(run).await.unwrap();
    let kinds = |kind| effects.iter().filter(|e| e.kind == kind).count();
    assert_eq!(kinds(EffectKind::CreateIssue), 1);
    assert_eq!(kinds(EffectKind::AppendIssueMarkers), 1);
    let append = effects
        .iter()
        .find(|e| e.kind == EffectKind::AppendIssueMarkers)
        .unwrap();
    assert_eq!(append.stage, Stage::Observed);
}
