//! Append-mostly records shown on the dashboard and used as evidence: agent
//! launches, validation outcomes, operator command decisions and audit
//! events. Launch and validation records are written on behalf of a leased
//! run and check the lease; command decisions and audit events may concern
//! no run at all (a refused command on an unknown issue), so they do not.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::effects::text_enum;
use crate::error::{JournalError, Result, unique_violation};
use crate::holdings::refused;
use crate::ids::{LaunchId, RunId};
use crate::journal::{Journal, JournalTx};
use crate::runs::{Lease, lease_is_current, stale};

/// An agent launch about to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLaunch {
    pub phase: String,
    pub role: String,
    pub profile: String,
    /// 0 for the first launch of this role in this phase entry.
    pub attempt: i32,
    pub log_dir: String,
}

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchEnd {
    /// `None` when killed by a signal.
    pub exit_status: Option<i32>,
    pub duration_ms: i64,
    pub tokens: Option<i64>,
    /// A short word for the dashboard and metrics: `success`, `timeout`, …
    pub outcome: String,
}

/// A stored launch.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AgentLaunch {
    pub id: LaunchId,
    pub run_id: RunId,
    pub phase: String,
    pub role: String,
    pub profile: String,
    pub attempt: i32,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub exit_status: Option<i32>,
    pub duration_ms: Option<i64>,
    pub tokens: Option<i64>,
    pub log_dir: String,
    pub outcome: Option<String>,
    /// Estimated cost by the profile's price table, in millionths of its
    /// unit; `None` without a price.
    pub cost_micros: Option<i64>,
}

text_enum!(
    /// The outcome of one validation command (SPEC §12).
    ValidationOutcome, "validation outcome" {
        Pass => "PASS",
        Fail => "FAIL",
        Timeout => "TIMEOUT",
    }
);

/// One validation command's result on one commit.
#[derive(Debug, Clone, PartialEq)]
pub struct NewValidation {
    /// 40 lowercase hex digits.
    pub sha: String,
    pub command_index: i32,
    pub command: String,
    pub outcome: ValidationOutcome,
    pub duration_ms: i64,
    /// Already redacted by the caller.
    pub output_tail: String,
}

/// A stored validation record.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ValidationRecord {
    pub id: i64,
    pub run_id: RunId,
    pub sha: String,
    pub command_index: i32,
    pub command: String,
    #[sqlx(try_from = "String")]
    pub outcome: ValidationOutcome,
    pub duration_ms: i64,
    pub output_tail: String,
    pub recorded_at: DateTime<Utc>,
}

/// An operator command and what the controller decided about it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCommandDecision {
    pub run_id: Option<RunId>,
    pub comment_id: i64,
    pub actor: String,
    pub command: String,
    pub accepted: bool,
    pub reason: String,
}

/// A stored command decision.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CommandDecision {
    pub id: i64,
    pub run_id: Option<RunId>,
    pub comment_id: i64,
    pub actor: String,
    pub command: String,
    pub accepted: bool,
    pub reason: String,
    pub decided_at: DateTime<Utc>,
}

/// A stored audit event.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AuditEvent {
    pub id: i64,
    pub run_id: Option<RunId>,
    pub kind: String,
    pub detail: Value,
    pub recorded_at: DateTime<Utc>,
}

