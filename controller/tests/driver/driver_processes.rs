//! Two driver processes on one database (docs/reliability.md): both run
//! their worker loop against the same runs at the same time; each records
//! when it held which run, and the parent checks that no two holdings of
//! one run overlapped and that GitHub got every write exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use autoforge::driver::{Driver, DriverConfig, RepositoryAccess, RunHooks, StepRetryPolicy};
use autoforge::github::{GitHubAuth, GitHubClient};
use autoforge_journal::{Journal, RunId};
use common::{OWNER, REPOSITORY, World};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;

const CHILD: &str = "DRIVER_PROCESS_CHILD";

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Appends `run entered left` (wall-clock nanoseconds, one clock for every
/// process on the host) for each holding to a file.
struct HoldingLog {
    file: Mutex<std::fs::File>,
    entered: Mutex<HashMap<RunId, u128>>,
    count: std::sync::atomic::AtomicUsize,
}

impl RunHooks for HoldingLog {
    fn entered(&self, run: RunId) {
        self.entered.lock().unwrap().insert(run, now_ns());
    }

    fn left(&self, run: RunId) {
        let left = now_ns();
        let entered = self.entered.lock().unwrap().remove(&run).unwrap();
        writeln!(self.file.lock().unwrap(), "{} {entered} {left}", run.0).unwrap();
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
#[ignore = "started by two_driver_processes_never_hold_one_run_at_once"]
async fn process_child_runs_the_driver_loop() {
    let var = |name: &str| std::env::var(format!("{CHILD}_{name}")).expect(name);
    let journal = Journal::connect(&SecretString::from(var("DB")))
        .await
        .unwrap();
    let api = GitHubClient::new(
        &var("HUB"),
        GitHubAuth::Token(SecretString::from(var("TOKEN"))),
    )
    .unwrap()
    .installation(0)
    .unwrap();
    let access = RepositoryAccess {
        api,
        repo: REPOSITORY.parse().unwrap(),
        login: OWNER.into(),
        html_base: "https://github.com".into(),
        git: None,
    };
    let config = DriverConfig {
        lease_ttl: Duration::from_secs(30),
        concurrency: 3,
        poll_interval: Duration::from_millis(10),
        idle_recheck: Duration::from_millis(20),
        retry: StepRetryPolicy::default(),
        ..DriverConfig::new(var("WORKER"))
    };
    let log = Arc::new(HoldingLog {
        file: Mutex::new(std::fs::File::create(var("LOG")).unwrap()),
        entered: Mutex::new(HashMap::new()),
        count: std::sync::atomic::AtomicUsize::new(0),
    });
    let (stop_tx, stop) = watch::channel(false);
    let driver = Driver::new(config, journal, [access]).with_hooks(log.clone());
    let running = tokio::spawn(driver.run(stop));
    tokio::time::sleep(Duration::from_millis(var("MILLIS").parse().unwrap())).await;
    // On a loaded machine the runs change hands less often: go on until
    // this process has held runs often enough for the overlap check to
    // mean something (bounded, so a broken driver still ends the test).
    let wanted: usize = var("MIN_HOLDINGS").parse().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while log.count.load(std::sync::atomic::Ordering::SeqCst) < wanted
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_tx.send(true).unwrap();
    running.await.unwrap();
}

fn holdings(path: &std::path::Path) -> Vec<(i64, u128, u128)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let mut next = || parts.next().unwrap();
            (
                next().parse().unwrap(),
                next().parse().unwrap(),
                next().parse().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn two_driver_processes_never_hold_one_run_at_once() {
    const RUNS: u64 = 4;
    let world = World::new(RUNS).await;
    let mut runs = Vec::new();
    for issue in (1..=RUNS).map(autoforge_journal::testing::issue) {
        let run = world.start_run(issue).await;
        world.command(run, issue, "status").await;
        runs.push(run);
    }
    let logs = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    for worker in ["process-a", "process-b"] {
        let child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::common::test_in(module_path!(), "process_child_runs_the_driver_loop")
                    .as_str(),
                "--ignored",
                "--nocapture",
            ])
            .env(format!("{CHILD}_DB"), world.db.url().expose_secret())
            .env(format!("{CHILD}_HUB"), world.hub.base_url())
            .env(format!("{CHILD}_TOKEN"), world.token.expose_secret())
            .env(format!("{CHILD}_WORKER"), worker)
            .env(format!("{CHILD}_LOG"), logs.path().join(worker))
            .env(format!("{CHILD}_MILLIS"), "3000")
            // Each process holds runs more than RUNS times, so together
            // they hand runs over more than twice per run.
            .env(format!("{CHILD}_MIN_HOLDINGS"), (RUNS + 1).to_string())
            .output();
        children.push(tokio::spawn(child));
    }
    for child in children {
        let out = child.await.unwrap().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let a = holdings(&logs.path().join("process-a"));
    let b = holdings(&logs.path().join("process-b"));
    assert!(!a.is_empty() && !b.is_empty(), "both processes drove runs");
    // Idle runs are due again every 20ms, so the runs change hands often;
    // each process ran until it held runs more than RUNS times, so the runs
    // were taken more than twice each on average (overlaps need handoffs).
    assert!(
        a.len() + b.len() > 2 * RUNS as usize,
        "{} holdings",
        a.len() + b.len()
    );
    let all: Vec<_> = a.iter().chain(b.iter()).collect();
    for (i, first) in all.iter().enumerate() {
        for second in &all[i + 1..] {
            let overlap = first.0 == second.0 && first.1 < second.2 && second.1 < first.2;
            assert!(!overlap, "run {} was held twice at once", first.0);
        }
    }
    for (issue, run) in (1..=RUNS).map(autoforge_journal::testing::issue).zip(&runs) {
        assert_eq!(world.phase(*run).await, "IMPLEMENT");
        assert_eq!(world.unconsumed_events(*run).await, 0);
        assert_eq!(world.status_comments(issue).await.len(), 1, "issue {issue}");
        assert_eq!(
            world.comments_with(issue, "autoforge-reply").await,
            1,
            "issue {issue}"
        );
    }
}
