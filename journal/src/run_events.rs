//! Run events: the durable queue between the observers (webhook dispatcher,
//! poller) and the run driver.
//!
//! Observers work in one transaction per observed change: they first
//! [`JournalTx::claim_change`] its dedupe key (a change already acted on is
//! skipped), then start a run or enqueue run events, and — for a delivery —
//! mark it processed in the same transaction, so that processing a change
//! twice, or seeing it through a webhook and through the poller, has no
//! further effect. The driver reads [`Journal::next_run_events`] and
//! acknowledges each with [`Journal::consume_run_event`].

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::{JournalError, Result};
use crate::github_ids::{IssueNumber, PullNumber};
use crate::holdings::refused;
use crate::ids::{DeliveryId, RunId};
use crate::journal::{Journal, JournalTx};
use crate::runs::{Lease, NewRun, check_new_run, lease_is_current, run_insert_error, stale};

/// Who saw a change first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventSource {
    Webhook,
    Poll,
    /// An operator's command on the controller's host (`autoforge unblock`).
    Operator,
}

impl EventSource {
    pub fn as_str(self) -> &'static str {
        match self {
            EventSource::Webhook => "webhook",
            EventSource::Poll => "poll",
            EventSource::Operator => "operator",
        }
    }
}

/// A run event to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRunEvent {
    pub run_id: RunId,
    /// Identifies the change (object id plus version); unique across events.
    pub dedupe_key: String,
    pub source: EventSource,
    /// The serialised observation the driver consumes.
    pub event: Value,
}

/// A stored run event.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RunEvent {
    pub id: i64,
    pub run_id: RunId,
    pub dedupe_key: String,
    pub source: String,
    pub event: Value,
    pub created_at: DateTime<Utc>,
    pub consumed_at: Option<DateTime<Utc>>,
}

/// Whether a change was new to the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeClaim {
    /// First sighting: act on it in this transaction.
    New,
    /// Acted on before (by a webhook, the poller or another replica).
    SeenBefore,
}

const RUN_EVENT_COLUMNS: &str = "id, run_id, dedupe_key, source, event, created_at, consumed_at";

impl JournalTx {
    /// Records that the change `dedupe_key` is being acted on, with a short
    /// `outcome` for the record. Concurrent claims of one key serialise on
    /// the primary key: the second waits for the first transaction and then
    /// sees [`ChangeClaim::SeenBefore`].
    pub async fn claim_change(
        &mut self,
        dedupe_key: &str,
        source: EventSource,
        outcome: &str,
    ) -> Result<ChangeClaim> {
        if dedupe_key.is_empty() {
            return Err(JournalError::InvalidInput(
                "a change needs a dedupe key".to_owned(),
            ));
        }
        let inserted = sqlx::query(
            "INSERT INTO observed_changes (dedupe_key, source, outcome) VALUES ($1, $2, $3) \
             ON CONFLICT (dedupe_key) DO NOTHING",
        )
        .bind(dedupe_key)
        .bind(source.as_str())
        .bind(outcome)
        .execute(self.conn())
        .await?;
        Ok(if inserted.rows_affected() == 1 {
            ChangeClaim::New
        } else {
            ChangeClaim::SeenBefore
        })
    }