impl Journal {
    /// Records that an agent launch starts now.
    pub async fn record_launch_started(
        &self,
        lease: &Lease,
        launch: &NewLaunch,
    ) -> Result<LaunchId> {
        let id: Option<LaunchId> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR SHARE) \
             INSERT INTO agent_launches (run_id, phase, role, profile, attempt, log_dir) \
             SELECT held.id, $4, $5, $6, $7, $8 FROM held RETURNING id"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(&launch.phase)
        .bind(&launch.role)
        .bind(&launch.profile)
        .bind(launch.attempt)
        .bind(&launch.log_dir)
        .fetch_optional(&self.pool)
        .await?;
        match id {
            Some(id) => Ok(id),
            None => Err(refused(&self.pool, stale(lease)).await),
        }
    }

    /// Records how a launch ended. A launch already ended is left as is.
    pub async fn record_launch_finished(
        &self,
        lease: &Lease,
        id: LaunchId,
        end: &LaunchEnd,
    ) -> Result<()> {
        let done: Option<LaunchId> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE) \
             UPDATE agent_launches l SET ended_at = now(), exit_status = $5, \
                 duration_ms = $6, tokens = $7, outcome = $8 \
             FROM held WHERE l.id = $1 AND l.run_id = held.id AND l.ended_at IS NULL \
             RETURNING l.id"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(end.exit_status)
        .bind(end.duration_ms)
        .bind(end.tokens)
        .bind(&end.outcome)
        .fetch_optional(&self.pool)
        .await?;
        if done.is_some() {
            return Ok(());
        }
        // Tell a stale lease apart from an unknown or already-ended launch.
        let ended: Option<bool> = sqlx::query_scalar(
            "SELECT ended_at IS NOT NULL FROM agent_launches WHERE id = $1 AND run_id = $2",
        )
        .bind(id)
        .bind(lease.run_id)
        .fetch_optional(&self.pool)
        .await?;
        match ended {
            None => Err(JournalError::NotFound {
                what: "agent launch",
                id: id.0,
            }),
            Some(true) => Ok(()),
            Some(false) => Err(refused(&self.pool, stale(lease)).await),
        }
    }

    /// The run's launches, oldest first.
    pub async fn list_launches(&self, run_id: RunId) -> Result<Vec<AgentLaunch>> {
        Ok(sqlx::query_as::<_, AgentLaunch>(
            "SELECT id, run_id, phase, role, profile, attempt, started_at, ended_at, \
                 exit_status, duration_ms, tokens, log_dir, outcome, cost_micros \
             FROM agent_launches WHERE run_id = $1 ORDER BY id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records one validation command's outcome. A second record for the
    /// same command on the same commit is refused: results are final.
    pub async fn record_validation(&self, lease: &Lease, record: &NewValidation) -> Result<()> {
        let inserted = sqlx::query_scalar::<_, i64>(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR SHARE) \
             INSERT INTO validation_records \
                 (run_id, sha, command_index, command, outcome, duration_ms, output_tail) \
             SELECT held.id, $4, $5, $6, $7, $8, $9 FROM held RETURNING id"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(&record.sha)
        .bind(record.command_index)
        .bind(&record.command)
        .bind(record.outcome.as_str())
        .bind(record.duration_ms)
        .bind(&record.output_tail)
        .fetch_optional(&self.pool)
        .await;
        match inserted {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(refused(&self.pool, stale(lease)).await),
            Err(error) if unique_violation(&error).is_some() => {
                Err(JournalError::ValidationAlreadyRecorded {
                    sha: record.sha.clone(),
                    command_index: record.command_index,
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The run's validation records, optionally only those of one commit,
    /// in command order.
    pub async fn list_validations(
        &self,
        run_id: RunId,
        sha: Option<&str>,
    ) -> Result<Vec<ValidationRecord>> {
        Ok(sqlx::query_as::<_, ValidationRecord>(
            "SELECT id, run_id, sha, command_index, command, outcome, duration_ms, \
                 output_tail, recorded_at \
             FROM validation_records WHERE run_id = $1 AND ($2::text IS NULL OR sha = $2) \
             ORDER BY id",
        )
        .bind(run_id)
        .bind(sha)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records an operator command decision on its own.
    pub async fn record_command_decision(&self, decision: &NewCommandDecision) -> Result<i64> {
        insert_command_decision(&mut *self.conn().await?, decision).await
    }

    /// Command decisions of a run, oldest first.
    pub async fn list_command_decisions(&self, run_id: RunId) -> Result<Vec<CommandDecision>> {
        Ok(sqlx::query_as::<_, CommandDecision>(
            "SELECT id, run_id, comment_id, actor, command, accepted, reason, decided_at \
             FROM command_decisions WHERE run_id = $1 ORDER BY id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records an audit event on its own.
    pub async fn record_audit_event(
        &self,
        run_id: Option<RunId>,
        kind: &str,
        detail: &Value,
    ) -> Result<i64> {
        insert_audit_event(&mut *self.conn().await?, run_id, kind, detail).await
    }

    /// Audit events of a run, oldest first.
    pub async fn list_audit_events(&self, run_id: RunId) -> Result<Vec<AuditEvent>> {
        Ok(sqlx::query_as::<_, AuditEvent>(
            "SELECT id, run_id, kind, detail, recorded_at FROM audit_events \
             WHERE run_id = $1 ORDER BY id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }
}

impl JournalTx {
    /// Records an operator command decision in this transaction, e.g. with
    /// the transition an accepted command causes.
    pub async fn record_command_decision(&mut self, decision: &NewCommandDecision) -> Result<i64> {
        insert_command_decision(self.conn(), decision).await
    }

    /// Records an audit event in this transaction.
    pub async fn record_audit_event(
        &mut self,
        run_id: Option<RunId>,
        kind: &str,
        detail: &Value,
    ) -> Result<i64> {
        insert_audit_event(self.conn(), run_id, kind, detail).await
    }
}

async fn insert_command_decision(
    conn: &mut sqlx::PgConnection,
    decision: &NewCommandDecision,
) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO command_decisions (run_id, comment_id, actor, command, accepted, reason) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(decision.run_id)
    .bind(decision.comment_id)
    .bind(&decision.actor)
    .bind(&decision.command)
    .bind(decision.accepted)
    .bind(&decision.reason)
    .fetch_one(conn)
    .await?)
}

async fn insert_audit_event(
    conn: &mut sqlx::PgConnection,
    run_id: Option<RunId>,
    kind: &str,
    detail: &Value,
) -> Result<i64> {
    if kind.is_empty() {
        return Err(JournalError::InvalidInput(
            "an audit event needs a kind".to_owned(),
        ));
    }
    Ok(sqlx::query_scalar(
        "INSERT INTO audit_events (run_id, kind, detail) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(run_id)
    .bind(kind)
    .bind(detail)
    .fetch_one(conn)
    .await?)
}
