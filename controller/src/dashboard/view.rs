//! What the dashboard (and `autoforge runs show`) shows, read from the
//! journal into plain structs; [`super::story`] then arranges a run's
//! records the way people read them (per issue, per round).
//!
//! Loading and rendering are apart so the pages can be tested on fixed
//! data, and so the HTML layer never sees a database type.

use std::path::Path;

use autoforge_journal::{
    AgentLaunch, AuditEvent, Effect, IssueNumber, Journal, JournalError, PullNumber, RunId,
    RunListRow, RunQuery, RunningLaunch, ValidationRecord,
};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

/// How many runs one page of the index lists.
pub const PAGE_SIZE: i64 = 50;
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
    pub round: Option<i64>,
    pub blocked_reason: Option<String>,
    pub tokens: i64,
    /// Estimated cost of its priced launches (millionths of the unit).
    pub cost_micros: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&RunListRow> for RunSummary {
    fn from(run: &RunListRow) -> Self {
        RunSummary {
            id: run.id.0,
            repository: run.repository.clone(),
            issue: run.current_issue.to_i64(),
            epic: run.epic.map(IssueNumber::to_i64),
            phase: run.phase.clone(),
            active: run.active,
            round: run.round,
            blocked_reason: run.blocked_reason.clone(),
            tokens: run.tokens,
            cost_micros: run.cost_micros,
            created_at: run.created_at,
            updated_at: run.updated_at,
        }
    }
}

/// What the index's filters ask for (`/?repo=…&phase=…&blocked=1&page=2`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct IndexFilter {
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub blocked: Option<String>,
    #[serde(default)]
    pub page: Option<i64>,
}

impl IndexFilter {
    /// Empty form fields mean "any".
    fn given(value: Option<&String>) -> Option<String> {
        value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    pub fn repo(&self) -> Option<String> {
        Self::given(self.repo.as_ref())
    }

    pub fn phase(&self) -> Option<String> {
        Self::given(self.phase.as_ref()).map(|p| p.to_ascii_uppercase())
    }

    pub fn blocked_only(&self) -> bool {
        Self::given(self.blocked.as_ref()).is_some()
    }

    /// The 1-based page asked for.
    pub fn page(&self) -> i64 {
        self.page.unwrap_or(1).max(1)
    }
}

/// One page of the index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexPage {
    pub runs: Vec<RunSummary>,
    /// Runs matching the filter, over all pages.
    pub matching: i64,
    pub filter: IndexFilter,
    /// Every repository with a run, for the filter's choices.
    pub repositories: Vec<String>,
}

/// One line of a run's timeline: a transition or another audit record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub text: String,
    /// For a transition: the phase it left and the one it entered.
    pub from: Option<String>,
    pub to: Option<String>,
    /// A transition that changed neither the phase nor wrote anything:
    /// internal bookkeeping, folded away on the page.
    pub no_op: bool,
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
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// For a review comment: what its marker says about the round.
    pub review: Option<ReviewMark>,
}

/// What a review comment's marker records about its round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewMark {
    pub round: u64,
    pub head: String,
    pub findings: usize,
    pub needs_fix: bool,
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
    pub cost_micros: Option<i64>,
    pub ended_at: Option<DateTime<Utc>>,
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
    pub output_tail: String,
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
    /// What the run waits for (`state.awaiting`'s kind), while active.
    pub awaiting: Option<String>,
    pub timeline: Vec<TimelineEntry>,
    pub effects: Vec<EffectRow>,
    pub launches: Vec<LaunchRow>,
    pub validations: Vec<ValidationRow>,
    /// The launch still running, as its last heartbeat left it.
    pub running: Option<LiveLaunch>,
}

/// A running launch's progress, from its heartbeats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveLaunch {
    pub role: String,
    pub profile: String,
    pub attempt: i32,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub elapsed_ms: Option<i64>,
    pub output_bytes: Option<i64>,
    pub tokens: Option<i64>,
}

