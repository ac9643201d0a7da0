//! The server's memory: the loaded scripts with their remaining faults,
//! holds and claimed usage, and the request log. [`Shared::decide`] turns a
//! [`Conversation`] into what to answer; it keeps no per-connection state,
//! so the step is always the count of tool results the request carries
//! (a retried request gets the same answer, parallel conversations do not
//! disturb each other).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::conversation::{Conversation, Wire};
use crate::script::{Action, Capture, CaptureSource, Fault, FaultKind, Script, ScriptError, Usage};

/// Usage the server claimed in one reply: one sent whole, or the part of a
/// cut reply that was sent before the break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub step: usize,
    pub usage: Usage,
    /// A reply to a request that offered no tools (OpenCode's title
    /// request): answered with plain text and not a script step.
    pub side: bool,
    /// The reply was cut: `usage` is what its sent half carried.
    #[serde(default)]
    pub cut: bool,
}

/// What the server did with a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A tool call was sent (the vendor's tool name).
    ToolCall { tool: String },
    /// The script's final message was sent.
    Final,
    /// A request without tools got a plain-text answer.
    Side,
    /// A fault was injected instead of a reply (a hang is not listed here:
    /// it is followed by the reply and marks the record `held`).
    Fault { fault: FaultKind },
    /// No loaded script's marker is in the conversation.
    NoScript,
    /// Not one of the three API routes: 404.
    NoRoute,
    /// The body is not what the API takes.
    BadRequest { reason: String },
}

/// One logged request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestRecord {
    pub seq: u64,
    pub method: String,
    /// Path and query as sent.
    pub path: String,
    pub wire: Option<Wire>,
    pub script: Option<String>,
    pub step: Option<usize>,
    pub model: Option<String>,
    pub stream: Option<bool>,
    pub offered_tools: Vec<String>,
    pub tool_results: usize,
    /// How the client authenticated: `x-api-key`, `bearer` or none. The
    /// value itself is never kept.
    pub auth: Option<String>,
    pub held: bool,
    pub status: u16,
    pub outcome: Outcome,
    pub body: Option<Value>,
}

/// A tool call or a final text, rendered from the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Turn {
    WriteFile { path: String, content: String },
    Shell { command: String },
    ReadFile { path: String },
    Text(String),
}

/// What to answer one request.
pub(crate) struct Decision {
    pub script: String,
    pub step: usize,
    pub turn: Turn,
    pub usage: Usage,
    pub side: bool,
    pub fault: Option<FaultKind>,
    /// Set when the reply waits for the script's hold to be released.
    pub hold: Option<watch::Receiver<bool>>,
}

struct Loaded {
    script: Script,
    captures: Vec<(Capture, Regex)>,
    faults: Vec<Fault>,
    claims: Vec<Claim>,
    release: watch::Sender<bool>,
}

/// Everything the handlers share.
#[derive(Default)]
pub struct Shared {
    scripts: Mutex<Vec<Loaded>>,
    log: Mutex<Vec<RequestRecord>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking handler must not take the whole server down.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The plain-text answer to a request that offers no tools.
pub const SIDE_REPLY: &str = "Scripted session";

impl Shared {
    pub(crate) fn load(&self, script: Script) -> Result<(), ScriptError> {
        let captures = script.compile()?;
        let mut scripts = lock(&self.scripts);
        if scripts.iter().any(|l| l.script.name == script.name) {
            return Err(ScriptError::Duplicate(script.name));
        }
        let (release, _) = watch::channel(false);
        scripts.push(Loaded {
            faults: script.faults.clone(),
            script,
            captures,
            claims: Vec::new(),
            release,
        });
        Ok(())
    }

    pub(crate) fn release(&self, name: &str) -> bool {
        let scripts = lock(&self.scripts);
        let Some(loaded) = scripts.iter().find(|l| l.script.name == name) else {
            return false;
        };
        loaded.release.send_replace(true);
        true
    }

    pub(crate) fn claims(&self) -> BTreeMap<String, Vec<Claim>> {
        lock(&self.scripts)
            .iter()
            .map(|l| (l.script.name.clone(), l.claims.clone()))
            .collect()
    }

    pub(crate) fn claim(&self, name: &str, claim: Claim) {
        if let Some(l) = lock(&self.scripts)
            .iter_mut()
            .find(|l| l.script.name == name)
        {
            l.claims.push(claim);
        }
    }

    pub(crate) fn record(&self, mut record: RequestRecord) {
        let mut log = lock(&self.log);
        record.seq = log.len() as u64 + 1;
        log.push(record);
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.log).clone()
    }

