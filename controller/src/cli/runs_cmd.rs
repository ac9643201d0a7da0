//! `autoforge status`, `autoforge runs list` and `autoforge runs show`:
//! what the journal says about the runs, as text for people or JSON for
//! scripts. Read-only; every read goes through `autoforge_journal`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use autoforge_journal::{Journal, RateLimitReading, RunId, RunListRow, RunQuery, StatusSummary};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{RunsListArgs, RunsShowArgs, StatusArgs};
use crate::config::Config;
use crate::dashboard::view::{self, RunDetail};
use crate::database::OpenDatabase;

/// Runs `work` on the configured journal in a small runtime, then lets the
/// managed cluster go (stopping it only if this command started it).
pub(super) fn with_journal<T>(
    config: &Config,
    work: impl AsyncFnOnce(&Journal) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let database = OpenDatabase::open(&config.database, 2).await?;
        let outcome = work(&database.journal).await;
        database.release().await;
        outcome
    })
}

pub(super) fn status(config: &Config, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let (summary, readings) = with_journal(config, async |journal| {
        let summary = journal
            .status_summary()
            .await
            .context("cannot read the journal")?;
        let readings = journal
            .rate_limit_readings()
            .await
            .context("cannot read the rate-limit readings")?;
        Ok((summary, readings))
    })?;
    let now = Utc::now();
    if args.json {
        let mut value = status_json(&summary, now);
        value["rate_limit"] = Value::Array(
            readings
                .iter()
                .map(|reading| reading_json(reading, now))
                .collect(),
        );
        print_json(&value)?;
    } else {
        print!("{}", status_text(&summary, now));
        print!("{}", readings_text(&readings, now));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn list(config: &Config, args: &RunsListArgs) -> anyhow::Result<ExitCode> {
    let query = RunQuery {
        repository: args.repo.clone(),
        phase: args.phase.as_ref().map(|p| p.to_ascii_uppercase()),
        blocked_only: args.blocked,
        active_only: false,
        limit: args.limit,
        offset: 0,
    };
    let rows = with_journal(config, async |journal| {
        journal
            .query_runs(&query)
            .await
            .context("cannot read the journal")
    })?;
    let now = Utc::now();
    if args.json {
        print_json(&Value::Array(rows.iter().map(row_json).collect()))?;
    } else {
        print!("{}", list_text(&rows, now));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn show(config: &Config, args: &RunsShowArgs) -> anyhow::Result<ExitCode> {
    let id = RunId(args.id);
    let detail = with_journal(config, async |journal| {
        view::load_run(journal, id)
            .await
            .context("cannot read the journal")
    })?;
    let Some(detail) = detail else {
        eprintln!("error: there is no run {id}");
        return Ok(ExitCode::FAILURE);
    };
    if args.json {
        print_json(&serde_json::to_value(&detail).context("cannot render JSON")?)?;
    } else {
        print!("{}", show_text(&detail, Utc::now()));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(value: &Value) -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("cannot render JSON")?
    );
    Ok(())
}

fn seconds_since(then: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    (now - then).num_seconds().max(0)
}

fn row_json(row: &RunListRow) -> Value {
    json!({
        "id": row.id,
        "repository": row.repository,
        "issue": row.current_issue,
        "epic": row.epic,
        "phase": row.phase,
        "active": row.active,
        "round": row.round,
        "blocked_reason": row.blocked_reason,
        "tokens": row.tokens,
        "cost_micros": row.cost_micros,
        "launches": row.launches,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    })
}

fn status_json(summary: &StatusSummary, now: DateTime<Utc>) -> Value {
    let phases: serde_json::Map<String, Value> = summary
        .active_by_phase
        .iter()
        .map(|p| (p.phase.clone(), json!(p.runs)))
        .collect();
    let deliveries = &summary.deliveries;
    let effects = &summary.effects;
    json!({
        "active_runs": phases,
        "blocked": summary.blocked.iter().map(row_json).collect::<Vec<_>>(),
        "deliveries": {
            "pending": deliveries.pending,
            "oldest_age_seconds": deliveries.oldest_received_at.map(|t| seconds_since(t, now)),
            "failed": deliveries.failed,
        },
        "effects": {
            "pending": effects.pending,
            "oldest_age_seconds": effects.oldest_created_at.map(|t| seconds_since(t, now)),
            "conflicts": effects.conflicts,
        },
        // Filled in from the readings serve records (`rate_limit_readings`).
        "rate_limit": [],
    })
}

fn status_text(summary: &StatusSummary, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let active: i64 = summary.active_by_phase.iter().map(|p| p.runs).sum();
    let _ = writeln!(out, "Active runs: {active}");
    for phase in &summary.active_by_phase {
        let _ = writeln!(out, "  {:<16} {}", phase.phase, phase.runs);
    }
    if summary.blocked.is_empty() {
        let _ = writeln!(out, "Blocked: none");
    } else {
        let _ = writeln!(out, "Blocked: {}", summary.blocked.len());
        for row in &summary.blocked {
            let _ = writeln!(
                out,
                "  run {} {}#{} (for {}): {}",
                row.id,
                row.repository,
                row.current_issue,
                crate::dashboard::age(row.updated_at, now),
                row.blocked_reason
                    .as_deref()
                    .unwrap_or("no reason recorded")
            );
            let _ = writeln!(
                out,
                "    resume with: autoforge unblock {} --reason TEXT  (or stop: autoforge stop {})",
                row.id, row.id
            );
        }
    }
    let deliveries = &summary.deliveries;
    let _ = writeln!(
        out,
        "Webhook deliveries waiting: {}{}; given up: {}",
        deliveries.pending,
        deliveries
            .oldest_received_at
            .map_or(String::new(), |t| format!(
                " (oldest {})",
                crate::dashboard::age(t, now)
            )),
        deliveries.failed
    );
    let effects = &summary.effects;
    let _ = writeln!(
        out,
        "GitHub writes not yet read back: {}{}; in conflict: {}",
        effects.pending,
        effects.oldest_created_at.map_or(String::new(), |t| format!(
            " (oldest {})",
            crate::dashboard::age(t, now)
        )),
        effects.conflicts
    );
    out
}

/// Whose budget a reading is, in words.
fn budget_owner(reading: &RateLimitReading) -> String {
    match reading.owner.as_str() {
        "app" => "the App (JWT)".to_owned(),
        "token" => "the token".to_owned(),
        id => format!("installation {id}"),
    }
}

fn reading_json(reading: &RateLimitReading, now: DateTime<Utc>) -> Value {
    json!({
        "owner": reading.owner,
        "resource": reading.resource,
        "remaining": reading.remaining,
        "limit": reading.limit_total,
        "reset_at": reading.reset_at,
        "reset_in_seconds": reading.reset_at.map(|t| seconds_since(now, t)),
        "paused_until": reading.paused_until.filter(|t| *t > now),
        "observed_at": reading.observed_at,
        "age_seconds": seconds_since(reading.observed_at, now),
        "recorded_by": reading.recorded_by,
    })
}

/// The headroom of each budget, as the serving process last saw it.
fn readings_text(readings: &[RateLimitReading], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    if readings.is_empty() {
        let _ = writeln!(
            out,
            "Rate limit: no reading yet (serve records one once GitHub has answered it)"
        );
        return out;
    }
    let _ = writeln!(out, "Rate limit (as serve last read it):");
    for reading in readings {
        let count = |n: Option<i64>| n.map_or("?".to_owned(), |n| n.to_string());
        let reset = reading.reset_at.map_or(String::new(), |t| {
            if t > now {
                format!(", resets in {}", crate::dashboard::age(now, t))
            } else {
                ", reset since".to_owned()
            }
        });
        let paused = reading
            .paused_until
            .filter(|t| *t > now)
            .map_or(String::new(), |t| {
                format!(", requests held for {}", crate::dashboard::age(now, t))
            });
        let _ = writeln!(
            out,
            "  {} {}: {} of {} left{reset}{paused} (read {} ago)",
            budget_owner(reading),
            reading.resource,
            count(reading.remaining),
            count(reading.limit_total),
            crate::dashboard::age(reading.observed_at, now),
        );
    }
    out
}

fn list_text(rows: &[RunListRow], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("No run matches.\n");
        return out;
    }
    let _ = writeln!(
        out,
        "{:>6}  {:<24} {:>6} {:>6}  {:<16} {:>5} {:>8} {:>9}  blocked reason",
        "run", "repository", "issue", "EPIC", "phase", "round", "age", "tokens"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:>6}  {:<24} {:>6} {:>6}  {:<16} {:>5} {:>8} {:>9}  {}",
            row.id,
            row.repository,
            format!("#{}", row.current_issue),
            row.epic.map_or("-".to_owned(), |e| format!("#{e}")),
            row.phase,
            row.round.map_or("-".to_owned(), |r| r.to_string()),
            crate::dashboard::age(row.created_at, now),
            row.tokens,
            row.blocked_reason.as_deref().unwrap_or("")
        );
    }
    out
}

fn show_text(detail: &RunDetail, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    write_run_header(&mut out, detail, now);
    write_timeline(&mut out, detail);
    write_effects(&mut out, detail);
    write_launches(&mut out, detail);
    write_validations(&mut out, detail);
    out
}

/// The run's identity, where it stands and why it stopped, if it did.
fn write_run_header(out: &mut String, detail: &RunDetail, now: DateTime<Utc>) {
    let run = &detail.summary;
    let _ = writeln!(
        out,
        "Run {} · {} · {}#{}",
        run.id, run.phase, run.repository, run.issue
    );
    if let Some(epic) = run.epic {
        let _ = writeln!(out, "EPIC #{epic}");
    }
    if let Some(pr) = detail.pr {
        let _ = writeln!(out, "Pull request #{pr}");
    }
    if let Some(round) = detail.round {
        let _ = writeln!(out, "Review round {round}");
    }
    let _ = writeln!(
        out,
        "Started {} ago; last change {} ago",
        crate::dashboard::age(run.created_at, now),
        crate::dashboard::age(run.updated_at, now)
    );
    if let Some(reason) = &detail.blocked_reason {
        let _ = writeln!(out, "Blocked: {reason}");
    }
    if let Some(failure) = &detail.failure {
        let _ = writeln!(out, "Failure: {failure}");
    }
}

fn write_timeline(out: &mut String, detail: &RunDetail) {
    let _ = writeln!(out, "\nTimeline");
    for entry in &detail.timeline {
        let _ = writeln!(
            out,
            "  {}  {:<20} {}",
            entry.at.format("%H:%M:%S"),
            entry.kind,
            entry.text
        );
    }
}

fn write_effects(out: &mut String, detail: &RunDetail) {
    let _ = writeln!(out, "\nGitHub writes");
    for effect in &detail.effects {
        let _ = writeln!(
            out,
            "  {:<20} {:<10} attempts {}  {}{}",
            effect.kind,
            effect.stage,
            effect.attempts,
            effect.identity,
            effect
                .reason
                .as_ref()
                .map_or(String::new(), |r| format!("  ({r})"))
        );
    }
}

fn write_launches(out: &mut String, detail: &RunDetail) {
    let _ = writeln!(out, "\nAgent launches");
    for launch in &detail.launches {
        let _ = writeln!(
            out,
            "  {} {} {} attempt {}  {}  exit {}  tokens {}  {}",
            launch.phase,
            launch.role,
            launch.profile,
            launch.attempt,
            launch
                .duration_ms
                .map_or("running".to_owned(), |ms| format!("{ms} ms")),
            launch
                .exit_status
                .map_or("-".to_owned(), |code| code.to_string()),
            launch.tokens.map_or("-".to_owned(), |t| t.to_string()),
            launch.outcome.as_deref().unwrap_or("")
        );
    }
}

fn write_validations(out: &mut String, detail: &RunDetail) {
    let _ = writeln!(out, "\nValidations");
    for record in &detail.validations {
        let _ = writeln!(
            out,
            "  {}  {:<7} {} ms  {}",
            record.sha.chars().take(12).collect::<String>(),
            record.outcome,
            record.duration_ms,
            record.command
        );
    }
}
