//! Runs and their leases. A run is driven by at most one task in the whole
//! cluster: the task must hold the run's lease, and every write it makes is
//! checked against the lease's fencing token, so a holder that lost the run
//! (paused, partitioned, expired) cannot write over its successor.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::{ActiveRunScope, JournalError, Result, unique_violation};
use crate::github_ids::IssueNumber;
use crate::holdings::refused;
use crate::ids::RunId;
use crate::journal::{Journal, JournalTx};

/// Phases after which a run is finished. The database's generated
/// `runs.active` column is the authority for queries; this list mirrors it
/// for Rust callers, and a test checks the two agree.
pub const TERMINAL_PHASES: [&str; 3] = ["DONE", "FAILED", "STOPPED"];

/// True when `phase` ends a run.
pub fn is_terminal(phase: &str) -> bool {
    TERMINAL_PHASES.contains(&phase)
}

/// What a new run starts with.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// `owner/name`.
    pub repository: String,
    pub epic: Option<IssueNumber>,
    pub issue: IssueNumber,
    pub phase: String,
    pub state: Value,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Run {
    pub id: RunId,
    pub repository: String,
    pub epic: Option<IssueNumber>,
    pub current_issue: IssueNumber,
    pub phase: String,
    pub active: bool,
    pub state: Value,
    pub version: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub fencing_token: i64,
    pub wake_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Which runs `list_runs` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFilter {
    Active,
    All,
}

/// Proof that the caller holds a run. Every write on behalf of the run
/// takes one; the journal refuses it once the lease is no longer current.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Lease {
    pub run_id: RunId,
    pub owner: String,
    pub fencing_token: i64,
    pub expires_at: DateTime<Utc>,
}

const RUN_COLUMNS: &str = "id, repository, epic, current_issue, phase, active, state, version, \
     lease_owner, lease_expires_at, fencing_token, wake_at, created_at, updated_at";

/// The SQL condition "the lease held by ($owner, $token) is still the run's
/// current, unexpired lease", for a `runs` row aliased `r`. Postgres' clock
/// decides expiry so replicas with skewed clocks agree.
macro_rules! lease_is_current {
    ($owner:literal, $token:literal) => {
        concat!(
            "r.lease_owner = ",
            $owner,
            " AND r.fencing_token = ",
            $token,
            " AND r.lease_expires_at > now()"
        )
    };
}
pub(crate) use lease_is_current;

/// The rest of an acquiring statement after its `taken` CTE (the runs row
/// just leased): records the holding, prunes the run's holdings older than
/// its last 200 acquisitions, and returns the lease.
macro_rules! record_holding {
    () => {
        "held AS (INSERT INTO lease_holdings \
             (run_id, fencing_token, owner, acquired_at, expires_at) \
             SELECT id, fencing_token, lease_owner, now(), lease_expires_at FROM taken), \
         pruned AS (DELETE FROM lease_holdings h USING taken \
             WHERE h.run_id = taken.id AND h.fencing_token <= taken.fencing_token - 200) \
         SELECT id AS run_id, lease_owner AS owner, fencing_token, \
             lease_expires_at AS expires_at FROM taken"
    };
}

impl Journal {
    /// Creates a run in its first phase. Refused with
    /// [`JournalError::ActiveRunExists`] if the issue or the EPIC already has
    /// an active run.
    pub async fn create_run(&self, run: &NewRun) -> Result<Run> {
        check_new_run(run)?;
        let inserted = sqlx::query_as::<_, Run>(sqlx::AssertSqlSafe(format!(
            "INSERT INTO runs (repository, epic, current_issue, phase, state) \
             VALUES ($1, $2, $3, $4, $5) RETURNING {RUN_COLUMNS}"
        )))
        .bind(&run.repository)
        .bind(run.epic)
        .bind(run.issue)
        .bind(&run.phase)
        .bind(&run.state)
        .fetch_one(&self.pool)
        .await;
        inserted.map_err(|error| run_insert_error(error, run))
    }

