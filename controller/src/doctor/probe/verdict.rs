//! Judging one probe: from the launch's exit, its (redacted) output and
//! what git shows in the probe repository, either success or the reason
//! the profile cannot work, with what to do about it.

use serde::Serialize;

use super::repo::{ProbeRepo, Written};
use super::{ANSWER_WORD, ProbeKind};
use crate::agents::supervisor::{LaunchError, LaunchExit, LaunchOutcome};

/// How much of the agent's own words a reason quotes.
const EXCERPT_CHARS: usize = 240;

/// Words that, in a failed launch's output, mean the model API refused
/// the key (compared in lower case).
const AUTH_HINTS: &[&str] = &[
    "401",
    "unauthorized",
    "unauthenticated",
    "authentication",
    "invalid api key",
    "invalid x-api-key",
    "api key",
    "api_key",
    "not logged in",
    "/login",
];

/// Why a probe failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum ProbeFailure {
    #[error("binary missing: {detail}")]
    BinaryMissing { detail: String },
    #[error("auth refused: {detail}")]
    AuthRefused { detail: String },
    #[error("permission mode denies writes: {detail}")]
    WritesDenied { detail: String },
    #[error("output unparsable: {detail}")]
    OutputUnparsable { detail: String },
    #[error("not as asked: {detail}")]
    NotAsAsked { detail: String },
    #[error("crashed: {detail}")]
    Crashed { detail: String },
    #[error("timed out: {detail}")]
    TimedOut { detail: String },
    #[error("could not set up the probe: {detail}")]
    Setup { detail: String },
}

impl ProbeFailure {
    /// What the operator should do.
    pub fn fix(&self) -> &'static str {
        match self {
            ProbeFailure::BinaryMissing { .. } => {
                "install the CLI or put its absolute path first in the profile's command"
            }
            ProbeFailure::AuthRefused { .. } => {
                "set the vendor key the profile inherits (env_inherit) in autoforge's environment, \
                 or log the CLI in"
            }
            ProbeFailure::WritesDenied { .. } => {
                "give the writing profile its CLI's write and shell permissions \
                 (docs/agents.md lists the flags per CLI)"
            }
            ProbeFailure::OutputUnparsable { .. } => {
                "make the command print the agent's final message (see the profile's output \
                 settings in docs/agents.md)"
            }
            ProbeFailure::NotAsAsked { .. } => {
                "check the profile's flags and the launch log; a reviewer profile must be read-only"
            }
            ProbeFailure::Crashed { .. } => "run the command by hand to see its error",
            ProbeFailure::TimedOut { .. } => {
                "check the key and the network path to the model API (run the command by \
                 hand to see what it waits for)"
            }
            ProbeFailure::Setup { .. } => "check the state directory and the sandbox line above",
        }
    }
}

/// A launch that could not start.
pub fn launch_error(error: &LaunchError) -> ProbeFailure {
    match error {
        LaunchError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            ProbeFailure::BinaryMissing {
                detail: error.to_string(),
            }
        }
        other => ProbeFailure::Setup {
            detail: other.to_string(),
        },
    }
}

/// Success (`None`) or the reason the probe failed.
pub async fn judge(
    kind: ProbeKind,
    outcome: &LaunchOutcome,
    repo: &ProbeRepo,
    before: &str,
) -> Option<ProbeFailure> {
    let output = format!(
        "{}\n{}",
        outcome.stdout.tail_text(),
        outcome.stderr.tail_text()
    );
    let code = match outcome.record.exit {
        LaunchExit::Exited(code) => code,
        LaunchExit::IdleTimeout => {
            return Some(ProbeFailure::TimedOut {
                detail: format!(
                    "silent for {} s: the CLI may be retrying a refused key or an \
                     unreachable model API",
                    outcome.record.duration.as_secs()
                ),
            });
        }
        LaunchExit::WallTimeout => {
            return Some(ProbeFailure::TimedOut {
                detail: format!(
                    "still running after {} s",
                    outcome.record.duration.as_secs()
                ),
            });
        }
        other => {
            return Some(ProbeFailure::Crashed {
                detail: format!("{other:?}"),
            });
        }
    };
    if code != 0 {
        return Some(failed_exit(code, &output));
    }
    let answered = outcome.result_text().contains(&repo.marker);
    match kind {
        ProbeKind::Write => judge_write(repo, answered, &output).await,
        ProbeKind::Read => judge_read(repo, before, answered, &output).await,
    }
}

/// The shell's status for a command it could not find: a profile that
/// starts its CLI through `sh -c` reports a missing CLI this way.
const COMMAND_NOT_FOUND: i32 = 127;

fn failed_exit(code: i32, output: &str) -> ProbeFailure {
    let detail = format!("exited with {code}: {}", excerpt(output));
    if code == COMMAND_NOT_FOUND {
        ProbeFailure::BinaryMissing { detail }
    } else if mentions_auth(output) {
        ProbeFailure::AuthRefused { detail }
    } else {
        ProbeFailure::Crashed { detail }
    }
}

