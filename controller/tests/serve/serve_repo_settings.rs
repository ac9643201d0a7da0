//! Repository settings end to end (SPEC §16): `.github/autoforge.toml` is
//! read from the default branch when a run starts and frozen into it. The
//! real `autoforge serve` binary runs against fakehub and a real Postgres;
//! the operator's own validation command always fails, so a run that
//! reaches REVIEW proves the repository's commands were the ones used.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use autoforge_journal::RunId;
use base64::Engine;
use common::{OWNER, Person, REPO, World, WorldOptions, eventually};
use serde_json::{Value, json};

const SETTINGS: &str = ".github/autoforge.toml";

/// The scripted implementer for issue 1, started only once `gate` exists
/// (so a test can act while the run is in IMPLEMENT); the operator's
/// validation always fails.
fn config(scratch: &Path) -> String {
    let implementer = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let gated = scratch.join("gated_implementer.sh");
    std::fs::write(
        &gated,
        format!(
            "#!/bin/sh\nwhile [ ! -e '{gate}' ]; do sleep 0.1; done\nexec '{implementer}' \"$@\"\n",
            gate = scratch.join("gate").display()
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&gated).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&gated, permissions).unwrap();
    format!(
        r#"
[agents.profiles.scripted]
command = ["{gated}", "good", "{{hub}}/octo/widgets/issues/1"]
idle_timeout_seconds = 60
max_runtime_seconds = 120

# The wrapper lives in the scratch directory; the agent it starts, here.
[agents.profiles.scripted.sandbox]
read_only = ["{agents_dir}"]

[agents.roles]
implement = "scripted"

[validation]
commands = ["false"]
timeout_seconds = 60

[limits]
validation_failures_per_phase = 1
"#,
        gated = gated.display(),
        agents_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/agents"),
    )
}

fn open_gate(scratch: &Path) {
    std::fs::write(scratch.join("gate"), "").unwrap();
}

