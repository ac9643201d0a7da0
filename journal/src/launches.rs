//! Launch rows while their process runs: the row written when the process
//! starts (with its pid), the heartbeats that refresh it (elapsed time,
//! output so far, tokens so far), the token counts and estimated cost of
//! a launch, the launches a crash left without an end (ended as `lost`),
//! and the reads the status comment and the dashboard need (the running
//! launch of a run, the token and cost totals of a set of runs).
//!
//! How a launch ends is [`Journal::record_launch_finished`] in `records`,
//! as before; progress written after the end is ignored.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::holdings::refused;
use crate::ids::{LaunchId, RunId};
use crate::journal::Journal;
use crate::records::NewLaunch;
use crate::runs::{Lease, lease_is_current, stale};

/// The outcome word of a launch a controller crash left without an end.
pub const LOST_OUTCOME: &str = "lost";

/// Token counts a launch reported, apart where its output format tells
/// them apart, and what they cost by the profile's price table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchUsage {
    /// Every token counted against `limits.tokens_per_run`.
    pub tokens: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    /// Millionths of the price table's unit (micro-dollars, say).
    pub cost_micros: Option<i64>,
}

/// A heartbeat of a running launch (also written once more at its end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchProgress {
    pub elapsed_ms: i64,
    pub output_bytes: i64,
    pub usage: LaunchUsage,
}

/// A launch still running, as its last heartbeat left it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RunningLaunch {
    pub id: LaunchId,
    pub run_id: RunId,
    pub role: String,
    pub profile: String,
    pub attempt: i32,
    pub pid: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub elapsed_ms: Option<i64>,
    pub output_bytes: Option<i64>,
    pub tokens: Option<i64>,
    pub log_dir: String,
}

/// A launch [`Journal::end_lost_launches`] ended.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LostLaunch {
    pub id: LaunchId,
    pub role: String,
    pub profile: String,
    pub pid: Option<i32>,
    pub log_dir: String,
}

/// Tokens and estimated cost summed over launches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct LaunchTotals {
    pub launches: i64,
    pub tokens: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    /// `None` when no launch had a price.
    pub cost_micros: Option<i64>,
}

/// Every column of a running launch, for `RunningLaunch`.
macro_rules! running_columns {
    () => {
        "id, run_id, role, profile, attempt, pid, started_at, \
         heartbeat_at, elapsed_ms, output_bytes, tokens, log_dir"
    };
}