async fn judge_write(repo: &ProbeRepo, answered: bool, output: &str) -> Option<ProbeFailure> {
    let written = match repo.written().await {
        Ok(written) => written,
        Err(error) => {
            return Some(ProbeFailure::Setup {
                detail: format!("{error:#}"),
            });
        }
    };
    let file = repo.written_file();
    match written {
        Written::Committed if answered => None,
        Written::Committed => Some(unanswered(output)),
        Written::NotCommitted => Some(ProbeFailure::WritesDenied {
            detail: format!(
                "{file} was written but not committed: the agent may edit files but not run git"
            ),
        }),
        Written::OtherCommit => Some(ProbeFailure::NotAsAsked {
            detail: format!("a commit was made, but HEAD does not hold {file} with the marker"),
        }),
        Written::Nothing if mentions_auth(output) && !answered => Some(ProbeFailure::AuthRefused {
            detail: excerpt(output),
        }),
        Written::Nothing => Some(ProbeFailure::WritesDenied {
            detail: format!(
                "the agent exited 0 without creating or committing {file}: its permission \
                 flags refuse file writes or shell commands"
            ),
        }),
    }
}

async fn judge_read(
    repo: &ProbeRepo,
    before: &str,
    answered: bool,
    output: &str,
) -> Option<ProbeFailure> {
    match repo.fingerprint().await {
        Ok(after) if after != before => {
            return Some(ProbeFailure::NotAsAsked {
                detail: "the read probe changed the repository: the profile is not read-only"
                    .into(),
            });
        }
        Ok(_) => {}
        Err(error) => {
            return Some(ProbeFailure::Setup {
                detail: format!("{error:#}"),
            });
        }
    }
    if answered {
        return None;
    }
    if mentions_auth(output) {
        return Some(ProbeFailure::AuthRefused {
            detail: excerpt(output),
        });
    }
    Some(unanswered(output))
}

fn unanswered(output: &str) -> ProbeFailure {
    ProbeFailure::OutputUnparsable {
        detail: format!(
            "no `{ANSWER_WORD} <marker>` answer in the final message or the end of stdout \
             (output ends: {})",
            excerpt(output)
        ),
    }
}

fn mentions_auth(output: &str) -> bool {
    let lower = output.to_lowercase();
    AUTH_HINTS.iter().any(|hint| lower.contains(hint))
}

/// The last non-empty line of the output, shortened: enough to recognise
/// the error without pasting the agent's whole log into the report. A JSON
/// line (a CLI's result object or error event) is quoted by its message.
fn excerpt(output: &str) -> String {
    let line = output
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("(no output)");
    let message = json_message(line);
    let line = message.as_deref().unwrap_or(line);
    let mut text: String = line.chars().take(EXCERPT_CHARS).collect();
    if text.len() < line.len() {
        text.push('…');
    }
    text
}

/// What a JSON output line says in words: Claude Code's result object
/// (`.result`, with `.api_error_status` when the model API refused), or an
/// error event's `.error.message` (Codex's `turn.failed`).
fn json_message(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    let text = ["/error/message", "/result", "/message"]
        .iter()
        .find_map(|pointer| value.pointer(pointer).and_then(serde_json::Value::as_str))?;
    Some(
        match value
            .get("api_error_status")
            .and_then(serde_json::Value::as_u64)
        {
            Some(status) => format!("{text} (the model API answered {status})"),
            None => text.to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_exit_is_an_auth_refusal_a_missing_binary_or_a_crash_by_what_it_says() {
        let failure = failed_exit(1, "starting\nError: 401 Unauthorized: invalid x-api-key\n");
        assert!(
            matches!(failure, ProbeFailure::AuthRefused { .. }),
            "{failure:?}"
        );
        assert!(failure.to_string().contains("invalid x-api-key"));
        let wrapped = failed_exit(127, "sh: 1: exec: opencode: not found\n");
        assert!(
            matches!(wrapped, ProbeFailure::BinaryMissing { .. }),
            "{wrapped:?}"
        );
        let crash = failed_exit(2, "segmentation fault\n");
        assert!(matches!(crash, ProbeFailure::Crashed { .. }), "{crash:?}");
    }

    #[test]
    fn the_excerpt_is_the_last_line_and_bounded() {
        assert_eq!(excerpt("a\nlast one\n\n"), "last one");
        assert_eq!(excerpt(""), "(no output)");
        let long = "x".repeat(500);
        assert_eq!(excerpt(&long).chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn a_refused_key_in_a_json_result_is_an_auth_refusal_quoted_by_its_message() {
        // Claude Code's `--output-format json` object once its retries of a
        // 401 are spent (shortened).
        let claude = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"api_error_type":"authentication_error","result":"Invalid API key · Fix external API key","usage":{"input_tokens":0}}"#;
        let failure = failed_exit(1, claude);
        assert!(
            matches!(failure, ProbeFailure::AuthRefused { .. }),
            "{failure:?}"
        );
        assert_eq!(
            failure.to_string(),
            "auth refused: exited with 1: Invalid API key · Fix external API key (the model API answered 401)"
        );
        let codex = r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided"}}"#;
        assert!(excerpt(codex).starts_with("unexpected status 401 Unauthorized"));
    }

    #[test]
    fn a_failure_serialises_with_its_reason_tag() {
        let json = serde_json::to_value(ProbeFailure::WritesDenied { detail: "d".into() })
            .unwrap_or_default();
        assert_eq!(json["reason"], "writes_denied");
        assert_eq!(json["detail"], "d");
    }
}
