//! Comment effects driven against fakehub and a real journal: exactly once,
//! already present, ambiguous writes, refusals, duplicates, foreign
//! markers, exhausted attempts, and the status comment edited in place.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;

use autoforge::effects::DriveOutcome;
use autoforge::machine::{EffectIntent, Phase, Reply, StatusSnapshot};
use autoforge::publish::render_marker;
use autoforge_journal::Stage;
use common::{World, ambiguous, payload_body};
use fakehub::FaultKind;
use serde_json::json;

const COMMENTS: &str = "/repos/{owner}/{repo}/issues/{number}/comments";

fn reply(comment_id: u64) -> EffectIntent {
    EffectIntent::PostCommandReply {
        thread: autoforge_journal::testing::issue(1),
        comment_id,
        reply: Reply::Accepted {
            command: "retry".into(),
            detail: "the phase is entered again".into(),
        },
    }
}

fn status(phase: Phase) -> EffectIntent {
    EffectIntent::EditStatusComment {
        issue: autoforge_journal::testing::issue(1),
        run_id: "1".into(),
        status: StatusSnapshot {
            phase,
            round: 1,
            pr: None,
            blocked_reason: None,
            failure: None,
            waiting_for: "agent".into(),
            last_validation: None,
            merge_mode: autoforge::machine::MergeMode::Never,
            blocked_from: None,
            merge_wait: None,
            tokens: 0,
            cost_micros: 0,
            epic: None,
            issue_tokens: 0,
            issue_cost_micros: 0,
            running: None,
            finished: None,
        },
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
async fn a_new_comment_is_sent_once_and_observed() {
    let mut world = world_with_issue().await;
    let planned = world.plan(&reply(41), &BTreeMap::new());
    let body = payload_body(&planned);
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Observed(observed) = outcome else {
        panic!("not observed: {outcome:?}");
    };
    let comments = world
        .api
        .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
        .await
        .unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, body);
    assert_eq!(observed["comment_id"], json!(comments[0].id));
    let row = world.row(row.id).await;
    assert_eq!((row.stage, row.attempts), (Stage::Observed, 1));
    assert_eq!(world.writes_to("POST", COMMENTS), 1);
}

#[tokio::test]
async fn a_comment_already_there_with_our_nonce_is_observed_without_sending() {
    let mut world = world_with_issue().await;
    let planned = world.plan(&reply(42), &BTreeMap::new());
    // The send of an earlier process landed; the crash lost the record.
    world
        .human_comment(
            autoforge_journal::testing::issue(1),
            &payload_body(&planned),
        )
        .await;
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    let before = world.writes_to("POST", COMMENTS);
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    assert_eq!(
        world.writes_to("POST", COMMENTS),
        before,
        "nothing was sent"
    );
    assert_eq!(world.row(row.id).await.attempts, 0);
}

#[tokio::test]
async fn an_ambiguous_write_is_reconciled_not_repeated() {
    for drop in [false, true] {
        let mut world = world_with_issue().await;
        let [row] = world
            .journal(vec![world.plan(&reply(43), &BTreeMap::new())])
            .await
            .try_into()
            .unwrap();
        world.fault("POST", COMMENTS, ambiguous(drop), Some(1));
        let outcome = world.drive(&world.executor(), row.id).await;
        assert!(
            matches!(outcome, DriveOutcome::Observed(_)),
            "drop={drop}: {outcome:?}"
        );
        assert_eq!(
            world
                .api
                .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(world.writes_to("POST", COMMENTS), 1, "drop={drop}");
    }
}

#[tokio::test]
async fn a_target_github_answers_404_for_is_a_conflict_without_a_send() {
    let mut world = world_with_issue().await;
    let intent = EffectIntent::PostCommandReply {
        thread: autoforge_journal::testing::issue(404),
        comment_id: 44,
        reply: Reply::Refused {
            command: "merge".into(),
            reason: "no".into(),
        },
    };
    let [row] = world
        .journal(vec![world.plan(&intent, &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.contains("404") && reason.contains("issue/404"),
        "{reason}"
    );
    assert_eq!(world.writes_to("POST", COMMENTS), 0);
    let row = world.row(row.id).await;
    assert_eq!((row.stage, row.attempts), (Stage::Conflict, 0));
}

#[tokio::test]
async fn a_reconcile_read_that_fails_sends_nothing_and_changes_no_stage() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(51), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world.fault("GET", COMMENTS, FaultKind::Status { status: 500 }, None);
    let error = world
        .executor()
        .drive(world.lease(), &row)
        .await
        .expect_err("the comments cannot be listed");
    assert!(error.to_string().contains("500"), "{error}");
    world.clear_faults();
    assert_eq!(world.writes_to("POST", COMMENTS), 0);
    let row = world.row(row.id).await;
    assert_eq!((row.stage, row.attempts), (Stage::Intended, 0));
}

#[tokio::test]
async fn a_refused_write_on_an_existing_issue_is_a_conflict_and_not_retried() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(45), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world.fault("POST", COMMENTS, FaultKind::Status { status: 422 }, None);
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("422"), "{reason}");
    let row = world.row(row.id).await;
    assert_eq!((row.stage, row.attempts), (Stage::Conflict, 1));
    assert_eq!(world.writes_to("POST", COMMENTS), 1);
}

#[tokio::test]
async fn two_comments_with_one_identity_are_a_conflict_naming_both() {
    let mut world = world_with_issue().await;
    let planned = world.plan(&reply(46), &BTreeMap::new());
    let first = world
        .human_comment(
            autoforge_journal::testing::issue(1),
            &payload_body(&planned),
        )
        .await;
    let second = world
        .human_comment(
            autoforge_journal::testing::issue(1),
            &payload_body(&planned),
        )
        .await;
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    let before = world.all_writes();
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.contains(&format!("issuecomment-{first}")),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("issuecomment-{second}")),
        "{reason}"
    );
    assert_eq!(world.all_writes(), before);
}

