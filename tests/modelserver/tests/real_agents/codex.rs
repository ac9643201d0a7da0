//! Codex CLI's `exec` mode: provider and quiet switches as `-c` overrides
//! (HOME stays empty), prompt on stdin, `--json` events on stdout (usage
//! in `turn.completed`) and the final message in the `-o` file.

use std::path::Path;

use modelserver::clis::{self, AgentCli};

use crate::harness::{self, INNER_BASE, Launch, os};

const KEY_VAR: &str = "MODELSERVER_KEY";

/// The provider and quiet switches; `retries` is the provider's request and
/// stream retry count.
fn overrides(retries: u32) -> Vec<String> {
    [
        // A model name Codex knows, so it offers its `apply_patch` tool.
        "model=\"gpt-5.5\"".to_owned(),
        "model_provider=\"modelserver\"".to_owned(),
        format!(
            "model_providers.modelserver={{name=\"modelserver\",base_url=\"{INNER_BASE}/v1\",\
             wire_api=\"responses\",env_key=\"{KEY_VAR}\",request_max_retries={retries},\
             stream_max_retries={retries}}}"
        ),
        "approval_policy=\"never\"".to_owned(),
        "check_for_update_on_startup=false".to_owned(),
        // Without this Codex reaches out to hosted services at start.
        "features.plugins=false".to_owned(),
        "analytics.enabled=false".to_owned(),
        "feedback.enabled=false".to_owned(),
        "otel.exporter=\"none\"".to_owned(),
    ]
    .into_iter()
    .flat_map(|o| ["-c".to_owned(), o])
    .collect()
}

fn args(launch: &Launch, sandbox: &str, last: &Path) -> Vec<std::ffi::OsString> {
    args_retrying(launch, sandbox, last, 0)
}

fn args_retrying(
    launch: &Launch,
    sandbox: &str,
    last: &Path,
    retries: u32,
) -> Vec<std::ffi::OsString> {
    let mut args = os(&["exec"]);
    args.extend(overrides(retries).into_iter().map(Into::into));
    args.extend(os(&[
        "--skip-git-repo-check",
        "--sandbox",
        sandbox,
        "--ephemeral",
        "--json",
    ]));
    args.push("-o".into());
    args.push(last.into());
    args.push("-C".into());
    args.push(launch.repo.clone().into());
    args.push("-".into());
    args
}

fn env() -> Vec<(&'static str, String)> {
    vec![(KEY_VAR, "sk-modelserver-test".to_owned())]
}

