//! Read models for the people operating autoforge: the rows behind
//! `autoforge status`, `autoforge runs list` and the dashboard's runs list,
//! each one query. Everything here only reads; the run document's fields
//! it shows (blocked reason, review round) are read by their JSON path so
//! that this crate does not need the controller's state type.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::github_ids::IssueNumber;
use crate::ids::RunId;
use crate::journal::Journal;

/// Which runs a list shows, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// `owner/name`; `None` for every repository.
    pub repository: Option<String>,
    /// A phase as the journal spells it (`REVIEW`); `None` for every phase.
    pub phase: Option<String>,
    /// Only runs parked in `BLOCKED`.
    pub blocked_only: bool,
    /// Only runs that have not finished.
    pub active_only: bool,
    pub limit: i64,
    pub offset: i64,
}

/// One run as a list shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RunListRow {
    pub id: RunId,
    pub repository: String,
    pub epic: Option<IssueNumber>,
    pub current_issue: IssueNumber,
    pub phase: String,
    pub active: bool,
    /// The review round the run is in (`state.review.round`).
    pub round: Option<i64>,
    /// Why it is blocked (`state.blocked.reason`), while it is.
    pub blocked_reason: Option<String>,
    /// Tokens its agent launches reported, summed.
    pub tokens: i64,
    /// Estimated cost of its priced launches, in millionths of the price
    /// unit; `None` when no launch had a price.
    pub cost_micros: Option<i64>,
    pub launches: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How many runs are in one phase.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PhaseCount {
    pub phase: String,
    pub runs: i64,
}

/// The webhook inbox: deliveries neither processed nor given up.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryBacklog {
    pub pending: i64,
    /// When the oldest of them was received.
    pub oldest_received_at: Option<DateTime<Utc>>,
    /// Deliveries given up on (kept for inspection).
    pub failed: i64,
}

/// Effects written but not yet read back, over every run.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EffectBacklog {
    pub pending: i64,
    pub oldest_created_at: Option<DateTime<Utc>>,
    pub conflicts: i64,
}

/// What `autoforge status` shows, read in one go.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSummary {
    /// Active runs per phase (phases with none are left out).
    pub active_by_phase: Vec<PhaseCount>,
    /// Every blocked run with its reason, oldest change first.
    pub blocked: Vec<RunListRow>,
    pub deliveries: DeliveryBacklog,
    pub effects: EffectBacklog,
}

const LIST_SQL: &str = "SELECT r.id, r.repository, r.epic, r.current_issue, r.phase, r.active, \
         (r.state #>> '{review,round}')::int8 AS round, \
         r.state #>> '{blocked,reason}' AS blocked_reason, \
         COALESCE(l.tokens, 0)::int8 AS tokens, l.cost_micros::int8 AS cost_micros, \
         COALESCE(l.launches, 0)::int8 AS launches, \
         r.created_at, r.updated_at \
     FROM runs r \
     LEFT JOIN (SELECT run_id, SUM(tokens) AS tokens, SUM(cost_micros) AS cost_micros, \
                       COUNT(*) AS launches \
                FROM agent_launches GROUP BY run_id) l ON l.run_id = r.id \
     WHERE ($1::text IS NULL OR r.repository = $1) \
       AND ($2::text IS NULL OR r.phase = $2) \
       AND (NOT $3 OR r.phase = 'BLOCKED') \
       AND (NOT $4 OR r.active)";