    /// Enqueues a run event unless one with its dedupe key exists. Returns
    /// whether it was inserted.
    pub async fn insert_run_event(&mut self, event: &NewRunEvent) -> Result<bool> {
        if event.dedupe_key.is_empty() {
            return Err(JournalError::InvalidInput(
                "a run event needs a dedupe key".to_owned(),
            ));
        }
        let inserted = sqlx::query(
            "INSERT INTO run_events (run_id, dedupe_key, source, event) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (dedupe_key) DO NOTHING",
        )
        .bind(event.run_id)
        .bind(&event.dedupe_key)
        .bind(event.source.as_str())
        .bind(&event.event)
        .execute(self.conn())
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    /// Marks a run event consumed inside the transaction that commits what
    /// the event caused, so a crash leaves either both or neither. The
    /// lease is checked (like every driver write) and the event must belong
    /// to the leased run. Returns false if it was already consumed.
    pub async fn consume_run_event_with(&mut self, lease: &Lease, id: i64) -> Result<bool> {
        let held: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT r.id FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR SHARE"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .fetch_optional(self.conn())
        .await?;
        if held.is_none() {
            return Err(refused(self.pool(), stale(lease)).await);
        }
        let done = sqlx::query(
            "UPDATE run_events SET consumed_at = now() \
             WHERE id = $1 AND run_id = $2 AND consumed_at IS NULL",
        )
        .bind(id)
        .bind(lease.run_id)
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Creates a run inside this transaction, so that the run and the event
    /// that starts it commit together. Refused with
    /// [`JournalError::ActiveRunExists`] like [`Journal::create_run`]; the
    /// transaction is then unusable and must be dropped.
    pub async fn start_run(&mut self, run: &NewRun) -> Result<RunId> {
        check_new_run(run)?;
        let inserted: std::result::Result<RunId, sqlx::Error> = sqlx::query_scalar(
            "INSERT INTO runs (repository, epic, current_issue, phase, state) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&run.repository)
        .bind(run.epic)
        .bind(run.issue)
        .bind(&run.phase)
        .bind(&run.state)
        .fetch_one(self.conn())
        .await;
        inserted.map_err(|error| run_insert_error(error, run))
    }

    /// Marks a delivery handled together with what handling it produced.
    /// Returns false if it was already finished (then the caller should roll
    /// back: another worker got there first).
    pub async fn mark_delivery_processed(&mut self, id: DeliveryId) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE deliveries SET processed_at = now(), error = NULL \
             WHERE id = $1 AND processed_at IS NULL AND failed_at IS NULL",
        )
        .bind(id)
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

impl Journal {
    /// The active run an issue, pull request or EPIC number belongs to in
    /// `repository`: its current issue, its recorded pull request, or its EPIC.
    pub async fn active_run_for_object(
        &self,
        repository: &str,
        number: IssueNumber,
    ) -> Result<Option<RunId>> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM runs WHERE active AND repository = $1 \
                 AND (current_issue = $2 OR pull_request = $2 OR epic = $2) \
             ORDER BY id LIMIT 1",
        )
        .bind(repository)
        .bind(number)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The dedupe key of the change that started `run` (its first run
    /// event): for a run started by a trigger labelling, the key names
    /// that labelling.
    pub async fn run_start_key(&self, run_id: RunId) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT dedupe_key FROM run_events WHERE run_id = $1 ORDER BY id LIMIT 1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The active runs of `repository` bound to a pull request, with it:
    /// who a commit status (which names only a commit) may concern.
    pub async fn active_runs_with_pull_requests(
        &self,
        repository: &str,
    ) -> Result<Vec<(RunId, PullNumber)>> {
        Ok(sqlx::query_as(
            "SELECT id, pull_request FROM runs WHERE active AND repository = $1 \
                 AND pull_request IS NOT NULL ORDER BY id",
        )
        .bind(repository)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Records the pull request a run opened or adopted (`None` to forget it).
    pub async fn set_run_pull_request(
        &self,
        run_id: RunId,
        pull_request: Option<PullNumber>,
    ) -> Result<()> {
        let updated = sqlx::query("UPDATE runs SET pull_request = $2 WHERE id = $1")
            .bind(run_id)
            .bind(pull_request)
            .execute(&self.pool)
            .await?;
        if updated.rows_affected() == 0 {
            return Err(JournalError::NotFound {
                what: "run",
                id: run_id.0,
            });
        }
        Ok(())
    }

    /// The pull request recorded for a run, if any.
    pub async fn run_pull_request(&self, run_id: RunId) -> Result<Option<PullNumber>> {
        Ok(sqlx::query_scalar::<_, Option<PullNumber>>(
            "SELECT pull_request FROM runs WHERE id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?
        .flatten())
    }

    /// Unconsumed events of a run, oldest first.
    pub async fn next_run_events(&self, run_id: RunId, limit: i64) -> Result<Vec<RunEvent>> {
        Ok(sqlx::query_as::<_, RunEvent>(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_EVENT_COLUMNS} FROM run_events \
             WHERE run_id = $1 AND consumed_at IS NULL ORDER BY id LIMIT $2"
        )))
        .bind(run_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every event of a run, consumed or not, oldest first.
    pub async fn list_run_events(&self, run_id: RunId) -> Result<Vec<RunEvent>> {
        Ok(sqlx::query_as::<_, RunEvent>(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_EVENT_COLUMNS} FROM run_events WHERE run_id = $1 ORDER BY id"
        )))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Marks a run event consumed. Returns false if it already was.
    pub async fn consume_run_event(&self, id: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE run_events SET consumed_at = now() WHERE id = $1 AND consumed_at IS NULL",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Audit events of one kind across runs (and those tied to no run,
    /// such as a refused trigger label), newest first.
    pub async fn list_audit_events_of_kind(
        &self,
        kind: &str,
        limit: i64,
    ) -> Result<Vec<crate::AuditEvent>> {
        Ok(sqlx::query_as::<_, crate::AuditEvent>(
            "SELECT id, run_id, kind, detail, recorded_at FROM audit_events \
             WHERE kind = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(kind)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Whether any change whose key starts with `prefix` was acted on (e.g.
    /// any version of one comment).
    pub async fn observed_change_with_prefix(&self, prefix: &str) -> Result<bool> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM observed_changes WHERE starts_with(dedupe_key, $1))",
        )
        .bind(prefix)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Whether a change was acted on, and with what outcome.
    pub async fn observed_change(&self, dedupe_key: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT outcome FROM observed_changes WHERE dedupe_key = $1")
                .bind(dedupe_key)
                .fetch_optional(&self.pool)
                .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testing::TestDatabase;
    use serde_json::json;

    fn new_run(issue: u64) -> NewRun {
        NewRun {
            repository: "acme/widgets".to_owned(),
            epic: None,
            issue: crate::testing::issue(issue),
            phase: "IMPLEMENT".to_owned(),
            state: json!({}),
        }
    }

    fn event(run_id: RunId, key: &str) -> NewRunEvent {
        NewRunEvent {
            run_id,
            dedupe_key: key.to_owned(),
            source: EventSource::Webhook,
            event: json!({"kind": "started"}),
        }
    }

    #[tokio::test]
    async fn a_change_is_claimed_once_across_transactions() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let mut tx = journal.begin().await.unwrap();
        let first = tx
            .claim_change("comment:1@t", EventSource::Webhook, "ok")
            .await;
        tx.commit().await.unwrap();
        let mut tx = journal.begin().await.unwrap();
        let second = tx
            .claim_change("comment:1@t", EventSource::Poll, "ok")
            .await;
        tx.commit().await.unwrap();
        assert_eq!(first.unwrap(), ChangeClaim::New);
        assert_eq!(second.unwrap(), ChangeClaim::SeenBefore);
        assert_eq!(
            journal
                .observed_change("comment:1@t")
                .await
                .unwrap()
                .as_deref(),
            Some("ok")
        );
    }

    #[tokio::test]
    async fn a_rolled_back_claim_leaves_the_change_new() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let mut tx = journal.begin().await.unwrap();
        tx.claim_change("k", EventSource::Webhook, "ok")
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let mut tx = journal.begin().await.unwrap();
        assert_eq!(
            tx.claim_change("k", EventSource::Poll, "ok").await.unwrap(),
            ChangeClaim::New
        );
    }

    #[tokio::test]
    async fn run_and_start_event_commit_together_and_are_consumed_in_order() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let mut tx = journal.begin().await.unwrap();
        let run_id = tx.start_run(&new_run(7)).await.unwrap();
        assert!(tx.insert_run_event(&event(run_id, "a")).await.unwrap());
        assert!(!tx.insert_run_event(&event(run_id, "a")).await.unwrap());
        assert!(tx.insert_run_event(&event(run_id, "b")).await.unwrap());
        tx.commit().await.unwrap();

        let pending = journal.next_run_events(run_id, 10).await.unwrap();
        let keys: Vec<_> = pending.iter().map(|e| e.dedupe_key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        assert!(journal.consume_run_event(pending[0].id).await.unwrap());
        assert!(!journal.consume_run_event(pending[0].id).await.unwrap());
        let pending = journal.next_run_events(run_id, 10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].dedupe_key, "b");
        assert_eq!(journal.list_run_events(run_id).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn starting_a_second_active_run_for_an_issue_is_refused() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let mut tx = journal.begin().await.unwrap();
        tx.start_run(&new_run(3)).await.unwrap();
        tx.commit().await.unwrap();
        let mut tx = journal.begin().await.unwrap();
        let error = tx.start_run(&new_run(3)).await.unwrap_err();
        assert!(
            matches!(error, JournalError::ActiveRunExists { .. }),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_run_is_found_by_its_issue_pull_request_or_epic() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let mut run = new_run(5);
        run.epic = Some(crate::testing::issue(1));
        let mut tx = journal.begin().await.unwrap();
        let run_id = tx.start_run(&run).await.unwrap();
        tx.commit().await.unwrap();
        journal
            .set_run_pull_request(run_id, Some(crate::testing::pull(9)))
            .await
            .unwrap();
        for number in [5, 9, 1] {
            assert_eq!(
                journal
                    .active_run_for_object("acme/widgets", crate::testing::issue(number))
                    .await
                    .unwrap(),
                Some(run_id)
            );
        }
        assert_eq!(
            journal
                .active_run_for_object("acme/widgets", crate::testing::issue(2))
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            journal
                .active_run_for_object("acme/other", crate::testing::issue(5))
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            journal.run_pull_request(run_id).await.unwrap(),
            Some(crate::testing::pull(9))
        );
    }

    #[tokio::test]
    async fn audit_events_without_a_run_are_listed_by_kind() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        journal
            .record_audit_event(None, "trigger_refused", &json!({"actor": "mallory"}))
            .await
            .unwrap();
        journal
            .record_audit_event(None, "other", &json!({}))
            .await
            .unwrap();
        let refused = journal
            .list_audit_events_of_kind("trigger_refused", 10)
            .await
            .unwrap();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].detail["actor"], "mallory");
        assert_eq!(refused[0].run_id, None);
    }

    #[tokio::test]
    async fn processing_marks_a_delivery_once_inside_the_transaction() {
        let db = TestDatabase::fresh().await;
        let journal = db.journal();
        let inserted = journal
            .insert_delivery(&crate::NewDelivery {
                delivery_id: "d-1".to_owned(),
                event: "ping".to_owned(),
                action: None,
                repository: None,
                installation_id: None,
                payload: b"{}".to_vec(),
            })
            .await
            .unwrap();
        let crate::InsertOutcome::Inserted(id) = inserted else {
            panic!("expected a new delivery");
        };
        let mut tx = journal.begin().await.unwrap();
        assert!(tx.mark_delivery_processed(id).await.unwrap());
        tx.rollback().await.unwrap();
        assert!(
            journal
                .get_delivery("d-1")
                .await
                .unwrap()
                .unwrap()
                .processed_at
                .is_none()
        );
        let mut tx = journal.begin().await.unwrap();
        assert!(tx.mark_delivery_processed(id).await.unwrap());
        tx.commit().await.unwrap();
        let mut tx = journal.begin().await.unwrap();
        assert!(!tx.mark_delivery_processed(id).await.unwrap());
    }
}
