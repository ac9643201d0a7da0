//! What a test tells the server to say: a [`Script`] per conversation role,
//! its steps (tool calls, then a final message), the values it captures from
//! the prompt and from tool results, the usage it claims and the faults it
//! injects. Scripts are plain data (serde) so the HTTP control API and the
//! library take the same thing.

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Token usage the server claims for one reply.
///
/// `input_tokens` counts input not served from a cache and
/// `cached_input_tokens` the cache reads; each vendor's wire shape is built
/// from these two (OpenAI's `input_tokens` is their sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
}

impl Usage {
    /// Element-wise sum.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_input_tokens: self.cached_input_tokens + other.cached_input_tokens,
        }
    }
}

/// One thing the model does in a turn. Every string is a template:
/// `{{name}}` is replaced by the capture `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Create a file with the CLI's own write tool (Claude Code `Write`,
    /// Codex `apply_patch`, OpenCode `write`). Claude Code and OpenCode want
    /// an absolute path.
    WriteFile { path: String, content: String },
    /// Run a shell command with the CLI's own shell tool.
    Shell { command: String },
    /// Read a file with the CLI's read tool (Codex: `cat` through its shell).
    ReadFile { path: String },
    /// End the conversation with this text.
    Final { text: String },
}

/// A step: an action and, optionally, the usage claimed for its reply
/// (the script's default otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    #[serde(flatten)]
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Where a capture looks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureSource {
    /// All text the client sent that is not a tool result: system text,
    /// instructions and user messages.
    Prompt,
    /// The result of the tool call made at this step (0-based).
    ToolResult(usize),
}

/// A named value taken from the conversation: the first group of `pattern`
/// (the whole match when it has no group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    pub name: String,
    pub from: CaptureSource,
    pub pattern: String,
}

/// A fault injected instead of (or into) a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// HTTP 429 in the vendor's error shape, with a short `retry-after`.
    RateLimited,
    /// Anthropic: HTTP 529 `overloaded_error`; OpenAI: HTTP 503
    /// `server_is_overloaded`.
    Overloaded,
    /// The stream starts, then the connection is cut before the reply ends.
    CutStream,
    /// Nothing is answered until the test releases the script's hold; then
    /// the reply is sent normally.
    Hang,
}

/// Fire `kind` on the next `times` requests at `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub step: usize,
    pub kind: FaultKind,
    pub times: u32,
}

/// The script of one conversation role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Script {
    /// Name used in the request log and the usage report.
    pub name: String,
    /// Text that a user message of the conversation contains; the first
    /// loaded script whose marker appears is the one that answers.
    pub marker: String,
    pub steps: Vec<Step>,
    #[serde(default)]
    pub captures: Vec<Capture>,
    /// Usage claimed per reply unless a step says otherwise.
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub faults: Vec<Fault>,
}

/// Why a script cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("script `{0}` has no steps")]
    NoSteps(String),
    #[error("script `{0}`: only the last step may be `final`, and it must be")]
    FinalNotLast(String),
    #[error("script `{0}` has an empty marker")]
    EmptyMarker(String),
    #[error("script `{script}`: capture `{capture}` has a bad pattern: {source}")]
    BadPattern {
        script: String,
        capture: String,
        source: regex::Error,
    },
    #[error("a script named `{0}` is already loaded")]
    Duplicate(String),
}

impl Script {
    /// A script with no steps yet; add them with the builder methods.
    pub fn new(name: impl Into<String>, marker: impl Into<String>) -> Self {
        Script {
            name: name.into(),
            marker: marker.into(),
            steps: Vec::new(),
            captures: Vec::new(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                cached_input_tokens: 0,
            },
            faults: Vec::new(),
        }
    }

    fn step(mut self, action: Action) -> Self {
        self.steps.push(Step {
            action,
            usage: None,
        });
        self
    }

    pub fn write_file(self, path: impl Into<String>, content: impl Into<String>) -> Self {
        self.step(Action::WriteFile {
            path: path.into(),
            content: content.into(),
        })
    }

    pub fn shell(self, command: impl Into<String>) -> Self {
        self.step(Action::Shell {
            command: command.into(),
        })
    }

    pub fn read_file(self, path: impl Into<String>) -> Self {
        self.step(Action::ReadFile { path: path.into() })
    }

