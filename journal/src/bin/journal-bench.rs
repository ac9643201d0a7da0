//! Journal latency benchmark on the managed, socket-only local Postgres with
//! fsync on (the product's default database). Measures, one operation at a
//! time, the latency of:
//! - committing a transition with three effect intents (BEGIN, one
//!   statement, COMMIT),
//! - marking an effect attempted, and marking it observed (one statement
//!   each, autocommitted),
//! - inserting a webhook delivery (ingress' only database call).
//!
//! It also times a one-row durable insert (an audit event) as the baseline:
//! every committed write waits for one WAL flush, so that row is the floor
//! the disk sets, and the difference is what the journal itself costs.
//!
//! Finally it measures throughput of delivery inserts from 64 concurrent
//! tasks sharing one `Journal` (what ingress does under a burst), which
//! depends on Postgres' group commit and the pool size.
//!
//! Usage: `journal-bench [--no-fsync] [ITERATIONS]` (default 2000).
//! `--no-fsync` runs the cluster with fsync off, which removes the disk from
//! the numbers and leaves the journal's own CPU and round-trip cost.
//! Prints p50, p99, max and mean per operation.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use autoforge_journal::{EffectId, EffectKind, Journal, NewDelivery, NewEffect, NewRun};
use serde_json::json;

const WARMUP: usize = 100;

#[tokio::main]
async fn main() -> Result<()> {
    let mut iterations: usize = 2000;
    let mut fsync = true;
    for arg in std::env::args().skip(1) {
        if arg == "--no-fsync" {
            fsync = false;
        } else {
            iterations = arg.parse().context("ITERATIONS must be a number")?;
        }
    }
    anyhow::ensure!(iterations > 0, "ITERATIONS must be at least 1");
    let dir = tempfile::Builder::new()
        .prefix("journal-bench-")
        .tempdir_in("/tmp")
        .context("create a scratch directory")?;
    let root = dir.path().join("postgres");
    let options = LocalPgOptions {
        stop_on_drop: true,
        ..if fsync {
            LocalPgOptions::persistent()
        } else {
            LocalPgOptions::ephemeral()
        }
    };
    let server = tokio::task::spawn_blocking(move || LocalPostgres::start(&root, options))
        .await?
        .context("start the local Postgres")?;
    let journal = Journal::connect(&server.database_url()).await?;
    journal.migrate().await?;

    let report = run(&journal, iterations).await;
    let burst = concurrent_inserts(&journal, BURST_TASKS, BURST_INSERTS).await;
    journal.close().await;
    tokio::task::spawn_blocking(move || server.stop())
        .await?
        .context("stop the local Postgres")?;
    let report = report?;
    let (burst_elapsed, burst_latencies) = burst?;

    println!(
        "journal-bench: local Postgres (Unix socket, fsync={}), {iterations} iterations each, sequential",
        if fsync { "on" } else { "off" }
    );
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>9}",
        "operation", "p50 ms", "p99 ms", "max ms", "mean ms"
    );
    for (name, samples) in report {
        let stats = Stats::of(samples);
        println!(
            "{name:<40} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            ms(stats.p50),
            ms(stats.p99),
            ms(stats.max),
            ms(stats.mean)
        );
    }
    let burst = Stats::of(burst_latencies);
    println!(
        "\n{BURST_INSERTS} delivery inserts from {BURST_TASKS} concurrent tasks: {:.0} inserts/s \
         (p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms per insert)",
        BURST_INSERTS as f64 / burst_elapsed.as_secs_f64(),
        ms(burst.p50),
        ms(burst.p99),
        ms(burst.max)
    );
    Ok(())
}

const BURST_TASKS: usize = 64;
const BURST_INSERTS: usize = 20_000;

