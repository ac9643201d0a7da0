//! Group commit for the webhook inbox (SPEC §14). Deliveries that arrive
//! together share one durable commit: each waits for the commit that holds
//! its row, and only then is it answered, so no delivery is acknowledged
//! before it is durable, while a burst costs one fsync instead of one per
//! delivery.
//!
//! A [`DeliveryCommitter`] feeds a queue that [`COMMITTERS`] tasks drain,
//! each on a connection of its own (opened from the pool's options, never
//! taken from the pool: a pooled connection is pinged on every acquire,
//! which would double the round trips of a lone delivery, and a task that
//! held one for good would stall the pool's shutdown). A task takes
//! whatever has queued up (at most [`MAX_BATCH`]) as one batch and stores it
//! with one `INSERT … SELECT FROM unnest(…)`; while it waits for that
//! commit, the other task collects the next batch, so the disk is never
//! idle under load. A lone delivery (nothing queued, nothing committing)
//! is committed by its own request on an idle committer connection: one
//! round trip of a prepared single-row insert, and no task to wake.
//!
//! A batch that fails (a lost connection, or one row Postgres refuses) is
//! tried again row by row on a fresh connection, so one bad delivery fails
//! alone and a restarted server costs one reconnect.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use tokio::sync::{Mutex, MutexGuard, mpsc, oneshot};

use crate::deliveries::{InsertOutcome, NewDelivery, check_delivery, insert_one};
use crate::error::{DatabaseError, JournalError, Result};
use crate::ids::DeliveryId;
use crate::journal::Journal;

/// Tasks committing batches at once: one commits while the other gathers.
const COMMITTERS: usize = 2;

/// The most deliveries one commit carries (ingress lets 32 requests store
/// at once, so a batch is rarely larger).
pub const MAX_BATCH: usize = 64;

/// How long a committer waits for a new connection before the deliveries
/// it holds are answered with an error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A delivery waiting for the commit that stores it.
struct Pending {
    delivery: NewDelivery,
    answer: oneshot::Sender<Result<InsertOutcome>>,
}

/// The inbox's writer: [`Self::insert`] returns once the delivery's row is
/// committed (or known from before). Cheap to clone; the committer tasks
/// end when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct DeliveryCommitter {
    queue: mpsc::Sender<Pending>,
    options: Arc<PgConnectOptions>,
    connections: Arc<[Slot]>,
}

/// A committer's connection; locked while a commit uses it.
type Slot = Mutex<Option<PgConnection>>;

impl Journal {
    /// Starts the committer tasks (`COMMITTERS`) on the current tokio runtime.
    pub fn delivery_committer(&self) -> DeliveryCommitter {
        let (queue, incoming) = mpsc::channel(MAX_BATCH * COMMITTERS * 4);
        let incoming = Arc::new(Mutex::new(incoming));
        let options = self.pool.connect_options();
        let connections: Arc<[Slot]> = (0..COMMITTERS).map(|_| Mutex::new(None)).collect();
        for slot in 0..COMMITTERS {
            tokio::spawn(commit_loop(
                Arc::clone(&options),
                Arc::clone(&incoming),
                Arc::clone(&connections),
                slot,
            ));
        }
        DeliveryCommitter {
            queue,
            options,
            connections,
        }
    }
}

impl DeliveryCommitter {
    /// Stores a delivery unless its id is already known; durable on return,
    /// so ingress may acknowledge afterwards. Like
    /// [`Journal::insert_delivery`], but sharing a commit with whatever
    /// arrives at the same time.
    pub async fn insert(&self, delivery: NewDelivery) -> Result<InsertOutcome> {
        check_delivery(&delivery)?;
        if let Some(connection) = self.alone() {
            let mut lent = Lent {
                connection,
                finished: false,
            };
            let outcome = commit(&self.options, &mut lent.connection, &[&delivery]).await;
            lent.finished = true;
            return outcome.into_iter().next().unwrap_or_else(|| Err(stopped()));
        }
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Pending { delivery, answer })
            .await
            .map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }

    /// A connection for a delivery that nothing could share a commit with:
    /// none is queued and none is being committed. Such a delivery is
    /// committed by its own request instead of being handed to a committer
    /// task and waiting to be woken by it: those two thread switches were
    /// most of what a lone delivery cost beyond the commit itself. Whatever
    /// arrives meanwhile finds a commit in flight and queues, so bursts are
    /// batched as before.
    fn alone(&self) -> Option<MutexGuard<'_, Option<PgConnection>>> {
        if self.queue.capacity() != self.queue.max_capacity() {
            return None;
        }
        let mut idle = self.connections.iter().map(|slot| slot.try_lock().ok());
        let first = idle.next()??;
        // Every other connection must be idle too; their guards drop here.
        idle.all(|guard| guard.is_some()).then_some(first)
    }
}

/// A committer connection used by a request's own commit. The request may
/// be dropped mid-commit (its store timeout passed, or its client left);
/// the connection is then closed rather than handed on half-way through a
/// query, and whoever uses the slot next opens a fresh one.
struct Lent<'a> {
    connection: MutexGuard<'a, Option<PgConnection>>,
    finished: bool,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if !self.finished {
            *self.connection = None;
        }
    }
}

fn stopped() -> JournalError {
    JournalError::Database(DatabaseError::message(
        "the delivery committer has stopped".to_owned(),
    ))
}

