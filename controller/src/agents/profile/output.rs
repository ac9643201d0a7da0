//! Where a profile's CLI puts its final message and its token usage
//! (SPEC §13). Most coding-agent CLIs can print machine-readable output:
//! one JSON object at the end (Claude Code's `--output-format json`) or
//! one JSON event per line (Codex's `--json`, OpenCode's `--format json`).
//! Reading named JSON fields there is exact, where a regex over free text
//! breaks with the next wording change; plain text with a `usage_pattern`
//! stays for the CLIs that offer nothing else.
//!
//! The final message is read, in this order, from the `{output}` file when
//! the command names one, from the JSON field `message` points at, or from
//! the end of stdout. Usage is the sum of the configured fields; a launch
//! whose output has none of them reports no usage (`None`), never zero.

use std::collections::BTreeMap;

use serde_json::Value;

use super::usage::UsagePattern;

/// The shapes of output a profile can declare (`output.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// Free text; usage, if any, through `usage_pattern`.
    #[default]
    Text,
    /// Stdout is one JSON object.
    Json,
    /// Stdout holds one JSON object per line (other lines are ignored).
    JsonLines,
}

impl OutputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
            Self::JsonLines => "json-lines",
        }
    }
}

/// JSON pointers (RFC 6901) to the usage fields. `cached` is for cache
/// reads a CLI reports *apart from* its input count (Anthropic's way); a
/// CLI whose input count already includes them (OpenAI's way) leaves it
/// unset, or the cache would be counted twice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFields {
    pub input: Option<String>,
    pub output: Option<String>,
    pub cached: Option<String>,
}

impl UsageFields {
    fn pointers(&self) -> impl Iterator<Item = &str> {
        [&self.input, &self.output, &self.cached]
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.pointers().next().is_none()
    }
}

/// A checked output declaration.
#[derive(Debug, Clone, Default)]
pub struct OutputFormat {
    pub kind: OutputKind,
    /// Pointer to the final message (JSON kinds only). For JSON lines the
    /// last event that has a string there and matches `message_when`.
    pub message: Option<String>,
    /// Pointer → value an event must carry to count as the final message.
    pub message_when: BTreeMap<String, String>,
    pub usage: UsageFields,
    /// Text kind only.
    pub usage_pattern: Option<UsagePattern>,
}

/// The same declaration as plain data, before the checks.
#[derive(Debug, Clone, Default)]
pub struct OutputSpec {
    pub kind: OutputKind,
    pub message: Option<String>,
    pub message_when: BTreeMap<String, String>,
    pub usage: UsageFields,
}

/// Token usage a launch reported, summed over its model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

impl TokenUsage {
    /// What counts against `limits.tokens_per_run`: every token billed.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cached)
    }
}

/// What a launch's output said, per the profile's declaration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOutput {
    pub message: Option<String>,
    pub tokens: Option<u64>,
    /// The counts apart (JSON formats only; a text pattern gives a total).
    pub usage: Option<TokenUsage>,
}

impl OutputFormat {
    /// Checks `spec` with the profile's `usage_pattern` (a key of its own,
    /// older than the output declaration); the error names the offending
    /// key and why.
    pub fn from_spec(
        spec: OutputSpec,
        usage_pattern: Option<&str>,
    ) -> Result<Self, (&'static str, String)> {
        let usage_pattern = usage_pattern.filter(|p| !p.is_empty());
        let json = spec.kind != OutputKind::Text;
        if json && usage_pattern.is_some() {
            return Err((
                "usage_pattern",
                format!(
                    "is for text output; with format `{}` name the usage fields instead",
                    spec.kind.as_str()
                ),
            ));
        }
        if !json && (spec.message.is_some() || !spec.usage.is_empty()) {
            return Err((
                "output",
                "`message` and the token fields need format `json` or `json-lines`".to_owned(),
            ));
        }
        if spec.kind != OutputKind::JsonLines && !spec.message_when.is_empty() {
            return Err((
                "output",
                "`message_when` picks one of many events: it needs format `json-lines`".to_owned(),
            ));
        }
        let pointers = spec
            .message
            .iter()
            .map(String::as_str)
            .chain(spec.usage.pointers())
            .chain(spec.message_when.keys().map(String::as_str));
        for pointer in pointers {
            if !pointer.starts_with('/') {
                return Err((
                    "output",
                    format!("`{pointer}` is not a JSON pointer (it starts with `/`)"),
                ));
            }
        }
        let usage_pattern = match usage_pattern {
            None => None,
            Some(pattern) => {
                Some(UsagePattern::parse(pattern).map_err(|reason| ("usage_pattern", reason))?)
            }
        };
        Ok(Self {
            kind: spec.kind,
            message: spec.message,
            message_when: spec.message_when,
            usage: spec.usage,
            usage_pattern,
        })
    }

