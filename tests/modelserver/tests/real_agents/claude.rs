//! Claude Code in print mode: prompt on stdin, `--output-format json`
//! (final message in `.result`, usage in `.usage`).

use modelserver::clis::{self, AgentCli};

use crate::harness::{self, INNER_BASE, Launch, os};

fn env() -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", INNER_BASE.to_owned()),
        ("ANTHROPIC_API_KEY", "sk-modelserver-test".to_owned()),
        // This alone stops every call that is not the model API.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("DISABLE_ERROR_REPORTING", "1".to_owned()),
    ]
}

const PRINT: [&str; 5] = [
    "-p",
    "--output-format",
    "json",
    "--model",
    "claude-sonnet-4-5",
];

fn json_output(ran: &harness::Ran) -> serde_json::Value {
    serde_json::from_str(ran.stdout().trim())
        .expect("claude -p --output-format json prints one object")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_writes_commits_and_reports_the_real_head() {
    let Some(cli) = clis::require(AgentCli::ClaudeCode) else {
        return;
    };
    let marker = "MS-ROLE=implement-claude";
    let launch = Launch::new().await;
    let file = launch.repo.join("greeting.txt");
    let file_arg = file.to_str().expect("UTF-8 path");
    launch
        .server
        .load(harness::writer_script("writer", marker, file_arg))
        .expect("loads");
    let mut args = os(&PRINT);
    args.extend(os(&[
        "--permission-mode",
        "dontAsk",
        "--allowedTools",
        "Write,Edit,Read,Bash",
    ]));
    args.extend(os(&["--no-session-persistence"]));
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let ran = launch.run(&cli, &args, &env(), Some(&prompt)).await;
    harness::report("claude", "writer", &ran);
    ran.assert_success("claude writer");
    assert_eq!(
        std::fs::read_to_string(&file).expect("file written"),
        harness::GREETING
    );
    assert_eq!(launch.commit_count(), 2, "the CLI's Bash tool committed");
    let out = json_output(&ran);
    let result = harness::control_result(out["result"].as_str().expect(".result is text"));
    assert_eq!(result["head_sha"], launch.head());
    let claimed = launch.server.claimed("writer");
    assert_eq!(out["usage"]["input_tokens"], claimed.input_tokens);
    assert_eq!(out["usage"]["output_tokens"], claimed.output_tokens);
    assert_eq!(
        out["usage"]["cache_read_input_tokens"],
        claimed.cached_input_tokens
    );
    launch.assert_clean("claude");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_read_only_tools_refuse_the_models_writes() {
    let Some(cli) = clis::require(AgentCli::ClaudeCode) else {
        return;
    };
    let marker = "MS-ROLE=review-claude";
    let launch = Launch::new().await;
    let file = launch.repo.join("intruder.txt");
    let script = harness::intruder_script("reviewer", marker, file.to_str().expect("UTF-8 path"));
    launch.server.load(script).expect("loads");
    let before = launch.fingerprint();
    let mut args = os(&PRINT);
    args.extend(os(&[
        "--tools",
        "Read,Grep,Glob",
        "--permission-mode",
        "dontAsk",
    ]));
    args.extend(os(&["--no-session-persistence"]));
    let prompt = format!("{marker}\nReview the repository.\n");
    let ran = launch.run(&cli, &args, &env(), Some(&prompt)).await;
    harness::report("claude", "read-only reviewer", &ran);
    ran.assert_success("claude reviewer");
    let out = json_output(&ran);
    eprintln!("claude reviewer final message: {}", out["result"]);
    harness::assert_untouched(&launch, &before, "claude", "reviewer");
    launch.assert_clean("claude");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_retries_an_overloaded_reply_and_a_cut_stream_itself() {
    let Some(cli) = clis::require(AgentCli::ClaudeCode) else {
        return;
    };
    let marker = "MS-ROLE=faulty-claude";
    let launch = Launch::new().await;
    let file = launch.repo.join("greeting.txt");
    let script = harness::faulty_script("writer", marker, file.to_str().expect("UTF-8 path"));
    launch.server.load(script).expect("loads");
    let mut args = os(&PRINT);
    args.extend(os(&[
        "--permission-mode",
        "dontAsk",
        "--allowedTools",
        "Write,Edit,Read,Bash",
    ]));
    args.extend(os(&["--no-session-persistence"]));
    let prompt = format!("{marker}\nAdd greeting.txt and commit it.\n");
    let ran = launch.run(&cli, &args, &env(), Some(&prompt)).await;
    harness::report("claude", "writer through faults", &ran);
    ran.assert_success("claude writer through faults");
    harness::assert_recovered(&launch, "claude");
    let out = json_output(&ran);
    assert_eq!(
        harness::control_result(out["result"].as_str().expect("text"))["head_sha"],
        launch.head()
    );
    // The refused reply claimed nothing; the cut one claimed its input in
    // `message_start`, and Claude Code counts it, as a bill would.
    let claimed = launch.server.claimed("writer");
    assert!(
        launch
            .server
            .claims("writer")
            .iter()
            .any(|c| c.cut && c.usage.input_tokens > 0)
    );
    assert_eq!(out["usage"]["input_tokens"], claimed.input_tokens);
    assert_eq!(out["usage"]["output_tokens"], claimed.output_tokens);
    assert_eq!(
        out["usage"]["cache_read_input_tokens"],
        claimed.cached_input_tokens
    );
    launch.assert_clean("claude");
}
