//! The idle cost of the GitHub API economy (#19 §2): what `autoforge serve`
//! spends while nothing changes. Twenty repositories are installed and
//! polled; five runs are parked at the merge gate (their default branch
//! requires a check nobody reports, so each waits for it, re-reading its
//! facts on the backstop); then fakehub counts the controller's requests
//! over ten poll intervals.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::scale::fleet::{Fleet, GITHUB_BUDGET, Size};

const REPOSITORIES: usize = 20;
const PARKED: usize = 5;
/// The poll interval of the fleet's configuration (the demo's).
const POLL_SECONDS: u64 = 5;
const INTERVALS: u64 = 10;

/// What the idle window cost.
#[derive(Debug, Clone)]
pub struct Idle {
    pub seconds: u64,
    pub requests: u64,
    pub not_modified: u64,
    pub points: u64,
    /// `METHOD route → (requests, points)`.
    pub by_route: BTreeMap<String, (u64, u64)>,
}

/// Parks the runs and measures ten quiet poll intervals.
pub async fn measure() -> anyhow::Result<Idle> {
    let fleet = Fleet::seed(Size {
        repositories: REPOSITORIES,
        issues_per_repository: 1,
        concurrency: 8,
        fix_round: false,
        required_check: true,
        budget_per_hour: GITHUB_BUDGET,
    })
    .await?;
    let replica = fleet.start_replica(0).await?;
    fleet.label_first(PARKED).await?;
    wait_parked(&fleet, Duration::from_secs(300)).await?;
    // Two more intervals: the webhooks of the last writes change the
    // delivery log, and the poll pass that reads that change once is then
    // behind us.
    tokio::time::sleep(Duration::from_secs(2 * POLL_SECONDS)).await;
    let before = fleet.hub.requests().len();
    let seconds = POLL_SECONDS * INTERVALS;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let requests = fleet.hub.requests();
    replica.terminate().await?;
    let mut idle = Idle {
        seconds,
        requests: 0,
        not_modified: 0,
        points: 0,
        by_route: BTreeMap::new(),
    };
    for record in requests.iter().skip(before) {
        if !matches!(record.token_kind.as_str(), "installation" | "app_jwt") {
            continue;
        }
        idle.requests += 1;
        idle.not_modified += u64::from(record.status == 304);
        idle.points += record.cost;
        let entry = idle
            .by_route
            .entry(format!("{} {}", record.method, record.route))
            .or_default();
        entry.0 += 1;
        entry.1 += record.cost;
    }
    Ok(idle)
}

/// Waits until every labelled run waits at the merge gate with nothing
/// left to write.
async fn wait_parked(fleet: &Fleet, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let (parked, pending): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM runs WHERE phase = 'READY_FOR_MERGE'), \
                 (SELECT count(*) FROM effects WHERE stage IN ('intended', 'attempted'))",
        )
        .fetch_one(&fleet.pool)
        .await?;
        if parked as usize == PARKED && pending == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{parked} of {PARKED} runs parked at the merge gate and {pending} effects \
                 pending after {} s",
                within.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Idle {
    /// The section's paragraph and table.
    pub fn markdown(&self) -> String {
        let rows: Vec<String> = self
            .by_route
            .iter()
            .map(|(route, (requests, points))| format!("| `{route}` | {requests} | {points} |"))
            .collect();
        let hour = self.points as f64 * 3600.0 / self.seconds as f64;
        format!(
            "Idle: {REPOSITORIES} repositories installed and polled every {POLL_SECONDS} s, \
             {PARKED} runs parked at the merge gate (a required check nobody reports), then \
             {INTERVALS} poll intervals ({} s) counted: {} requests, {} of them answered \
             `304`, **{} rate-limit points** (an hour at that rate: {hour:.0}).\n\n\
             | route | requests | points |\n|---|---|---|\n{}\n",
            self.seconds,
            self.requests,
            self.not_modified,
            self.points,
            rows.join("\n"),
        )
    }
}