    /// Whether any launch of this profile can report usage.
    pub fn reports_usage(&self) -> bool {
        match self.kind {
            OutputKind::Text => self.usage_pattern.is_some(),
            OutputKind::Json | OutputKind::JsonLines => !self.usage.is_empty(),
        }
    }

    /// Reads the final message and the usage from the captured `stdout`
    /// (and, for text, `stderr`, where some CLIs print their summary).
    pub fn read(&self, stdout: &str, stderr: &str) -> ReadOutput {
        match self.kind {
            OutputKind::Text => {
                let pattern = self.usage_pattern.as_ref();
                ReadOutput {
                    message: None,
                    tokens: pattern
                        .and_then(|p| p.tokens_in(stdout).or_else(|| p.tokens_in(stderr))),
                    usage: None,
                }
            }
            OutputKind::Json => {
                let Ok(object) = serde_json::from_str::<Value>(stdout.trim()) else {
                    return ReadOutput::default();
                };
                ReadOutput {
                    message: self
                        .message
                        .as_deref()
                        .and_then(|p| object.pointer(p))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    ..Self::usage_read(self.usage_of(std::slice::from_ref(&object)))
                }
            }
            OutputKind::JsonLines => {
                let events: Vec<Value> = stdout
                    .lines()
                    .filter(|line| line.trim_start().starts_with('{'))
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect();
                ReadOutput {
                    message: self.last_message(&events),
                    ..Self::usage_read(self.usage_of(&events))
                }
            }
        }
    }

    fn usage_read(usage: Option<TokenUsage>) -> ReadOutput {
        ReadOutput {
            message: None,
            tokens: usage.map(|u| u.total()),
            usage,
        }
    }

    fn last_message(&self, events: &[Value]) -> Option<String> {
        let pointer = self.message.as_deref()?;
        events
            .iter()
            .rev()
            .filter(|event| {
                self.message_when
                    .iter()
                    .all(|(at, want)| event.pointer(at).and_then(Value::as_str) == Some(want))
            })
            .find_map(|event| event.pointer(pointer).and_then(Value::as_str))
            .map(str::to_owned)
    }