#[tokio::test]
async fn a_foreign_comment_with_our_marker_blocks_the_run_and_is_left_alone() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(47), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    // Same identity, but no nonce this journal issued: someone else wrote it.
    let forged = render_marker(
        "autoforge-reply",
        &json!({ "command_comment_id": 47, "run": world.run_id().0 }),
    );
    let foreign = world
        .human_comment(
            autoforge_journal::testing::issue(1),
            &format!("looks legit\n\n{forged}"),
        )
        .await;
    let before = world.all_writes();
    let outcome = world.drive(&world.executor(), row.id).await;
    let DriveOutcome::Blocked { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.contains(&format!("issuecomment-{foreign}")),
        "{reason}"
    );
    assert_eq!(world.all_writes(), before, "never adopted, never deleted");
    assert_eq!(
        world
            .api
            .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn an_unreadable_marker_blocks_instead_of_counting_as_absent() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(48), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world
        .human_comment(
            autoforge_journal::testing::issue(1),
            "<!-- autoforge-reply: {command_comment_id: 48} -->",
        )
        .await;
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Blocked { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        world.writes_to("POST", COMMENTS),
        1,
        "only the human's comment"
    );
}

#[tokio::test]
async fn sends_answered_502_are_resent_after_a_reconcile_and_stop_after_five_with_the_manual_step()
{
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(49), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    // 502 without running the handler: the write never lands.
    world.fault("POST", COMMENTS, FaultKind::Status { status: 502 }, None);
    let executor = world.executor();
    for attempt in 1..=autoforge_journal::MAX_UNANSWERED_SENDS {
        let outcome = world.drive(&executor, row.id).await;
        assert_eq!(outcome, DriveOutcome::StillAttempted);
        let stored = world.row(row.id).await;
        assert_eq!((stored.attempts, stored.unanswered), (attempt, attempt));
    }
    let outcome = world.drive(&executor, row.id).await;
    let DriveOutcome::Blocked { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("by hand"), "{reason}");
    assert!(
        reason.contains("5 of them answered with an error"),
        "{reason}"
    );
    assert_eq!(world.writes_to("POST", COMMENTS), 5);
    assert_eq!(world.row(row.id).await.stage, Stage::Conflict);
}

#[tokio::test]
async fn a_refusal_after_a_send_of_unknown_outcome_is_reconciled_again_before_it_counts() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(55), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let executor = world.executor();
    world.fault("POST", COMMENTS, FaultKind::Status { status: 502 }, Some(1));
    assert_eq!(
        world.drive(&executor, row.id).await,
        DriveOutcome::StillAttempted
    );
    // The resend is refused, as GitHub may refuse for the sake of an
    // earlier send still landing: not final yet.
    world.fault("POST", COMMENTS, FaultKind::Status { status: 422 }, Some(1));
    assert_eq!(
        world.drive(&executor, row.id).await,
        DriveOutcome::StillAttempted
    );
    let stored = world.row(row.id).await;
    assert_eq!(
        (stored.stage, stored.attempts, stored.unanswered),
        (Stage::Attempted, 2, 2)
    );
    world.clear_faults();
    let outcome = world.drive(&executor, row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
}

