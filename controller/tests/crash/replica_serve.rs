//! Replicas (SPEC §6): three `autoforge serve` processes on one Postgres
//! and one fakehub, GitHub's webhooks spread over them by a relay, drive
//! many runs at once. One replica is SIGKILLed while it holds runs, another
//! is SIGSTOPped past its lease and resumed. The journal's lease history
//! (`lease_holdings`) must show one holder per run at a time and every
//! journalled write inside its writer's holding, the paused replica's late
//! writes refused, and fakehub every object once.
//!
//! `AUTOFORGE_REPLICA_RUNS` sets the number of runs (50 unless set;
//! `docs/reliability.md` has the command for the larger size).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use autoforge_journal::{LeaseHolding, RunId, Stage};
use common::relay::Relay;
use common::{Replica, World, WorldOptions, agent_command, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::crash_serve::{comments_exactly_once, get};

/// Short leases, so a dead or paused replica's runs are taken over soon.
const LEASE_SECONDS: u64 = 10;

pub(super) fn config() -> String {
    format!(
        r#"[driver]
lease_seconds = {LEASE_SECONDS}

[agents.profiles.implementer]
command = {implement}

[agents.profiles.reviewer]
command = {review}

[agents.roles]
implement = "implementer"
review = "reviewer"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
        implement = agent_command("phase_implement.sh", &["per_issue", "-"]),
        review = agent_command("phase_review.sh", &["clean", "1"]),
    )
}

fn run_count() -> usize {
    std::env::var("AUTOFORGE_REPLICA_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50)
}

/// The lease owner prefix of a serve process's driver.
fn owner_prefix(pid: u32) -> String {
    format!("driver-{pid}-")
}

/// The active, unfinished runs whose lease `pid`'s driver holds right now.
async fn held_by(world: &World, pid: u32) -> Vec<(RunId, i64)> {
    let prefix = owner_prefix(pid);
    let now = chrono::Utc::now();
    world
        .db
        .journal()
        .list_runs(autoforge_journal::RunFilter::Active, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|run| {
            run.lease_owner
                .as_deref()
                .is_some_and(|owner| owner.starts_with(&prefix))
                && run.lease_expires_at.is_some_and(|at| at > now)
                && run.phase != "READY_FOR_MERGE"
        })
        .map(|run| (run.id, run.fencing_token))
        .collect()
}

/// Waits until `pid`'s driver holds at least one run in the middle of its
/// work and SIGSTOPs it there; returns the runs it holds, which a stopped
/// process can no longer let go of. A holding released between the look
/// and the signal does not count: the process is resumed and the look
/// repeated.
async fn stop_while_holding(world: &World, pid: u32) -> Vec<(RunId, i64)> {
    let process = Pid::from_raw(i32::try_from(pid).unwrap());
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < deadline, "pid {pid} never held a run");
        if held_by(world, pid).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        kill(process, Signal::SIGSTOP).unwrap();
        let held = held_by(world, pid).await;
        if !held.is_empty() {
            return held;
        }
        kill(process, Signal::SIGCONT).unwrap();
    }
}

/// Waits until another worker leased each of `runs` with a higher token.
async fn taken_over(world: &World, runs: &[(RunId, i64)]) {
    for (run, token) in runs {
        eventually(
            Duration::from_secs(120),
            &format!("run {run} taken over"),
            || async {
                let current = world.db.journal().get_run(*run).await.unwrap()?;
                (current.fencing_token > *token).then_some(())
            },
        )
        .await;
    }
}