/// The JSON events Codex printed.
fn events(ran: &harness::Ran) -> Vec<serde_json::Value> {
    ran.stdout()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("each --json line is an object"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_writes_commits_and_reports_the_real_head() {
    let Some(cli) = clis::require(AgentCli::Codex) else {
        return;
    };
    let marker = "MS-ROLE=implement-codex";
    let launch = Launch::new().await;
    // apply_patch takes paths relative to the working directory.
    launch
        .server
        .load(harness::writer_script("writer", marker, "greeting.txt"))
        .expect("loads");
    let last = launch.tmp.join("last-message.txt");
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let ran = launch
        .run(
            &cli,
            &args(&launch, "danger-full-access", &last),
            &env(),
            Some(&prompt),
        )
        .await;
    harness::report("codex", "writer", &ran);
    ran.assert_success("codex writer");
    let file = launch.repo.join("greeting.txt");
    assert_eq!(
        std::fs::read_to_string(file).expect("file written"),
        harness::GREETING
    );
    assert_eq!(launch.commit_count(), 2, "the CLI's exec_command committed");
    let final_message = std::fs::read_to_string(&last).expect("-o file written");
    assert_eq!(
        harness::control_result(&final_message)["head_sha"],
        launch.head()
    );
    let events = events(&ran);
    let agent_message = events
        .iter()
        .rev()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .expect("an agent_message item");
    assert_eq!(agent_message["item"]["text"], final_message.as_str());
    assert_usage_claimed(&events, &launch);
    launch.assert_clean("codex");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_read_only_sandbox_refuses_the_models_writes() {
    let Some(cli) = clis::require(AgentCli::Codex) else {
        return;
    };
    let marker = "MS-ROLE=review-codex";
    let launch = Launch::new().await;
    launch
        .server
        .load(harness::intruder_script("reviewer", marker, "intruder.txt"))
        .expect("loads");
    let before = launch.fingerprint();
    let last = launch.tmp.join("last-message.txt");
    let prompt = format!("{marker}\nReview the repository.\n");
    let ran = launch
        .run(
            &cli,
            &args(&launch, "read-only", &last),
            &env(),
            Some(&prompt),
        )
        .await;
    harness::report("codex", "read-only reviewer", &ran);
    ran.assert_success("codex reviewer");
    eprintln!(
        "codex reviewer final message: {}",
        std::fs::read_to_string(&last).unwrap_or_default()
    );
    harness::assert_untouched(&launch, &before, "codex", "reviewer");
    // Under its own sandbox Codex makes this directory in /tmp itself, not
    // under TMPDIR (a launch needs a private /tmp, as ours has).
    let daemon_dir = format!("codex-daemon-{}", nix::unistd::geteuid());
    let listing = std::fs::read_dir(launch.slash_tmp.join(&daemon_dir)).map(|d| {
        d.filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    });
    eprintln!("codex left /tmp/{daemon_dir}: {listing:?}");
    launch.assert_clean_but("codex", &[&daemon_dir]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_without_retries_fails_on_overload_and_on_a_cut_stream() {
    let Some(cli) = clis::require(AgentCli::Codex) else {
        return;
    };
    let launch = Launch::new().await;
    let overloaded = "MS-ROLE=overloaded-codex";
    let cut = "MS-ROLE=cut-codex";
    let only =
        |name, marker, kind| harness::writer_script(name, marker, "greeting.txt").fault(0, kind, 1);
    let server = &launch.server;
    server
        .load(only(
            "overloaded",
            overloaded,
            modelserver::FaultKind::Overloaded,
        ))
        .expect("loads");
    server
        .load(only("cut", cut, modelserver::FaultKind::CutStream))
        .expect("loads");
    let before = launch.fingerprint();
    let last = launch.tmp.join("last-message.txt");
    for (marker, said) in [
        (overloaded, "Selected model is at capacity"),
        (cut, "stream disconnected before completion"),
    ] {
        let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
        let argv = args(&launch, "danger-full-access", &last);
        let ran = launch.run(&cli, &argv, &env(), Some(&prompt)).await;
        harness::report("codex", "writer meeting a fault", &ran);
        assert!(
            !ran.output.status.success(),
            "codex must fail: {}",
            ran.stdout()
        );
        let failed = events(&ran)
            .into_iter()
            .find(|e| e["type"] == "turn.failed")
            .expect("a turn.failed event");
        let message = failed["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(said), "{message}");
    }
    assert_eq!(launch.fingerprint(), before);
    launch.assert_clean("codex");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_with_retries_recovers_from_overload_and_a_cut_stream() {
    let Some(cli) = clis::require(AgentCli::Codex) else {
        return;
    };
    let marker = "MS-ROLE=faulty-codex";
    let launch = Launch::new().await;
    launch
        .server
        .load(harness::faulty_script("writer", marker, "greeting.txt"))
        .expect("loads");
    let last = launch.tmp.join("last-message.txt");
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let argv = args_retrying(&launch, "danger-full-access", &last, 1);
    let ran = launch.run(&cli, &argv, &env(), Some(&prompt)).await;
    harness::report("codex", "writer through faults", &ran);
    ran.assert_success("codex writer through faults");
    harness::assert_recovered(&launch, "codex");
    let final_message = std::fs::read_to_string(&last).expect("-o file written");
    assert_eq!(
        harness::control_result(&final_message)["head_sha"],
        launch.head()
    );
    assert_usage_claimed(&events(&ran), &launch);
    launch.assert_clean("codex");
}

/// The `turn.completed` usage equals what the writer script claimed.
fn assert_usage_claimed(events: &[serde_json::Value], launch: &Launch) {
    let usage = &events
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .expect("a turn.completed event")["usage"];
    let claimed = launch.server.claimed("writer");
    // Codex's input_tokens include the cached ones, as OpenAI reports them.
    assert_eq!(
        usage["input_tokens"],
        claimed.input_tokens + claimed.cached_input_tokens
    );
    assert_eq!(usage["cached_input_tokens"], claimed.cached_input_tokens);
    assert_eq!(usage["output_tokens"], claimed.output_tokens);
}