/// One committer: takes what has queued up, commits it, answers, again,
/// until every [`DeliveryCommitter`] is gone.
async fn commit_loop(
    options: Arc<PgConnectOptions>,
    incoming: Arc<Mutex<mpsc::Receiver<Pending>>>,
    connections: Arc<[Slot]>,
    slot: usize,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = incoming.lock().await.recv_many(&mut batch, MAX_BATCH).await;
        if received == 0 {
            return;
        }
        // A request that gave up waiting (answered 503, so GitHub will
        // deliver it again) needs no row: after an outage the backlog of
        // abandoned deliveries is not written before the live ones.
        batch.retain(|pending| !pending.answer.is_closed());
        if batch.is_empty() {
            continue;
        }
        let deliveries: Vec<&NewDelivery> = batch.iter().map(|p| &p.delivery).collect();
        let outcomes = commit(&options, &mut *connections[slot].lock().await, &deliveries).await;
        for (pending, outcome) in batch.drain(..).zip(outcomes) {
            // A request that gave up while its batch was committing is
            // gone; its row, if committed, makes the redelivery a duplicate.
            let _ = pending.answer.send(outcome);
        }
    }
}

/// Stores `deliveries` in one statement; if that fails, each alone, so an
/// outcome per delivery in order.
async fn commit(
    options: &PgConnectOptions,
    connection: &mut Option<PgConnection>,
    deliveries: &[&NewDelivery],
) -> Vec<Result<InsertOutcome>> {
    let batched = match connected(options, connection).await {
        Ok(conn) => insert_batch(conn, deliveries).await,
        Err(error) => return deliveries.iter().map(|_| Err(copy_of(&error))).collect(),
    };
    if let Ok(outcomes) = batched {
        return outcomes.into_iter().map(Ok).collect();
    }
    // A fresh connection in case the old one broke; then each delivery
    // alone, so only a row Postgres refuses fails. A batch that committed
    // although its answer was lost shows its rows as duplicates now:
    // durable either way.
    *connection = None;
    let mut outcomes = Vec::with_capacity(deliveries.len());
    // Once the server cannot be reached, the rest fail at once rather than
    // each waiting for a connection of its own.
    let mut unreachable: Option<JournalError> = None;
    for delivery in deliveries {
        if let Some(error) = &unreachable {
            outcomes.push(Err(copy_of(error)));
            continue;
        }
        let outcome = match connected(options, connection).await {
            Ok(conn) => insert_one(conn, delivery).await,
            Err(error) => {
                let answered = copy_of(&error);
                unreachable = Some(error);
                Err(answered)
            }
        };
        if outcome.is_err() {
            // It may have been the connection that failed.
            *connection = None;
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// The committer's connection, opened now if it has none.
async fn connected<'c>(
    options: &PgConnectOptions,
    connection: &'c mut Option<PgConnection>,
) -> Result<&'c mut PgConnection> {
    let open = match connection.take() {
        Some(open) => open,
        None => tokio::time::timeout(CONNECT_TIMEOUT, options.connect())
            .await
            .map_err(|_| {
                JournalError::Database(DatabaseError::message(format!(
                    "no database connection within {CONNECT_TIMEOUT:?}"
                )))
            })??,
    };
    Ok(connection.insert(open))
}

/// One multi-row insert; a delivery id already stored, or earlier in the
/// same batch, is a duplicate.
async fn insert_batch(
    connection: &mut PgConnection,
    deliveries: &[&NewDelivery],
) -> Result<Vec<InsertOutcome>> {
    // A lone delivery (all of them at concurrency 1) takes the plain
    // insert: no arrays to encode and unpack.
    if let [delivery] = deliveries {
        return Ok(vec![insert_one(&mut *connection, delivery).await?]);
    }
    let ids: Vec<&str> = deliveries.iter().map(|d| d.delivery_id.as_str()).collect();
    let events: Vec<&str> = deliveries.iter().map(|d| d.event.as_str()).collect();
    let actions: Vec<Option<&str>> = deliveries.iter().map(|d| d.action.as_deref()).collect();
    let repositories: Vec<Option<&str>> =
        deliveries.iter().map(|d| d.repository.as_deref()).collect();
    let installations: Vec<Option<i64>> = deliveries.iter().map(|d| d.installation_id).collect();
    let payloads: Vec<&[u8]> = deliveries.iter().map(|d| d.payload.as_slice()).collect();
    let stored: Vec<(DeliveryId, String)> = sqlx::query_as(
        "INSERT INTO deliveries \
             (delivery_id, event, action, repository, installation_id, payload) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
             $5::int8[], $6::bytea[]) \
         ON CONFLICT (delivery_id) DO NOTHING RETURNING id, delivery_id",
    )
    .bind(&ids)
    .bind(&events)
    .bind(&actions)
    .bind(&repositories)
    .bind(&installations)
    .bind(&payloads)
    .fetch_all(&mut *connection)
    .await?;
    let mut stored: HashMap<String, DeliveryId> = stored
        .into_iter()
        .map(|(id, delivery_id)| (delivery_id, id))
        .collect();
    // The first of a batch's copies of one id takes the new row; the rest,
    // like an id stored before, are duplicates.
    Ok(ids
        .iter()
        .map(|delivery_id| {
            stored
                .remove(*delivery_id)
                .map_or(InsertOutcome::Duplicate, InsertOutcome::Inserted)
        })
        .collect())
}

/// The same failure for another waiter (a journal error is not `Clone`).
fn copy_of(error: &JournalError) -> JournalError {
    JournalError::Database(DatabaseError::message(error.to_string()))
}