/// Waits until `runs` runs are in READY_FOR_MERGE and every effect is
/// observed.
pub(super) async fn all_ready(world: &World, runs: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let journal = world.db.journal();
        let all = journal
            .list_runs(autoforge_journal::RunFilter::All, 10_000)
            .await
            .unwrap_or_default();
        let mut ready = 0;
        let mut phases: BTreeMap<String, usize> = BTreeMap::new();
        for run in &all {
            *phases.entry(run.phase.clone()).or_default() += 1;
            if run.phase != "READY_FOR_MERGE" {
                continue;
            }
            let effects = journal.list_effects(run.id).await.unwrap_or_default();
            if !effects.is_empty() && effects.iter().all(|e| e.stage == Stage::Observed) {
                ready += 1;
            }
        }
        if ready == runs && all.len() == runs {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ready} of {runs} runs ready with every effect observed: {phases:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// No two holdings of one run overlap, on the database's clock.
fn holdings_never_overlap(run: RunId, holdings: &[LeaseHolding]) {
    for pair in holdings.windows(2) {
        assert!(
            pair[0].ended_at() <= pair[1].acquired_at,
            "run {run}: {} held it until {} but {} took it at {}",
            pair[0].owner,
            pair[0].ended_at(),
            pair[1].owner,
            pair[1].acquired_at
        );
    }
}

/// Every effect row was last written by a holder inside its holding.
async fn effects_written_inside_their_holdings(
    world: &World,
    run: RunId,
    holdings: &[LeaseHolding],
) {
    let by_token: BTreeMap<i64, &LeaseHolding> =
        holdings.iter().map(|h| (h.fencing_token, h)).collect();
    for effect in world.db.journal().list_effects(run).await.unwrap() {
        let holding = by_token
            .get(&effect.fencing_token)
            .unwrap_or_else(|| panic!("run {run}: no holding for {effect:?}"));
        assert!(
            holding.acquired_at <= effect.updated_at && effect.updated_at <= holding.ended_at(),
            "run {run}: effect {} written at {} outside its holding {holding:?}",
            effect.identity,
            effect.updated_at
        );
    }
}

/// Three replicas, many runs; one replica SIGKILLed while it holds runs,
/// one SIGSTOPped past its lease and resumed; every run finishes with
/// every object once and one holder at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "on a quiet machine the runs finished before a replica was caught holding any, and the test waited over 20 min; run with --ignored replica_"]
async fn replica_three_serve_processes_finish_every_run_once_through_a_kill_and_a_pause() {
    let started = Instant::now();
    let runs = run_count();
    let relay = Relay::start().await;
    let world = World::start_with(WorldOptions {
        config_toml: Some(config()),
        webhook_url: Some(relay.url.clone()),
        ..WorldOptions::default()
    })
    .await;
    relay.add(world.serve_url());
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut replicas: Vec<Replica> = Vec::new();
    for state in &states {
        let replica = world.start_replica_at(state.path()).await;
        relay.add(&replica.url);
        replicas.push(replica);
    }
    let killed_pid = replicas[0].child.id();
    let paused_pid = replicas[1].child.id();

    let owner = world.owner();
    for n in 1..=runs {
        let issue = world.open_issue(&owner, &format!("replica work {n}")).await;
        world.add_label(&owner, issue, "autoforge").await;
    }

    // A SIGKILL no code of the replica sees, while it holds runs mid-work.
    let killed_runs = stop_while_holding(&world, killed_pid).await;
    replicas[0].child.kill().unwrap();
    replicas[0].child.wait().unwrap();
    // A pause past the lease, then the replica goes on as if nothing happened.
    let paused_runs = stop_while_holding(&world, paused_pid).await;
    taken_over(&world, &paused_runs).await;
    let paused = Pid::from_raw(i32::try_from(paused_pid).unwrap());
    kill(paused, Signal::SIGCONT).unwrap();

    all_ready(&world, runs, Duration::from_secs(1800)).await;
    let took = started.elapsed();

    let mut refused_to_paused = 0;
    let mut holdings_total = 0;
    let mut driven_by: BTreeMap<String, usize> = BTreeMap::new();
    let all = world
        .db
        .journal()
        .list_runs(autoforge_journal::RunFilter::All, 10_000)
        .await
        .unwrap();
    assert_eq!(all.len(), runs, "one run per labelled issue");
    for run in &all {
        let holdings = world.db.journal().lease_holdings(run.id).await.unwrap();
        holdings_never_overlap(run.id, &holdings);
        effects_written_inside_their_holdings(&world, run.id, &holdings).await;
        holdings_total += holdings.len();
        for holding in &holdings {
            let pid = holding.owner.split('-').nth(1).unwrap_or_default();
            *driven_by.entry(pid.to_owned()).or_default() += 1;
            if holding.owner.starts_with(&owner_prefix(paused_pid)) {
                refused_to_paused += holding.refused_writes;
            }
        }
        let effects = world.db.journal().list_effects(run.id).await.unwrap();
        assert!(effects.iter().all(|e| e.stage == Stage::Observed));
        comments_exactly_once(&world, &owner, &effects, &format!("run {}", run.id)).await;
    }
    // The runs the dead and the paused replica held went on under others.
    for (run, token) in killed_runs.iter().chain(&paused_runs) {
        let holdings = world.db.journal().lease_holdings(*run).await.unwrap();
        let later: Vec<&LeaseHolding> = holdings
            .iter()
            .filter(|h| h.fencing_token > *token)
            .collect();
        assert!(!later.is_empty(), "run {run} was taken over");
    }
    assert!(
        refused_to_paused > 0,
        "the paused replica's late writes were refused"
    );

    // GitHub saw one PR per run, each from its own branch.
    let pulls = get(
        &world,
        &owner,
        &format!("/repos/{}/pulls?state=all&per_page=100", world.repository()),
    )
    .await;
    let heads: BTreeSet<&str> = pulls
        .iter()
        .filter_map(|p| p["head"]["ref"].as_str())
        .collect();
    assert_eq!(pulls.len(), runs, "one PR per run");
    assert_eq!(heads.len(), runs, "one branch per PR");
    let created = world
        .hub
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pulls") && r.status < 300)
        .count();
    assert_eq!(created, runs, "one PR creation request per run");

    let answered = relay.answered();
    assert!(
        answered.iter().all(|&n| n > 0),
        "every replica took deliveries: {answered:?}"
    );
    eprintln!(
        "replicas: {runs} runs in {:.0} s; {holdings_total} lease holdings {driven_by:?}; \
         killed pid {killed_pid} held {} runs, paused pid {paused_pid} held {} runs and had \
         {refused_to_paused} writes refused; deliveries per replica {answered:?}",
        took.as_secs_f64(),
        killed_runs.len(),
        paused_runs.len(),
    );
    for replica in &mut replicas[1..] {
        assert!(common::terminate(&mut replica.child).success());
    }
}
