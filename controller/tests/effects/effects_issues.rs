//! Issue-side effects against fakehub and a real journal: follow-up issues,
//! marker hand-over, the EPIC roadmap splice, reactions and labels.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;

use autoforge::effects::DriveOutcome;
use autoforge::effects::markers::{ROADMAP_END, ROADMAP_START};
use autoforge::machine::EffectIntent;
use autoforge_journal::Stage;
use common::{World, ambiguous, payload_body};
use fakehub::FaultKind;

const ISSUE: &str = "/repos/{owner}/{repo}/issues/{number}";

fn follow_up(finding: &str) -> EffectIntent {
    EffectIntent::CreateFollowUpIssue {
        pr: autoforge_journal::testing::pull(2),
        finding_id: finding.into(),
        title: "Handle the empty widget".into(),
        body: "The empty widget is not handled yet.".into(),
    }
}

fn set_labels(add: &[&str], remove: &[&str]) -> EffectIntent {
    EffectIntent::SetLabels {
        issue: autoforge_journal::testing::issue(1),
        add: add.iter().map(|l| (*l).to_owned()).collect(),
        remove: remove.iter().map(|l| (*l).to_owned()).collect(),
    }
}

async fn world_with_issue() -> World {
    let world = World::with_leased_run().await;
    assert_eq!(
        world.human_issue("Add widgets", "please").await,
        autoforge_journal::testing::issue(1)
    );
    world
}

#[tokio::test]
async fn a_follow_up_issue_is_created_once_despite_a_lost_answer() {
    let mut world = world_with_issue().await;
    let planned = world.plan(&follow_up("R1-F1"), &BTreeMap::new());
    let body = payload_body(&planned);
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    world.fault(
        "POST",
        "/repos/{owner}/{repo}/issues",
        ambiguous(true),
        Some(1),
    );
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Observed(observed) = outcome else {
        panic!("{outcome:?}");
    };
    let number = autoforge_journal::testing::issue(observed["number"].as_u64().unwrap());
    let issue = world.api.issue(&world.repo, number).await.unwrap();
    assert_eq!(issue.body.as_deref(), Some(body.as_str()));
    assert!(body.contains("<!-- ai-follow-up: "));
    // Issue 1 by the human, the follow-up once.
    assert_eq!(world.writes_to("POST", "/repos/{owner}/{repo}/issues"), 2);
}

#[tokio::test]
async fn a_follow_up_someone_else_created_with_our_marker_blocks() {
    let mut world = world_with_issue().await;
    let planned = world.plan(&follow_up("R1-F2"), &BTreeMap::new());
    // Copy the body but not the nonce: the marker is re-rendered without it.
    let forged = payload_body(&planned);
    let start = forged.find("<!-- ai-follow-up").unwrap();
    let marker = autoforge::publish::render_marker(
        "ai-follow-up",
        &serde_json::json!({"finding_id": "R1-F2", "pr": "https://github.com/octo/widgets/pull/2"}),
    );
    let foreign = world
        .human_issue("copy", &format!("{}{marker}", &forged[..start]))
        .await;
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Blocked { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains(&format!("/issues/{foreign}")), "{reason}");
    assert_eq!(world.row(row.id).await.attempts, 0);
}

#[tokio::test]
async fn markers_are_appended_to_a_handed_over_issue_keeping_its_bytes() {
    let mut world = world_with_issue().await;
    let human = "Known problem.\r\nTracked here.";
    let target = world.human_issue("existing follow-up", human).await;
    let bodies = BTreeMap::from([(target, human.to_owned())]);
    let intent = EffectIntent::AppendFollowUpMarkers {
        issue: target,
        pr: autoforge_journal::testing::pull(2),
        finding_ids: vec!["R1-F1".into(), "R1-F3".into()],
    };
    let planned = world.plan(&intent, &bodies);
    let wanted = payload_body(&planned);
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    world.fault("PATCH", ISSUE, ambiguous(false), Some(1));
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let body = world
        .api
        .issue(&world.repo, target)
        .await
        .unwrap()
        .body
        .unwrap();
    assert_eq!(body, wanted);
    assert!(body.starts_with(&format!("{human}\n\n<!-- ai-follow-up: ")));
    assert_eq!(body.matches("<!-- ai-follow-up: ").count(), 2);
    assert_eq!(world.writes_to("PATCH", ISSUE), 1);
}

#[tokio::test]
async fn appending_to_a_body_edited_since_planning_is_a_conflict() {
    let mut world = world_with_issue().await;
    let target = world.human_issue("existing", "v1").await;
    let bodies = BTreeMap::from([(target, "v1".to_owned())]);
    let intent = EffectIntent::AppendFollowUpMarkers {
        issue: target,
        pr: autoforge_journal::testing::pull(2),
        finding_ids: vec!["R1-F1".into()],
    };
    let [row] = world
        .journal(vec![world.plan(&intent, &bodies)])
        .await
        .try_into()
        .unwrap();
    world.human_edit_issue(target, "v2").await;
    let before = world.writes_to("PATCH", ISSUE);
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Conflict { .. }),
        "{outcome:?}"
    );
    assert_eq!(world.writes_to("PATCH", ISSUE), before);
    assert_eq!(world.row(row.id).await.stage, Stage::Conflict);
}