    /// What to answer `conv`, or `None` when no script's marker is in it.
    pub(crate) fn decide(&self, conv: &Conversation) -> Option<Decision> {
        let mut scripts = lock(&self.scripts);
        let loaded = scripts
            .iter_mut()
            .find(|l| conv.user_text.contains(&l.script.marker))?;
        let name = loaded.script.name.clone();
        if conv.offered_tools.is_empty() {
            return Some(Decision {
                script: name,
                step: conv.tool_results.len(),
                turn: Turn::Text(SIDE_REPLY.to_owned()),
                usage: loaded.script.usage,
                side: true,
                fault: None,
                hold: None,
            });
        }
        let last = loaded.script.steps.len().saturating_sub(1);
        let step = conv.tool_results.len().min(last);
        let fault = take_fault(&mut loaded.faults, step);
        let values = captured(&loaded.captures, conv);
        let render = |t: &str| crate::script::render(t, &values);
        let turn = match &loaded.script.steps.get(step)?.action {
            Action::WriteFile { path, content } => Turn::WriteFile {
                path: render(path),
                content: render(content),
            },
            Action::Shell { command } => Turn::Shell {
                command: render(command),
            },
            Action::ReadFile { path } => Turn::ReadFile { path: render(path) },
            Action::Final { text } => Turn::Text(render(text)),
        };
        Some(Decision {
            script: name,
            step,
            turn,
            usage: loaded.script.usage_at(step),
            side: false,
            hold: (fault == Some(FaultKind::Hang)).then(|| loaded.release.subscribe()),
            fault,
        })
    }
}

/// Uses up one firing of the first fault armed for `step`.
fn take_fault(faults: &mut [Fault], step: usize) -> Option<FaultKind> {
    let fault = faults.iter_mut().find(|f| f.step == step && f.times > 0)?;
    fault.times -= 1;
    Some(fault.kind)
}

fn captured(captures: &[(Capture, Regex)], conv: &Conversation) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for (capture, re) in captures {
        let haystack = match capture.from {
            CaptureSource::Prompt => Some(conv.prompt_text.as_str()),
            CaptureSource::ToolResult(i) => conv.tool_results.get(i).map(String::as_str),
        };
        let found = haystack
            .and_then(|h| re.captures(h))
            .and_then(|c| c.get(1).or_else(|| c.get(0)).map(|m| m.as_str().to_owned()));
        if let Some(value) = found {
            values.insert(capture.name.clone(), value);
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(user: &str, results: &[&str]) -> Conversation {
        Conversation {
            user_text: user.to_owned(),
            prompt_text: format!("system text\n{user}"),
            tool_results: results.iter().map(|s| (*s).to_owned()).collect(),
            offered_tools: vec!["Bash".to_owned()],
            ..Conversation::default()
        }
    }

    fn shared() -> Shared {
        let shared = Shared::default();
        let script = Script::new("impl", "ROLE=implement")
            .capture_prompt("round", r"round (\d+)")
            .shell("git rev-parse HEAD")
            .capture_result("head", 0, "([0-9a-f]{40})")
            .final_message("head={{head}} round={{round}}")
            .fault(1, FaultKind::Overloaded, 1);
        shared.load(script).expect("loads");
        shared
    }

    #[test]
    fn the_step_is_the_count_of_tool_results() {
        let shared = shared();
        let first = shared
            .decide(&conv("ROLE=implement round 2", &[]))
            .expect("matches");
        assert_eq!(
            first.turn,
            Turn::Shell {
                command: "git rev-parse HEAD".into()
            }
        );
        // The same request again (a retry) gets the same answer.
        let again = shared
            .decide(&conv("ROLE=implement round 2", &[]))
            .expect("matches");
        assert_eq!(again.turn, first.turn);
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let faulted = shared
            .decide(&conv("ROLE=implement round 2", &[sha]))
            .expect("matches");
        assert_eq!(faulted.fault, Some(FaultKind::Overloaded));
        let last = shared
            .decide(&conv("ROLE=implement round 2", &[sha]))
            .expect("matches");
        assert_eq!(last.fault, None, "the fault fired once");
        assert_eq!(last.turn, Turn::Text(format!("head={sha} round=2")));
    }

    #[test]
    fn a_conversation_without_the_marker_matches_no_script() {
        assert!(shared().decide(&conv("ROLE=review", &[])).is_none());
    }

    #[test]
    fn a_request_without_tools_is_a_side_request() {
        let mut c = conv("ROLE=implement", &[]);
        c.offered_tools.clear();
        let d = shared().decide(&c).expect("matches");
        assert!(d.side);
        assert_eq!(d.turn, Turn::Text(SIDE_REPLY.to_owned()));
    }
}
