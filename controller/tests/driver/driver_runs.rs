//! The run driver against a real Postgres and fakehub: starting a run,
//! recovery of a crashed predecessor's effects, stale lease holders, and
//! two drivers sharing one database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use autoforge::driver::RunEnd;
use autoforge::effects::{PlanContext, plan};
use autoforge::intake::RunSignal;
use autoforge::machine::{EffectIntent, Reply, RunState};
use autoforge_journal::Stage;
use common::{OverlapProbe, World};
use fakehub::{FaultKind, FaultRule};
use tokio::sync::watch;

#[tokio::test]
async fn a_started_run_enters_implement_and_posts_exactly_one_status_comment() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    let ended = world.driver("w1").drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    assert_eq!(world.phase(run).await, "IMPLEMENT");
    assert_eq!(world.unconsumed_events(run).await, 0);
    let state: RunState = serde_json::from_value(
        world
            .db
            .journal()
            .get_run(run)
            .await
            .unwrap()
            .unwrap()
            .state,
    )
    .unwrap();
    assert_eq!(state.base_branch, "main");
    assert_eq!(state.awaiting.name(), "agent");
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
    let effects = world.db.journal().list_effects(run).await.unwrap();
    assert!(effects.iter().all(|e| e.stage == Stage::Observed));

    // Driving again finds nothing to do and writes nothing more.
    let writes = world.all_writes();
    tokio::time::sleep(Duration::from_millis(60)).await;
    world.driver("w1").drive_due_runs(5).await.unwrap();
    assert_eq!(world.all_writes(), writes);
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn recovery_drives_a_crashed_holders_pending_effect_before_any_new_event() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world.driver("w1").drive_due_runs(5).await.unwrap();
    let journal = world.db.journal();

    // A holder commits a transition with an intent and dies before sending.
    let crashed = journal
        .acquire_lease_for(run, "crashed", Duration::from_millis(200))
        .await
        .unwrap()
        .expect("lease");
    let current = journal.get_run(run).await.unwrap().unwrap();
    let bodies = BTreeMap::new();
    let repo = world.repo.clone();
    let context = PlanContext {
        run_id: run,
        repo: &repo,
        html_base: "https://github.com",
        default_branch: "main",
        bodies: &bodies,
        diffs: &autoforge::effects::NO_DIFFS,
    };
    let reply = plan(
        &EffectIntent::PostCommandReply {
            thread: autoforge_journal::testing::issue(1),
            comment_id: 4242,
            reply: Reply::Accepted {
                command: "status".into(),
                detail: "noted".into(),
            },
        },
        &context,
    )
    .unwrap();
    let mut tx = journal.begin().await.unwrap();
    let (_, ids) = tx
        .commit_transition(
            &crashed,
            current.version,
            &current.phase,
            &current.state,
            &[reply],
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Meanwhile the label is removed.
    world
        .signal(
            run,
            "unlabeled:1",
            RunSignal::TriggerLabelRemoved {
                issue: autoforge_journal::testing::issue(1),
                by: "alice".into(),
            },
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let ended = world.driver("w2").drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Terminal)]);
    assert_eq!(world.phase(run).await, "STOPPED");
    let effects = journal.list_effects(run).await.unwrap();
    let recovered = effects.iter().find(|e| e.id == ids[0]).unwrap();
    assert_eq!(recovered.stage, Stage::Observed);
    let stopping = effects
        .iter()
        .filter(|e| e.phase_entry > recovered.phase_entry)
        .collect::<Vec<_>>();
    assert!(
        !stopping.is_empty(),
        "the stop transition journalled its status edit"
    );
    for later in stopping {
        assert!(
            recovered.updated_at <= later.created_at,
            "the pending reply settled before the label removal was decided"
        );
        assert_eq!(later.stage, Stage::Observed);
    }
    let replies = world
        .api
        .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.body.contains("command_comment_id=4242") || c.body.contains("4242"))
        .count();
    assert_eq!(replies, 1);
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn a_stale_lease_holder_is_refused_and_sends_nothing() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    let journal = world.db.journal();
    let stale = journal
        .acquire_lease_for(run, "paused", Duration::from_millis(100))
        .await
        .unwrap()
        .expect("lease");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let successor = journal
        .acquire_lease_for(run, "successor", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("takeover");
    assert!(successor.fencing_token > stale.fencing_token);

    let (_keep, stop) = watch::channel(false);
    let ended = world.driver("paused").drive_leased(stale, stop).await;

    assert_eq!(ended, RunEnd::LostLease);
    assert_eq!(world.all_writes(), 1, "only the test's own issue creation");
    assert!(journal.list_effects(run).await.unwrap().is_empty());
    assert_eq!(
        world.unconsumed_events(run).await,
        1,
        "the event is not consumed"
    );
    let held = journal.get_run(run).await.unwrap().unwrap();
    assert_eq!(held.lease_owner.as_deref(), Some("successor"));
    assert_eq!(held.fencing_token, successor.fencing_token);
}

