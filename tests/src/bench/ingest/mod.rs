//! Webhook ingest (#19 §1): how fast `/webhook` takes signed deliveries
//! while each is durable before its answer, beside two references
//! measured in the same run on the same machine:
//!
//! - autoforge: the webhook listener's router (what `autoforge serve`
//!   mounts, from this release build) over the journal's group-commit
//!   inbox, on a managed local Postgres with fsync and synchronous commit
//!   on. Nothing dispatches the stored deliveries, so the figure is
//!   ingress alone.
//! - Probot: a minimal Probot app (`probot.rs`), which checks and parses
//!   each delivery and stores nothing.
//! - pgbench: Postgres inserting the same row with one durable commit per
//!   row, the ceiling a one-commit-per-delivery design could reach.
//!
//! wrk drives autoforge and Probot with the same body, secret and load
//! (`wrk.rs`); pgbench drives itself. Each repeat runs every target at
//! every concurrency, in turn, so noise from the shared machine falls on
//! all of them; the report gives medians of the repeats with their spread.

mod postgres;
mod probot;
mod wrk;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use secrecy::SecretString;

use super::chart::{Series, line_chart};
use super::stats::Spread;
use super::{BenchOptions, Section};

/// The delivery every request carries: GitHub's `issue_comment.created`
/// example, its comment grown until the body is [`BODY_BYTES`] long.
const EXAMPLE: &str =
    include_str!("../../../fixtures/github/webhooks/issue_comment.created.1.json");
const BODY_BYTES: usize = 12_600;
const EVENT: &str = "issue_comment";
const SECRET: &str = "bench-webhook-secret";
const PATH: &str = "/webhook";
const CONCURRENCIES: [usize; 3] = [1, 16, 64];

/// One load run's figures.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Requests answered (pgbench: transactions committed).
    pub requests: u64,
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

/// The three things measured, in the order each repeat runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Autoforge,
    Probot,
    Pgbench,
}

const TARGETS: [Target; 3] = [Target::Autoforge, Target::Probot, Target::Pgbench];

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Autoforge => "autoforge",
            Target::Probot => "Probot",
            Target::Pgbench => "pgbench",
        }
    }
}

/// The body, exactly [`BODY_BYTES`] long.
fn body() -> anyhow::Result<String> {
    let mut payload: serde_json::Value = serde_json::from_str(EXAMPLE)?;
    let compact = serde_json::to_string(&payload)?;
    let missing = BODY_BYTES
        .checked_sub(compact.len())
        .context("the example is already larger than the bench's body")?;
    let comment = payload["comment"]["body"]
        .as_str()
        .context("the example has a comment body")?;
    let grown = format!("{comment}{}", "x".repeat(missing));
    payload["comment"]["body"] = serde_json::Value::String(grown);
    let body = serde_json::to_string(&payload)?;
    if body.len() != BODY_BYTES {
        bail!("the grown body is {} bytes, not {BODY_BYTES}", body.len());
    }
    Ok(body)
}

/// A chart of the section: its file, title, y axis and the figure drawn.
type Chart = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Figures) -> f64,
);

/// Every run's figures, per target and concurrency.
#[derive(Default)]
struct Measured {
    runs: Vec<(Target, usize, Figures)>,
}

impl Measured {
    fn spread(&self, target: Target, concurrency: usize, pick: fn(&Figures) -> f64) -> Spread {
        let values: Vec<f64> = self
            .runs
            .iter()
            .filter(|(t, c, _)| *t == target && *c == concurrency)
            .map(|(_, _, figures)| pick(figures))
            .collect();
        Spread::of(&values).unwrap_or_default()
    }
}