impl Journal {
    /// Records that a launch's process started now with process id `pid`.
    pub async fn record_launch_spawned(
        &self,
        lease: &Lease,
        launch: &NewLaunch,
        pid: i32,
    ) -> Result<LaunchId> {
        let id: Option<LaunchId> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR SHARE) \
             INSERT INTO agent_launches (run_id, phase, role, profile, attempt, log_dir, pid, \
                 heartbeat_at, elapsed_ms, output_bytes) \
             SELECT held.id, $4, $5, $6, $7, $8, $9, now(), 0, 0 FROM held RETURNING id"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(&launch.phase)
        .bind(&launch.role)
        .bind(&launch.profile)
        .bind(launch.attempt)
        .bind(&launch.log_dir)
        .bind(pid)
        .fetch_optional(&self.pool)
        .await?;
        match id {
            Some(id) => Ok(id),
            None => Err(refused(&self.pool, stale(lease)).await),
        }
    }

    /// Refreshes a running launch's progress. A launch that already ended
    /// keeps its row as it is (a late heartbeat changes nothing); a stale
    /// lease is an error.
    pub async fn record_launch_progress(
        &self,
        lease: &Lease,
        id: LaunchId,
        progress: &LaunchProgress,
    ) -> Result<()> {
        let usage = &progress.usage;
        let held: Option<bool> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE), \
             moved AS (UPDATE agent_launches l SET heartbeat_at = now(), elapsed_ms = $5, \
                 output_bytes = $6, tokens = COALESCE($7, l.tokens), \
                 input_tokens = COALESCE($8, l.input_tokens), \
                 output_tokens = COALESCE($9, l.output_tokens), \
                 cached_tokens = COALESCE($10, l.cached_tokens), \
                 cost_micros = COALESCE($11, l.cost_micros) \
             FROM held WHERE l.id = $1 AND l.run_id = held.id AND l.ended_at IS NULL \
             RETURNING l.id) \
             SELECT true FROM held"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(progress.elapsed_ms)
        .bind(progress.output_bytes)
        .bind(usage.tokens)
        .bind(usage.input_tokens)
        .bind(usage.output_tokens)
        .bind(usage.cached_tokens)
        .bind(usage.cost_micros)
        .fetch_optional(&self.pool)
        .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(refused(&self.pool, stale(lease)).await),
        }
    }

    /// Ends, as `lost`, every launch of the leased run that has no end.
    ///
    /// Only the lease holder launches for a run, and a launch's row is
    /// ended by the task that started it before that task lets the run go;
    /// so when a task takes the run, a row without an end belongs to a
    /// process of a controller that died (its sandbox died with it). Its
    /// duration is what its last heartbeat saw.
    pub async fn end_lost_launches(&self, lease: &Lease) -> Result<Vec<LostLaunch>> {
        let rows: Vec<(bool, Option<LostLaunch>)> = sqlx::query_as::<_, LostRow>(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR SHARE), \
             lost AS (UPDATE agent_launches l SET ended_at = now(), outcome = $4, \
                 duration_ms = COALESCE(l.elapsed_ms, 0) \
             FROM held WHERE l.run_id = held.id AND l.ended_at IS NULL \
             RETURNING l.id, l.role, l.profile, l.pid, l.log_dir) \
             SELECT true AS held, lost.id, lost.role, lost.profile, lost.pid, lost.log_dir \
             FROM held LEFT JOIN lost ON true"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(LOST_OUTCOME)
        .fetch_all(&self.pool)
        .await?
        .into_iter()
        .map(LostRow::split)
        .collect();
        if rows.is_empty() {
            return Err(refused(&self.pool, stale(lease)).await);
        }
        Ok(rows.into_iter().filter_map(|(_, lost)| lost).collect())
    }

    /// The run's launch that has no end yet, if any (the newest, should a
    /// crash have left an older one).
    pub async fn running_launch(&self, run_id: RunId) -> Result<Option<RunningLaunch>> {
        Ok(sqlx::query_as::<_, RunningLaunch>(concat!(
            "SELECT ",
            running_columns!(),
            " FROM agent_launches \
             WHERE run_id = $1 AND ended_at IS NULL ORDER BY id DESC LIMIT 1"
        ))
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Tokens and estimated cost over every launch of `runs`.
    pub async fn launch_totals(&self, runs: &[RunId]) -> Result<LaunchTotals> {
        let ids: Vec<i64> = runs.iter().map(|r| r.0).collect();
        Ok(sqlx::query_as::<_, LaunchTotals>(
            "SELECT count(*) AS launches, \
                 COALESCE(sum(tokens), 0)::bigint AS tokens, \
                 COALESCE(sum(input_tokens), 0)::bigint AS input_tokens, \
                 COALESCE(sum(output_tokens), 0)::bigint AS output_tokens, \
                 COALESCE(sum(cached_tokens), 0)::bigint AS cached_tokens, \
                 sum(cost_micros)::bigint AS cost_micros \
             FROM agent_launches WHERE run_id = ANY($1)",
        )
        .bind(&ids)
        .fetch_one(&self.pool)
        .await?)
    }
}

/// One row of `end_lost_launches`: the lease check, and a lost launch when
/// there was one.
#[derive(sqlx::FromRow)]
struct LostRow {
    held: bool,
    id: Option<LaunchId>,
    role: Option<String>,
    profile: Option<String>,
    pid: Option<i32>,
    log_dir: Option<String>,
}

impl LostRow {
    fn split(self) -> (bool, Option<LostLaunch>) {
        let lost = match (self.id, self.role, self.profile, self.log_dir) {
            (Some(id), Some(role), Some(profile), Some(log_dir)) => Some(LostLaunch {
                id,
                role,
                profile,
                pid: self.pid,
                log_dir,
            }),
            _ => None,
        };
        (self.held, lost)
    }
}
