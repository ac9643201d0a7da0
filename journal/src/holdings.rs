//! The lease history (`lease_holdings`): one row per acquisition of a
//! run's lease, kept by the same statements that grant, renew and release
//! leases, and the count of writes the journal refused to each holder
//! after it lost the run. Operators and the replica tests read it to see
//! who drove a run when, on the database's clock.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgPool;

use crate::error::{JournalError, Result};
use crate::ids::RunId;
use crate::journal::Journal;

/// One acquisition of a run's lease and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LeaseHolding {
    pub run_id: RunId,
    pub fencing_token: i64,
    /// The worker that held it (`Lease::owner`).
    pub owner: String,
    pub acquired_at: DateTime<Utc>,
    /// The last expiry granted (at acquisition or by a renewal).
    pub expires_at: DateTime<Utc>,
    /// When the holder gave the run back, if it did.
    pub released_at: Option<DateTime<Utc>>,
    /// Fenced writes the journal refused to this holder once it had lost
    /// the run (renewals included).
    pub refused_writes: i32,
    pub last_refused_at: Option<DateTime<Utc>>,
}

impl LeaseHolding {
    /// When the holder stopped holding the run: its release, or else the
    /// last expiry it was granted (a run is taken over only once its lease
    /// is released or expired).
    pub fn ended_at(&self) -> DateTime<Utc> {
        self.released_at.unwrap_or(self.expires_at)
    }
}

impl Journal {
    /// The run's recorded lease holdings, oldest first.
    pub async fn lease_holdings(&self, run_id: RunId) -> Result<Vec<LeaseHolding>> {
        Ok(sqlx::query_as::<_, LeaseHolding>(
            "SELECT run_id, fencing_token, owner, acquired_at, expires_at, released_at, \
                 refused_writes, last_refused_at \
             FROM lease_holdings WHERE run_id = $1 ORDER BY fencing_token",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }
}

/// Counts a refused write against the holding that attempted it and
/// returns `error` unchanged. It runs on a connection of its own, because
/// the caller's transaction (if any) is about to roll back; a failure to
/// count is logged, never returned, so the caller still sees why its write
/// was refused.
pub(crate) async fn refused(pool: &PgPool, error: JournalError) -> JournalError {
    let JournalError::StaleLease {
        run_id,
        fencing_token,
    } = &error
    else {
        return error;
    };
    let counted = sqlx::query(
        "UPDATE lease_holdings SET refused_writes = refused_writes + 1, last_refused_at = now() \
         WHERE run_id = $1 AND fencing_token = $2",
    )
    .bind(run_id)
    .bind(fencing_token)
    .execute(pool)
    .await;
    if let Err(failure) = counted {
        tracing::warn!(error = %failure, run = %run_id, "cannot count a refused write");
    }
    error
}
