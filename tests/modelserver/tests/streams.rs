//! The wire shapes of the three APIs, as a client sees them over HTTP: the
//! SSE bytes of tool calls and final messages (pinned with insta), the
//! non-streaming objects, the error envelopes of each fault, the request
//! log, the claimed usage and the control API.

use std::time::Duration;

use modelserver::{FaultKind, Outcome, Script, Usage};
use serde_json::{Value, json};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

async fn server() -> modelserver::Handle {
    modelserver::start(modelserver::Config::default())
        .await
        .expect("modelserver starts")
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: 0,
    }
}

/// A writer: write a file, commit, then report the HEAD the commit printed
/// and the round read from the prompt.
fn writer(name: &str, marker: &str) -> Script {
    Script::new(name, marker)
        .usage(usage(100, 10))
        .capture_prompt("round", r"review round (\d+)")
        .write_file("/repo/a.txt", "one\ntwo\n")
        .shell("git add -A && git commit -qm 'Add a' && git rev-parse HEAD")
        .capture_result("head", 1, "([0-9a-f]{40})")
        .final_message("round {{round}}\nhead_sha={{head}}")
        .with_usage(usage(300, 30))
}

async fn post(base: &str, path: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-api-key", "sk-test")
        .json(body)
        .send()
        .await
        .expect("request is answered");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body is read"))
}

fn anthropic_request(tool_results: &[&str], stream: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "ROLE=writer, review round 2"}]})];
    for (i, result) in tool_results.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
             "content": [{"type": "text", "text": result}]}]}));
    }
    json!({"model": "claude-test", "max_tokens": 100, "stream": stream,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": [{"name": "Write"}, {"name": "Bash"}], "messages": messages})
}

#[tokio::test]
async fn anthropic_stream_sends_tool_use_blocks_then_the_rendered_final_text() {
    let server = server().await;
    server.load(writer("writer", "ROLE=writer")).expect("loads");
    let base = server.base_url();
    let (status, first) = post(
        base,
        "/v1/messages?beta=true",
        &anthropic_request(&[], true),
    )
    .await;
    assert_eq!(status, 200);
    insta::assert_snapshot!("anthropic_tool_use", first);
    let (_, last) = post(
        base,
        "/v1/messages",
        &anthropic_request(&["File created", &format!("{SHA}\n")], true),
    )
    .await;
    insta::assert_snapshot!("anthropic_final_text", last);
    assert!(last.contains(&format!("head_sha={SHA}")), "{last}");
    assert_eq!(server.claimed("writer"), usage(400, 40));
}

#[tokio::test]
async fn anthropic_without_stream_answers_one_message_object() {
    let server = server().await;
    server.load(writer("writer", "ROLE=writer")).expect("loads");
    let (status, body) = post(
        server.base_url(),
        "/v1/messages",
        &anthropic_request(&[], false),
    )
    .await;
    assert_eq!(status, 200);
    let message: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["name"], "Write");
    assert_eq!(message["content"][0]["input"]["file_path"], "/repo/a.txt");
    assert_eq!(message["usage"]["output_tokens"], 10);
}

fn responses_request(outputs: &[&str]) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "sandbox notes"}]}),
        json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "ROLE=writer, review round 3"}]}),
    ];
    for (i, output) in outputs.iter().enumerate() {
        input.push(json!({"type": "function_call", "call_id": format!("c{i}"),
            "name": "exec_command", "arguments": "{}"}));
        input.push(
            json!({"type": "function_call_output", "call_id": format!("c{i}"),
            "output": output}),
        );
    }
    json!({"model": "gpt-5.5", "instructions": "You are Codex.", "stream": true,
        "tools": [{"type": "function", "name": "exec_command"},
                  {"type": "custom", "name": "apply_patch"}],
        "input": input})
}

#[tokio::test]
async fn responses_stream_sends_patch_command_and_message_items_with_usage() {
    let server = server().await;
    server.load(writer("writer", "ROLE=writer")).expect("loads");
    let base = server.base_url();
    let (status, patch) = post(base, "/v1/responses", &responses_request(&[])).await;
    assert_eq!(status, 200);
    insta::assert_snapshot!("responses_apply_patch", patch);
    let (_, command) = post(base, "/v1/responses", &responses_request(&["Success"])).await;
    insta::assert_snapshot!("responses_exec_command", command);
    let (_, message) = post(
        base,
        "/v1/responses",
        &responses_request(&["Success", &format!("Output:\n{SHA}\n")]),
    )
    .await;
    insta::assert_snapshot!("responses_message", message);
    assert_eq!(server.claimed("writer"), usage(500, 50));
}

