//! The vendor-neutral view of one request: who is asking (which wire API),
//! the text the client sent, the tool results so far and the tools it
//! offers. Each wire module fills it from its own request shape; the
//! decision of what to answer is taken on this view only.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// Anthropic Messages (`POST /v1/messages`), Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`), Codex CLI.
    Responses,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), OpenCode.
    Chat,
}

/// What a request says about its conversation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    pub model: String,
    pub stream: bool,
    /// Text of the user messages (not tool results): where markers are looked for.
    pub user_text: String,
    /// System text, instructions and user text: where prompt captures look.
    pub prompt_text: String,
    /// Each tool result in conversation order, as text.
    pub tool_results: Vec<String>,
    /// Names of the tools the client offers.
    pub offered_tools: Vec<String>,
}

/// The text of a content value: a string, or the `text` fields of an
/// array of parts joined by newlines (other parts are skipped).
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(s) => Some(s.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_owned),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(_) => value
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// Appends `text` to `out` on a new line.
pub(crate) fn push_line(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// The request body's `model` and `stream` fields.
pub(crate) fn model_and_stream(body: &Value) -> (String, bool) {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    (model, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_of_reads_strings_and_part_arrays() {
        assert_eq!(text_of(&json!("a")), "a");
        assert_eq!(
            text_of(&json!([{"type": "text", "text": "a"}, {"type": "image"}, "b"])),
            "a\nb"
        );
        assert_eq!(text_of(&json!(3)), "");
    }
}
