//! The operator CLI against a run the real `autoforge serve` drove on
//! fakehub and a real Postgres: `status`, `runs list` and `runs show` read
//! it back; `unblock` and `stop` reach the run's driver, which decides
//! them by the comment commands' rules and records the local operator.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use autoforge_journal::{EffectKind, RunId, Stage};
use common::{World, WorldOptions, eventually};
use secrecy::ExposeSecret;
use serde_json::Value;

/// `autoforge ARGS` on the world's database, from a scratch directory.
fn cli(world: &World, scratch: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .args(args)
        .arg("--state-dir")
        .arg(scratch)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", scratch)
        .env("USER", "casey")
        .env("DATABASE_URL", world.db.url().expose_secret())
        .current_dir(scratch)
        .output()
        .expect("run autoforge")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn shown(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn json_of(output: &Output) -> Value {
    assert!(output.status.success(), "{}", shown(output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(output)))
}

/// An implementer that commits for issue 1, validated by a command that
/// passes only once `pass_flag` exists: the first candidate fails and the
/// run blocks; after the flag exists the implementer repairs on top.
fn gated_validation_config(pass_flag: &Path) -> String {
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
# The gate is a file on the host, which the sandbox hides from validation.
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

async fn wait_for_phase(world: &World, run: RunId, phase: &str, within: Duration) {
    eventually(within, &format!("the run in {phase}"), || async {
        let row = world.db.journal().get_run(run).await.unwrap()?;
        (row.phase == phase && row.state["phase"] == phase).then_some(())
    })
    .await;
}

async fn settled(world: &World, run: RunId) {
    eventually(Duration::from_secs(30), "the effects settled", || async {
        let effects = world.db.journal().list_effects(run).await.unwrap();
        effects
            .iter()
            .all(|e| e.stage == Stage::Observed)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_read_a_blocked_run_unblock_it_and_stop_it_from_the_command_line() {
    let scratch = tempfile::tempdir().unwrap();
    let pass_flag = scratch.path().join("validation-passes");
    let world = World::start_with(WorldOptions {
        config_toml: Some(gated_validation_config(&pass_flag)),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;
    wait_for_phase(&world, run, "BLOCKED", Duration::from_secs(90)).await;
    settled(&world, run).await;
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path();

    let status = json_of(&cli(&world, dir, &["status", "--json"]));
    assert_eq!(status["active_runs"]["BLOCKED"], 1, "{status:#}");
    assert_eq!(status["blocked"][0]["id"], run.0, "{status:#}");
    assert!(
        status["blocked"][0]["blocked_reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{status:#}"
    );
    assert_eq!(status["deliveries"]["pending"], 0, "{status:#}");
    let text = stdout(&cli(&world, dir, &["status"]));
    assert!(text.contains("Blocked: 1"), "{text}");
    assert!(
        text.contains(&format!("autoforge unblock {run} --reason")),
        "{text}"
    );

    let listed = json_of(&cli(
        &world,
        dir,
        &["runs", "list", "--phase", "blocked", "--json"],
    ));
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed:#}");
    assert_eq!(rows[0]["repository"], "octo/widgets");
    assert!(rows[0]["launches"].as_i64() >= Some(1), "{listed:#}");
    let elsewhere = json_of(&cli(
        &world,
        dir,
        &["runs", "list", "--repo", "octo/other", "--json"],
    ));
    assert_eq!(elsewhere, Value::Array(vec![]));

    let shown_run = json_of(&cli(
        &world,
        dir,
        &["runs", "show", &run.to_string(), "--json"],
    ));
    assert_eq!(shown_run["summary"]["phase"], "BLOCKED", "{shown_run:#}");
    assert!(
        !shown_run["launches"].as_array().unwrap().is_empty(),
        "{shown_run:#}"
    );
    assert_eq!(
        shown_run["validations"][0]["outcome"], "FAIL",
        "{shown_run:#}"
    );
    assert!(
        shown_run["effects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "edit_status_comment" && e["stage"] == "observed"),
        "{shown_run:#}"
    );
    let text = stdout(&cli(&world, dir, &["runs", "show", &run.to_string()]));
    assert!(text.contains("Agent launches"), "{text}");
    assert!(!cli(&world, dir, &["runs", "show", "9999"]).status.success());

    // The cause is fixed; the local operator unblocks: the decision table
    // picks IMPLEMENT (no PR yet), and the repaired candidate is published.
    std::fs::write(&pass_flag, "").unwrap();
    let unblocked = cli(
        &world,
        dir,
        &[
            "unblock",
            &run.to_string(),
            "--reason",
            "the check is fixed",
            "--as",
            "alice",
        ],
    );
    assert!(unblocked.status.success(), "{}", shown(&unblocked));
    assert!(
        stdout(&unblocked).contains("accepted `unblock`"),
        "{}",
        shown(&unblocked)
    );
    wait_for_phase(&world, run, "REVIEW", Duration::from_secs(90)).await;
    let audit = world.db.journal().list_audit_events(run).await.unwrap();
    let recorded = audit
        .iter()
        .find(|e| e.kind == "operator_command")
        .expect("the command is recorded");
    assert_eq!(recorded.detail["actor"], "alice");
    assert_eq!(recorded.detail["command"], "unblock");
    assert_eq!(recorded.detail["reason"], "the check is fixed");
    // There is no comment to react to or answer.
    let effects = world.db.journal().list_effects(run).await.unwrap();
    assert!(
        !effects
            .iter()
            .any(|e| e.kind == EffectKind::AddReaction || e.identity.starts_with("autoforge-reply")),
        "{effects:#?}"
    );

    let stopped = cli(&world, dir, &["stop", &run.to_string()]);
    assert!(stopped.status.success(), "{}", shown(&stopped));
    assert!(stdout(&stopped).contains("as casey"), "{}", shown(&stopped));
    wait_for_phase(&world, run, "STOPPED", Duration::from_secs(30)).await;
    let again = cli(&world, dir, &["stop", &run.to_string()]);
    assert!(!again.status.success(), "{}", shown(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("has finished"),
        "{}",
        shown(&again)
    );
}

/// An agent that sleeps far past any limit of the test.
fn sleeping_agent_config(pid_file: &Path) -> String {
    let script = format!(
        "{}/../tests/agents/sleeper_with_grandchild.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
# The pid file names a host process only outside the sandbox's PID namespace.
[agents]
sandbox = "off"

[agents.profiles.sleeper]
command = ["{script}", "{pid}"]
idle_timeout_seconds = 600
max_runtime_seconds = 900

[agents.roles]
implement = "sleeper"
"#,
        pid = pid_file.display()
    )
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(") ")?.1.to_owned();
            after.chars().next()
        })
        .is_some_and(|state| state != 'Z')
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_stop_kills_the_running_agent_at_once_and_stops_the_run() {
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
    let run = world.run_for(issue).await;
    let grandchild: i32 = eventually(Duration::from_secs(60), "the agent running", || async {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
    })
    .await;
    assert!(alive(grandchild));

    let cwd = tempfile::tempdir().unwrap();
    let stopped = tokio::task::block_in_place(|| {
        cli(
            &world,
            cwd.path(),
            &["stop", &run.to_string(), "--wait", "30"],
        )
    });
    assert!(stopped.status.success(), "{}", shown(&stopped));
    assert!(
        stdout(&stopped).contains(&format!("run {run} is now STOPPED")),
        "decided within the wait, long before the agent's limits: {}",
        shown(&stopped)
    );
    eventually(Duration::from_secs(15), "the agent gone", || async {
        (!alive(grandchild)).then_some(())
    })
    .await;
    let launches = world.db.journal().list_launches(run).await.unwrap();
    assert_eq!(launches.len(), 1, "{launches:#?}");
    assert_eq!(launches[0].outcome.as_deref(), Some("cancelled"));
}
