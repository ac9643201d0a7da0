//! Webhook ingest: how fast `/webhook` stores signed deliveries durably.
//!
//! Starts a managed local Postgres with fsync on (the product's durable
//! settings) and the real ingress router in-process over the journal inbox.
//! Every answer is sent only after the delivery row is committed, so each
//! measured request includes a durable commit. Closed-loop load at
//! concurrency 1, 16 and 64, repeated; the section reports the median of the
//! repeats with their spread.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use secrecy::SecretString;

use super::chart::{Series, line_chart};
use super::stats::{Spread, percentile};
use super::{BenchOptions, Section};

/// A realistic delivery body (GitHub's `issues.labeled` example).
const BODY: &str = include_str!("../../fixtures/github/webhooks/issues.labeled.9.json");
const SECRET: &str = "bench-webhook-secret";
const CONCURRENCIES: [usize; 3] = [1, 16, 64];

struct Target {
    url: String,
    signature: String,
    next_id: AtomicU64,
}

struct RunResult {
    elapsed: Duration,
    latencies_us: Vec<u64>,
}

/// One load run's figures.
struct Figures {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
}

impl RunResult {
    fn figures(&self) -> Figures {
        let mut sorted: Vec<f64> = self
            .latencies_us
            .iter()
            .map(|&us| us as f64 / 1000.0)
            .collect();
        sorted.sort_by(f64::total_cmp);
        Figures {
            rate: self.latencies_us.len() as f64 / self.elapsed.as_secs_f64(),
            p50_ms: percentile(&sorted, 0.50).unwrap_or(0.0),
            p99_ms: percentile(&sorted, 0.99).unwrap_or(0.0),
            p999_ms: percentile(&sorted, 0.999).unwrap_or(0.0),
        }
    }
}

/// Runs the ingest section.
pub async fn run(options: &BenchOptions) -> anyhow::Result<Section> {
    let data = tempfile::tempdir()?;
    let root = data.path().to_path_buf();
    let mut pg_options = LocalPgOptions::persistent();
    pg_options.stop_on_drop = true;
    let server =
        tokio::task::spawn_blocking(move || LocalPostgres::start(&root, pg_options)).await??;
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

    let duration = Duration::from_secs(options.seconds);
    let mut rows = Vec::new();
    let mut points = Vec::new();
    for concurrency in CONCURRENCIES {
        let mut runs = Vec::new();
        for _ in 0..options.repeats {
            runs.push(
                closed_loop(&client, &target, concurrency, duration)
                    .await?
                    .figures(),
            );
        }
        let spread = |pick: fn(&Figures) -> f64| {
            Spread::of(&runs.iter().map(pick).collect::<Vec<_>>()).unwrap_or_default()
        };
        let rate = spread(|f| f.rate);
        points.push((concurrency as f64, rate.median));
        rows.push(format!(
            "| {concurrency} | {} | {} | {} | {} |",
            rate.display(0),
            spread(|f| f.p50_ms).display(2),
            spread(|f| f.p99_ms).display(2),
            spread(|f| f.p999_ms).display(2),
        ));
    }

    let stored = target.next_id.load(Ordering::SeqCst);
    let last = format!("bench-{}", stored.saturating_sub(1));
    if journal.get_delivery(&last).await?.is_none() {
        bail!("the last acknowledged delivery {last} is not in the inbox");
    }
    journal.close().await;
    drop(server);

    let chart = "ingest-throughput.svg";
    line_chart(
        &options.chart_path(chart),
        "Durable webhook ingest",
        "concurrency",
        "deliveries/s",
        &[Series {
            name: "autoforge".into(),
            points,
        }],
    )?;
    let markdown = format!(
        "Signed `issues` deliveries with unique ids, closed loop, {} s per run, \
         median of {} runs (min–max). Each answer follows the delivery's durable commit.\n\n\
         | concurrency | req/s | p50 ms | p99 ms | p99.9 ms |\n|---|---|---|---|---|\n{}\n",
        options.seconds,
        options.repeats,
        rows.join("\n"),
    );
    Ok(Section {
        title: "Webhook ingest".into(),
        markdown,
        charts: vec![chart.into()],
    })
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
        elapsed: started.elapsed(),
        latencies_us,
    })
}
