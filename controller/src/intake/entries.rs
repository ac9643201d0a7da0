//! What one observed change does to the journal, and applying it in one
//! transaction.
//!
//! Observers (dispatcher, poller) first work out a [`ChangeEntries`] — this may read
//! GitHub, e.g. a permission — then [`record`] it: claim the change's dedupe
//! key, perform the entries, mark the delivery processed, commit. A change
//! already claimed is skipped, so a webhook and a poll sighting of one change,
//! or a delivery processed twice, act once.

use autoforge_journal::{
    ChangeClaim, DeliveryId, EventSource, IssueNumber, Journal, JournalError, NewAnswer,
    NewCommandDecision, NewRun, NewRunEvent, RunId,
};
use serde_json::{Value, json};

use super::signal::RunSignal;

/// The first phase of a new run; the driver takes it from there.
pub const FIRST_PHASE: &str = "IMPLEMENT";

/// The journal writes one change causes.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeEntries {
    /// Identifies the change across webhook and poll sightings.
    pub key: String,
    /// Short record of what was decided, stored with the key.
    pub outcome: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// Create a run (first phase) with its `Started` event.
    StartRun {
        repository: String,
        issue: IssueNumber,
        labeled_by: String,
    },
    /// Queue a signal for an existing run; `suffix` keeps several signals of
    /// one change apart.
    Signal {
        run_id: RunId,
        suffix: String,
        signal: RunSignal,
    },
    Decision(NewCommandDecision),
    Audit {
        run_id: Option<RunId>,
        kind: String,
        detail: Value,
    },
    /// Journal a comment that answers this change outside any run; it is
    /// sent after the commit (see `answering`).
    Answer(NewAnswer),
}

impl ChangeEntries {
    pub fn new(key: impl Into<String>, outcome: impl Into<String>) -> ChangeEntries {
        ChangeEntries {
            key: key.into(),
            outcome: outcome.into(),
            entries: Vec::new(),
        }
    }

    pub fn with(mut self, entry: Entry) -> ChangeEntries {
        self.entries.push(entry);
        self
    }

    /// A single signal for `run_id`.
    pub fn signal(key: impl Into<String>, run_id: RunId, signal: RunSignal) -> ChangeEntries {
        let key = key.into();
        ChangeEntries::new(key, "signal").with(Entry::Signal {
            run_id,
            suffix: String::new(),
            signal,
        })
    }
}

/// What applying a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Done {
        started: Option<RunId>,
    },
    /// The change was acted on before; nothing was written except the
    /// delivery's processed mark.
    AlreadySeen,
}

/// Applies `change` in one transaction, marking `delivery` processed in it.
/// With no change (an ignored delivery) only the mark is written.
pub async fn record(
    journal: &Journal,
    change: Option<&ChangeEntries>,
    source: EventSource,
    delivery: Option<DeliveryId>,
) -> Result<Recorded, JournalError> {
    let mut tx = journal.begin().await?;
    let mut applied = Recorded::Done { started: None };
    if let Some(change) = change {
        if tx
            .claim_change(&change.key, source, &change.outcome)
            .await?
            == ChangeClaim::SeenBefore
        {
            applied = Recorded::AlreadySeen;
        } else {
            let mut started = None;
            for entry in &change.entries {
                if let Some(run_id) = apply_step(&mut tx, &change.key, source, entry).await? {
                    started = Some(run_id);
                }
            }
            applied = Recorded::Done { started };
        }
    }
    if let Some(id) = delivery {
        // Another worker finishing it first is harmless: the dedupe key made
        // whichever of us came second a no-op.
        let _first = tx.mark_delivery_processed(id).await?;
    }
    tx.commit().await?;
    Ok(applied)
}

async fn apply_step(
    tx: &mut autoforge_journal::JournalTx,
    key: &str,
    source: EventSource,
    entry: &Entry,
) -> Result<Option<RunId>, JournalError> {
    match entry {
        Entry::StartRun {
            repository,
            issue,
            labeled_by,
        } => {
            let number = *issue;
            let run_id = tx
                .start_run(&NewRun {
                    repository: repository.clone(),
                    epic: None,
                    issue: number,
                    phase: FIRST_PHASE.to_owned(),
                    state: json!({}),
                })
                .await?;
            let signal = RunSignal::Started {
                issue: *issue,
                labeled_by: labeled_by.clone(),
            };
            tx.insert_run_event(&NewRunEvent {
                run_id,
                dedupe_key: key.to_owned(),
                source,
                event: signal.to_json(),
            })
            .await?;
            tx.record_audit_event(
                Some(run_id),
                "trigger_accepted",
                &json!({"actor": labeled_by, "issue": issue, "source": source.as_str()}),
            )
            .await?;
            Ok(Some(run_id))
        }
        Entry::Signal {
            run_id,
            suffix,
            signal,
        } => {
            tx.insert_run_event(&NewRunEvent {
                run_id: *run_id,
                dedupe_key: format!("{key}{suffix}"),
                source,
                event: signal.to_json(),
            })
            .await?;
            Ok(None)
        }
        Entry::Decision(decision) => {
            tx.record_command_decision(decision).await?;
            Ok(None)
        }
        Entry::Audit {
            run_id,
            kind,
            detail,
        } => {
            tx.record_audit_event(*run_id, kind, detail).await?;
            Ok(None)
        }
        Entry::Answer(answer) => {
            // The change's key was just claimed, so this is its first
            // answer; the unique key only guards against a defect.
            let _inserted = tx.insert_answer(answer).await?;
            Ok(None)
        }
    }
}