fn chat_request(results: &[&str], tools: bool) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are opencode."}),
        json!({"role": "user", "content": [{"type": "text", "text": "ROLE=writer, review round 4"}]}),
    ];
    for (i, result) in results.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result}));
    }
    let mut body = json!({"model": "m", "stream": true,
        "stream_options": {"include_usage": true}, "messages": messages});
    if tools {
        body["tools"] = json!([{"type": "function", "function": {"name": "write"}},
                               {"type": "function", "function": {"name": "bash"}}]);
    }
    body
}

#[tokio::test]
async fn chat_stream_sends_tool_call_chunks_a_usage_chunk_and_done() {
    let server = server().await;
    server.load(writer("writer", "ROLE=writer")).expect("loads");
    let base = server.base_url();
    let (_, title) = post(base, "/v1/chat/completions", &chat_request(&[], false)).await;
    insta::assert_snapshot!("chat_side_title", title);
    let (status, write) = post(base, "/v1/chat/completions", &chat_request(&[], true)).await;
    assert_eq!(status, 200);
    insta::assert_snapshot!("chat_tool_call", write);
    let (_, last) = post(
        base,
        "/v1/chat/completions",
        &chat_request(&["Wrote file successfully.", SHA], true),
    )
    .await;
    insta::assert_snapshot!("chat_final_text", last);
    // The title request is booked as a side reply and left out of the total.
    let claims = server.claims("writer");
    assert_eq!(claims.len(), 3);
    assert!(claims[0].side);
    assert_eq!(server.claimed("writer"), usage(400, 40));
}

#[tokio::test]
async fn overload_and_rate_limit_use_each_vendors_error_envelope() {
    let server = server().await;
    let script = writer("writer", "ROLE=writer")
        .fault(0, FaultKind::Overloaded, 1)
        .fault(0, FaultKind::RateLimited, 1);
    server.load(script).expect("loads");
    let base = server.base_url();
    let (status, body) = post(base, "/v1/messages", &anthropic_request(&[], true)).await;
    assert_eq!(status, 529);
    let error: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "overloaded_error");
    let (status, body) = post(base, "/v1/responses", &responses_request(&[])).await;
    assert_eq!(status, 429);
    let error: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    // Both faults fired once; the retry is answered.
    let (status, _) = post(base, "/v1/chat/completions", &chat_request(&[], true)).await;
    assert_eq!(status, 200);
    let outcomes: Vec<Outcome> = server.requests().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            Outcome::Fault {
                fault: FaultKind::Overloaded
            },
            Outcome::Fault {
                fault: FaultKind::RateLimited
            },
            Outcome::ToolCall {
                tool: "write".to_owned()
            },
        ]
    );
    assert_eq!(
        server.claimed("writer"),
        usage(100, 10),
        "faults claim nothing"
    );
}

/// Reads a streamed body until it ends or breaks: the bytes received and
/// whether it ended cleanly.
async fn read_until_break(path: &str, base: &str, body: &Value) -> (String, bool) {
    let mut response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .expect("headers arrive");
    assert_eq!(response.status().as_u16(), 200);
    let mut received = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => received.extend_from_slice(&bytes),
            Ok(None) => return (String::from_utf8_lossy(&received).into_owned(), true),
            Err(_) => return (String::from_utf8_lossy(&received).into_owned(), false),
        }
    }
}

#[tokio::test]
async fn a_cut_stream_breaks_off_after_half_its_events_and_books_what_they_carried() {
    let server = server().await;
    let script = writer("writer", "ROLE=writer")
        .fault(0, FaultKind::CutStream, 1)
        .fault(1, FaultKind::CutStream, 1);
    server.load(script).expect("loads");
    let base = server.base_url();
    let (got, clean) = read_until_break("/v1/messages", base, &anthropic_request(&[], true)).await;
    assert!(!clean, "the body must not end cleanly: {got}");
    assert!(
        got.starts_with("event: message_start\n") && got.ends_with("\n\n"),
        "{got}"
    );
    assert!(!got.contains("message_delta"), "{got}");
    // message_start carried the input usage; the output count never came.
    let claims = server.claims("writer");
    assert_eq!(claims.len(), 1);
    assert!(claims[0].cut);
    assert_eq!(claims[0].usage, usage(100, 0));
    let (got, clean) =
        read_until_break("/v1/chat/completions", base, &chat_request(&["done"], true)).await;
    assert!(!clean && !got.contains("usage"), "{got}");
    assert_eq!(
        server.claims("writer").len(),
        1,
        "a cut chat stream carried no usage"
    );
    // The retry of a cut request is answered whole.
    let (_, again) = post(base, "/v1/messages", &anthropic_request(&[], true)).await;
    assert!(again.contains("event: message_stop"), "{again}");
}

