//! The metrics recorded by the serve loops and the effect executor, seen
//! through the process-wide recorder: dispatch outcomes, the active-runs
//! gauge refreshed by a poller pass, and effect drives.
//!
//! Tests in this binary run in parallel on one recorder, so counters are
//! compared as deltas; only the poller test sets the active-runs gauge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::exposition;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use autoforge::commands::OperatorPolicy;
use autoforge::effects::DriveOutcome;
use autoforge::github::{BackoffPolicy, ClientOptions, GitHubAuth, GitHubClient};
use autoforge::intake::{Dispatcher, GitHubAccess, Poller};
use autoforge::machine::{EffectIntent, Reply};
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{Journal, NewDelivery, NewRun};
use exposition::{scrape, value_of};
use secrecy::SecretString;
use serde_json::json;

const PROCESSED: &str = "autoforge_deliveries_processed_total";
const FAILED: &str = "autoforge_deliveries_failed_total";

/// GitHub access through a token to an address where nothing listens, so
/// any GitHub read fails fast as a transport error.
fn unreachable_github(trigger_label: &str) -> GitHubAccess {
    let options = ClientOptions {
        retry: BackoffPolicy {
            max_attempts: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        },
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let client = GitHubClient::with_options(
        "http://127.0.0.1:9",
        GitHubAuth::Token(SecretString::from("token-never-sent".to_owned())),
        options,
    )
    .unwrap();
    GitHubAccess::from_parts(
        client,
        "autoforge-metrics".into(),
        OperatorPolicy::default(),
        trigger_label.into(),
        vec![],
        false,
    )
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/github/webhooks")
        .join(name);
    std::fs::read(path).unwrap()
}

async fn store(journal: &Journal, delivery_id: &str, event: &str, payload: Vec<u8>) {
    journal
        .insert_delivery(&NewDelivery {
            delivery_id: delivery_id.into(),
            event: event.into(),
            action: None,
            repository: None,
            installation_id: None,
            payload,
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dispatch_outcomes_are_counted_as_ignored_retry_and_gave_up() {
    let db = TestDatabase::fresh().await;
    // The fixture's label is the trigger, so the dispatcher must ask GitHub
    // who labelled the issue, and GitHub is unreachable: a transient failure.
    let labelled = fixture("issues.labeled.9.json");
    let label: serde_json::Value = serde_json::from_slice(&labelled).unwrap();
    let trigger = label["label"]["name"].as_str().unwrap();
    let dispatcher = Dispatcher {
        journal: db.journal().clone(),
        access: unreachable_github(trigger),
        worker: "metrics-test".into(),
        wakeup: std::sync::Arc::new(tokio::sync::Notify::new()),
        notifier: std::sync::Arc::new(autoforge::driver::RunNotifier::default()),
    };
    store(db.journal(), "m-ping", "ping", fixture("ping.event.0.json")).await;
    store(db.journal(), "m-labelled", "issues", labelled).await;
    store(
        db.journal(),
        "m-broken",
        "issues",
        br#"{"action":"labeled","issue":{}}"#.to_vec(),
    )
    .await;

    let before = scrape();
    let claimed = db
        .journal()
        .claim_deliveries("metrics-test", 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    for delivery in &claimed {
        dispatcher.dispatch_one(delivery).await;
    }
    let after = scrape();
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value_of(&after, name, labels) - value_of(&before, name, labels)
    };
    let ping = ("event", "ping");
    let issues = ("event", "issues");
    assert_eq!(delta(PROCESSED, &[ping, ("outcome", "ignored")]), 1.0);
    assert_eq!(delta(FAILED, &[issues, ("outcome", "retry")]), 1.0);
    assert_eq!(delta(FAILED, &[issues, ("outcome", "gave_up")]), 1.0);
    assert_eq!(delta(FAILED, &[ping, ("outcome", "retry")]), 0.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_pass_sets_active_runs_per_phase_and_zeroes_emptied_phases() {
    let db = TestDatabase::fresh().await;
    let journal = db.journal();
    let mut runs = Vec::new();
    for (issue, phase) in [(1, "IMPLEMENT"), (2, "IMPLEMENT"), (3, "REVIEW")] {
        let run = journal
            .create_run(&NewRun {
                repository: "octo/widgets".into(),
                epic: None,
                issue: autoforge_journal::testing::issue(issue),
                phase: phase.into(),
                state: json!({}),
            })
            .await
            .unwrap();
        runs.push(run);
    }
    let mut poller = Poller::new(
        journal.clone(),
        unreachable_github("autoforge"),
        Duration::from_secs(60),
    );
    // Recording is a no-op until the recorder exists.
    autoforge::metrics::install().unwrap();
    poller.pass().await.unwrap();
    let samples = scrape();
    let phase = |name: &str| value_of(&samples, "autoforge_active_runs", &[("phase", name)]);
    assert_eq!(phase("IMPLEMENT"), 2.0);
    assert_eq!(phase("REVIEW"), 1.0);
    assert_eq!(phase("FIX"), 0.0);
    assert!(
        samples
            .iter()
            .any(|s| s.name == "autoforge_active_runs" && s.labels["phase"] == "FIX"),
        "emptied phases are exported as zero, not left out"
    );
    assert!(
        !samples
            .iter()
            .any(|s| s.name == "autoforge_active_runs" && s.labels["phase"] == "DONE"),
        "terminal phases are not active"
    );
}

#[tokio::test]
async fn driving_an_effect_counts_its_kind_and_outcome() {
    let mut world = common::World::with_leased_run().await;
    assert_eq!(
        world.human_issue("Add widgets", "please").await,
        autoforge_journal::testing::issue(1)
    );
    let intent = EffectIntent::PostCommandReply {
        thread: autoforge_journal::testing::issue(1),
        comment_id: 41,
        reply: Reply::Accepted {
            command: "retry".into(),
            detail: "the phase is entered again".into(),
        },
    };
    let planned = world.plan(&intent, &BTreeMap::new());
    let [row] = world.journal(vec![planned]).await.try_into().unwrap();
    let labels = [("kind", row.kind.as_str()), ("outcome", "observed")];
    let before = value_of(&scrape(), "autoforge_effects_driven_total", &labels);
    let outcome = world.drive(&world.executor(), row.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let after = value_of(&scrape(), "autoforge_effects_driven_total", &labels);
    assert_eq!(after - before, 1.0);
}
