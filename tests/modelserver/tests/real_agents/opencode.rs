//! OpenCode's `run` mode: a custom OpenAI-compatible provider in the file
//! `OPENCODE_CONFIG` names, the prompt as an argument, `--format json`
//! events on stdout (final text in the last `text` event, usage summed over
//! the `step_finish` events).

use modelserver::clis::{self, AgentCli};
use serde_json::json;

use crate::harness::{self, INNER_BASE, Launch, os};

/// Writes the config (`edit`/`bash` allowed or denied) into HOME and
/// pre-empts the background npm install of OpenCode's plugin package.
fn configure(launch: &Launch, allow: bool) -> String {
    let verdict = if allow { "allow" } else { "deny" };
    let config = json!({
        "model": "modelserver/m", "small_model": "modelserver/m",
        "enabled_providers": ["modelserver"],
        "autoupdate": false, "share": "disabled", "lsp": false, "formatter": false,
        "snapshot": false,
        "permission": {"edit": verdict, "bash": verdict, "webfetch": "deny",
                       "external_directory": "deny"},
        "provider": {"modelserver": {
            "npm": "@ai-sdk/openai-compatible",
            "options": {"baseURL": format!("{INNER_BASE}/v1"), "apiKey": "sk-modelserver-test"},
            "models": {"m": {"tool_call": true, "limit": {"context": 200000, "output": 8192}}},
        }},
    });
    let path = launch.home.join("opencode.json");
    std::fs::write(&path, config.to_string()).expect("config written");
    let plugin_dir = launch.home.join(".config/opencode");
    std::fs::create_dir_all(plugin_dir.join("node_modules")).expect("plugin dir");
    std::fs::write(
        plugin_dir.join("package-lock.json"),
        r#"{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}"#,
    )
    .expect("lock file");
    path.to_str().expect("UTF-8 path").to_owned()
}

fn env(config: String) -> Vec<(&'static str, String)> {
    let mut env = vec![("OPENCODE_CONFIG", config)];
    for var in [
        // Essential: otherwise it fetches a model catalogue at start.
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    ] {
        env.push((var, "1".to_owned()));
    }
    env
}

fn events(ran: &harness::Ran) -> Vec<serde_json::Value> {
    ran.stdout()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("each --format json line is an object"))
        .collect()
}

fn token_sum(events: &[serde_json::Value], pointer: &str) -> u64 {
    events
        .iter()
        .filter(|e| e["type"] == "step_finish")
        .map(|e| {
            e["part"]["tokens"]
                .pointer(pointer)
                .and_then(|v| v.as_u64())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_opencode_writes_commits_and_reports_the_real_head() {
    let Some(cli) = clis::require(AgentCli::OpenCode) else {
        return;
    };
    let marker = "MS-ROLE=implement-opencode";
    let launch = Launch::new().await;
    let file = launch.repo.join("greeting.txt");
    let script = harness::writer_script("writer", marker, file.to_str().expect("UTF-8 path"));
    launch.server.load(script).expect("loads");
    let config = configure(&launch, true);
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let args = [os(&["run", "--format", "json"]), vec![prompt.into()]].concat();
    let ran = launch.run(&cli, &args, &env(config), None).await;
    harness::report("opencode", "writer", &ran);
    ran.assert_success("opencode writer");
    assert_eq!(
        std::fs::read_to_string(&file).expect("file written"),
        harness::GREETING
    );
    assert_eq!(launch.commit_count(), 2, "the CLI's bash tool committed");
    let events = events(&ran);
    let text = events
        .iter()
        .rev()
        .find(|e| e["type"] == "text")
        .and_then(|e| e["part"]["text"].as_str())
        .expect("a text event");
    assert_eq!(harness::control_result(text)["head_sha"], launch.head());
    let claimed = launch.server.claimed("writer");
    assert_eq!(token_sum(&events, "/input"), claimed.input_tokens);
    assert_eq!(
        token_sum(&events, "/cache/read"),
        claimed.cached_input_tokens
    );
    assert_eq!(token_sum(&events, "/output"), claimed.output_tokens);
    launch.assert_clean("opencode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_opencode_denied_permissions_refuse_the_models_writes() {
    let Some(cli) = clis::require(AgentCli::OpenCode) else {
        return;
    };
    let marker = "MS-ROLE=review-opencode";
    let launch = Launch::new().await;
    let file = launch.repo.join("intruder.txt");
    let script = harness::intruder_script("reviewer", marker, file.to_str().expect("UTF-8 path"));
    launch.server.load(script).expect("loads");
    let before = launch.fingerprint();
    let config = configure(&launch, false);
    let prompt = format!("{marker}\nReview the repository.\n");
    let args = [os(&["run", "--format", "json"]), vec![prompt.into()]].concat();
    let ran = launch.run(&cli, &args, &env(config), None).await;
    harness::report("opencode", "read-only reviewer", &ran);
    ran.assert_success("opencode reviewer");
    let events = events(&ran);
    let text = events.iter().rev().find(|e| e["type"] == "text");
    eprintln!(
        "opencode reviewer final message: {:?}",
        text.map(|e| &e["part"]["text"])
    );
    harness::assert_untouched(&launch, &before, "opencode", "reviewer");
    launch.assert_clean("opencode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_opencode_retries_an_overloaded_reply_and_a_cut_stream_itself() {
    let Some(cli) = clis::require(AgentCli::OpenCode) else {
        return;
    };
    let marker = "MS-ROLE=faulty-opencode";
    let launch = Launch::new().await;
    let file = launch.repo.join("greeting.txt");
    let script = harness::faulty_script("writer", marker, file.to_str().expect("UTF-8 path"));
    launch.server.load(script).expect("loads");
    let config = configure(&launch, true);
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let args = [os(&["run", "--format", "json"]), vec![prompt.into()]].concat();
    let ran = launch.run(&cli, &args, &env(config), None).await;
    harness::report("opencode", "writer through faults", &ran);
    ran.assert_success("opencode writer through faults");
    harness::assert_recovered(&launch, "opencode");
    let events = events(&ran);
    let text = events
        .iter()
        .rev()
        .find(|e| e["type"] == "text")
        .and_then(|e| e["part"]["text"].as_str())
        .expect("a text event");
    assert_eq!(harness::control_result(text)["head_sha"], launch.head());
    // Neither fault carried usage (a chat stream reports it at its end).
    let claimed = launch.server.claimed("writer");
    assert_eq!(token_sum(&events, "/input"), claimed.input_tokens);
    assert_eq!(
        token_sum(&events, "/cache/read"),
        claimed.cached_input_tokens
    );
    assert_eq!(token_sum(&events, "/output"), claimed.output_tokens);
    launch.assert_clean("opencode");
}