/// `total` inserts spread over `tasks` tasks; returns the wall time and
/// every insert's latency.
async fn concurrent_inserts(
    journal: &Journal,
    tasks: usize,
    total: usize,
) -> Result<(Duration, Vec<Duration>)> {
    let payload = std::sync::Arc::new(vec![b'x'; 8 * 1024]);
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let journal = journal.clone();
            let payload = payload.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for i in (task..total).step_by(tasks) {
                    let delivery = NewDelivery {
                        delivery_id: format!("burst-{i}"),
                        event: "issue_comment".to_owned(),
                        action: Some("created".to_owned()),
                        repository: Some("bench/repo".to_owned()),
                        installation_id: Some(1),
                        payload: payload.to_vec(),
                    };
                    let one = Instant::now();
                    journal.insert_delivery(&delivery).await?;
                    latencies.push(one.elapsed());
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(total);
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok((started.elapsed(), latencies))
}

async fn run(journal: &Journal, iterations: usize) -> Result<Vec<(&'static str, Vec<Duration>)>> {
    let run = journal
        .create_run(&NewRun {
            repository: "bench/repo".to_owned(),
            epic: None,
            issue: autoforge_journal::IssueNumber::new(1)?,
            phase: "INITIALIZING".to_owned(),
            state: json!({"round": 0}),
        })
        .await?;
    let lease = journal
        .acquire_lease_for(run.id, "bench", Duration::from_secs(3600))
        .await?
        .context("lease the benchmark run")?;

    let mut baseline = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let started = Instant::now();
        journal
            .record_audit_event(None, "bench", &json!({ "i": i }))
            .await?;
        if i >= WARMUP {
            baseline.push(started.elapsed());
        }
    }

    let mut version = run.version;
    let mut effect_ids: Vec<EffectId> = Vec::new();
    let mut transitions = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let state = json!({"round": i, "head": "0123456789abcdef0123456789abcdef01234567"});
        let effects = intents(i);
        let started = Instant::now();
        let mut tx = journal.begin().await?;
        let (new_version, ids) = tx
            .commit_transition(&lease, version, "REVIEW", &state, &effects)
            .await?;
        tx.commit().await?;
        let elapsed = started.elapsed();
        version = new_version;
        if i >= WARMUP {
            transitions.push(elapsed);
            effect_ids.extend(ids);
        }
    }

    let targets = &effect_ids[..iterations];
    let mut attempted = Vec::with_capacity(iterations);
    for id in targets {
        let started = Instant::now();
        journal.mark_attempted(&lease, *id).await?;
        attempted.push(started.elapsed());
    }
    let mut observed = Vec::with_capacity(iterations);
    for id in targets {
        let read_back = json!({"id": id.0, "url": "https://example.invalid/x"});
        let started = Instant::now();
        journal.mark_observed(&lease, *id, &read_back).await?;
        observed.push(started.elapsed());
    }
    let mut deliveries = Vec::with_capacity(iterations);
    let payload = vec![b'x'; 8 * 1024];
    for i in 0..iterations {
        let delivery = NewDelivery {
            delivery_id: format!("bench-{i}"),
            event: "issue_comment".to_owned(),
            action: Some("created".to_owned()),
            repository: Some("bench/repo".to_owned()),
            installation_id: Some(1),
            payload: payload.clone(),
        };
        let started = Instant::now();
        journal.insert_delivery(&delivery).await?;
        deliveries.push(started.elapsed());
    }
    Ok(vec![
        ("baseline: one-row durable insert", baseline),
        ("transition + 3 effect intents (commit)", transitions),
        ("mark attempted", attempted),
        ("mark observed", observed),
        ("insert delivery (8 KiB payload)", deliveries),
    ])
}

fn intents(i: usize) -> Vec<NewEffect> {
    [
        (EffectKind::PostComment, "ai-review-result"),
        (EffectKind::EditStatusComment, "autoforge-status"),
        (EffectKind::SetLabels, "labels"),
    ]
    .into_iter()
    .map(|(kind, identity)| NewEffect {
        kind,
        identity: format!("{identity}:{i}"),
        target: "bench/repo#1".to_owned(),
        precondition: json!({"pr_head": "0123456789abcdef0123456789abcdef01234567"}),
        payload: vec![b'b'; 2048],
        completion: json!({"marker": identity}),
    })
    .collect()
}

struct Stats {
    p50: Duration,
    p99: Duration,
    max: Duration,
    mean: Duration,
}

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Stats {
        samples.sort_unstable();
        let at = |q: f64| {
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1]
        };
        let total: Duration = samples.iter().sum();
        Stats {
            p50: at(0.50),
            p99: at(0.99),
            max: samples.last().copied().unwrap_or_default(),
            mean: total / u32::try_from(samples.len().max(1)).unwrap_or(u32::MAX),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