#[tokio::test]
async fn two_drivers_on_one_database_never_drive_one_run_at_once() {
    const RUNS: u64 = 6;
    let world = World::new(RUNS).await;
    let mut runs = Vec::new();
    for issue in (1..=RUNS).map(autoforge_journal::testing::issue) {
        runs.push(world.start_run(issue).await);
    }
    let probe = Arc::new(OverlapProbe::default());
    let (stop_tx, stop) = watch::channel(false);
    let first = tokio::spawn(
        world
            .driver("first")
            .with_hooks(probe.clone())
            .run(stop.clone()),
    );
    let second = tokio::spawn(world.driver("second").with_hooks(probe.clone()).run(stop));

    // Idle runs are due again every 50ms, so both drivers keep leasing
    // the same runs over and over while this waits.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut started = 0;
        for run in &runs {
            if world.phase(*run).await == "IMPLEMENT" {
                started += 1;
            }
        }
        if started == runs.len() && probe.entries.load(Ordering::SeqCst) > 4 * RUNS as i32 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "runs did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_tx.send(true).unwrap();
    first.await.unwrap();
    second.await.unwrap();

    assert_eq!(probe.highest.load(Ordering::SeqCst), 1);
    for issue in (1..=RUNS).map(autoforge_journal::testing::issue) {
        assert_eq!(world.status_comments(issue).await.len(), 1, "issue {issue}");
    }
    for run in &runs {
        assert_eq!(world.unconsumed_events(*run).await, 0);
    }
}