impl Journal {
    /// The runs `query` selects, newest first.
    pub async fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunListRow>> {
        Ok(sqlx::query_as::<_, RunListRow>(sqlx::AssertSqlSafe(format!(
            "{LIST_SQL} ORDER BY r.id DESC LIMIT $5 OFFSET $6"
        )))
        .bind(&query.repository)
        .bind(&query.phase)
        .bind(query.blocked_only)
        .bind(query.active_only)
        .bind(query.limit.max(0))
        .bind(query.offset.max(0))
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many runs `query` selects without its limit and offset (for
    /// pagination).
    pub async fn count_runs(&self, query: &RunQuery) -> Result<i64> {
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM ({LIST_SQL}) counted"
        )))
        .bind(&query.repository)
        .bind(&query.phase)
        .bind(query.blocked_only)
        .bind(query.active_only)
        .fetch_one(&self.pool)
        .await?)
    }

    /// One run's list row, or `None` when there is no such run.
    pub async fn run_row(&self, id: RunId) -> Result<Option<RunListRow>> {
        Ok(sqlx::query_as::<_, RunListRow>(sqlx::AssertSqlSafe(format!(
            "{LIST_SQL} AND r.id = $5"
        )))
        .bind(None::<String>)
        .bind(None::<String>)
        .bind(false)
        .bind(false)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every repository that has a run, in name order.
    pub async fn run_repositories(&self) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT DISTINCT repository FROM runs ORDER BY repository")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Active runs by phase, blocked runs, and what waits in the inbox and
    /// in the effect journal.
    pub async fn status_summary(&self) -> Result<StatusSummary> {
        let active_by_phase = sqlx::query_as::<_, PhaseCount>(
            "SELECT phase, COUNT(*)::int8 AS runs FROM runs WHERE active \
             GROUP BY phase ORDER BY phase",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut blocked = self
            .query_runs(&RunQuery {
                blocked_only: true,
                limit: 1000,
                ..RunQuery::default()
            })
            .await?;
        blocked.sort_by_key(|row| row.updated_at);
        Ok(StatusSummary {
            active_by_phase,
            blocked,
            deliveries: self.delivery_backlog().await?,
            effects: self.effect_backlog().await?,
        })
    }

    /// The webhook inbox's backlog.
    pub async fn delivery_backlog(&self) -> Result<DeliveryBacklog> {
        Ok(sqlx::query_as::<_, DeliveryBacklog>(
            "SELECT COUNT(*) FILTER (WHERE processed_at IS NULL AND failed_at IS NULL)::int8 \
                     AS pending, \
                 MIN(received_at) FILTER (WHERE processed_at IS NULL AND failed_at IS NULL) \
                     AS oldest_received_at, \
                 COUNT(*) FILTER (WHERE failed_at IS NOT NULL)::int8 AS failed \
             FROM deliveries",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Effects not yet settled, and those in conflict, over every run.
    pub async fn effect_backlog(&self) -> Result<EffectBacklog> {
        Ok(sqlx::query_as::<_, EffectBacklog>(
            "SELECT COUNT(*) FILTER (WHERE stage IN ('intended', 'attempted'))::int8 AS pending, \
                 MIN(created_at) FILTER (WHERE stage IN ('intended', 'attempted')) \
                     AS oldest_created_at, \
                 COUNT(*) FILTER (WHERE stage = 'conflict')::int8 AS conflicts \
             FROM effects",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::NewRun;
    use crate::testing::{TestDatabase, issue};
    use serde_json::json;

    async fn run(db: &TestDatabase, repository: &str, number: u64, phase: &str) -> RunId {
        let state = json!({
            "phase": phase,
            "review": { "round": 2 },
            "blocked": (phase == "BLOCKED").then(|| json!({ "from": "FIX", "reason": "stuck" })),
        });
        db.journal()
            .create_run(&NewRun {
                repository: repository.into(),
                epic: None,
                issue: issue(number),
                phase: phase.into(),
                state,
            })
            .await
            .unwrap()
            .id
    }

    #[tokio::test]
    async fn lists_filter_by_repository_phase_and_blocked_and_page_newest_first() {
        let db = TestDatabase::fresh().await;
        let first = run(&db, "a/one", 1, "REVIEW").await;
        let blocked = run(&db, "a/one", 2, "BLOCKED").await;
        let other = run(&db, "b/two", 3, "DONE").await;
        let journal = db.journal();
        let all = |offset| RunQuery {
            limit: 2,
            offset,
            ..RunQuery::default()
        };
        let page: Vec<RunId> = journal
            .query_runs(&all(0))
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(page, [other, blocked]);
        let next = journal.query_runs(&all(2)).await.unwrap();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].id, first);
        assert_eq!(next[0].round, Some(2));
        assert_eq!(journal.count_runs(&all(0)).await.unwrap(), 3);

        let of_one = RunQuery {
            repository: Some("a/one".into()),
            limit: 10,
            ..RunQuery::default()
        };
        assert_eq!(journal.count_runs(&of_one).await.unwrap(), 2);
        let blocked_only = RunQuery {
            blocked_only: true,
            limit: 10,
            ..RunQuery::default()
        };
        let rows = journal.query_runs(&blocked_only).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].blocked_reason.as_deref(), Some("stuck"));
        let done = RunQuery {
            phase: Some("DONE".into()),
            limit: 10,
            ..RunQuery::default()
        };
        assert_eq!(journal.query_runs(&done).await.unwrap()[0].id, other);
        assert_eq!(
            journal.run_row(blocked).await.unwrap().unwrap().phase,
            "BLOCKED"
        );
        assert!(journal.run_row(RunId(9_999)).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_status_counts_active_phases_and_the_inbox_backlog() {
        let db = TestDatabase::fresh().await;
        run(&db, "a/one", 1, "REVIEW").await;
        run(&db, "a/one", 2, "BLOCKED").await;
        run(&db, "a/one", 3, "DONE").await;
        db.journal()
            .insert_delivery(&crate::NewDelivery {
                delivery_id: "d-1".into(),
                event: "issues".into(),
                action: None,
                repository: None,
                installation_id: None,
                payload: b"{}".to_vec(),
            })
            .await
            .unwrap();
        let status = db.journal().status_summary().await.unwrap();
        let phases: Vec<(&str, i64)> = status
            .active_by_phase
            .iter()
            .map(|p| (p.phase.as_str(), p.runs))
            .collect();
        assert_eq!(phases, [("BLOCKED", 1), ("REVIEW", 1)]);
        assert_eq!(status.blocked.len(), 1);
        assert_eq!(status.deliveries.pending, 1);
        assert!(status.deliveries.oldest_received_at.is_some());
        assert_eq!(status.effects.pending, 0);
    }
}
