//! webhook-bench: how fast `/webhook` stores signed deliveries durably.
//!
//! Starts a managed local Postgres with fsync on (the product's durable
//! settings), the real ingress router in-process over the journal inbox, and
//! a reqwest client. Every answer is sent only after the delivery row is
//! committed, so each measured request includes a durable commit.
//!
//! Runs, in order: closed-loop at concurrency 1, 16 and 64 for a fixed time
//! each, then an open-loop run paced at a fixed rate. Prints throughput and
//! latency percentiles (p50/p99/p99.9) per run.
//!
//! Usage: `cargo run --release -p autoforge-tests --bin webhook-bench -- [seconds] [paced-rate]`
//! (defaults: 5 s per run, 500 req/s).
//!
//! Two consecutive runs on the 2-core machine while two other engineers
//! compiled (load average 4-5), release build of commit 15c9e5b's ingress:
//!
//! | run | req/s | p50 ms | p99 ms | p99.9 ms |
//! |---|---|---|---|---|
//! | concurrency 1 | 340 / 1,605 | 2.65 / 0.52 | 8.21 / 3.92 | 57.38 / 9.37 |
//! | concurrency 16 | 3,294 / 3,990 | 4.14 / 3.73 | 15.94 / 9.78 | 30.12 / 18.11 |
//! | concurrency 64 | 3,303 / 4,118 | 18.57 / 15.02 | 40.49 / 27.73 | 75.77 / 39.48 |
//! | paced 500 req/s | 500 / 500 | 1.86 / 0.64 | 13.07 / 7.39 | 38.06 / 19.35 |

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use secrecy::SecretString;

/// A realistic delivery body (GitHub's `issues.labeled` example).
const BODY: &str = include_str!("../../fixtures/github/webhooks/issues.labeled.9.json");
const SECRET: &str = "bench-webhook-secret";

struct Target {
    url: String,
    signature: String,
    next_id: AtomicU64,
}

struct RunResult {
    label: String,
    sent: usize,
    elapsed: Duration,
    latencies_us: Vec<u64>,
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args
        .next()
        .map_or(Ok(5), |s| s.parse())
        .context("seconds")?;
    let paced_rate: u64 = args.next().map_or(Ok(500), |s| s.parse()).context("rate")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench(Duration::from_secs(seconds), paced_rate))
}

async fn bench(duration: Duration, paced_rate: u64) -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let root = data.path().to_path_buf();
    let mut options = LocalPgOptions::persistent();
    options.stop_on_drop = true;
    let server =
        tokio::task::spawn_blocking(move || LocalPostgres::start(&root, options)).await??;
    let journal = Journal::connect(&server.database_url()).await?;
    journal.migrate().await?;
    let secret = SecretString::from(SECRET.to_owned());
    // Nobody dispatches here: the bench measures ingress alone.
    let wakeup = Arc::new(tokio::sync::Notify::new());
    let app = autoforge::serve::webhook_listener_router(journal.clone(), secret.clone(), wakeup);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let target = Arc::new(Target {
        url: format!("http://{address}/webhook"),
        signature: autoforge::webhook::sign_body(&secret, BODY.as_bytes()),
        next_id: AtomicU64::new(0),
    });
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(128)
        .build()?;
    // Warm the connection pools on both sides.
    closed_loop(&client, &target, 16, Duration::from_millis(500)).await?;

    let mut results = Vec::new();
    for concurrency in [1, 16, 64] {
        let mut result = closed_loop(&client, &target, concurrency, duration).await?;
        result.label = format!("closed loop, concurrency {concurrency}");
        results.push(result);
    }
    let mut paced = open_loop(&client, &target, paced_rate, duration).await?;
    paced.label = format!("paced {paced_rate} req/s");
    results.push(paced);

    let stored = target.next_id.load(Ordering::SeqCst);
    let last = format!("bench-{}", stored - 1);
    if journal.get_delivery(&last).await?.is_none() {
        bail!("the last acknowledged delivery {last} is not in the inbox");
    }
    println!(
        "webhook-bench: durable inbox on a managed local Postgres (fsync on), {} per run",
        humantime(duration)
    );
    println!(
        "{:<32} {:>9} {:>11} {:>9} {:>9} {:>9}",
        "run", "requests", "req/s", "p50 ms", "p99 ms", "p99.9 ms"
    );
    for result in &results {
        report(result);
    }
    journal.close().await;
    drop(server);
    Ok(())
}

fn humantime(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

async fn send_one(client: &reqwest::Client, target: &Target) -> anyhow::Result<u64> {
    let id = target.next_id.fetch_add(1, Ordering::SeqCst);
    let started = Instant::now();
    let response = client
        .post(&target.url)
        .header("x-github-event", "issues")
        .header("x-github-delivery", format!("bench-{id}"))
        .header("x-hub-signature-256", &target.signature)
        .header("content-type", "application/json")
        .body(reqwest::Body::from(BODY.as_bytes()))
        .send()
        .await?;
    let status = response.status();
    let _drained = response.bytes().await?;
    if status != reqwest::StatusCode::ACCEPTED {
        bail!("delivery bench-{id} answered {status}");
    }
    Ok(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX))
}

async fn closed_loop(
    client: &reqwest::Client,
    target: &Arc<Target>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<RunResult> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        let target = Arc::clone(target);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                latencies.push(send_one(&client, &target).await?);
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies_us = Vec::new();
    for worker in workers {
        latencies_us.extend(worker.await??);
    }
    Ok(RunResult {
        label: String::new(),
        sent: latencies_us.len(),
        elapsed: started.elapsed(),
        latencies_us,
    })
}

/// Sends at a fixed rate regardless of answers, so slow answers show up as
/// latency instead of lowering the offered load.
async fn open_loop(
    client: &reqwest::Client,
    target: &Arc<Target>,
    rate: u64,
    duration: Duration,
) -> anyhow::Result<RunResult> {
    let period = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut requests = Vec::new();
    while started.elapsed() < duration {
        ticker.tick().await;
        let client = client.clone();
        let target = Arc::clone(target);
        requests.push(tokio::spawn(
            async move { send_one(&client, &target).await },
        ));
    }
    let mut latencies_us = Vec::new();
    for request in requests {
        latencies_us.push(request.await??);
    }
    Ok(RunResult {
        label: String::new(),
        sent: latencies_us.len(),
        elapsed: started.elapsed(),
        latencies_us,
    })
}

fn percentile_ms(sorted: &[u64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64) * fraction).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted[index] as f64 / 1000.0
}

fn report(result: &RunResult) {
    let mut sorted = result.latencies_us.clone();
    sorted.sort_unstable();
    println!(
        "{:<32} {:>9} {:>11.0} {:>9.2} {:>9.2} {:>9.2}",
        result.label,
        result.sent,
        result.sent as f64 / result.elapsed.as_secs_f64(),
        percentile_ms(&sorted, 0.50),
        percentile_ms(&sorted, 0.99),
        percentile_ms(&sorted, 0.999),
    );
}