    pub fn final_message(self, text: impl Into<String>) -> Self {
        self.step(Action::Final { text: text.into() })
    }

    /// Usage claimed for the reply of the step added last.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        if let Some(step) = self.steps.last_mut() {
            step.usage = Some(usage);
        }
        self
    }

    /// Default usage per reply.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    pub fn capture_prompt(self, name: &str, pattern: &str) -> Self {
        self.capture(name, CaptureSource::Prompt, pattern)
    }

    pub fn capture_result(self, name: &str, step: usize, pattern: &str) -> Self {
        self.capture(name, CaptureSource::ToolResult(step), pattern)
    }

    fn capture(mut self, name: &str, from: CaptureSource, pattern: &str) -> Self {
        self.captures.push(Capture {
            name: name.to_owned(),
            from,
            pattern: pattern.to_owned(),
        });
        self
    }

    pub fn fault(mut self, step: usize, kind: FaultKind, times: u32) -> Self {
        self.faults.push(Fault { step, kind, times });
        self
    }

    /// Usage claimed for the reply at `step` (the last step answers any
    /// later request too).
    pub fn usage_at(&self, step: usize) -> Usage {
        self.steps
            .get(step.min(self.steps.len().saturating_sub(1)))
            .and_then(|s| s.usage)
            .unwrap_or(self.usage)
    }

    /// Checks the shape and compiles the capture patterns.
    pub(crate) fn compile(&self) -> Result<Vec<(Capture, Regex)>, ScriptError> {
        if self.marker.is_empty() {
            return Err(ScriptError::EmptyMarker(self.name.clone()));
        }
        let Some((last, rest)) = self.steps.split_last() else {
            return Err(ScriptError::NoSteps(self.name.clone()));
        };
        let final_inside = rest
            .iter()
            .any(|s| matches!(s.action, Action::Final { .. }));
        if final_inside || !matches!(last.action, Action::Final { .. }) {
            return Err(ScriptError::FinalNotLast(self.name.clone()));
        }
        self.captures
            .iter()
            .map(|c| {
                Regex::new(&c.pattern)
                    .map(|re| (c.clone(), re))
                    .map_err(|source| ScriptError::BadPattern {
                        script: self.name.clone(),
                        capture: c.name.clone(),
                        source,
                    })
            })
            .collect()
    }
}

/// Replaces each `{{name}}` by its value. A name without a value stays in
/// the text as `{{name: not captured}}`, so a test comparing the final
/// message sees what went wrong.
pub(crate) fn render(template: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = after[..end].trim();
        match values.get(name) {
            Some(value) => out.push_str(value),
            None => {
                out.push_str("{{");
                out.push_str(name);
                out.push_str(": not captured}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_replaces_known_names_and_flags_unknown_ones() {
        let values = BTreeMap::from([("head".to_owned(), "abc".to_owned())]);
        assert_eq!(
            render("sha {{head}} round {{ round }} {{", &values),
            "sha abc round {{round: not captured}} {{"
        );
    }

    #[test]
    fn a_script_must_end_with_exactly_one_final_step() {
        let no_final = Script::new("s", "m").shell("true");
        assert!(matches!(
            no_final.compile(),
            Err(ScriptError::FinalNotLast(_))
        ));
        let two = Script::new("s", "m").final_message("a").final_message("b");
        assert!(matches!(two.compile(), Err(ScriptError::FinalNotLast(_))));
        let ok = Script::new("s", "m")
            .capture_prompt("x", "(a")
            .final_message("a");
        assert!(matches!(ok.compile(), Err(ScriptError::BadPattern { .. })));
    }

    #[test]
    fn script_round_trips_through_json() {
        let script = Script::new("writer", "MARK")
            .write_file("/r/a.txt", "hi\n")
            .with_usage(Usage {
                input_tokens: 5,
                output_tokens: 6,
                cached_input_tokens: 0,
            })
            .shell("git rev-parse HEAD")
            .capture_result("head", 1, "([0-9a-f]{40})")
            .final_message("{{head}}")
            .fault(0, FaultKind::Overloaded, 1);
        let text = serde_json::to_string(&script).expect("serialises");
        let back: Script = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, script);
        assert_eq!(back.usage_at(0).input_tokens, 5);
        assert_eq!(back.usage_at(9), script.usage);
    }
}