/// Creates or replaces `path` on `branch` through the contents API.
async fn put_file(world: &World, person: &Person, branch: &str, path: &str, text: &str) {
    let current = world
        .http
        .get(format!(
            "{}/repos/{OWNER}/{REPO}/contents/{path}?ref={branch}",
            world.hub.base_url()
        ))
        .header("authorization", format!("token {}", person.token))
        .header("user-agent", "autoforge-e2e")
        .send()
        .await
        .unwrap();
    let sha = if current.status().is_success() {
        current.json::<Value>().await.unwrap()["sha"]
            .as_str()
            .map(str::to_owned)
    } else {
        None
    };
    let mut body = json!({
        "message": format!("Set {path}"),
        "content": base64::engine::general_purpose::STANDARD.encode(text),
        "branch": branch,
    });
    if let Some(sha) = sha {
        body["sha"] = json!(sha);
    }
    world
        .rest_as(
            person,
            reqwest::Method::PUT,
            &format!("/repos/{OWNER}/{REPO}/contents/{path}"),
            body,
        )
        .await;
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// Pushes a branch off `main` whose settings file says `text`, and opens a
/// PR from it, as a contributor would.
async fn open_pr_changing_settings(world: &World, person: &Person, text: &str) {
    let work = tempfile::tempdir().unwrap();
    let header = format!(
        "http.extraHeader=Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("x-access-token:{}", person.token))
    );
    let url = world.hub.git_url(OWNER, REPO);
    git(work.path(), &["-c", &header, "clone", "-q", &url, "clone"]);
    let clone = work.path().join("clone");
    std::fs::create_dir_all(clone.join(".github")).unwrap();
    std::fs::write(clone.join(SETTINGS), text).unwrap();
    git(&clone, &["checkout", "-q", "-b", "contributor"]);
    git(&clone, &["add", SETTINGS]);
    git(
        &clone,
        &[
            "-c",
            "user.name=contributor",
            "-c",
            "user.email=contributor@example.invalid",
            "commit",
            "-q",
            "-m",
            "Change the validation",
        ],
    );
    git(
        &clone,
        &["-c", &header, "push", "-q", "origin", "contributor"],
    );
    world
        .rest_as(
            person,
            reqwest::Method::POST,
            &format!("/repos/{OWNER}/{REPO}/pulls"),
            json!({"title": "Change the validation", "head": "contributor", "base": "main"}),
        )
        .await;
}

async fn wait_for_run(world: &World, issue: u64) -> RunId {
    eventually(Duration::from_secs(15), "a run for the issue", || async {
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
    })
    .await
}

async fn wait_for_phase(world: &World, run_id: RunId, phase: &str) -> Value {
    let what = format!("the run in {phase}");
    eventually(Duration::from_secs(90), &what, || async {
        let run = world.db.journal().get_run(run_id).await.unwrap()?;
        // A new run's row says IMPLEMENT before the driver has written its
        // document; the document's own phase is the one that counts.
        (run.phase == phase && run.state["phase"] == phase).then_some(run.state)
    })
    .await
}

async fn status_comment(world: &World, person: &Person, issue: u64) -> String {
    let path = format!("/repos/{OWNER}/{REPO}/issues/{issue}/comments");
    let comments = world
        .rest_as(person, reqwest::Method::GET, &path, Value::Null)
        .await;
    comments
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["body"].as_str())
        .find(|body| body.contains("autoforge-status"))
        .map(str::to_owned)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_are_read_from_the_default_branch_and_a_later_edit_changes_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let world = World::start_with(WorldOptions {
        config_toml: Some(config(scratch.path())),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    put_file(
        &world,
        &owner,
        "main",
        SETTINGS,
        "[validation]\ncommands = [\"true\"]\n\n[labels]\nstatus = true\n",
    )
    .await;
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    let state = wait_for_phase(&world, run_id, "IMPLEMENT").await;
    assert_eq!(
        state["repository_settings"]["validation"]["commands"],
        json!(["true"])
    );
    assert_eq!(state["settings"]["status_labels"], json!(true));

    // The file now says the opposite; the run keeps what it froze.
    put_file(
        &world,
        &owner,
        "main",
        SETTINGS,
        "[validation]\ncommands = [\"false\"]\n",
    )
    .await;
    open_gate(scratch.path());
    let state = wait_for_phase(&world, run_id, "REVIEW").await;
    assert_eq!(
        state["repository_settings"]["validation"]["commands"],
        json!(["true"])
    );
    let validations = world
        .db
        .journal()
        .list_validations(run_id, None)
        .await
        .unwrap();
    assert!(
        validations.iter().all(|v| v.command == "true"),
        "{validations:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_changing_the_settings_file_has_no_effect() {
    let scratch = tempfile::tempdir().unwrap();
    let world = World::start_with(WorldOptions {
        config_toml: Some(config(scratch.path())),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    put_file(
        &world,
        &owner,
        "main",
        SETTINGS,
        "[validation]\ncommands = [\"true\"]\n",
    )
    .await;
    // Issues and PRs share numbers: the issue comes first.
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    let contributor = world.person("carol", "write");
    open_pr_changing_settings(
        &world,
        &contributor,
        "[validation]\ncommands = [\"false\"]\n",
    )
    .await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    open_gate(scratch.path());
    let state = wait_for_phase(&world, run_id, "REVIEW").await;
    assert_eq!(
        state["repository_settings"]["validation"]["commands"],
        json!(["true"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_settings_file_blocks_the_run_with_the_reason_in_the_status_comment() {
    let scratch = tempfile::tempdir().unwrap();
    let world = World::start_with(WorldOptions {
        config_toml: Some(config(scratch.path())),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    put_file(
        &world,
        &owner,
        "main",
        SETTINGS,
        "[validation]\ncommand = [\"make test\"]\n",
    )
    .await;
    let issue = world.open_issue(&owner, "add the feature").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    let state = wait_for_phase(&world, run_id, "BLOCKED").await;
    let reason = state["blocked"]["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.contains("unknown key `command` in `validation`"),
        "{reason}"
    );
    let comment = eventually(
        Duration::from_secs(20),
        "the status comment showing the reason",
        || async {
            let body = status_comment(&world, &owner, issue).await;
            body.contains("unknown key `command`").then_some(body)
        },
    )
    .await;
    assert!(comment.contains("**BLOCKED**"), "{comment}");
    assert!(
        world
            .db
            .journal()
            .list_launches(run_id)
            .await
            .unwrap()
            .is_empty(),
        "no agent ran"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_repository_may_pick_another_of_the_operators_profiles_for_a_role() {
    let scratch = tempfile::tempdir().unwrap();
    // The operator's implementer is a profile that always exits 1; the
    // repository picks the working one, which the operator also defines.
    let config = config(scratch.path()).replace(
        "[agents.roles]\nimplement = \"scripted\"",
        "[agents.profiles.broken]\ncommand = [\"false\"]\n\n[agents.roles]\nimplement = \"broken\"",
    );
    assert!(config.contains("implement = \"broken\""));
    let world = World::start_with(WorldOptions {
        config_toml: Some(config),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    put_file(
        &world,
        &owner,
        "main",
        SETTINGS,
        "[validation]\ncommands = [\"true\"]\n\n[agents]\nimplement = \"scripted\"\n",
    )
    .await;
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    open_gate(scratch.path());
    let state = wait_for_phase(&world, run_id, "REVIEW").await;
    assert_eq!(
        state["repository_settings"]["agents"]["implement"],
        json!("scripted")
    );
    let launches = world.db.journal().list_launches(run_id).await.unwrap();
    assert_eq!(launches.len(), 1, "one launch, of the chosen profile");
    assert_eq!(launches[0].profile, "scripted");
}