/// One page of the index, newest first.
pub async fn load_index(journal: &Journal, filter: IndexFilter) -> Result<IndexPage, JournalError> {
    let query = RunQuery {
        repository: filter.repo(),
        phase: filter.phase(),
        blocked_only: filter.blocked_only(),
        active_only: false,
        limit: PAGE_SIZE,
        offset: (filter.page() - 1).saturating_mul(PAGE_SIZE),
    };
    let runs = journal.query_runs(&query).await?;
    Ok(IndexPage {
        runs: runs.iter().map(RunSummary::from).collect(),
        matching: journal.count_runs(&query).await?,
        repositories: journal.run_repositories().await?,
        filter,
    })
}

/// One run with its history, or `None` when there is no such run.
pub async fn load_run(journal: &Journal, id: RunId) -> Result<Option<RunDetail>, JournalError> {
    let (Some(run), Some(row)) = (journal.get_run(id).await?, journal.run_row(id).await?) else {
        return Ok(None);
    };
    let timeline = rows(journal.list_audit_events(id).await?);
    let effects = rows(journal.list_effects(id).await?);
    let launches = rows(journal.list_launches(id).await?);
    let validations = rows(journal.list_validations(id, None).await?);
    let running = match run.active {
        true => journal.running_launch(id).await?.map(LiveLaunch::from),
        false => None,
    };
    let state = &run.state;
    Ok(Some(RunDetail {
        running,
        summary: RunSummary::from(&row),
        awaiting: run
            .active
            .then(|| awaiting_kind(state.get("awaiting")?))
            .flatten(),
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

/// Journal records as the rows a page shows, in their order.
fn rows<R, T: From<R>>(records: Vec<R>) -> Vec<T> {
    records.into_iter().map(T::from).collect()
}

impl From<AuditEvent> for TimelineEntry {
    fn from(event: AuditEvent) -> TimelineEntry {
        TimelineEntry {
            at: event.recorded_at,
            text: timeline_text(&event.kind, &event.detail),
            from: transition_phase(&event.kind, &event.detail, "from"),
            to: transition_phase(&event.kind, &event.detail, "to"),
            no_op: is_no_op(&event.kind, &event.detail),
            kind: event.kind,
        }
    }
}

impl From<Effect> for EffectRow {
    fn from(effect: Effect) -> EffectRow {
        EffectRow {
            kind: effect.kind.as_str().to_owned(),
            link: effect.observed.as_ref().and_then(web_link),
            review: review_mark(&effect.payload),
            created_at: effect.created_at,
            identity: effect.identity,
            stage: effect.stage.as_str().to_owned(),
            attempts: effect.attempts,
            reason: effect.reason,
            updated_at: effect.updated_at,
        }
    }
}

impl From<AgentLaunch> for LaunchRow {
    fn from(launch: AgentLaunch) -> LaunchRow {
        LaunchRow {
            log_tail: log_tail(&Path::new(&launch.log_dir).join("output.log")),
            phase: launch.phase,
            role: launch.role,
            profile: launch.profile,
            attempt: launch.attempt,
            started_at: launch.started_at,
            ended_at: launch.ended_at,
            exit_status: launch.exit_status,
            duration_ms: launch.duration_ms,
            tokens: launch.tokens,
            cost_micros: launch.cost_micros,
            outcome: launch.outcome,
        }
    }
}

impl From<ValidationRecord> for ValidationRow {
    fn from(record: ValidationRecord) -> ValidationRow {
        ValidationRow {
            sha: record.sha,
            command: record.command,
            outcome: record.outcome.as_str().to_owned(),
            duration_ms: record.duration_ms,
            output_tail: record.output_tail,
            recorded_at: record.recorded_at,
        }
    }
}

impl From<RunningLaunch> for LiveLaunch {
    fn from(launch: RunningLaunch) -> LiveLaunch {
        LiveLaunch {
            role: launch.role,
            profile: launch.profile,
            attempt: launch.attempt,
            started_at: launch.started_at,
            heartbeat_at: launch.heartbeat_at,
            elapsed_ms: launch.elapsed_ms,
            output_bytes: launch.output_bytes,
            tokens: launch.tokens,
        }
    }
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
    if kind == "relaunch_backoff"
        && let Some(text) = relaunch_pause_text(detail)
    {
        return text;
    }
    detail.to_string()
}

/// A relaunch pause the driver recorded before relaunching a failed launch.
fn relaunch_pause_text(detail: &Value) -> Option<String> {
    let launch = detail.get("launch")?.as_u64()?;
    let retry = detail.get("retry")?.as_u64()?;
    let delay_ms = detail.get("delay_ms")?.as_u64()?;
    let after = detail
        .get("after_outcome")
        .and_then(Value::as_str)
        .map(|outcome| format!(" after a launch that ended {outcome}"))
        .unwrap_or_default();
    Some(format!(
        "launch {launch} (retry {retry}) waits {:.1} s before it starts{after}",
        std::time::Duration::from_millis(delay_ms).as_secs_f64()
    ))
}

fn transition_phase(kind: &str, detail: &Value, key: &str) -> Option<String> {
    (kind == "transition")
        .then(|| detail.get(key).and_then(Value::as_str).map(str::to_owned))
        .flatten()
}

/// Whether a transition kept its phase and wrote nothing.
fn is_no_op(kind: &str, detail: &Value) -> bool {
    kind == "transition"
        && detail.get("from") == detail.get("to")
        && detail.get("effects").and_then(Value::as_i64).unwrap_or(0) == 0
}

/// The kind of what the run document says it waits for (its tag:
/// `{"awaiting": "agent", …}` reads `agent`).
fn awaiting_kind(awaiting: &Value) -> Option<String> {
    awaiting
        .get("awaiting")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The round, head and findings a review comment's payload carries in its
/// `ai-review-result` marker; `None` for every other write.
fn review_mark(payload: &[u8]) -> Option<ReviewMark> {
    const OPEN: &str = "<!-- ai-review-result: ";
    let payload: Value = serde_json::from_slice(payload).ok()?;
    let body = payload
        .as_object()?
        .values()
        .filter_map(Value::as_str)
        .find(|text| text.contains(OPEN))?;
    let start = body.find(OPEN)? + OPEN.len();
    let end = start + body[start..].find(" -->")?;
    let marker: Value = serde_json::from_str(&body[start..end]).ok()?;
    Some(ReviewMark {
        round: marker.get("round")?.as_u64()?,
        head: marker.get("reviewed_head_sha")?.as_str()?.to_owned(),
        findings: marker.get("finding_ids")?.as_array()?.len(),
        needs_fix: marker.get("needs_fix_round")?.as_bool()?,
    })
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
    fn a_review_comments_marker_gives_its_round_head_and_findings() {
        let body = "# Review\n\n<!-- ai-review-result: {\"finding_ids\":[\"R1-F1\",\"R1-F2\"],\
            \"needs_fix_round\":true,\"reviewed_head_sha\":\"abc\",\"round\":1} -->";
        let payload = serde_json::to_vec(&json!({ "body": body, "issue": 4 })).unwrap();
        assert_eq!(
            review_mark(&payload),
            Some(ReviewMark {
                round: 1,
                head: "abc".into(),
                findings: 2,
                needs_fix: true
            })
        );
        let status = serde_json::to_vec(&json!({ "body": "status" })).unwrap();
        assert_eq!(review_mark(&status), None);
        assert_eq!(review_mark(b"not json"), None);
    }

    #[test]
    fn bookkeeping_transitions_are_no_ops_and_awaiting_reads_as_its_kind() {
        let same = json!({ "from": "IMPLEMENT", "to": "IMPLEMENT", "effects": 0 });
        assert!(is_no_op("transition", &same));
        let writes = json!({ "from": "IMPLEMENT", "to": "IMPLEMENT", "effects": 1 });
        assert!(!is_no_op("transition", &writes));
        assert!(!is_no_op("event_refused", &same));
        let agent = json!({ "awaiting": "agent", "launch": {} });
        assert_eq!(awaiting_kind(&agent), Some("agent".into()));
        assert_eq!(awaiting_kind(&json!("start")), None);
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
