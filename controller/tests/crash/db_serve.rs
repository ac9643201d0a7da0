//! The database misbehaving, on the real binary: a Postgres that is down
//! when `serve` starts, and one restarted while runs are under way. The
//! cluster is the test's own (`common::cluster`), so stopping it touches
//! no other test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cluster::TestCluster;
use common::{World, WorldOptions, eventually, free_port};
use secrecy::ExposeSecret;

use super::crash_serve::{comments_exactly_once, get};
use super::replica_serve::{all_ready, config};

async fn probe(http: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let answer = http.get(url).send().await.ok()?;
    let status = answer.status().as_u16();
    Some((status, answer.text().await.unwrap_or_default()))
}

/// `serve` pointed at a Postgres that is down waits for it: `/readyz`
/// answers 503 saying why, a delivery is refused with 503 (never stored
/// half-way), a log line says it is waiting; once the server is up, serve
/// migrates and becomes ready on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_unreachable_at_start_serve_waits_says_why_then_becomes_ready() {
    let world = World::start().await;
    let mut cluster = TestCluster::start().await;
    cluster.stop().await;

    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = state.path().join("serve.log");
    let mut command = world.serve_command_at(state.path(), port);
    command
        .env("DATABASE_URL", cluster.url().expose_secret())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut serve = command.spawn().expect("spawn autoforge serve");

    let base = format!("http://127.0.0.1:{port}");
    let readyz = format!("{base}/readyz");
    let (status, reason) = eventually(Duration::from_secs(30), "an answer on /readyz", || {
        probe(&world.http, &readyz)
    })
    .await;
    assert_eq!(status, 503, "{reason}");
    assert!(
        reason.contains("database unreachable") && reason.contains("waiting"),
        "{reason}"
    );
    let healthz = probe(&world.http, &format!("{base}/healthz")).await;
    assert_eq!(healthz.map(|(s, _)| s), Some(200));
    let refused = world
        .http
        .post(format!("{base}/webhook"))
        .header("X-GitHub-Event", "ping")
        .header("X-GitHub-Delivery", "while-the-database-is-down")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    eventually(Duration::from_secs(30), "the waiting log line", || async {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("the database does not answer yet; serve waits for it")
            .then_some(())
    })
    .await;
    assert!(
        matches!(serve.try_wait(), Ok(None)),
        "serve must keep waiting, not exit"
    );

    cluster.start_again().await;
    eventually(
        Duration::from_secs(90),
        "serve ready once Postgres is up",
        || async {
            probe(&world.http, &format!("{base}/readyz"))
                .await
                .filter(|(status, _)| *status == 200)
        },
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("the database answers; serve starts"),
        "{text}"
    );
    assert!(
        !text.contains(cluster.url().expose_secret()),
        "the URL with its password is never logged"
    );
    assert!(common::terminate(&mut serve).success());
}

/// Postgres stopped and started again while runs are under way: every
/// delivery GitHub sent meanwhile is answered 503 (none is acknowledged
/// without its row), redelivery brings them back, and every run finishes
/// with every object once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_restarted_under_load_refuses_deliveries_meanwhile_and_every_run_finishes_once() {
    const RUNS: u64 = 8;
    let mut cluster = TestCluster::start().await;
    let world = World::start_with(WorldOptions {
        config_toml: Some(config()),
        database_server: Some(cluster.url().clone()),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let mut issues = Vec::new();
    for n in 1..=RUNS {
        issues.push(world.open_issue(&owner, &format!("outage work {n}")).await);
    }
    let (before, during) = issues.split_at(issues.len() / 2);
    for issue in before {
        world.add_label(&owner, *issue, "autoforge").await;
    }
    eventually(Duration::from_secs(60), "the first runs", || async {
        let runs = world
            .db
            .journal()
            .list_runs(autoforge_journal::RunFilter::All, 100)
            .await
            .ok()?;
        (runs.len() == before.len()).then_some(())
    })
    .await;

    cluster.stop().await;
    let down = Instant::now();
    let seen_before = world.hub.deliveries().len();
    for issue in during {
        world.add_label(&owner, *issue, "autoforge").await;
    }
    // Down for longer than a lease, so the runs held when it went are
    // taken again from scratch.
    let refused_while_down = eventually(Duration::from_secs(60), "refused deliveries", || async {
        let refused: Vec<String> = world.hub.deliveries()[seen_before..]
            .iter()
            .filter(|d| d.status_code == 503)
            .map(|d| d.guid.clone())
            .collect();
        (refused.len() >= during.len()).then_some(refused)
    })
    .await;
    if let Some(rest) = Duration::from_secs(12).checked_sub(down.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    cluster.start_again().await;

    all_ready(&world, RUNS as usize, Duration::from_secs(900)).await;

    // Never a 2xx without a durable row, and the refused ones came back.
    let journal = world.db.journal();
    let deliveries = world.hub.deliveries();
    let mut stored: BTreeSet<String> = BTreeSet::new();
    for delivery in &deliveries {
        if journal
            .get_delivery(&delivery.guid)
            .await
            .unwrap()
            .is_some()
        {
            stored.insert(delivery.guid.clone());
        }
    }
    for delivery in &deliveries {
        if (200..300).contains(&delivery.status_code) {
            assert!(
                stored.contains(&delivery.guid),
                "{} answered {} without a row",
                delivery.guid,
                delivery.status_code
            );
        }
    }
    for guid in &refused_while_down {
        assert!(stored.contains(guid), "refused delivery {guid} came back");
    }
    let runs = world
        .db
        .journal()
        .list_runs(autoforge_journal::RunFilter::All, 100)
        .await
        .unwrap();
    assert_eq!(runs.len(), RUNS as usize);
    for run in &runs {
        let effects = world.db.journal().list_effects(run.id).await.unwrap();
        comments_exactly_once(&world, &owner, &effects, &format!("run {}", run.id)).await;
    }
    let pulls = get(
        &world,
        &owner,
        &format!("/repos/{}/pulls?state=all&per_page=100", world.repository()),
    )
    .await;
    assert_eq!(pulls.len(), RUNS as usize, "one PR per run");
    eprintln!(
        "db restart: {} deliveries refused with 503 while Postgres was down, {} in all, \
         every run finished",
        refused_while_down.len(),
        deliveries.len()
    );
}
