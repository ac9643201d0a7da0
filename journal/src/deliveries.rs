//! The webhook inbox. Ingress stores each delivery once (deduplicated on
//! GitHub's delivery id) before answering; workers claim due deliveries,
//! process them and mark them processed or failed.

use chrono::{DateTime, Utc};

use crate::error::{JournalError, Result};
use crate::ids::DeliveryId;
use crate::journal::Journal;

/// A delivery as received.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    /// `X-GitHub-Delivery`.
    pub delivery_id: String,
    /// `X-GitHub-Event`.
    pub event: String,
    pub action: Option<String>,
    /// `owner/name`, when the payload names one.
    pub repository: Option<String>,
    pub installation_id: Option<i64>,
    /// The raw request body, byte for byte.
    pub payload: Vec<u8>,
}

/// Whether `insert_delivery` stored a new row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    Inserted(DeliveryId),
    /// GitHub sent this delivery id before (a redelivery or a retry).
    Duplicate,
}

/// What to do after a delivery failed to process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryRetry {
    /// Make it due again at this time.
    At(DateTime<Utc>),
    /// Stop trying; it shows up in `list_failed_deliveries`.
    GiveUp,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Delivery {
    pub id: DeliveryId,
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    pub repository: Option<String>,
    pub installation_id: Option<i64>,
    pub payload: Vec<u8>,
    pub received_at: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    pub claimed_by: Option<String>,
    /// How many times a worker claimed it.
    pub attempts: i32,
    pub processed_at: Option<DateTime<Utc>>,
    pub failed_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
}

/// One delivery in one statement (its own commit outside a transaction).
pub(crate) async fn insert_one<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    delivery: &NewDelivery,
) -> Result<InsertOutcome> {
    let id: Option<DeliveryId> = sqlx::query_scalar(
        "INSERT INTO deliveries \
             (delivery_id, event, action, repository, installation_id, payload) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (delivery_id) DO NOTHING RETURNING id",
    )
    .bind(&delivery.delivery_id)
    .bind(&delivery.event)
    .bind(&delivery.action)
    .bind(&delivery.repository)
    .bind(delivery.installation_id)
    .bind(&delivery.payload)
    .fetch_optional(executor)
    .await?;
    Ok(id.map_or(InsertOutcome::Duplicate, InsertOutcome::Inserted))
}

/// Refuses a delivery the inbox cannot key: it needs both ids.
pub(crate) fn check_delivery(delivery: &NewDelivery) -> Result<()> {
    if delivery.delivery_id.is_empty() || delivery.event.is_empty() {
        return Err(JournalError::InvalidInput(
            "a delivery needs a delivery id and an event".to_owned(),
        ));
    }
    Ok(())
}

const DELIVERY_COLUMNS: &str = "id, delivery_id, event, action, repository, installation_id, \
     payload, received_at, next_attempt_at, claimed_by, attempts, processed_at, failed_at, error";

impl Journal {
    /// Stores a delivery unless its id is already known. One round trip and
    /// durable on return, so ingress may acknowledge afterwards.
    /// Ingress stores through [`crate::DeliveryCommitter`] instead, which
    /// shares one commit among deliveries arriving together.
    pub async fn insert_delivery(&self, delivery: &NewDelivery) -> Result<InsertOutcome> {
        check_delivery(delivery)?;
        insert_one(&self.pool, delivery).await
    }

    /// Claims up to `limit` due, unfinished deliveries, oldest first, for
    /// `worker`. A claim hides the delivery for `visibility`: if the worker
    /// dies without marking it, it becomes due again afterwards. Concurrent
    /// workers skip each other's rows instead of waiting.
    pub async fn claim_deliveries(
        &self,
        worker: &str,
        limit: i64,
        visibility: std::time::Duration,
    ) -> Result<Vec<Delivery>> {
        Ok(sqlx::query_as::<_, Delivery>(sqlx::AssertSqlSafe(format!(
            "UPDATE deliveries d SET claimed_by = $1, attempts = d.attempts + 1, \
                 next_attempt_at = now() + make_interval(secs => $3) \
             WHERE d.id IN (SELECT id FROM deliveries \
                 WHERE processed_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now() \
                 ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) \
             RETURNING {DELIVERY_COLUMNS}"
        )))
        .bind(worker)
        .bind(limit)
        .bind(visibility.as_secs_f64())
        .fetch_all(&self.pool)
        .await
        .map(|mut rows| {
            rows.sort_by_key(|d| (d.received_at, d.id));
            rows
        })?)
    }

    /// Marks a delivery handled. Returns false if it was already finished.
    pub async fn mark_delivery_processed(&self, id: DeliveryId) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE deliveries SET processed_at = now(), error = NULL \
             WHERE id = $1 AND processed_at IS NULL AND failed_at IS NULL",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records why processing failed, and either when to retry or that the
    /// delivery is given up. Returns false if it was already finished.
    pub async fn record_delivery_failure(
        &self,
        id: DeliveryId,
        error: &str,
        retry: DeliveryRetry,
    ) -> Result<bool> {
        let (retry_at, give_up) = match retry {
            DeliveryRetry::At(at) => (Some(at), false),
            DeliveryRetry::GiveUp => (None, true),
        };
        let done = sqlx::query(
            "UPDATE deliveries SET error = $2, claimed_by = NULL, \
                 next_attempt_at = COALESCE($3, next_attempt_at), \
                 failed_at = CASE WHEN $4 THEN now() END \
             WHERE id = $1 AND processed_at IS NULL AND failed_at IS NULL",
        )
        .bind(id)
        .bind(error)
        .bind(retry_at)
        .bind(give_up)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deliveries that were given up, most recent first.
    pub async fn list_failed_deliveries(&self, limit: i64) -> Result<Vec<Delivery>> {
        Ok(sqlx::query_as::<_, Delivery>(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE failed_at IS NOT NULL \
             ORDER BY failed_at DESC, id DESC LIMIT $1"
        )))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One delivery by GitHub's delivery id.
    pub async fn get_delivery(&self, delivery_id: &str) -> Result<Option<Delivery>> {
        Ok(sqlx::query_as::<_, Delivery>(sqlx::AssertSqlSafe(format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE delivery_id = $1"
        )))
        .bind(delivery_id)
        .fetch_optional(&self.pool)
        .await?)
    }
}
