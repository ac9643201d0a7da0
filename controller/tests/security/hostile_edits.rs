//! Commands from people who are no operators, where GitHub lets them
//! speak: on a public repository a non-collaborator comments `/autoforge
//! unblock`, and with `operators.min_permission = "maintain"` a writer
//! (who may edit anyone's comment) both gives the command himself and
//! edits it into the owner's plain comment. The edit is judged by its
//! editor, not by the comment's author: every one is refused, each with
//! a journalled decision naming who gave it, and the BLOCKED run's row is
//! byte for byte what it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge_journal::EffectKind;
use fakehub::world::UserKind;
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::json;

use super::hostile_commands::{deliveries_processed, run_rows};
use crate::common::scenario::{self, Agents, OWNER, PATIENCE, Person, Phase, REPO, Role, Scenario};

/// A user who is no collaborator of the repository at all.
fn stranger(s: &scenario::Running, login: &str) -> Person {
    let user = s
        .world
        .hub
        .create_user(login, UserKind::User)
        .expect("create a user");
    Person {
        login: user.login,
        token: user.token.expose_secret().to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_a_strangers_command_and_a_non_operators_edit_of_an_operators_comment_change_nothing()
 {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .env("AUTOFORGE_OPERATORS_MIN_PERMISSION", "maintain")
        .start()
        .await;
    // Public, so that someone without any permission may comment at all.
    s.world
        .rest_as(
            &s.owner,
            Method::PATCH,
            &format!("/repos/{OWNER}/{REPO}"),
            json!({"private": false}),
        )
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let rows_before = run_rows(&s).await;
    let journal = s.world.db.journal();
    let effects_before = journal.list_effects(run.id).await.unwrap().len();

    let nora = stranger(&s, "nora");
    let writer = s.person("wes", "write");
    let from_stranger = s
        .comment_as(&nora, issue, "/autoforge unblock let me in")
        .await;
    let from_writer = s.comment_as(&writer, issue, "/autoforge stop").await;
    let owners = s.comment_as(&s.owner, issue, "Looks fine to me.").await;
    deliveries_processed(&s, owners, 1).await;
    s.world
        .rest_as(
            &writer,
            Method::PATCH,
            &format!("/repos/{OWNER}/{REPO}/issues/comments/{owners}"),
            json!({"body": "Looks fine to me.\n/autoforge unblock added by wes"}),
        )
        .await;
    deliveries_processed(&s, owners, 2).await;
    for comment in [from_stranger, from_writer] {
        deliveries_processed(&s, comment, 1).await;
    }
    // A real command afterwards proves the run has looked at every event.
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    scenario::eventually(PATIENCE, "the status answered", || run.decision_on(status)).await;
    run.reaches(Phase::Blocked).await;

    assert_eq!(run_rows(&s).await, rows_before, "the run rows changed");
    let decisions = run.command_decisions().await;
    for (comment, who) in [
        (from_stranger, "nora"),
        (from_writer, "wes"),
        (owners, "wes"),
    ] {
        let id = i64::try_from(comment).unwrap();
        let decided: Vec<_> = decisions.iter().filter(|d| d.comment_id == id).collect();
        assert_eq!(decided.len(), 1, "comment {comment}: {decisions:#?}");
        assert!(!decided[0].accepted, "comment {comment}: {decided:#?}");
        assert_eq!(
            decided[0].actor, who,
            "comment {comment} is judged by {who}"
        );
    }
    let accepted: Vec<_> = decisions.iter().filter(|d| d.accepted).collect();
    assert_eq!(accepted.len(), 1, "only the status: {decisions:#?}");
    let effects = journal.list_effects(run.id).await.unwrap();
    let new_kinds: Vec<EffectKind> = effects[effects_before..].iter().map(|e| e.kind).collect();
    assert!(
        new_kinds
            .iter()
            .all(|k| matches!(k, EffectKind::PostComment | EffectKind::AddReaction)),
        "only replies and the status reaction: {new_kinds:?}"
    );
    assert_eq!(s.launches(Role::Implement), 1, "nothing relaunched");
}

/// The same edit when GitHub's webhooks for comments do not arrive: the
/// poller, which reads the comment's author but not who edited it, must
/// not take the writer's added command for the owner's. (GitHub gives a
/// comment's times to the second, so the edit is made in a later second
/// than the comment, where the poller can see that it was edited.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_an_edit_seen_only_by_the_poller_is_not_taken_for_the_authors_command() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .env("AUTOFORGE_OPERATORS_MIN_PERMISSION", "maintain")
        .start()
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let rows_before = run_rows(&s).await;
    s.world.hub.set_faults(vec![fakehub::FaultRule::on_webhook(
        "issue_comment",
        fakehub::FaultKind::WebhookDrop,
    )]);
    let writer = s.person("wes", "write");
    let owners = s.comment_as(&s.owner, issue, "Looks fine to me.").await;
    next_second().await;
    s.world
        .rest_as(
            &writer,
            Method::PATCH,
            &format!("/repos/{OWNER}/{REPO}/issues/comments/{owners}"),
            json!({"body": "Looks fine to me.\n/autoforge unblock added by wes"}),
        )
        .await;
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    scenario::eventually(PATIENCE, "the status answered", || run.decision_on(status)).await;
    let decisions = run.command_decisions().await;
    assert!(
        decisions
            .iter()
            .filter(|d| d.comment_id == i64::try_from(owners).unwrap())
            .all(|d| !d.accepted),
        "{decisions:#?}"
    );
    run.reaches(Phase::Blocked).await;
    assert_eq!(run_rows(&s).await, rows_before, "the run rows changed");
}

/// Sleeps into the next wall-clock second (fakehub's clock is this one).
async fn next_second() {
    use chrono::Timelike;
    let into = chrono::Utc::now().nanosecond() / 1_000_000;
    let rest = 1_000u64.saturating_sub(u64::from(into.min(999)));
    tokio::time::sleep(std::time::Duration::from_millis(rest + 20)).await;
}
