//! The latest GitHub rate-limit reading per budget (`rate_limit_readings`):
//! the serving process upserts what its client last saw, one row per
//! budget owner and resource, and `autoforge status` reads them back with
//! their age. A reading older than the stored one is ignored, so two
//! replicas writing in turn never move a row back in time.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::journal::Journal;

/// One budget as a response's `x-ratelimit-*` headers left it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RateLimitReading {
    /// An installation id, `app` or `token`.
    pub owner: String,
    /// GitHub's `x-ratelimit-resource` (`core` when it named none).
    pub resource: String,
    pub limit_total: Option<i64>,
    pub remaining: Option<i64>,
    /// When the budget refills.
    pub reset_at: Option<DateTime<Utc>>,
    /// Set while a secondary limit or an exhausted budget holds requests.
    pub paused_until: Option<DateTime<Utc>>,
    /// When the response carrying the reading arrived.
    pub observed_at: DateTime<Utc>,
    /// The serving process that wrote it.
    pub recorded_by: String,
}

impl Journal {
    /// Upserts each reading, unless the stored one for its budget is newer.
    pub async fn record_rate_limits(&self, readings: &[RateLimitReading]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for reading in readings {
            sqlx::query(
                "INSERT INTO rate_limit_readings (owner, resource, limit_total, remaining, \
                     reset_at, paused_until, observed_at, recorded_by) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (owner, resource) DO UPDATE SET \
                     limit_total = EXCLUDED.limit_total, remaining = EXCLUDED.remaining, \
                     reset_at = EXCLUDED.reset_at, paused_until = EXCLUDED.paused_until, \
                     observed_at = EXCLUDED.observed_at, recorded_by = EXCLUDED.recorded_by, \
                     recorded_at = now() \
                 WHERE rate_limit_readings.observed_at <= EXCLUDED.observed_at",
            )
            .bind(&reading.owner)
            .bind(&reading.resource)
            .bind(reading.limit_total)
            .bind(reading.remaining)
            .bind(reading.reset_at)
            .bind(reading.paused_until)
            .bind(reading.observed_at)
            .bind(&reading.recorded_by)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every stored reading, by owner and resource.
    pub async fn rate_limit_readings(&self) -> Result<Vec<RateLimitReading>> {
        Ok(sqlx::query_as::<_, RateLimitReading>(
            "SELECT owner, resource, limit_total, remaining, reset_at, paused_until, \
                 observed_at, recorded_by FROM rate_limit_readings ORDER BY owner, resource",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}