/// Runs the ingest section.
pub async fn run(options: &BenchOptions) -> anyhow::Result<Section> {
    let scratch = tempfile::tempdir()?;
    let body = body()?;
    let body_file = scratch.path().join("body.json");
    std::fs::write(&body_file, &body)?;
    let secret = SecretString::from(SECRET.to_owned());
    let signature = autoforge::webhook::sign_body(&secret, body.as_bytes());

    let root = scratch.path().join("postgres");
    let mut pg_options = LocalPgOptions::persistent();
    pg_options.stop_on_drop = true;
    let server =
        tokio::task::spawn_blocking(move || LocalPostgres::start(&root, pg_options)).await??;
    let journal = Journal::connect(&server.database_url()).await?;
    journal.migrate().await?;
    let postgres = postgres::Server::from_url(&server.database_url())?;

    // Nobody dispatches here: the bench measures ingress alone.
    let wakeup = Arc::new(tokio::sync::Notify::new());
    let app = autoforge::serve::webhook_listener_router(journal.clone(), secret.clone(), wakeup);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let autoforge_url = format!("http://{}{PATH}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let probot = probot::Probot::start(SECRET, PATH).await?;

    let delivery = wrk::Delivery {
        body: &body_file,
        signature: &signature,
        event: EVENT,
    };
    let duration = Duration::from_secs(options.seconds);
    let warm_up = Duration::from_secs(1);
    for (url, name) in [(&autoforge_url, "autoforge"), (&probot.url, "probot")] {
        wrk::load(url, &delivery, 16, warm_up, &format!("warm-{name}")).await?;
    }
    let mut measured = Measured::default();
    for repeat in 0..options.repeats {
        for concurrency in CONCURRENCIES {
            for target in TARGETS {
                postgres.reset().await?;
                let prefix = format!("r{repeat}-c{concurrency}");
                let figures = match target {
                    Target::Autoforge => {
                        let figures =
                            wrk::load(&autoforge_url, &delivery, concurrency, duration, &prefix)
                                .await?;
                        // Every answered delivery has its row (a request
                        // cut off when wrk stopped may have one too).
                        let rows = postgres.deliveries().await?;
                        if rows < figures.requests {
                            bail!("{} deliveries answered but {rows} stored", figures.requests);
                        }
                        figures
                    }
                    Target::Probot => {
                        wrk::load(&probot.url, &delivery, concurrency, duration, &prefix).await?
                    }
                    Target::Pgbench => {
                        postgres
                            .pgbench(concurrency, duration, &body, scratch.path())
                            .await?
                    }
                };
                eprintln!(
                    "ingest: repeat {repeat} c{concurrency} {}: {:.0} req/s p99 {:.2} ms",
                    target.name(),
                    figures.rate,
                    figures.p99_ms
                );
                measured.runs.push((target, concurrency, figures));
            }
        }
    }
    drop(probot);
    journal.close().await;
    drop(server);
    report(options, &measured)
}

/// The section's tables and charts.
fn report(options: &BenchOptions, measured: &Measured) -> anyhow::Result<Section> {
    let median = |target, concurrency, pick| measured.spread(target, concurrency, pick).median;
    let mut throughput = Vec::new();
    let mut latency = Vec::new();
    for concurrency in CONCURRENCIES {
        let rate = |target| measured.spread(target, concurrency, |f| f.rate);
        let ours = median(Target::Autoforge, concurrency, |f| f.rate);
        throughput.push(format!(
            "| {concurrency} | {} | {} | {} | {:.2}× | {:.2}× |",
            rate(Target::Autoforge).display(0),
            rate(Target::Probot).display(0),
            rate(Target::Pgbench).display(0),
            ratio(ours, median(Target::Probot, concurrency, |f| f.rate)),
            ratio(ours, median(Target::Pgbench, concurrency, |f| f.rate)),
        ));
        for target in TARGETS {
            let spread = |pick| measured.spread(target, concurrency, pick).display(2);
            latency.push(format!(
                "| {concurrency} | {} | {} | {} | {} |",
                target.name(),
                spread(|f| f.p50_ms),
                spread(|f| f.p99_ms),
                spread(|f| f.p999_ms),
            ));
        }
    }
    let series = |pick: fn(&Figures) -> f64| -> Vec<Series> {
        TARGETS
            .iter()
            .map(|&target| Series {
                name: target.name().into(),
                points: CONCURRENCIES
                    .iter()
                    .map(|&c| (c as f64, median(target, c, pick)))
                    .collect(),
            })
            .collect()
    };
    let charts: [Chart; 2] = [
        (
            "ingest-throughput.svg",
            "Webhook ingest throughput",
            "requests/s",
            |f| f.rate,
        ),
        (
            "ingest-p99.svg",
            "Webhook ingest p99 latency",
            "p99 ms",
            |f| f.p99_ms,
        ),
    ];
    for (file, title, y_label, pick) in charts {
        line_chart(
            &options.chart_path(file),
            title,
            "concurrency",
            y_label,
            &series(pick),
        )?;
    }
    let verdict = verdict(&|target, concurrency| Medians {
        rate: median(target, concurrency, |f| f.rate),
        p99_ms: median(target, concurrency, |f| f.p99_ms),
    });
    let markdown = format!(
        "Signed `{EVENT}` deliveries of {BODY_BYTES} bytes, each with a delivery id of its \
         own, posted by wrk (closed loop, keep-alive) for {} s per run; median of {} \
         repeats (min–max), every target at every concurrency in each repeat, the inbox \
         emptied and checkpointed before each run.\n\n\
         - **autoforge**: the webhook listener of this build over the journal's group \
           commit, on a local Postgres with fsync and synchronous commit on; every answer \
           follows its delivery's durable commit (checked: rows ≥ answers after each run).\n\
         - **Probot** {}: a no-op `issue_comment.created` handler behind Probot's Node \
           middleware, same secret and body; it stores nothing.\n\
         - **pgbench**: the same row inserted by pgbench (`--protocol=prepared`) into the \
           same inbox table (its payload column compressed with lz4, as the schema sets \
           it), one durable commit per row, on the same server.\n\n\
         | concurrency | autoforge req/s | Probot req/s | pgbench tx/s | autoforge ÷ Probot | autoforge ÷ pgbench |\n\
         |---|---|---|---|---|---|\n{}\n\n\
         | concurrency | target | p50 ms | p99 ms | p99.9 ms |\n|---|---|---|---|---|\n{}\n\n{verdict}\n",
        options.seconds,
        options.repeats,
        probot::PROBOT_VERSION,
        throughput.join("\n"),
        latency.join("\n"),
    );
    Ok(Section {
        title: "Webhook ingest".into(),
        markdown,
        charts: charts.iter().map(|(file, ..)| (*file).into()).collect(),
    })
}

/// `a ÷ b`, or 0 when nothing was measured for `b`.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The medians one verdict compares.
#[derive(Debug, Clone, Copy)]
struct Medians {
    rate: f64,
    p99_ms: f64,
}

/// How much longer autoforge's p99 may be and still count as no worse
/// than Probot's: the report prints two decimals, so equal figures pass.
const P99_EPSILON_MS: f64 = 0.005;

/// Each of the section's targets, met or not, in words: Probot's rate and
/// p99 at every concurrency, 70% of pgbench at 16 and 64. Where Probot's
/// rate is out of reach it says whether the durable insert alone reaches it.
fn verdict(medians: &dyn Fn(Target, usize) -> Medians) -> String {
    let mut lines = Vec::new();
    for concurrency in CONCURRENCIES {
        let ours = medians(Target::Autoforge, concurrency);
        let probot = medians(Target::Probot, concurrency);
        let pgbench = medians(Target::Pgbench, concurrency);
        let mut parts = Vec::new();
        if ours.rate >= probot.rate {
            parts.push(format!(
                "at least Probot's rate ({:.0} against {:.0} req/s): met",
                ours.rate, probot.rate
            ));
        } else if pgbench.rate < probot.rate {
            parts.push(format!(
                "at least Probot's rate: not met ({:.0} against {:.0} req/s), and out of reach \
                 for any design that commits each delivery before answering it: with the same \
                 {concurrency} client(s), Postgres's own durable insert reaches {:.0}/s here, \
                 and Probot stores nothing",
                ours.rate, probot.rate, pgbench.rate
            ));
        } else {
            parts.push(format!(
                "at least Probot's rate: not met ({:.0} against {:.0} req/s), though pgbench \
                 reaches {:.0}",
                ours.rate, probot.rate, pgbench.rate
            ));
        }
        let p99_met = ours.p99_ms <= probot.p99_ms + P99_EPSILON_MS;
        parts.push(format!(
            "p99 no worse than Probot's ({:.2} against {:.2} ms): {}",
            ours.p99_ms,
            probot.p99_ms,
            if p99_met { "met" } else { "not met" }
        ));
        if concurrency > 1 {
            let share = ratio(ours.rate, pgbench.rate);
            parts.push(format!(
                "≥ 70% of pgbench ({:.0}%): {}",
                share * 100.0,
                if share >= 0.7 { "met" } else { "not met" }
            ));
        }
        lines.push(format!("- c{concurrency}: {}.", parts.join("; ")));
    }
    format!("Targets, on the medians:\n\n{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn figures(target: Target, concurrency: usize) -> Medians {
        let (rate, p99_ms) = match (target, concurrency) {
            (Target::Autoforge, 1) => (2200.0, 0.9),
            (Target::Probot, 1) => (3700.0, 1.5),
            (Target::Pgbench, 1) => (2700.0, 0.7),
            (Target::Autoforge, _) => (9500.0, 3.6),
            (Target::Probot, _) => (6400.0, 6.2),
            (Target::Pgbench, _) => (10000.0, 4.3),
        };
        Medians { rate, p99_ms }
    }

    #[test]
    fn the_verdict_names_each_target_met_or_not_and_why_c1_is_out_of_reach() {
        let text = verdict(&figures);
        let c1 = text.lines().find(|l| l.starts_with("- c1:")).unwrap();
        assert!(
            c1.contains("not met (2200 against 3700 req/s), and out of reach"),
            "{c1}"
        );
        assert!(c1.contains("durable insert reaches 2700/s"), "{c1}");
        assert!(c1.contains("(0.90 against 1.50 ms): met"), "{c1}");
        assert!(!c1.contains("pgbench ("), "c1 has no pgbench target: {c1}");
        let c16 = text.lines().find(|l| l.starts_with("- c16:")).unwrap();
        assert!(c16.contains("(9500 against 6400 req/s): met"), "{c16}");
        assert!(c16.contains("≥ 70% of pgbench (95%): met"), "{c16}");
    }

    #[test]
    fn a_rate_under_probot_that_pgbench_reaches_is_not_called_out_of_reach() {
        let text = verdict(&|target, concurrency| match target {
            Target::Pgbench => Medians {
                rate: 5000.0,
                p99_ms: 1.0,
            },
            _ => figures(target, concurrency),
        });
        let c1 = text.lines().find(|l| l.starts_with("- c1:")).unwrap();
        assert!(c1.contains("though pgbench reaches 5000"), "{c1}");
        assert!(!c1.contains("out of reach"), "{c1}");
    }

    #[test]
    fn the_bench_body_is_a_comment_event_of_exactly_the_stated_size() {
        let body = body().unwrap();
        assert_eq!(body.len(), BODY_BYTES);
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["action"], "created");
        assert!(parsed["comment"]["body"].as_str().unwrap().ends_with("xxx"));
    }
}