#[tokio::test]
async fn a_hang_holds_the_reply_until_the_test_releases_it() {
    let server = server().await;
    server
        .load(writer("writer", "ROLE=writer").fault(0, FaultKind::Hang, 1))
        .expect("loads");
    let base = server.base_url().to_owned();
    let pending =
        tokio::spawn(
            async move { post(&base, "/v1/chat/completions", &chat_request(&[], true)).await },
        );
    // Wait for the request to arrive (a loaded machine may take a while),
    // not for a fixed time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.requests().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished(), "the reply is held");
    let log = server.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(
        log[0].outcome,
        Outcome::Fault {
            fault: FaultKind::Hang
        }
    );
    assert!(server.release("writer"));
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("released in time")
        .expect("task ends");
    assert_eq!(status, 200);
    assert!(body.ends_with("data: [DONE]\n\n"));
    assert!(server.requests()[1].held);
}

#[tokio::test]
async fn other_routes_get_a_logged_404_and_unmatched_conversations_a_400() {
    let server = server().await;
    server.load(writer("writer", "ROLE=writer")).expect("loads");
    let response = reqwest::Client::new()
        .head(format!("{}/api/hello", server.base_url()))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 404);
    let response = reqwest::get(format!("{}/v1/models", server.base_url()))
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 404);
    let text = response.text().await.expect("body");
    assert!(text.contains("no route for GET /v1/models"), "{text}");
    let mut other = anthropic_request(&[], true);
    other["messages"][0]["content"][0]["text"] = json!("ROLE=reviewer");
    let (status, body) = post(server.base_url(), "/v1/messages", &other).await;
    assert_eq!(status, 400);
    assert!(body.contains("no loaded script"), "{body}");
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].method, "HEAD");
    assert_eq!(log[1].outcome, Outcome::NoRoute);
    assert_eq!(log[2].outcome, Outcome::NoScript);
    assert_eq!(log[2].auth.as_deref(), Some("x-api-key"));
}

#[tokio::test]
async fn parallel_conversations_each_follow_their_own_script() {
    let server = server().await;
    server.load(writer("one", "ROLE=writer")).expect("loads");
    server
        .load(Script::new("two", "ROLE=reviewer").final_message("clean"))
        .expect("loads");
    let base = server.base_url();
    let mut review = anthropic_request(&[], true);
    review["messages"][0]["content"][0]["text"] = json!("ROLE=reviewer");
    let write = anthropic_request(&[], true);
    let (a, b) = tokio::join!(
        post(base, "/v1/messages", &write),
        post(base, "/v1/messages", &review),
    );
    assert!(a.1.contains("\"name\":\"Write\""), "{}", a.1);
    assert!(b.1.contains("\"text\":\"clean\""), "{}", b.1);
}

#[tokio::test]
async fn the_control_api_loads_scripts_and_reports_log_and_usage() {
    let server = server().await;
    let base = server.base_url();
    let client = reqwest::Client::new();
    let load = client
        .post(format!("{base}/_modelserver/scripts"))
        .json(&Script::new("r", "ROLE=r").final_message("ok"))
        .send()
        .await
        .expect("answered");
    assert_eq!(load.status().as_u16(), 201);
    let bad = client
        .post(format!("{base}/_modelserver/scripts"))
        .json(&Script::new("r2", "ROLE=r2").shell("true"))
        .send()
        .await
        .expect("answered");
    assert_eq!(bad.status().as_u16(), 400);
    let mut request = anthropic_request(&[], true);
    request["messages"][0]["content"][0]["text"] = json!("ROLE=r");
    post(base, "/v1/messages", &request).await;
    let usage: Value = client
        .get(format!("{base}/_modelserver/usage"))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    assert_eq!(usage["r"][0]["usage"]["input_tokens"], 100);
    let log: Value = client
        .get(format!("{base}/_modelserver/requests"))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    assert_eq!(log[0]["outcome"]["kind"], "final");
    let release = client
        .post(format!("{base}/_modelserver/release/nobody"))
        .send()
        .await
        .expect("answered");
    assert_eq!(release.status().as_u16(), 404);
}

#[tokio::test]
async fn a_non_loopback_address_is_refused() {
    let config = modelserver::Config {
        addr: "0.0.0.0:0".parse().expect("address"),
        unix_socket: None,
    };
    assert!(modelserver::start(config).await.is_err());
}
