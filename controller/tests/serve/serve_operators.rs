//! Operator commands and stops end to end (SPEC §2): the real `autoforge
//! serve` binary against fakehub and a real Postgres. People comment and
//! label through fakehub's REST API; the assertions read the journal and
//! what fakehub holds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use autoforge_journal::{EffectKind, RunId, Stage};
use common::{OWNER, Person, REPO, World, WorldOptions, eventually};
use serde_json::Value;

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

async fn wait_for_phase(world: &World, run_id: RunId, phase: &str, within: Duration) {
    let what = format!("the run in {phase}");
    eventually(within, &what, || async {
        let run = world.db.journal().get_run(run_id).await.unwrap()?;
        // A new run's row says IMPLEMENT before the driver has written its
        // document; the document's own phase is the one that counts.
        (run.phase == phase && run.state["phase"] == phase).then_some(())
    })
    .await;
}

/// The reply effect to `comment_id`, once observed.
async fn observed_reply(
    world: &World,
    run_id: RunId,
    comment_id: u64,
) -> autoforge_journal::Effect {
    let identity = format!("autoforge-reply:command_comment_id={comment_id}");
    eventually(Duration::from_secs(30), "the command's reply", || async {
        world
            .db
            .journal()
            .list_effects(run_id)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.identity == identity && e.stage == Stage::Observed)
    })
    .await
}

/// Effects of `kind` for `comment_id` in the run's journal (any stage).
async fn effects_for_comment(
    world: &World,
    run_id: RunId,
    kind: EffectKind,
    comment_id: u64,
) -> usize {
    let suffix = format!("={comment_id}");
    world
        .db
        .journal()
        .list_effects(run_id)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == kind && e.identity.ends_with(&suffix))
        .count()
}

async fn comments_on(world: &World, person: &Person, thread: u64) -> Vec<Value> {
    let path = format!("/repos/{OWNER}/{REPO}/issues/{thread}/comments");
    let comments = world
        .rest_as(person, reqwest::Method::GET, &path, Value::Null)
        .await;
    comments.as_array().cloned().unwrap_or_default()
}

/// The bot's reply on `thread` to `comment_id`, by its marker.
async fn reply_on(world: &World, person: &Person, thread: u64, comment_id: u64) -> String {
    let marker = format!("\"command_comment_id\":{comment_id}");
    let replies: Vec<String> = comments_on(world, person, thread)
        .await
        .into_iter()
        .filter_map(|c| c["body"].as_str().map(str::to_owned))
        .filter(|body| body.contains("autoforge-reply") && body.contains(&marker))
        .collect();
    assert_eq!(replies.len(), 1, "exactly one reply: {replies:?}");
    replies.into_iter().next().unwrap()
}

async fn eyes_on(world: &World, person: &Person, comment_id: u64) -> usize {
    let path = format!("/repos/{OWNER}/{REPO}/issues/comments/{comment_id}/reactions");
    let reactions = world
        .rest_as(person, reqwest::Method::GET, &path, Value::Null)
        .await;
    reactions
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["content"] == "eyes")
        .count()
}

async fn run_document(world: &World, run_id: RunId) -> String {
    let run = world.db.journal().get_run(run_id).await.unwrap().unwrap();
    serde_json::to_string(&run.state).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_is_answered_with_one_reaction_and_one_reply() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "status please").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    wait_for_phase(&world, run_id, "IMPLEMENT", Duration::from_secs(20)).await;

    let comment = world.comment(&owner, issue, "/autoforge status").await;
    observed_reply(&world, run_id, comment).await;
    let reply = reply_on(&world, &owner, issue, comment).await;
    assert!(reply.contains("Phase: **IMPLEMENT**"), "{reply}");
    assert!(reply.contains("/autoforge stop"), "{reply}");
    eventually(Duration::from_secs(20), "the 👀 reaction", || async {
        (eyes_on(&world, &owner, comment).await == 1).then_some(())
    })
    .await;
    assert_eq!(
        effects_for_comment(&world, run_id, EffectKind::AddReaction, comment).await,
        1
    );
    assert_eq!(
        world
            .db
            .journal()
            .get_run(run_id)
            .await
            .unwrap()
            .unwrap()
            .phase,
        "IMPLEMENT"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_by_an_operator_stops_the_run_with_a_reaction_and_a_reply() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "stop me").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    wait_for_phase(&world, run_id, "IMPLEMENT", Duration::from_secs(20)).await;

    let comment = world.comment(&owner, issue, "/autoforge stop").await;
    wait_for_phase(&world, run_id, "STOPPED", Duration::from_secs(20)).await;
    observed_reply(&world, run_id, comment).await;
    let reply = reply_on(&world, &owner, issue, comment).await;
    assert!(reply.starts_with("Accepted `/autoforge stop`"), "{reply}");
    eventually(Duration::from_secs(20), "the 👀 reaction", || async {
        (eyes_on(&world, &owner, comment).await == 1).then_some(())
    })
    .await;
    let decisions = world
        .db
        .journal()
        .list_command_decisions(run_id)
        .await
        .unwrap();
    assert_eq!(decisions.len(), 1);
    assert!(decisions[0].accepted);
    assert_eq!(decisions[0].actor, OWNER);
}

