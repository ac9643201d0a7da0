//! The OpenAI Responses API as Codex CLI uses it: the request shape
//! (`instructions`, `input` items with `function_call_output` /
//! `custom_tool_call_output`, `tools`), the SSE event sequence of one
//! response, the non-streaming response object and the error envelope.
//! Files are written with Codex's freeform `apply_patch` tool, commands run
//! through `exec_command`.

use serde_json::{Value, json};

use crate::conversation::{Conversation, model_and_stream, push_line, text_of};
use crate::script::Usage;
use crate::state::{Decision, Turn};
use crate::wire::{ApiError, sse_frame};

pub(crate) fn parse(body: &Value) -> Result<Conversation, String> {
    let (model, stream) = model_and_stream(body);
    let mut conv = Conversation {
        model,
        stream,
        ..Conversation::default()
    };
    if let Some(instructions) = body.get("instructions") {
        push_line(&mut conv.prompt_text, &text_of(instructions));
    }
    let items = match body.get("input") {
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(text)) => {
            vec![json!({"type": "message", "role": "user", "content": text})]
        }
        _ => return Err("`input` is missing".to_owned()),
    };
    for item in &items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "function_call_output" | "custom_tool_call_output" => conv
                .tool_results
                .push(output_text(item.get("output").unwrap_or(&Value::Null))),
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                let text = text_of(item.get("content").unwrap_or(&Value::Null));
                match role {
                    "user" => push_line(&mut conv.user_text, &text),
                    "developer" | "system" => push_line(&mut conv.prompt_text, &text),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    push_line(&mut conv.prompt_text, &conv.user_text.clone());
    conv.offered_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    t.get("name")
                        .or_else(|| t.get("type"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(conv)
}

/// A tool output is a string, or an object / array holding text parts.
fn output_text(output: &Value) -> String {
    match output {
        Value::Object(map) => map
            .get("content")
            .or_else(|| map.get("output"))
            .map(output_text)
            .unwrap_or_else(|| text_of(output)),
        other => text_of(other),
    }
}

/// Single-quotes `text` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// An `apply_patch` patch that adds `path` with `content`.
fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}

/// The output item of this turn.
pub(crate) fn item(d: &Decision) -> Value {
    let call_id = format!("call_modelserver_{}", d.step);
    let exec = |cmd: String| {
        json!({"type": "function_call", "id": format!("fc_modelserver_{}", d.step),
            "call_id": call_id, "name": "exec_command", "status": "completed",
            "arguments": json!({"cmd": cmd}).to_string()})
    };
    match &d.turn {
        Turn::WriteFile { path, content } => json!({
            "type": "custom_tool_call", "id": format!("ctc_modelserver_{}", d.step),
            "call_id": call_id, "name": "apply_patch", "status": "completed",
            "input": add_file_patch(path, content),
        }),
        Turn::Shell { command } => exec(command.clone()),
        Turn::ReadFile { path } => exec(format!("cat -- {}", shell_quote(path))),
        Turn::Text(text) => json!({
            "type": "message", "id": format!("msg_modelserver_{}", d.step),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
    }
}

/// The vendor tool name of this turn, for the log.
pub(crate) fn tool_name(turn: &Turn) -> Option<&'static str> {
    match turn {
        Turn::WriteFile { .. } => Some("apply_patch"),
        Turn::Shell { .. } | Turn::ReadFile { .. } => Some("exec_command"),
        Turn::Text(_) => None,
    }
}

fn usage_json(usage: Usage) -> Value {
    let input = usage.input_tokens + usage.cached_input_tokens;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + usage.output_tokens,
    })
}

fn response_object(d: &Decision, model: &str, status: &str, output: Value) -> Value {
    let mut response = json!({
        "id": format!("resp_modelserver_{}_{}", d.script, d.step),
        "object": "response", "created_at": 0, "status": status, "model": model,
        "output": output,
    });
    if status == "completed" {
        response["usage"] = usage_json(d.usage);
    }
    response
}

/// The whole reply as SSE frames.
pub(crate) fn frames(d: &Decision, model: &str) -> Vec<String> {
    let done = item(d);
    let mut added = done.clone();
    added["status"] = json!("in_progress");
    let mut out = vec![sse_frame(
        Some("response.created"),
        &json!({"type": "response.created",
            "response": response_object(d, model, "in_progress", json!([]))}),
    )];
    if let Turn::Text(text) = &d.turn {
        added["content"] = json!([]);
        out.push(sse_frame(
            Some("response.output_item.added"),
            &json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        ));
        out.push(sse_frame(
            Some("response.output_text.delta"),
            &json!({"type": "response.output_text.delta", "item_id": done["id"],
                "output_index": 0, "content_index": 0, "delta": text}),
        ));
    } else {
        out.push(sse_frame(
            Some("response.output_item.added"),
            &json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        ));
    }
    out.push(sse_frame(
        Some("response.output_item.done"),
        &json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
    ));
    out.push(sse_frame(
        Some("response.completed"),
        &json!({"type": "response.completed",
            "response": response_object(d, model, "completed", json!([done]))}),
    ));
    out
}

/// The whole reply as one response object (`stream: false`).
pub(crate) fn response(d: &Decision, model: &str) -> Value {
    response_object(d, model, "completed", json!([item(d)]))
}

/// Status and body of an error, in OpenAI's envelope.
pub(crate) fn error(e: &ApiError) -> (u16, Value) {
    let (status, kind, code) = match e {
        ApiError::RateLimited => (429, "rate_limit_error", "rate_limit_exceeded"),
        ApiError::Overloaded => (503, "server_error", "server_is_overloaded"),
        ApiError::NoScript | ApiError::BadRequest(_) => {
            (400, "invalid_request_error", "invalid_request")
        }
    };
    (
        status,
        json!({"error": {"message": e.to_string(), "type": kind, "param": null, "code": code}}),
    )
}