#[tokio::test]
async fn the_roadmap_is_appended_then_replaced_with_outside_bytes_kept() {
    let mut world = world_with_issue().await;
    let original = "EPIC intro <b>\r\n\n- [ ] #1";
    let epic = world.human_issue("EPIC", original).await;
    let bodies = BTreeMap::from([(epic, original.to_owned())]);
    let first = EffectIntent::SpliceEpicRoadmap {
        epic,
        section: "1. widgets".into(),
    };
    let [row] = world
        .journal(vec![world.plan(&first, &bodies)])
        .await
        .try_into()
        .unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let appended = world
        .api
        .issue(&world.repo, epic)
        .await
        .unwrap()
        .body
        .unwrap();
    assert_eq!(
        appended,
        format!("{original}\n\n{ROADMAP_START}\n1. widgets\n{ROADMAP_END}")
    );
    // A human adds text after the section; the next splice keeps it.
    let edited = format!("{appended}\n\nhuman tail");
    world.human_edit_issue(epic, &edited).await;
    let bodies = BTreeMap::from([(epic, edited.clone())]);
    let second = EffectIntent::SpliceEpicRoadmap {
        epic,
        section: "1. widgets (done)\n2. gadgets".into(),
    };
    let [row] = world
        .journal(vec![world.plan(&second, &bodies)])
        .await
        .try_into()
        .unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let replaced = world
        .api
        .issue(&world.repo, epic)
        .await
        .unwrap()
        .body
        .unwrap();
    assert_eq!(
        replaced,
        format!(
            "{original}\n\n{ROADMAP_START}\n1. widgets (done)\n2. gadgets\n{ROADMAP_END}\n\nhuman tail"
        )
    );
}

#[tokio::test]
async fn a_human_edit_outside_the_section_after_planning_asks_for_the_section_again() {
    let mut world = world_with_issue().await;
    let original = format!("intro\n\n{ROADMAP_START}\nold\n{ROADMAP_END}\n");
    let epic = world.human_issue("EPIC", &original).await;
    let bodies = BTreeMap::from([(epic, original.clone())]);
    let intent = EffectIntent::SpliceEpicRoadmap {
        epic,
        section: "new".into(),
    };
    let [row] = world
        .journal(vec![world.plan(&intent, &bodies)])
        .await
        .try_into()
        .unwrap();
    let human = original.replace("intro", "intro, edited by a human");
    world.human_edit_issue(epic, &human).await;
    let before = world.writes_to("PATCH", ISSUE);
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Rerequest { .. }),
        "{outcome:?}"
    );
    assert_eq!(world.writes_to("PATCH", ISSUE), before, "nothing written");
    let body = world
        .api
        .issue(&world.repo, epic)
        .await
        .unwrap()
        .body
        .unwrap();
    assert_eq!(body, human, "the human's bytes are untouched");
    let row = world.row(row.id).await;
    assert_eq!(row.stage, Stage::Conflict);
    assert!(row.reason.unwrap().starts_with("re-request"));
}

#[tokio::test]
async fn an_edit_inside_the_managed_section_does_not_stop_the_splice() {
    let mut world = world_with_issue().await;
    let original = format!("intro\n{ROADMAP_START}\nold\n{ROADMAP_END}\nend");
    let epic = world.human_issue("EPIC", &original).await;
    let bodies = BTreeMap::from([(epic, original.clone())]);
    let intent = EffectIntent::SpliceEpicRoadmap {
        epic,
        section: "new".into(),
    };
    let [row] = world
        .journal(vec![world.plan(&intent, &bodies)])
        .await
        .try_into()
        .unwrap();
    world
        .human_edit_issue(epic, &original.replace("old", "scribbled"))
        .await;
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let body = world
        .api
        .issue(&world.repo, epic)
        .await
        .unwrap()
        .body
        .unwrap();
    assert_eq!(
        body,
        format!("intro\n{ROADMAP_START}\nnew\n{ROADMAP_END}\nend")
    );
}

#[tokio::test]
async fn the_eyes_reaction_is_added_once_and_found_again_without_sending() {
    let mut world = world_with_issue().await;
    let comment = world
        .human_comment(autoforge_journal::testing::issue(1), "/autoforge retry")
        .await;
    let intent = EffectIntent::AddReaction {
        comment_id: comment,
    };
    let [row] = world
        .journal(vec![world.plan(&intent, &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let route = "/repos/{owner}/{repo}/issues/comments/{id}/reactions";
    world.fault("POST", route, ambiguous(false), Some(1));
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let [again] = world
        .journal(vec![world.plan(&intent, &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let outcome = world.drive(&world.executor(), again.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    assert_eq!(world.row(again.id).await.attempts, 0);
    assert_eq!(world.writes_to("POST", route), 1);
}

#[tokio::test]
async fn status_labels_are_set_and_a_refusal_is_a_conflict() {
    let mut world = world_with_issue().await;
    let labels = world.plan(&set_labels(&["autoforge:review"], &[]), &BTreeMap::new());
    let [row] = world.journal(vec![labels]).await.try_into().unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    assert!(
        world
            .api
            .issue(&world.repo, autoforge_journal::testing::issue(1))
            .await
            .unwrap()
            .has_label("autoforge:review")
    );

    let swap = world.plan(
        &set_labels(&["autoforge:fix"], &["autoforge:review"]),
        &BTreeMap::new(),
    );
    let [row] = world.journal(vec![swap]).await.try_into().unwrap();
    world.fault(
        "POST",
        "/repos/{owner}/{repo}/issues/{number}/labels",
        FaultKind::Status { status: 403 },
        None,
    );
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Conflict { .. }),
        "{outcome:?}"
    );
    world.clear_faults();
    let issue = world
        .api
        .issue(&world.repo, autoforge_journal::testing::issue(1))
        .await
        .unwrap();
    assert!(issue.has_label("autoforge:review") && !issue.has_label("autoforge:fix"));
}