/// An implementer that commits and answers for issue 1, validated by a
/// command that passes only once `pass_flag` exists; one failed validation
/// blocks the run. Once the flag exists the implementer repairs: work is
/// kept across launches, so it adds a commit on top of the failed
/// candidate, whose failed validation is final (SPEC §12).
fn gated_validation_config(pass_flag: &Path) -> String {
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
# The gate is a file on the host, which the sandbox hides from validation
# by design; this test is about operator commands, not the sandbox.
[agents]
sandbox = "off"

[agents.profiles.scripted]
command = ["sh", "-c", "if [ -e \"$1\" ]; then m=repair; else m=good; fi; exec \"$0\" \"$m\" \"$2\"", "{script}", "{flag}", "{{hub}}/octo/widgets/issues/1"]
idle_timeout_seconds = 60
max_runtime_seconds = 120

[agents.roles]
implement = "scripted"

[validation]
commands = [["test", "-e", "{flag}"]]
timeout_seconds = 60

[limits]
validation_failures_per_phase = 1
"#,
        flag = pass_flag.display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn unblock_by_a_reader_is_refused_unchanged_and_by_an_operator_resumes_in_implement() {
    let scratch = tempfile::tempdir().unwrap();
    let pass_flag = scratch.path().join("validation-passes");
    let world = World::start_with(WorldOptions {
        config_toml: Some(gated_validation_config(&pass_flag)),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let reader = world.person("rory", "read");
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;
    wait_for_phase(&world, run_id, "BLOCKED", Duration::from_secs(90)).await;
    // Let the BLOCKED transition's status edit settle before comparing.
    eventually(Duration::from_secs(20), "the effects settled", || async {
        let effects = world.db.journal().list_effects(run_id).await.unwrap();
        effects
            .iter()
            .all(|e| e.stage == Stage::Observed)
            .then_some(())
    })
    .await;

    // A reader's unblock: answered, recorded, and the run document stays
    // byte for byte what it was.
    let before = run_document(&world, run_id).await;
    let refused = world
        .comment(&reader, issue, "/autoforge unblock I want it")
        .await;
    observed_reply(&world, run_id, refused).await;
    let reply = reply_on(&world, &owner, issue, refused).await;
    assert!(reply.starts_with("Refused `/autoforge unblock`"), "{reply}");
    assert_eq!(run_document(&world, run_id).await, before);
    assert_eq!(
        world
            .db
            .journal()
            .get_run(run_id)
            .await
            .unwrap()
            .unwrap()
            .phase,
        "BLOCKED"
    );
    assert_eq!(
        effects_for_comment(&world, run_id, EffectKind::AddReaction, refused).await,
        0,
        "a refused command gets no reaction"
    );
    let decisions = world
        .db
        .journal()
        .list_command_decisions(run_id)
        .await
        .unwrap();
    assert_eq!(decisions.len(), 1);
    assert!(!decisions[0].accepted);
    assert_eq!(decisions[0].actor, "rory");

    // The operator fixes the cause and unblocks: no PR is bound and the
    // issue is open, so the decision table resumes IMPLEMENT, and this
    // time the candidate passes and is published.
    std::fs::write(&pass_flag, "").unwrap();
    let accepted = world
        .comment(&owner, issue, "/autoforge unblock the check is fixed")
        .await;
    observed_reply(&world, run_id, accepted).await;
    let reply = reply_on(&world, &owner, issue, accepted).await;
    assert!(
        reply.contains("resumed in IMPLEMENT"),
        "the decision table picks IMPLEMENT: {reply}"
    );
    wait_for_phase(&world, run_id, "REVIEW", Duration::from_secs(90)).await;

    // The run's PR thread reaches the run too.
    let pr = world
        .db
        .journal()
        .run_pull_request(run_id)
        .await
        .unwrap()
        .expect("the run's PR is recorded");
    let pr = pr.get();
    let on_pr = world.comment(&owner, pr, "/autoforge status").await;
    observed_reply(&world, run_id, on_pr).await;
    let reply = reply_on(&world, &owner, pr, on_pr).await;
    assert!(reply.contains("Phase: **REVIEW**"), "{reply}");
    assert!(reply.contains("Last validation: passed"), "{reply}");
}

/// An agent that sleeps forever and leaves a grandchild that ignores
/// SIGTERM; the grandchild's pid is written to `pid_file`.
fn sleeping_agent_config(pid_file: &Path) -> String {
    let script = format!(
        "{}/../tests/agents/sleeper_with_grandchild.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
# The pid file names a host process only outside the sandbox's PID
# namespace; the sandboxed kill is proven in `sandbox_launch.rs`.
[agents]
sandbox = "off"

[agents.profiles.sleeper]
command = ["{script}", "{pid}"]
idle_timeout_seconds = 600
max_runtime_seconds = 900

[agents.roles]
implement = "sleeper"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
        pid = pid_file.display()
    )
}

/// Field 5 of `/proc/PID/stat` (after the parenthesised command name).
fn process_group_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split(' ').nth(2)?.parse().ok()
}

/// Live (not zombie) processes whose process group is `group`.
fn live_members_of(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        let zombie = fields.first() == Some(&"Z");
        if !zombie && fields.get(2).and_then(|g| g.parse().ok()) == Some(group) {
            members.push(pid);
        }
    }
    members
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_the_label_during_implement_kills_the_agents_process_group_and_stops() {
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("grandchild.pid");
    let world = World::start_with(WorldOptions {
        config_toml: Some(sleeping_agent_config(&pid_file)),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "sleep on it").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;

    let grandchild: i32 = eventually(Duration::from_secs(60), "the agent running", || async {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
    })
    .await;
    let group = process_group_of(grandchild).expect("the grandchild runs");
    assert!(!live_members_of(group).is_empty());

    world
        .rest_as(
            &owner,
            reqwest::Method::DELETE,
            &format!("/repos/{OWNER}/{REPO}/issues/{issue}/labels/autoforge"),
            Value::Null,
        )
        .await;
    // Sooner than the driver's 30 s idle re-check and far sooner than the
    // agent's own limits: the stop is acted on when it is stored.
    wait_for_phase(&world, run_id, "STOPPED", Duration::from_secs(20)).await;
    eventually(
        Duration::from_secs(15),
        "the agent's process group to be gone",
        || async { live_members_of(group).is_empty().then_some(()) },
    )
    .await;
    let launches = world.db.journal().list_launches(run_id).await.unwrap();
    assert_eq!(launches.len(), 1, "the agent was not launched again");
}

async fn labels_of(world: &World, person: &Person, issue: u64) -> Vec<String> {
    let path = format!("/repos/{OWNER}/{REPO}/issues/{issue}");
    let read = world
        .rest_as(person, reqwest::Method::GET, &path, Value::Null)
        .await;
    read["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_labels_follow_the_phase_when_enabled() {
    let scratch = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[labels]\nstatus = true\n",
        gated_validation_config(&scratch.path().join("never-created"))
    );
    let world = World::start_with(WorldOptions {
        config_toml: Some(config),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "add the feature").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run_id = wait_for_run(&world, issue).await;

    wait_for_phase(&world, run_id, "BLOCKED", Duration::from_secs(90)).await;
    let labels = eventually(Duration::from_secs(20), "the blocked label", || async {
        let labels = labels_of(&world, &owner, issue).await;
        labels
            .contains(&"autoforge:blocked".to_owned())
            .then_some(labels)
    })
    .await;
    assert!(
        !labels.contains(&"autoforge:running".to_owned()),
        "{labels:?}"
    );
    let label_writes = world
        .db
        .journal()
        .list_effects(run_id)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == EffectKind::SetLabels)
        .count();
    assert_eq!(label_writes, 2, "running at the start, then blocked");

    world.comment(&owner, issue, "/autoforge stop").await;
    wait_for_phase(&world, run_id, "STOPPED", Duration::from_secs(20)).await;
    eventually(Duration::from_secs(20), "no status label left", || async {
        let labels = labels_of(&world, &owner, issue).await;
        (!labels.iter().any(|l| l.starts_with("autoforge:"))).then_some(())
    })
    .await;
    assert!(
        labels_of(&world, &owner, issue)
            .await
            .contains(&"autoforge".to_owned()),
        "the trigger label is not a status label and stays"
    );
}
