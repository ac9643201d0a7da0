//! Commands nobody may give, on the real `autoforge serve`: a BLOCKED run
//! is sent `/autoforge unblock` and `/autoforge stop` by a reader, a
//! triager, a bot with admin rights and the App itself, by the owner only
//! inside a block quote, inline code, a fenced block, an HTML comment or a
//! `<details>` block, and by a bot's edit of the owner's comment. Every one
//! is refused or is no command at all; the run's row is byte for byte what
//! it was and nothing but replies was planned.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge_journal::{EffectKind, RunFilter};
use fakehub::world::UserKind;
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::common::scenario::{
    self, Agents, OWNER, PATIENCE, Person, Phase, REPO, Role, Running, Scenario,
};

/// The run rows as the journal holds them, without the columns every
/// lease and wake-up moves: what a command would change.
pub(super) async fn run_rows(s: &Running) -> String {
    let runs = s
        .world
        .db
        .journal()
        .list_runs(RunFilter::All, 100)
        .await
        .unwrap();
    let rows: Vec<Value> = runs
        .iter()
        .map(|run| {
            json!({
                "id": run.id.to_string(),
                "repository": run.repository,
                "epic": run.epic.map(|e| e.get()),
                "current_issue": run.current_issue.get(),
                "phase": run.phase,
                "active": run.active,
                "state": run.state,
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).unwrap()
}

/// A user of `kind` with `permission` on the repository.
fn account(s: &Running, login: &str, kind: UserKind, permission: &str) -> Person {
    let user = s.world.hub.create_user(login, kind).expect("create a user");
    s.world
        .hub
        .set_collaborator(OWNER, REPO, login, permission)
        .expect("set the permission");
    Person {
        login: user.login,
        token: user.token.expose_secret().to_owned(),
    }
}

/// The App comments on `issue` through its installation token.
async fn comment_as_the_app(s: &Running, issue: u64, body: &str) -> u64 {
    let key = octocrab::EncodingKey::from_rsa_pem(s.world.app_key().expose_secret().as_bytes())
        .expect("the App's key");
    let app = octocrab::Octocrab::builder()
        .base_uri(s.world.hub.base_url())
        .unwrap()
        .app(octocrab::models::AppId(s.world.app_id()), key)
        .build()
        .unwrap();
    let installations = app.apps().installations().send().await.unwrap();
    let installation = app.installation(installations.items[0].id).unwrap();
    let comment = installation
        .issues(OWNER, REPO)
        .create_comment(issue, body)
        .await
        .unwrap();
    comment.id.0
}

/// Waits until every delivery fakehub sent about comment `comment` (at
/// least `at_least` of them) is processed.
pub(super) async fn deliveries_processed(s: &Running, comment: u64, at_least: usize) {
    let hub = &s.world.hub;
    let journal = s.world.db.journal();
    scenario::eventually(
        PATIENCE,
        &format!("deliveries of comment {comment}"),
        || async move {
            let guids: Vec<String> = hub
                .deliveries()
                .into_iter()
                .filter(|d| d.payload["comment"]["id"].as_u64() == Some(comment))
                .map(|d| d.guid)
                .collect();
            if guids.len() < at_least {
                return None;
            }
            for guid in guids {
                let stored = journal.get_delivery(&guid).await.unwrap()?;
                stored.processed_at?;
            }
            Some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_commands_from_people_without_the_right_or_hidden_in_text_change_nothing() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let rows_before = run_rows(&s).await;
    let effects_before = s
        .world
        .db
        .journal()
        .list_effects(run.id)
        .await
        .unwrap()
        .len();

    let reader = s.person("rita", "read");
    let triager = s.person("tia", "triage");
    let bot = account(&s, "helper-bot", UserKind::Bot, "admin");
    let mut refused = Vec::new();
    for person in [&reader, &triager, &bot] {
        for command in ["/autoforge unblock because I say so", "/autoforge stop"] {
            refused.push(s.comment_as(person, issue, command).await);
        }
    }
    let n = issue.number.get();
    refused.push(comment_as_the_app(&s, n, "/autoforge unblock from the App").await);
    let hidden = [
        "> /autoforge unblock quoted from an email",
        "`/autoforge unblock` is how one would do it",
        "Like this:\n\n```\n/autoforge unblock fenced\n```\n",
        "Nothing to see.\n<!--\n/autoforge unblock hidden\n-->\n",
        "<details>\n<summary>more</summary>\n\n/autoforge unblock folded\n\n</details>\n",
        "    /autoforge unblock indented code",
    ];
    let mut not_commands = Vec::new();
    for text in hidden {
        not_commands.push(s.comment_as(&s.owner, issue, text).await);
    }
    // The owner's plain comment, then a bot (never an operator) edits a
    // command into it.
    let edited = s.comment_as(&s.owner, issue, "Looks fine to me.").await;
    deliveries_processed(&s, edited, 1).await;
    s.world
        .rest_as(
            &bot,
            Method::PATCH,
            &format!("/repos/{OWNER}/{REPO}/issues/comments/{edited}"),
            json!({"body": "Looks fine to me.\n/autoforge unblock added by an edit"}),
        )
        .await;
    deliveries_processed(&s, edited, 2).await;
    for comment in refused.iter().chain(&not_commands) {
        deliveries_processed(&s, *comment, 1).await;
    }
    // A real command afterwards proves the run has looked at every event.
    let status = s.comment_as(&s.owner, issue, "/autoforge status").await;
    scenario::eventually(PATIENCE, "the status answered", || run.decision_on(status)).await;
    run.reaches(Phase::Blocked).await;

    assert_eq!(run_rows(&s).await, rows_before, "the run rows changed");
    let decisions = run.command_decisions().await;
    let accepted: Vec<_> = decisions.iter().filter(|d| d.accepted).collect();
    assert_eq!(accepted.len(), 1, "only the status: {decisions:#?}");
    assert_eq!(accepted[0].comment_id, i64::try_from(status).unwrap());
    for comment in &not_commands {
        assert!(
            run.decision_on(*comment).await.is_none(),
            "comment {comment} was a command"
        );
    }
    let effects = s.world.db.journal().list_effects(run.id).await.unwrap();
    let new_kinds: Vec<EffectKind> = effects[effects_before..].iter().map(|e| e.kind).collect();
    assert!(
        new_kinds
            .iter()
            .all(|k| matches!(k, EffectKind::PostComment | EffectKind::AddReaction)),
        "only replies and the status reaction: {new_kinds:?}"
    );
    assert_eq!(s.launches(Role::Implement), 1, "nothing relaunched");
}