    /// The configured fields summed over `events`; `None` when not one of
    /// them was present anywhere.
    fn usage_of(&self, events: &[Value]) -> Option<TokenUsage> {
        let sum = |pointer: &Option<String>| -> Option<u64> {
            let pointer = pointer.as_deref()?;
            let values: Vec<u64> = events
                .iter()
                .filter_map(|e| e.pointer(pointer).and_then(Value::as_u64))
                .collect();
            (!values.is_empty()).then(|| values.iter().fold(0u64, |a, b| a.saturating_add(*b)))
        };
        let (input, output, cached) = (
            sum(&self.usage.input),
            sum(&self.usage.output),
            sum(&self.usage.cached),
        );
        if input.is_none() && output.is_none() && cached.is_none() {
            return None;
        }
        Some(TokenUsage {
            input: input.unwrap_or(0),
            output: output.unwrap_or(0),
            cached: cached.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn fields(input: &str, output: &str, cached: Option<&str>) -> UsageFields {
        UsageFields {
            input: Some(input.into()),
            output: Some(output.into()),
            cached: cached.map(Into::into),
        }
    }

    #[test]
    fn a_json_object_gives_its_message_and_its_usage_fields() {
        let format = OutputFormat::from_spec(
            OutputSpec {
                kind: OutputKind::Json,
                message: Some("/result".into()),
                usage: fields(
                    "/usage/input_tokens",
                    "/usage/output_tokens",
                    Some("/usage/cache_read_input_tokens"),
                ),
                ..OutputSpec::default()
            },
            None,
        )
        .unwrap();
        let stdout = r#"{"type":"result","result":"done\n<<<CONTROL_RESULT>>>","usage":{"input_tokens":4500,"cache_read_input_tokens":768,"output_tokens":165}}"#;
        let read = format.read(stdout, "");
        assert_eq!(read.message.as_deref(), Some("done\n<<<CONTROL_RESULT>>>"));
        assert_eq!(read.tokens, Some(4500 + 768 + 165));
        assert!(format.reports_usage());
    }

    #[test]
    fn json_lines_sum_usage_over_events_and_take_the_last_matching_message() {
        let format = OutputFormat::from_spec(
            OutputSpec {
                kind: OutputKind::JsonLines,
                message: Some("/part/text".into()),
                message_when: [("/type".to_owned(), "text".to_owned())].into(),
                usage: fields(
                    "/part/tokens/input",
                    "/part/tokens/output",
                    Some("/part/tokens/cache/read"),
                ),
            },
            None,
        )
        .unwrap();
        let stdout = [
            r#"{"type":"step_finish","part":{"tokens":{"input":100,"output":10,"cache":{"read":5}}}}"#,
            r#"{"type":"text","part":{"text":"first"}}"#,
            "a line that is not JSON",
            r#"{"type":"reasoning","part":{"text":"thinking"}}"#,
            r#"{"type":"text","part":{"text":"final"}}"#,
            r#"{"type":"step_finish","part":{"tokens":{"input":200,"output":20,"cache":{"read":0}}}}"#,
        ]
        .join("\n");
        let read = format.read(&stdout, "");
        assert_eq!(read.message.as_deref(), Some("final"));
        assert_eq!(read.tokens, Some(300 + 30 + 5));
    }

    #[test]
    fn output_without_any_usage_field_reports_none_not_zero() {
        let format = OutputFormat::from_spec(
            OutputSpec {
                kind: OutputKind::JsonLines,
                usage: fields("/usage/input_tokens", "/usage/output_tokens", None),
                ..OutputSpec::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(format.read(r#"{"type":"turn.failed"}"#, "").tokens, None);
        assert_eq!(format.read("not json at all", "").tokens, None);
        let json = OutputFormat::from_spec(
            OutputSpec {
                kind: OutputKind::Json,
                message: Some("/result".into()),
                ..OutputSpec::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(json.read("{\"result\": tru", ""), ReadOutput::default());
        assert!(!json.reports_usage());
    }

    #[test]
    fn text_output_reads_usage_through_the_pattern_on_either_stream() {
        let format = OutputFormat::from_spec(
            OutputSpec::default(),
            Some(r"tokens used:?\s*(?<tokens>[\d,]+)"),
        )
        .unwrap();
        assert_eq!(
            format.read("work", "tokens used\n1,234\n").tokens,
            Some(1234)
        );
        assert_eq!(format.read("work", "").message, None);
    }

    #[test]
    fn mismatched_declarations_are_refused_with_their_key() {
        let refused = |spec: OutputSpec| OutputFormat::from_spec(spec, None).unwrap_err().0;
        let json = OutputSpec {
            kind: OutputKind::Json,
            ..OutputSpec::default()
        };
        assert_eq!(
            OutputFormat::from_spec(json, Some("t=(\\d+)"))
                .unwrap_err()
                .0,
            "usage_pattern"
        );
        assert_eq!(
            refused(OutputSpec {
                message: Some("/result".into()),
                ..OutputSpec::default()
            }),
            "output"
        );
        assert_eq!(
            refused(OutputSpec {
                kind: OutputKind::Json,
                message_when: [("/type".to_owned(), "text".to_owned())].into(),
                ..OutputSpec::default()
            }),
            "output"
        );
        assert_eq!(
            refused(OutputSpec {
                kind: OutputKind::Json,
                message: Some("result".into()),
                ..OutputSpec::default()
            }),
            "output"
        );
    }
}
