//! Commands an operator gives on the controller's host (`autoforge
//! unblock|stop`): queued for the run like an observed change, with an
//! audit record naming the local operator, in one transaction. The run's
//! driver decides them; this only delivers and records.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::error::{JournalError, Result};
use crate::ids::RunId;
use crate::journal::Journal;
use crate::run_events::{EventSource, NewRunEvent};

/// A local command to queue for a run.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOperatorCommand {
    pub run_id: RunId,
    /// The local operator (`--as`, else the login name).
    pub actor: String,
    /// `unblock` or `stop`.
    pub command: String,
    /// The unblock reason; kept in the audit record only.
    pub reason: Option<String>,
    /// The serialised run event the driver decides on.
    pub event: Value,
}

/// A queued local command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedCommand {
    pub run_event: i64,
    pub queued_at: DateTime<Utc>,
}

impl Journal {
    /// Queues `command` for its run and records who gave it. Refused with
    /// [`JournalError::InvalidInput`] when the run does not exist or has
    /// finished: a finished run has no driver to decide it.
    pub async fn queue_operator_command(
        &self,
        command: &NewOperatorCommand,
    ) -> Result<QueuedCommand> {
        let mut tx = self.begin().await?;
        let active: Option<bool> = sqlx::query_scalar("SELECT active FROM runs WHERE id = $1")
            .bind(command.run_id)
            .fetch_optional(tx.conn())
            .await?;
        match active {
            None => {
                return Err(JournalError::InvalidInput(format!(
                    "there is no run {}",
                    command.run_id
                )));
            }
            Some(false) => {
                return Err(JournalError::InvalidInput(format!(
                    "run {} has finished",
                    command.run_id
                )));
            }
            Some(true) => {}
        }
        let queued_at: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(tx.conn())
            .await?;
        let key = format!(
            "operator:{}:{}:{}",
            command.run_id,
            command.command,
            uuid::Uuid::new_v4()
        );
        tx.insert_run_event(&NewRunEvent {
            run_id: command.run_id,
            dedupe_key: key.clone(),
            source: EventSource::Operator,
            event: command.event.clone(),
        })
        .await?;
        let run_event: i64 = sqlx::query_scalar("SELECT id FROM run_events WHERE dedupe_key = $1")
            .bind(&key)
            .fetch_one(tx.conn())
            .await?;
        let detail = json!({
            "actor": command.actor,
            "command": command.command,
            "reason": command.reason,
            "via": "cli",
            "run_event": run_event,
        });
        tx.record_audit_event(Some(command.run_id), "operator_command", &detail)
            .await?;
        sqlx::query("UPDATE runs SET wake_at = now() WHERE id = $1 AND wake_at > now()")
            .bind(command.run_id)
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(QueuedCommand {
            run_event,
            queued_at,
        })
    }

    /// Runs with a local `stop` queued and not yet decided. The driver
    /// kills their running agent at once, as it does for a stop comment:
    /// the command came through the journal, not through this process.
    pub async fn runs_with_queued_stop(&self) -> Result<Vec<RunId>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT run_id FROM run_events \
             WHERE consumed_at IS NULL AND source = 'operator' \
               AND event #>> '{local_command,verb}' = 'stop' \
             ORDER BY run_id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Whether the run event `id` was consumed (decided) by its driver.
    pub async fn run_event_consumed(&self, id: i64) -> Result<bool> {
        let consumed: Option<Option<DateTime<Utc>>> =
            sqlx::query_scalar("SELECT consumed_at FROM run_events WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(matches!(consumed, Some(Some(_))))
    }
}