#[tokio::test]
async fn github_outages_back_off_with_the_event_kept_then_reach_the_machine_and_recover() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world.hub.set_faults(vec![FaultRule::on(
        "GET",
        "/repos/{owner}/{repo}",
        FaultKind::Status { status: 503 },
    )]);
    let journal = world.db.journal();
    let driver = world.driver("w1");

    // The configured budget is two backoffs; the third failure goes to the
    // machine, which cannot retry a start and refuses it without a change.
    for attempt in 1..=3 {
        let before = chrono::Utc::now();
        let ended = driver.drive_due_runs(5).await.unwrap();
        assert_eq!(ended, vec![(run, RunEnd::Backoff)], "attempt {attempt}");
        let held = journal.get_run(run).await.unwrap().unwrap();
        assert!(
            held.wake_at > before,
            "attempt {attempt}: a pause is scheduled"
        );
        assert!(
            held.lease_owner.is_none(),
            "attempt {attempt}: the lease is given back"
        );
        assert_eq!(world.unconsumed_events(run).await, 1, "attempt {attempt}");
        assert!(journal.list_effects(run).await.unwrap().is_empty());
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let refused = journal
        .list_audit_events(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "event_refused" && e.detail["event"] == "transient_failure")
        .count();
    assert_eq!(refused, 1);

    world.hub.set_faults(Vec::new());
    let ended = driver.drive_due_runs(5).await.unwrap();
    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    assert_eq!(world.phase(run).await, "IMPLEMENT");
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn a_spent_rate_limit_budget_defers_the_run_to_the_reset_without_spending_its_retries() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    // The installation's hourly budget is gone for the next half hour: far
    // longer than the client waits in-task.
    world.hub.set_faults(vec![
        FaultRule::on(
            "GET",
            "/repos/{owner}/{repo}",
            FaultKind::PrimaryExhausted {
                reset_seconds: 1800,
            },
        )
        .times(1),
    ]);
    let journal = world.db.journal();
    let driver = world.driver("w1");

    // More attempts than the retry budget (two backoffs): each one waits
    // for the reset again, and none reaches the machine as a failure.
    for attempt in 1..=4 {
        let before = chrono::Utc::now();
        let requests = world.hub.requests().len();
        let ended = driver.drive_due_runs(5).await.unwrap();
        assert_eq!(ended, vec![(run, RunEnd::Backoff)], "attempt {attempt}");
        let held = journal.get_run(run).await.unwrap().unwrap();
        assert!(
            held.wake_at > before + chrono::Duration::seconds(1700),
            "attempt {attempt}: due again at the reset, not after a backoff: {}",
            held.wake_at
        );
        assert!(held.lease_owner.is_none(), "attempt {attempt}");
        assert_eq!(world.unconsumed_events(run).await, 1, "attempt {attempt}");
        if attempt > 1 {
            // The closed gate refuses in the controller: GitHub sees nothing.
            assert_eq!(world.hub.requests().len(), requests, "attempt {attempt}");
        }
        // Until the reset the run is not due: nothing drives it.
        assert!(driver.drive_due_runs(5).await.unwrap().is_empty());
        // Make it due now, as if the reset had come while the gate still
        // holds (a clock ahead of GitHub's).
        let lease = journal
            .acquire_lease_for(run, "operator", Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        journal
            .schedule_wake(&lease, chrono::Utc::now())
            .await
            .unwrap();
        journal.release_lease(&lease).await.unwrap();
    }
    let failures = journal
        .list_audit_events(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.detail["event"] == "transient_failure")
        .count();
    assert_eq!(failures, 0, "waiting for GitHub's budget is no failure");
    assert!(journal.list_effects(run).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unblock_command_is_decided_on_a_fresh_read_of_github() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    let driver = world.driver("w1");
    driver.drive_due_runs(5).await.unwrap();
    // The observers saw the issue closed; on GitHub it is open again.
    world
        .signal(
            run,
            "closed:1",
            RunSignal::IssueClosed {
                issue: autoforge_journal::testing::issue(1),
            },
        )
        .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    driver.drive_due_runs(5).await.unwrap();
    assert_eq!(world.phase(run).await, "BLOCKED");

    let comment = world
        .command(run, autoforge_journal::testing::issue(1), "unblock")
        .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    driver.drive_due_runs(5).await.unwrap();

    assert_eq!(world.phase(run).await, "IMPLEMENT");
    assert_eq!(world.unconsumed_events(run).await, 0);
    assert_eq!(world.reactions_on(comment).await, 1);
    assert_eq!(
        world
            .comments_with(autoforge_journal::testing::issue(1), "autoforge-reply")
            .await,
        1
    );
    assert_eq!(
        world
            .status_comments(autoforge_journal::testing::issue(1))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn a_stale_holder_cannot_consume_an_event_it_only_acknowledges() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;
    world.driver("w1").drive_due_runs(5).await.unwrap();
    // A reopening of an open issue is acknowledged without a transition.
    world
        .signal(
            run,
            "reopened:1",
            RunSignal::IssueReopened {
                issue: autoforge_journal::testing::issue(1),
            },
        )
        .await;
    let journal = world.db.journal();
    let stale = journal
        .acquire_lease_for(run, "paused", Duration::from_millis(100))
        .await
        .unwrap()
        .expect("lease");
    tokio::time::sleep(Duration::from_millis(200)).await;
    journal
        .acquire_lease_for(run, "successor", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("takeover");
    let writes = world.all_writes();

    let (_keep, stop) = watch::channel(false);
    let ended = world.driver("paused").drive_leased(stale, stop).await;

    assert_eq!(ended, RunEnd::LostLease);
    assert_eq!(world.unconsumed_events(run).await, 1);
    assert_eq!(world.all_writes(), writes);
    let acknowledged = journal
        .list_audit_events(run)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == "run_event_not_driven")
        .count();
    assert_eq!(acknowledged, 0);
}

#[tokio::test]
async fn the_worker_loop_stops_when_asked_and_when_nobody_can_ask_any_more() {
    let world = World::new(1).await;
    let run = world.start_run(autoforge_journal::testing::issue(1)).await;

    let (stop_tx, stop) = watch::channel(false);
    let running = tokio::spawn(world.driver("w1").run(stop));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while world.phase(run).await != "IMPLEMENT" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("stops when asked")
        .unwrap();

    let (stop_tx, stop) = watch::channel(false);
    drop(stop_tx);
    tokio::time::timeout(Duration::from_secs(10), world.driver("w2").run(stop))
        .await
        .expect("stops once the sender is gone");
}
