//! Journal tests on a real Postgres: each test gets its own database from
//! `TestDatabase::fresh` (an ephemeral local cluster unless DATABASE_URL is
//! set).

#![allow(clippy::unwrap_used)]

mod deliveries;
mod effects;
mod group_commit;
mod holdings;
mod launches;
mod leases;
mod records;
mod schema;
mod transactions;

use std::time::Duration;

use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EffectKind, Journal, Lease, NewEffect, NewRun, Run};
use serde_json::json;

pub const OWNER: &str = "replica-a";
pub const LONG: Duration = Duration::from_secs(300);

pub fn new_run(issue: u64) -> NewRun {
    NewRun {
        repository: "acme/widgets".to_owned(),
        epic: None,
        issue: autoforge_journal::testing::issue(issue),
        phase: "INITIALIZING".to_owned(),
        state: json!({"round": 0}),
    }
}

pub fn intent(kind: EffectKind, identity: &str) -> NewEffect {
    NewEffect {
        kind,
        identity: identity.to_owned(),
        target: "acme/widgets#7".to_owned(),
        precondition: json!({"head": "0".repeat(40)}),
        payload: format!("{{\"body\":\"{identity}\"}}").into_bytes(),
        completion: json!({"marker": identity}),
    }
}

/// A run and a lease on it.
pub async fn leased_run(db: &TestDatabase, issue: u64) -> (Run, Lease) {
    let journal = db.journal();
    let run = journal.create_run(&new_run(issue)).await.unwrap();
    let lease = journal
        .acquire_lease_for(run.id, OWNER, LONG)
        .await
        .unwrap()
        .expect("a fresh run is free");
    (run, lease)
}

/// Commits one transition with the given intents; returns the effect ids.
pub async fn transition(
    journal: &Journal,
    lease: &Lease,
    expected_version: i64,
    phase: &str,
    effects: &[NewEffect],
) -> (i64, Vec<autoforge_journal::EffectId>) {
    let mut tx = journal.begin().await.unwrap();
    let committed = tx
        .commit_transition(
            lease,
            expected_version,
            phase,
            &json!({"phase": phase}),
            effects,
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    committed
}
