//! The Anthropic Messages API as Claude Code uses it: the request shape
//! (`system`, `messages` with `tool_result` blocks, `tools`), the SSE event
//! sequence of one assistant message, the non-streaming message object and
//! the error envelope. Tools are Claude Code's: `Write`, `Bash`, `Read`.

use serde_json::{Value, json};

use crate::conversation::{Conversation, model_and_stream, push_line, text_of};
use crate::script::Usage;
use crate::state::{Decision, Turn};
use crate::wire::{ApiError, sse_frame};

pub(crate) fn parse(body: &Value) -> Result<Conversation, String> {
    let (model, stream) = model_and_stream(body);
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` is missing or not an array")?;
    let mut conv = Conversation {
        model,
        stream,
        ..Conversation::default()
    };
    if let Some(system) = body.get("system") {
        push_line(&mut conv.prompt_text, &text_of(system));
    }
    for message in messages {
        if message.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        let Some(blocks) = content.as_array() else {
            push_line(&mut conv.user_text, &text_of(content));
            continue;
        };
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_result") => conv
                    .tool_results
                    .push(text_of(block.get("content").unwrap_or(&Value::Null))),
                Some("text") => push_line(&mut conv.user_text, &text_of(block)),
                _ => {}
            }
        }
    }
    push_line(&mut conv.prompt_text, &conv.user_text.clone());
    conv.offered_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(conv)
}

/// The tool name and input of a tool turn.
pub(crate) fn tool_call(turn: &Turn) -> Option<(&'static str, Value)> {
    match turn {
        Turn::WriteFile { path, content } => {
            Some(("Write", json!({"file_path": path, "content": content})))
        }
        Turn::Shell { command } => Some((
            "Bash",
            json!({"command": command, "description": "Run the scripted command"}),
        )),
        Turn::ReadFile { path } => Some(("Read", json!({"file_path": path}))),
        Turn::Text(_) => None,
    }
}

fn usage_json(usage: Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": output_tokens,
    })
}

fn ids(d: &Decision) -> (String, String) {
    (
        format!("msg_modelserver_{}_{}", d.script, d.step),
        format!("toolu_modelserver_{}", d.step),
    )
}

/// The whole reply as SSE frames.
pub(crate) fn frames(d: &Decision, model: &str) -> Vec<String> {
    let (message_id, tool_id) = ids(d);
    let mut out = vec![sse_frame(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage_json(d.usage, 0),
        }}),
    )];
    let (block, deltas, stop_reason) = match tool_call(&d.turn) {
        Some((name, input)) => {
            let text = input.to_string();
            let (a, b) = text.split_at(text.len() / 2);
            let deltas = [a, b]
                .iter()
                .map(|part| json!({"type": "input_json_delta", "partial_json": part}))
                .collect::<Vec<_>>();
            (
                json!({"type": "tool_use", "id": tool_id, "name": name, "input": {}}),
                deltas,
                "tool_use",
            )
        }
        None => {
            let text = text_of_turn(&d.turn);
            (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": text})],
                "end_turn",
            )
        }
    };
    out.push(sse_frame(
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    for delta in deltas {
        out.push(sse_frame(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ));
    }
    out.push(sse_frame(
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    out.push(sse_frame(
        Some("message_delta"),
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": d.usage.output_tokens}}),
    ));
    out.push(sse_frame(
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    ));
    out
}

fn text_of_turn(turn: &Turn) -> String {
    match turn {
        Turn::Text(text) => text.clone(),
        _ => String::new(),
    }
}

/// The whole reply as one message object (`stream: false`).
pub(crate) fn message(d: &Decision, model: &str) -> Value {
    let (message_id, tool_id) = ids(d);
    let (content, stop_reason) = match tool_call(&d.turn) {
        Some((name, input)) => (
            json!([{"type": "tool_use", "id": tool_id, "name": name, "input": input}]),
            "tool_use",
        ),
        None => (
            json!([{"type": "text", "text": text_of_turn(&d.turn)}]),
            "end_turn",
        ),
    };
    json!({
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": usage_json(d.usage, d.usage.output_tokens),
    })
}

/// Status and body of an error, in Anthropic's envelope.
pub(crate) fn error(e: &ApiError) -> (u16, Value) {
    let (status, kind) = match e {
        ApiError::RateLimited => (429, "rate_limit_error"),
        ApiError::Overloaded => (529, "overloaded_error"),
        ApiError::NoScript | ApiError::BadRequest(_) => (400, "invalid_request_error"),
    };
    (
        status,
        json!({"type": "error", "error": {"type": kind, "message": e.to_string()}}),
    )
}