    /// One run, or `None` if the id is unknown.
    pub async fn get_run(&self, id: RunId) -> Result<Option<Run>> {
        Ok(sqlx::query_as::<_, Run>(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Runs, newest first.
    pub async fn list_runs(&self, filter: RunFilter, limit: i64) -> Result<Vec<Run>> {
        Ok(sqlx::query_as::<_, Run>(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE ($1 OR active) ORDER BY id DESC LIMIT $2"
        )))
        .bind(filter == RunFilter::All)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The active run of an issue, if any.
    pub async fn active_run_for_issue(
        &self,
        repository: &str,
        issue: IssueNumber,
    ) -> Result<Option<Run>> {
        Ok(sqlx::query_as::<_, Run>(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs \
             WHERE active AND repository = $1 AND current_issue = $2"
        )))
        .bind(repository)
        .bind(issue)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Leases some run that is due (`wake_at` passed) and whose lease is
    /// free or expired: an active run, or a finished one whose last writes
    /// are still `intended` or `attempted` (a crash right after the
    /// terminal transition committed must not lose its status update).
    /// Locked rows are skipped, so concurrent callers never wait on each
    /// other and never get the same run. Each acquisition bumps the fencing
    /// token. `None` when no run is available.
    ///
    /// Work already begun comes before work not yet started, so that
    /// recovery after a crash does not wait behind a queue of fresh runs:
    /// first runs whose lease expired without being released (their holder
    /// died mid-step, perhaps with writes `attempted` on GitHub and an
    /// agent gone; a released lease leaves the expiry empty), then runs
    /// with writes still `intended` or `attempted`, then the rest by
    /// `wake_at`.
    pub async fn acquire_lease(
        &self,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<Lease>> {
        Ok(sqlx::query_as::<_, Lease>(concat!(
            "WITH taken AS (UPDATE runs SET lease_owner = $1, \
                 lease_expires_at = now() + make_interval(secs => $2), \
                 fencing_token = fencing_token + 1 \
             WHERE id = (SELECT r.id FROM runs r \
                 LEFT JOIN (SELECT DISTINCT run_id FROM effects \
                            WHERE stage IN ('intended', 'attempted')) unfinished \
                   ON unfinished.run_id = r.id \
                 WHERE (r.active OR unfinished.run_id IS NOT NULL) \
                   AND r.wake_at <= now() \
                   AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= now()) \
                 ORDER BY r.lease_expires_at IS NULL, unfinished.run_id IS NULL, \
                     r.wake_at, r.id \
                 LIMIT 1 FOR UPDATE OF r SKIP LOCKED) \
             RETURNING id, lease_owner, fencing_token, lease_expires_at), ",
            record_holding!()
        ))
        .bind(owner)
        .bind(ttl.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Leases one specific active run if its lease is free or expired,
    /// regardless of `wake_at` (an event for it just arrived).
    pub async fn acquire_lease_for(
        &self,
        run_id: RunId,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<Lease>> {
        Ok(sqlx::query_as::<_, Lease>(concat!(
            "WITH taken AS (UPDATE runs SET lease_owner = $2, \
                 lease_expires_at = now() + make_interval(secs => $3), \
                 fencing_token = fencing_token + 1 \
             WHERE id = (SELECT id FROM runs WHERE id = $1 AND active \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= now()) \
                 FOR UPDATE SKIP LOCKED) \
             RETURNING id, lease_owner, fencing_token, lease_expires_at), ",
            record_holding!()
        ))
        .bind(run_id)
        .bind(owner)
        .bind(ttl.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Extends a lease the caller still holds. A holder whose lease expired
    /// may renew it as long as nobody took the run over in between (the
    /// fencing token is unchanged). Returns the lease with its new expiry.
    pub async fn renew_lease(&self, lease: &Lease, ttl: std::time::Duration) -> Result<Lease> {
        let renewed = sqlx::query_as::<_, Lease>(
            "WITH renewed AS (UPDATE runs SET lease_expires_at = now() + make_interval(secs => $4) \
                 WHERE id = $1 AND lease_owner = $2 AND fencing_token = $3 \
                 RETURNING id, lease_owner, fencing_token, lease_expires_at), \
             noted AS (UPDATE lease_holdings h SET expires_at = renewed.lease_expires_at \
                 FROM renewed \
                 WHERE h.run_id = renewed.id AND h.fencing_token = renewed.fencing_token) \
             SELECT id AS run_id, lease_owner AS owner, fencing_token, \
                 lease_expires_at AS expires_at FROM renewed",
        )
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(ttl.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        match renewed {
            Some(renewed) => Ok(renewed),
            None => Err(refused(&self.pool, stale(lease)).await),
        }
    }

    /// Gives a run back. The fencing token is kept so the next holder gets a
    /// higher one.
    pub async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let released = sqlx::query(
            "WITH released AS (UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL \
                 WHERE id = $1 AND lease_owner = $2 AND fencing_token = $3 RETURNING id), \
             noted AS (UPDATE lease_holdings h SET released_at = now() FROM released \
                 WHERE h.run_id = released.id AND h.fencing_token = $3) \
             SELECT id FROM released",
        )
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .execute(&self.pool)
        .await?;
        if released.rows_affected() == 1 {
            Ok(())
        } else {
            Err(refused(&self.pool, stale(lease)).await)
        }
    }

    /// Sets when the run is next due for `acquire_lease` (backoff, waiting
    /// for CI). Needs the lease.
    pub async fn schedule_wake(&self, lease: &Lease, at: DateTime<Utc>) -> Result<()> {
        let done = sqlx::query(concat!(
            "UPDATE runs r SET wake_at = $4, updated_at = now() WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3")
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(at)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(refused(&self.pool, stale(lease)).await)
        }
    }

    /// Makes a run due now, e.g. because an event for it arrived. Needs no
    /// lease: it changes no state a holder relies on.
    pub async fn wake_run(&self, run_id: RunId) -> Result<()> {
        sqlx::query("UPDATE runs SET wake_at = now() WHERE id = $1 AND wake_at > now()")
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Makes every active run of `repository` due now (its access changed).
    pub async fn wake_runs_of(&self, repository: &str) -> Result<()> {
        sqlx::query(
            "UPDATE runs SET wake_at = now() WHERE repository = $1 AND active AND wake_at > now()",
        )
        .bind(repository)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

impl JournalTx {
    /// Moves the run to `issue` within `epic` (an EPIC run continuing with
    /// its next issue, or a labelled EPIC starting on its first child), in
    /// the caller's transaction with the corresponding transition. Refused
    /// with [`JournalError::ActiveRunExists`] if another active run holds
    /// that issue or that EPIC.
    pub async fn set_scope(
        &mut self,
        lease: &Lease,
        issue: IssueNumber,
        epic: Option<IssueNumber>,
    ) -> Result<()> {
        // Read first: after a unique violation the transaction is aborted
        // and can no longer tell us which repository the run belongs to.
        let repository: Option<String> =
            sqlx::query_scalar("SELECT repository FROM runs WHERE id = $1")
                .bind(lease.run_id)
                .fetch_optional(self.conn())
                .await?;
        let repository = repository.ok_or(JournalError::NotFound {
            what: "run",
            id: lease.run_id.0,
        })?;
        let done = sqlx::query(concat!(
            "UPDATE runs r SET current_issue = $4, epic = $5, updated_at = now() \
             WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3")
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(issue)
        .bind(epic)
        .execute(self.conn())
        .await;
        let scope = match done {
            Ok(done) if done.rows_affected() == 1 => return Ok(()),
            Ok(_) => return Err(refused(self.pool(), stale(lease)).await),
            Err(error) => match unique_violation(&error) {
                Some("runs_one_active_per_issue") => ActiveRunScope::Issue(issue),
                // The per-EPIC index covers only rows with an EPIC.
                Some("runs_one_active_per_epic") if let Some(epic) = epic => {
                    ActiveRunScope::Epic(epic)
                }
                _ => return Err(error.into()),
            },
        };
        Err(JournalError::ActiveRunExists { repository, scope })
    }
}

pub(crate) fn stale(lease: &Lease) -> JournalError {
    JournalError::StaleLease {
        run_id: lease.run_id,
        fencing_token: lease.fencing_token,
    }
}

/// Refuses a run without the fields every run needs, before any SQL.
pub(crate) fn check_new_run(run: &NewRun) -> Result<()> {
    if run.repository.is_empty() || run.phase.is_empty() {
        return Err(JournalError::InvalidInput(
            "a run needs a repository and a phase".to_owned(),
        ));
    }
    Ok(())
}

/// Names the active run a failed insert collided with, if that is why it
/// failed (the partial unique indexes of SPEC §2's one-active-run rule).
pub(crate) fn run_insert_error(error: sqlx::Error, run: &NewRun) -> JournalError {
    let scope = match unique_violation(&error) {
        Some("runs_one_active_per_issue") => ActiveRunScope::Issue(run.issue),
        Some("runs_one_active_per_epic") if let Some(epic) = run.epic => ActiveRunScope::Epic(epic),
        _ => return error.into(),
    };
    JournalError::ActiveRunExists {
        repository: run.repository.clone(),
        scope,
    }
}