#[tokio::test]
async fn refusals_that_persist_after_a_send_of_unknown_outcome_end_in_a_conflict_naming_them() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(56), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let executor = world.executor();
    world.fault("POST", COMMENTS, FaultKind::Status { status: 502 }, Some(1));
    assert_eq!(
        world.drive(&executor, row.id).await,
        DriveOutcome::StillAttempted
    );
    world.fault("POST", COMMENTS, FaultKind::Status { status: 422 }, None);
    let mut sends = 1;
    let reason = loop {
        sends += 1;
        match world.drive(&executor, row.id).await {
            DriveOutcome::StillAttempted => assert!(sends < 10, "never settled"),
            DriveOutcome::Conflict { reason } => break reason,
            other => panic!("{other:?}"),
        }
    };
    assert!(
        reason.contains("GitHub refused the post_comment"),
        "{reason}"
    );
    assert_eq!(sends, autoforge_journal::MAX_UNANSWERED_SENDS);
    assert_eq!(world.writes_to("POST", COMMENTS), sends as usize);
    assert_eq!(world.row(row.id).await.stage, Stage::Conflict);
}

#[tokio::test]
async fn a_write_that_landed_while_answered_502_is_observed_not_resent() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(51), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world.fault(
        "POST",
        COMMENTS,
        FaultKind::AmbiguousWrite { drop: false },
        Some(1),
    );
    let executor = world.executor();
    let outcome = world.drive(&executor, row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let stored = world.row(row.id).await;
    assert_eq!((stored.attempts, stored.unanswered), (1, 0));
    assert_eq!(world.writes_to("POST", COMMENTS), 1);
}

#[tokio::test]
async fn a_second_attempt_follows_a_reconcile_that_shows_the_first_did_not_land() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(50), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world.fault("POST", COMMENTS, FaultKind::Status { status: 503 }, Some(1));
    let executor = world.executor();
    assert_eq!(
        world.drive(&executor, row.id).await,
        DriveOutcome::StillAttempted
    );
    let outcome = world.drive(&executor, row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    assert_eq!(world.row(row.id).await.attempts, 2);
    assert_eq!(
        world
            .api
            .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn the_status_comment_is_created_once_then_edited_in_place() {
    let mut world = world_with_issue().await;
    let executor = world.executor();
    let [first] = world
        .journal(vec![
            world.plan(&status(Phase::Implement), &BTreeMap::new()),
        ])
        .await
        .try_into()
        .unwrap();
    assert!(matches!(
        world.drive(&executor, first.id).await,
        DriveOutcome::Observed(_)
    ));
    let second_plan = world.plan(&status(Phase::Review), &BTreeMap::new());
    let wanted = payload_body(&second_plan);
    let [second] = world.journal(vec![second_plan]).await.try_into().unwrap();
    world.fault(
        "PATCH",
        "/repos/{owner}/{repo}/issues/comments/{id}",
        ambiguous(false),
        Some(1),
    );
    let outcome = world.drive(&executor, second.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let comments = world
        .api
        .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
        .await
        .unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, wanted);
    assert!(wanted.contains("**REVIEW**"));
    assert_eq!(world.writes_to("POST", COMMENTS), 1);
}

#[tokio::test]
async fn an_object_the_entry_observation_saw_is_a_conflict_not_foreign() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(52), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let older = render_marker("autoforge-reply", &json!({ "command_comment_id": 52 }));
    let seen = world
        .human_comment(
            autoforge_journal::testing::issue(1),
            &format!("an older reply\n\n{older}"),
        )
        .await;
    let executor = world
        .executor()
        .with_entry_seen([format!("comment/{seen}")]);
    let outcome = world.drive(&executor, row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains(&format!("issuecomment-{seen}")), "{reason}");
    assert_eq!(world.writes_to("POST", COMMENTS), 1, "only the older reply");
}

#[tokio::test]
async fn a_driver_whose_run_was_taken_over_sends_nothing() {
    let mut world = world_with_issue().await;
    let [row] = world
        .journal(vec![world.plan(&reply(53), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    world
        .db
        .journal()
        .release_lease(world.lease())
        .await
        .unwrap();
    let error = world
        .executor()
        .drive(world.lease(), &row)
        .await
        .expect_err("a stale lease cannot mark the effect attempted");
    assert!(
        matches!(
            error,
            autoforge::effects::EffectError::Journal(
                autoforge_journal::JournalError::StaleLease { .. }
            )
        ),
        "{error}"
    );
    assert_eq!(world.writes_to("POST", COMMENTS), 0);
    assert_eq!(world.row(row.id).await.stage, Stage::Intended);
}
