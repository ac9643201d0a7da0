//! `autoforge serve` end to end: the real binary against fakehub and a real
//! Postgres. Each test starts its own world (see `serve_harness.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge_journal::{RunFilter, RunId};
use common::{POLL_SECONDS, World, WorldOptions, eventually};
use fakehub::{FaultKind, FaultRule};

const PERMISSION_ROUTE: &str = "/repos/{owner}/{repo}/collaborators/{username}/permission";

async fn wait_for_run(world: &World, issue: u64) -> RunId {
    let repository = world.repository();
    eventually(Duration::from_secs(15), "a run for the issue", || {
        let repository = repository.clone();
        async move {
            world
                .db
                .journal()
                .active_run_for_issue(&repository, autoforge_journal::testing::issue(issue))
                .await
                .unwrap()
                .map(|run| run.id)
        }
    })
    .await
}

fn webhook_rule(kind: FaultKind, event: &str) -> FaultRule {
    FaultRule::on_webhook(event, kind).times(1)
}

#[tokio::test(flavor = "multi_thread")]
async fn trigger_label_by_an_admin_starts_a_run_and_by_a_triage_user_is_refused() {
    let world = World::start().await;
    let admin = world.person("ada", "admin");
    // GitHub lets `triage` (not `read`) add labels; both are below the
    // default `write` minimum, so this is the refusal a real repo can see.
    let reader = world.person("rory", "triage");

    let refused_issue = world.open_issue(&admin, "from a reader").await;
    world.add_label(&reader, refused_issue, "autoforge").await;
    let refusal = eventually(Duration::from_secs(15), "the refusal", || async {
        world
            .db
            .journal()
            .list_audit_events_of_kind("trigger_refused", 10)
            .await
            .unwrap()
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(refusal.detail["actor"], "rory");
    assert!(
        refusal.detail["reason"]
            .as_str()
            .unwrap()
            .contains("`triage`"),
        "{}",
        refusal.detail
    );

    let issue = world.open_issue(&admin, "from an admin").await;
    world.add_label(&admin, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    let events = world.db.journal().list_run_events(run_id).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event["kind"], "started");
    assert_eq!(events[0].event["labeled_by"], "ada");

    // The reader's issue never got a run, and the decision came from the
    // permission endpoint, not from the payload.
    let runs = world
        .db
        .journal()
        .list_runs(RunFilter::All, 10)
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert!(world.requests_to(PERMISSION_ROUTE).len() >= 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicated_delivery_is_stored_and_processed_once() {
    let world = World::start().await;
    world
        .hub
        .set_faults(vec![webhook_rule(FaultKind::WebhookDuplicate, "issues")]);
    let owner = world.owner();
    let issue = world.open_issue(&owner, "twice").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    // Give the second copy time to arrive and be refused as a duplicate.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent_twice = world
        .hub
        .deliveries()
        .into_iter()
        .filter(|d| d.event == "issues" && d.action.as_deref() == Some("opened"))
        .count();
    assert!(sent_twice >= 1);
    assert_eq!(
        world
            .db
            .journal()
            .list_run_events(run_id)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        world
            .db
            .journal()
            .list_runs(RunFilter::All, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_label_delivery_is_recovered_within_one_poll_interval() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "lost webhook").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    world
        .hub
        .set_faults(vec![webhook_rule(FaultKind::WebhookDrop, "issues")]);
    let labelled_at = std::time::Instant::now();
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = eventually(
        Duration::from_secs(POLL_SECONDS + 10),
        "the poller to find the labelled issue",
        || async {
            world
                .db
                .journal()
                .active_run_for_issue(
                    &world.repository(),
                    autoforge_journal::testing::issue(issue),
                )
                .await
                .unwrap()
                .map(|run| run.id)
        },
    )
    .await;
    assert!(labelled_at.elapsed() < Duration::from_secs(POLL_SECONDS + 10));
    // Whether the poller or the redelivery got there first, it acted once.
    tokio::time::sleep(Duration::from_secs(POLL_SECONDS + 1)).await;
    assert_eq!(
        world
            .db
            .journal()
            .list_run_events(run_id)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_in_code_blocks_and_quotes_are_ignored_and_a_plain_one_is_accepted() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "commands").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;

    let hidden = world
        .comment(
            &owner,
            issue,
            "```\n/autoforge stop\n```\n\n> /autoforge retry\n\nuse `/autoforge stop` later",
        )
        .await;
    let plain = world.comment(&owner, issue, "/autoforge status").await;
    let decisions = eventually(Duration::from_secs(15), "the status decision", || async {
        let decisions = world
            .db
            .journal()
            .list_command_decisions(run_id)
            .await
            .unwrap();
        (!decisions.is_empty()).then_some(decisions)
    })
    .await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].comment_id, i64::try_from(plain).unwrap());
    assert_eq!(decisions[0].command, "status");
    assert!(decisions[0].accepted);
    assert!(
        decisions
            .iter()
            .all(|d| d.comment_id != i64::try_from(hidden).unwrap())
    );
    let events = world.db.journal().list_run_events(run_id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| e.event["kind"].clone()).collect();
    assert_eq!(kinds, ["started", "command"]);
    assert_eq!(events[1].event["verb"], "status");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_by_a_read_user_is_refused_and_recorded() {
    let world = World::start().await;
    let owner = world.owner();
    let reader = world.person("rory", "read");
    let issue = world.open_issue(&owner, "refused command").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    world.comment(&reader, issue, "/autoforge stop").await;
    let decisions = eventually(Duration::from_secs(15), "the refusal", || async {
        let decisions = world
            .db
            .journal()
            .list_command_decisions(run_id)
            .await
            .unwrap();
        (!decisions.is_empty()).then_some(decisions)
    })
    .await;
    assert_eq!(decisions[0].actor, "rory");
    assert!(!decisions[0].accepted);
    // The refusal is queued for the run to answer; no command is.
    let kinds: Vec<_> = world
        .db
        .journal()
        .list_run_events(run_id)
        .await
        .unwrap()
        .iter()
        .map(|e| e.event["kind"].clone())
        .collect();
    assert_eq!(kinds, ["started", "command_refused"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_probes_refuses_bad_signatures_and_stops_cleanly_on_sigterm() {
    let mut world = World::start().await;
    let healthz = world
        .http
        .get(format!("{}/healthz", world.serve_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.status(), 200);
    let unsigned = world
        .http
        .post(format!("{}/webhook", world.serve_url()))
        .header("x-github-event", "ping")
        .header("x-github-delivery", "forged-1")
        .header("x-hub-signature-256", format!("sha256={}", "0".repeat(64)))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    assert!(
        world
            .db
            .journal()
            .get_delivery("forged-1")
            .await
            .unwrap()
            .is_none()
    );

    // A redelivery carries the same GUID: stored once, answered 200.
    let body = br#"{"zen":"redelivered","hook_id":1}"#;
    let signature =
        autoforge::webhook::sign_body(&secrecy::SecretString::from(common::WEBHOOK_SECRET), body);
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let response = world
            .http
            .post(format!("{}/webhook", world.serve_url()))
            .header("x-github-event", "ping")
            .header("x-github-delivery", "again-1")
            .header("x-hub-signature-256", &signature)
            .header("content-type", "application/json")
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [202, 200]);
    eventually(
        Duration::from_secs(10),
        "the ping to be processed",
        || async {
            world
                .db
                .journal()
                .get_delivery("again-1")
                .await
                .unwrap()
                .and_then(|d| d.processed_at)
        },
    )
    .await;

    let status = world.terminate();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_redelivered_by_github_is_processed_once() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "redelivered").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    let labeled = world
        .hub
        .deliveries()
        .into_iter()
        .find(|d| d.event == "issues" && d.action.as_deref() == Some("labeled"))
        .expect("the labeled delivery");

    let client = autoforge::github::GitHubClient::new(
        world.hub.base_url(),
        autoforge::github::GitHubAuth::App {
            app_id: world.app_id(),
            private_key_pem: world.app_key(),
        },
    )
    .unwrap();
    autoforge::github::writes::redeliver_hook_delivery(&client.app().unwrap(), labeled.id)
        .await
        .unwrap();
    let answered = eventually(Duration::from_secs(10), "the redelivery", || async {
        world
            .hub
            .deliveries()
            .into_iter()
            .find(|d| d.guid == labeled.guid && d.redelivery && d.status_code != 0)
            .map(|d| d.status_code)
    })
    .await;
    assert_eq!(answered, 200, "a known delivery id is a duplicate");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        world
            .db
            .journal()
            .list_run_events(run_id)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_on_its_managed_postgres_and_stops_it_on_sigterm() {
    let mut world = World::start_with(WorldOptions {
        managed_database: true,
        ..WorldOptions::default()
    })
    .await;
    let data_dir = world.state_dir().join("postgres");
    assert!(
        data_dir.exists(),
        "the managed cluster lives under the state dir"
    );
    let status = world.terminate();
    assert!(status.success(), "{status:?}");
    let pid_files: Vec<_> = walk(&data_dir)
        .into_iter()
        .filter(|path| path.ends_with("postmaster.pid"))
        .collect();
    assert!(
        pid_files.is_empty(),
        "the managed Postgres is still running: {pid_files:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_to_start_without_a_webhook_secret() {
    let state = tempfile::tempdir().unwrap();
    let output = common::serve_command(state.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("AUTOFORGE_WEBHOOK_SECRET"), "{stderr}");
    // Refused before anything started: no managed database was created.
    assert!(!state.path().join("postgres").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_drives_a_started_run_to_implement_with_one_status_comment() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "driven by serve").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;

    // The driver inside serve leases the run, decides the start and posts
    // the run's status comment through the effect journal.
    let path = format!("/repos/{}/issues/{issue}/comments", world.repository());
    let status_comments = eventually(Duration::from_secs(20), "the status comment", || {
        let path = path.clone();
        let world = &world;
        let owner = owner.clone();
        async move {
            let comments = world
                .rest_as(&owner, reqwest::Method::GET, &path, serde_json::Value::Null)
                .await;
            let found: Vec<serde_json::Value> = comments
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| {
                    c["body"]
                        .as_str()
                        .is_some_and(|b| b.contains("autoforge-status"))
                })
                .cloned()
                .collect();
            (!found.is_empty()).then_some(found)
        }
    })
    .await;
    assert_eq!(status_comments.len(), 1, "exactly one status comment");
    assert!(
        status_comments[0]["user"]["login"]
            .as_str()
            .is_some_and(|login| login.ends_with("[bot]")),
        "the App wrote it: {}",
        status_comments[0]["user"]
    );

    // The comment is visible on GitHub a moment before the executor's
    // read-back marks the effect observed: wait for the journal to settle.
    let effects = eventually(Duration::from_secs(20), "the effects observed", || async {
        let effects = world.db.journal().list_effects(run_id).await.unwrap();
        (!effects.is_empty()
            && effects
                .iter()
                .all(|e| e.stage == autoforge_journal::Stage::Observed))
        .then_some(effects)
    })
    .await;
    assert!(
        effects
            .iter()
            .any(|e| e.kind == autoforge_journal::EffectKind::EditStatusComment),
        "the status comment went through the journal: {effects:?}"
    );
    let run = world
        .db
        .journal()
        .get_run(run_id)
        .await
        .unwrap()
        .expect("the run");
    assert_eq!(run.phase, "IMPLEMENT");
}

/// An implementer that commits `feature.txt` and answers for issue 1, and a
/// validation command that always passes; no reviewer, so the run waits in
/// REVIEW once its PR is open.
fn scripted_implementer_config() -> String {
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
[agents.profiles.scripted]
command = ["{script}", "good", "{{hub}}/octo/widgets/issues/1"]
idle_timeout_seconds = 60
max_runtime_seconds = 120

[agents.roles]
implement = "scripted"

[validation]
commands = ["true"]
timeout_seconds = 60
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_pushes_the_implementers_branch_with_an_installation_token_and_opens_one_pr() {
    let world = World::start_with(WorldOptions {
        config_toml: Some(scripted_implementer_config()),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;

    let pulls_path = format!("/repos/{}/pulls?state=all", world.repository());
    let pulls = eventually(Duration::from_secs(90), "the run's pull request", || {
        let path = pulls_path.clone();
        let world = &world;
        let owner = owner.clone();
        async move {
            let pulls = world
                .rest_as(&owner, reqwest::Method::GET, &path, serde_json::Value::Null)
                .await;
            let pulls = pulls.as_array().cloned().unwrap_or_default();
            (!pulls.is_empty()).then_some(pulls)
        }
    })
    .await;
    let branch = format!("autoforge/{issue}");
    assert_eq!(pulls.len(), 1, "exactly one PR: {pulls:?}");
    assert_eq!(pulls[0]["head"]["ref"].as_str(), Some(branch.as_str()));
    assert!(
        pulls[0]["user"]["login"]
            .as_str()
            .is_some_and(|login| login.ends_with("[bot]")),
        "the App opened it: {}",
        pulls[0]["user"]
    );

    // The branch exists on fakehub's git side and holds the agent's commit.
    // The repository is private and serve holds only the App's key, so the
    // fetch and the push went through with an installation token.
    let pushed = world
        .rest_as(
            &owner,
            reqwest::Method::GET,
            &format!("/repos/{}/branches/{branch}", world.repository()),
            serde_json::Value::Null,
        )
        .await;
    let head = pushed["commit"]["sha"].as_str().expect("branch head sha");
    assert_eq!(pulls[0]["head"]["sha"].as_str(), Some(head));

    let run = eventually(Duration::from_secs(30), "the run in REVIEW", || async {
        let run = world.db.journal().get_run(run_id).await.unwrap()?;
        (run.phase == "REVIEW").then_some(run)
    })
    .await;
    assert_eq!(run.phase, "REVIEW");

    // Still exactly one PR after the driver had time for another pass.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = world
        .rest_as(
            &owner,
            reqwest::Method::GET,
            &pulls_path,
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(again.as_array().map(Vec::len), Some(1), "{again}");
}
