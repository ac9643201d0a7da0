//! What the dashboard shows, read from the journal into plain structs.
//!
//! Loading and rendering are apart so the pages can be tested on fixed
//! data, and so the HTML layer never sees a database type.

use std::path::Path;

use autoforge_journal::{IssueNumber, Journal, JournalError, PullNumber, Run, RunFilter, RunId};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

/// How many runs the index lists.
pub const INDEX_LIMIT: i64 = 200;
/// How many lines of an agent's log a run page shows.
pub const LOG_TAIL_LINES: usize = 40;
/// A log line longer than this is cut (the capture already redacted it).
const LOG_LINE_LIMIT: usize = 400;

/// One row of the index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub id: i64,
    pub repository: String,
    pub issue: i64,
    pub epic: Option<i64>,
    pub phase: String,
    pub active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&Run> for RunSummary {
    fn from(run: &Run) -> Self {
        RunSummary {
            id: run.id.0,
            repository: run.repository.clone(),
            issue: run.current_issue.to_i64(),
            epic: run.epic.map(IssueNumber::to_i64),
            phase: run.phase.clone(),
            active: run.active,
            created_at: run.created_at,
            updated_at: run.updated_at,
        }
    }
}

/// One line of a run's timeline: a transition or another audit record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub text: String,
}

/// One GitHub write of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EffectRow {
    pub kind: String,
    pub identity: String,
    pub stage: String,
    pub attempts: i32,
    pub reason: Option<String>,
    /// The written object's web page, when the read-back named one.
    pub link: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// One agent launch of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchRow {
    pub phase: String,
    pub role: String,
    pub profile: String,
    pub attempt: i32,
    pub started_at: DateTime<Utc>,
    pub exit_status: Option<i32>,
    pub duration_ms: Option<i64>,
    pub tokens: Option<i64>,
    pub outcome: Option<String>,
    pub log_tail: Vec<String>,
}

/// One validation command's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationRow {
    pub sha: String,
    pub command: String,
    pub outcome: String,
    pub duration_ms: i64,
    pub recorded_at: DateTime<Utc>,
}

/// Everything the run page shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    pub summary: RunSummary,
    pub round: Option<u64>,
    pub pr: Option<PullNumber>,
    pub blocked_reason: Option<String>,
    pub failure: Option<String>,
    pub timeline: Vec<TimelineEntry>,
    pub effects: Vec<EffectRow>,
    pub launches: Vec<LaunchRow>,
    pub validations: Vec<ValidationRow>,
}

/// The runs of the index, newest first.
pub async fn load_index(journal: &Journal) -> Result<Vec<RunSummary>, JournalError> {
    let runs = journal.list_runs(RunFilter::All, INDEX_LIMIT).await?;
    Ok(runs.iter().map(RunSummary::from).collect())
}

/// One run with its history, or `None` when there is no such run.
pub async fn load_run(journal: &Journal, id: RunId) -> Result<Option<RunDetail>, JournalError> {
    let Some(run) = journal.get_run(id).await? else {
        return Ok(None);
    };
    let timeline = journal
        .list_audit_events(id)
        .await?
        .into_iter()
        .map(|event| TimelineEntry {
            at: event.recorded_at,
            text: timeline_text(&event.kind, &event.detail),
            kind: event.kind,
        })
        .collect();
    let effects = journal
        .list_effects(id)
        .await?
        .into_iter()
        .map(|effect| EffectRow {
            kind: effect.kind.as_str().to_owned(),
            link: effect.observed.as_ref().and_then(web_link),
            identity: effect.identity,
            stage: effect.stage.as_str().to_owned(),
            attempts: effect.attempts,
            reason: effect.reason,
            updated_at: effect.updated_at,
        })
        .collect();
    let launches = journal
        .list_launches(id)
        .await?
        .into_iter()
        .map(|launch| LaunchRow {
            log_tail: log_tail(&Path::new(&launch.log_dir).join("output.log")),
            phase: launch.phase,
            role: launch.role,
            profile: launch.profile,
            attempt: launch.attempt,
            started_at: launch.started_at,
            exit_status: launch.exit_status,
            duration_ms: launch.duration_ms,
            tokens: launch.tokens,
            outcome: launch.outcome,
        })
        .collect();
    let validations = journal
        .list_validations(id, None)
        .await?
        .into_iter()
        .map(|record| ValidationRow {
            sha: record.sha,
            command: record.command,
            outcome: record.outcome.as_str().to_owned(),
            duration_ms: record.duration_ms,
            recorded_at: record.recorded_at,
        })
        .collect();
    let state = &run.state;
    Ok(Some(RunDetail {
        summary: RunSummary::from(&run),
        round: state.pointer("/review/round").and_then(Value::as_u64),
        pr: state
            .get("pr")
            .and_then(Value::as_u64)
            .and_then(|n| PullNumber::new(n).ok()),
        blocked_reason: state
            .pointer("/blocked/reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        failure: state
            .get("failure")
            .and_then(Value::as_str)
            .map(str::to_owned),
        timeline,
        effects,
        launches,
        validations,
    }))
}

/// A one-line reading of an audit record; transitions read as `A → B`.
fn timeline_text(kind: &str, detail: &Value) -> String {
    if kind == "transition" {
        let phase = |key: &str| detail.get(key).and_then(Value::as_str).unwrap_or("?");
        let effects = detail.get("effects").and_then(Value::as_i64).unwrap_or(0);
        return format!(
            "{} → {} ({effects} GitHub write{})",
            phase("from"),
            phase("to"),
            if effects == 1 { "" } else { "s" }
        );
    }
    detail.to_string()
}

/// The `url` a read-back recorded, if it is a web address. Anything else
/// (a `javascript:` URL planted in a field, say) is not made a link.
fn web_link(observed: &Value) -> Option<String> {
    let url = observed.get("url").and_then(Value::as_str)?;
    (url.starts_with("https://") || url.starts_with("http://")).then(|| url.to_owned())
}

/// The last lines of a launch's captured output. The capture is redacted
/// before it reaches the disk; a missing or unreadable file shows nothing.
fn log_tail(path: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[start..]
        .iter()
        .map(|line| line.chars().take(LOG_LINE_LIMIT).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn transitions_read_as_an_arrow_between_phases() {
        let detail = json!({ "from": "IMPLEMENT", "to": "REVIEW", "effects": 2 });
        assert_eq!(
            timeline_text("transition", &detail),
            "IMPLEMENT → REVIEW (2 GitHub writes)"
        );
        let one = json!({ "from": "A", "to": "B", "effects": 1 });
        assert_eq!(timeline_text("transition", &one), "A → B (1 GitHub write)");
    }

    #[test]
    fn only_web_addresses_become_links() {
        assert_eq!(
            web_link(&json!({ "url": "https://github.com/o/r/issues/1#c" })),
            Some("https://github.com/o/r/issues/1#c".to_owned())
        );
        assert_eq!(web_link(&json!({ "url": "javascript:alert(1)" })), None);
        assert_eq!(web_link(&json!({ "sha": "abc" })), None);
    }

    #[test]
    fn the_log_tail_keeps_the_last_lines_and_cuts_long_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(&"x".repeat(1000));
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert_eq!(tail.len(), LOG_TAIL_LINES);
        assert_eq!(tail[0], "line 61");
        assert_eq!(tail.last().unwrap().len(), LOG_LINE_LIMIT);
        assert!(log_tail(&dir.path().join("missing.log")).is_empty());
    }
}
