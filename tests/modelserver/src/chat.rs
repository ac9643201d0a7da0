//! The OpenAI Chat Completions API as OpenCode uses it: the request shape
//! (`messages` with `role: "tool"` results, `tools`), the
//! `chat.completion.chunk` stream ending in a usage chunk and `[DONE]`, the
//! non-streaming completion and the error envelope (OpenAI's, shared with
//! the Responses module). Tools are OpenCode's: `write`, `bash`, `read`.

use serde_json::{Value, json};

use crate::conversation::{Conversation, model_and_stream, push_line, text_of};
use crate::script::Usage;
use crate::state::{Decision, Turn};
use crate::wire::sse_frame;

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
    for message in messages {
        let content = text_of(message.get("content").unwrap_or(&Value::Null));
        match message.get("role").and_then(Value::as_str) {
            Some("tool") => conv.tool_results.push(content),
            Some("user") => push_line(&mut conv.user_text, &content),
            Some("system") | Some("developer") => push_line(&mut conv.prompt_text, &content),
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
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(conv)
}

/// The tool name and arguments of a tool turn.
pub(crate) fn tool_call(turn: &Turn) -> Option<(&'static str, Value)> {
    match turn {
        Turn::WriteFile { path, content } => {
            Some(("write", json!({"filePath": path, "content": content})))
        }
        Turn::Shell { command } => Some((
            "bash",
            json!({"command": command, "description": "Run the scripted command"}),
        )),
        Turn::ReadFile { path } => Some(("read", json!({"filePath": path}))),
        Turn::Text(_) => None,
    }
}

fn chunk(d: &Decision, model: &str, choices: Value) -> Value {
    json!({
        "id": format!("chatcmpl-modelserver-{}-{}", d.script, d.step),
        "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": choices,
    })
}

fn usage_json(usage: Usage) -> Value {
    let prompt = usage.input_tokens + usage.cached_input_tokens;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
    })
}

/// The whole reply as SSE `data:` frames, `[DONE]` last.
pub(crate) fn frames(d: &Decision, model: &str) -> Vec<String> {
    let call_id = format!("call_modelserver_{}", d.step);
    let delta_choice = |delta: Value| json!([{"index": 0, "delta": delta, "finish_reason": null}]);
    let mut out = Vec::new();
    let finish = match tool_call(&d.turn) {
        Some((name, args)) => {
            let args = args.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            out.push(chunk(
                d,
                model,
                delta_choice(json!({"role": "assistant", "content": null, "tool_calls": [
                    {"index": 0, "id": call_id, "type": "function",
                     "function": {"name": name, "arguments": a}}]})),
            ));
            out.push(chunk(
                d,
                model,
                delta_choice(json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]})),
            ));
            "tool_calls"
        }
        None => {
            let text = match &d.turn {
                Turn::Text(text) => text.as_str(),
                _ => "",
            };
            out.push(chunk(
                d,
                model,
                delta_choice(json!({"role": "assistant", "content": ""})),
            ));
            out.push(chunk(d, model, delta_choice(json!({"content": text}))));
            "stop"
        }
    };
    out.push(chunk(
        d,
        model,
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let mut usage = chunk(d, model, json!([]));
    usage["usage"] = usage_json(d.usage);
    out.push(usage);
    let mut frames: Vec<String> = out.iter().map(|c| sse_frame(None, c)).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// The whole reply as one completion (`stream: false`).
pub(crate) fn completion(d: &Decision, model: &str) -> Value {
    let message = match tool_call(&d.turn) {
        Some((name, args)) => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_modelserver_{}", d.step), "type": "function",
             "function": {"name": name, "arguments": args.to_string()}}]}),
        None => json!({"role": "assistant", "content": match &d.turn {
            Turn::Text(text) => text.as_str(), _ => "" }}),
    };
    let finish = if matches!(d.turn, Turn::Text(_)) {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "id": format!("chatcmpl-modelserver-{}-{}", d.script, d.step),
        "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_json(d.usage),
    })
}
