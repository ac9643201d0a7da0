//! Scale on one host (#19 §4), recovery after a SIGKILL (#19 §5) and
//! replicas on one Postgres (#19 §6), measured on a fleet of many
//! repositories (`fleet.rs`) whose issues are all labelled at once and
//! carried by the demo's instant scripted agents (implement, one clean
//! review, auto merge) through `autoforge serve` processes of this build.
//!
//! Each measurement is a fixed window from the first label on: what the
//! journal recorded in it (transitions, effects observed, runs done), what
//! the processes cost (serve's own CPU, its children's, Postgres's), peak
//! memory, the database connections open, and the time from each labelled
//! webhook's arrival to its run's first transition. Recovery kills the
//! single replica at the window's end and starts it again.

pub(crate) mod fleet;
mod recovery;
mod report;

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::Row;

use super::procstat::{cpu_times, machine_busy, memory, server_cpu};
use super::stats::percentile;
use super::{BenchOptions, Section};
use fleet::{Fleet, GITHUB_BUDGET, Replica, Size};

/// A budget no window can spend: the controller, not GitHub's rate limit,
/// is then what is measured.
const UNLIMITED: u64 = 1_000_000_000;

/// How often memory and connections are sampled during a window.
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// One configuration the bench measures.
#[derive(Debug, Clone, Copy)]
struct Setup {
    size: Size,
    replicas: usize,
    /// Whether the window ends with a SIGKILL and a timed restart.
    recover: bool,
}

/// What one window measured.
#[derive(Debug, Clone)]
pub struct Window {
    pub runs: usize,
    pub replicas: usize,
    pub concurrency: usize,
    /// fakehub's rate limit per token and hour.
    pub budget_per_hour: u64,
    pub seconds: f64,
    /// Rate-limit points the controller spent in the window.
    pub points: u64,
    /// Seconds until every label request was answered.
    pub labelled_after: f64,
    pub transitions: i64,
    pub effects_observed: i64,
    pub runs_done: i64,
    pub active_at_end: i64,
    /// The largest `VmHWM` of a replica.
    pub peak_rss: u64,
    pub serve_cpu: Duration,
    pub children_cpu: Duration,
    pub postgres_cpu: Duration,
    /// The bench process itself: fakehub, which serves the fleet's REST
    /// calls, webhooks and git transfers, with the git processes it runs.
    pub fakehub_cpu: Duration,
    /// The whole machine's busy time (see [`machine_busy`]).
    pub machine_cpu: Duration,
    pub connections_max: i64,
    /// Webhook arrival to the run's first transition, per run that made
    /// one in the window (the others waited for a driver all along).
    pub first_transition_ms: Vec<f64>,
}

impl Window {
    pub fn transitions_per_second(&self) -> f64 {
        self.transitions as f64 / self.seconds
    }

    pub fn points_per_transition(&self) -> f64 {
        self.points as f64 / self.transitions.max(1) as f64
    }

    pub fn effects_per_second(&self) -> f64 {
        self.effects_observed as f64 / self.seconds
    }

    pub fn latency(&self, fraction: f64) -> f64 {
        percentile(&self.first_transition_ms, fraction).unwrap_or(f64::NAN)
    }

    /// Runs that made their first transition in the window.
    pub fn started(&self) -> usize {
        self.first_transition_ms.len()
    }

    /// The window's CPU shares of the machine, in percent: serve, its
    /// children, Postgres, fakehub with its git, and the rest of what the
    /// machine was busy with (kernel threads, processes nobody reaped).
    pub fn cpu_shares(&self) -> [f64; 5] {
        let share = |spent: Duration| 100.0 * spent.as_secs_f64() / (self.seconds * cores());
        let counted = self.serve_cpu + self.children_cpu + self.postgres_cpu + self.fakehub_cpu;
        [
            share(self.serve_cpu),
            share(self.children_cpu),
            share(self.postgres_cpu),
            share(self.fakehub_cpu),
            share(self.machine_cpu.saturating_sub(counted)),
        ]
    }

    /// How busy the machine was over the window, in percent of its cores.
    pub fn machine_busy(&self) -> f64 {
        (100.0 * self.machine_cpu.as_secs_f64() / (self.seconds * cores())).min(100.0)
    }
}

/// The machine's cores, as the shares above count them.
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as f64
}

/// The sizes measured: the full size and the quick one.
fn setups(options: &BenchOptions) -> Vec<Setup> {
    let (small, full) = if options.quick {
        (Size::new(2, 5), Size::new(4, 5))
    } else {
        (Size::new(10, 25), Size::new(50, 20))
    };
    // The default concurrency and four times it: whether more runs driven
    // at once move the limit says what the limit is.
    let wide = Size {
        concurrency: 4 * full.concurrency,
        ..full
    };
    // GitHub's own budget: what one installation allows.
    let budgeted = Size {
        budget_per_hour: GITHUB_BUDGET,
        ..full
    };
    vec![
        Setup {
            size: small,
            replicas: 1,
            recover: false,
        },
        Setup {
            size: full,
            replicas: 1,
            recover: true,
        },
        Setup {
            size: wide,
            replicas: 1,
            recover: false,
        },
        Setup {
            size: full,
            replicas: 3,
            recover: false,
        },
        Setup {
            size: budgeted,
            replicas: 1,
            recover: false,
        },
    ]
}

impl Size {
    /// The default driver concurrency (8).
    fn new(repositories: usize, issues_per_repository: usize) -> Size {
        Size {
            repositories,
            issues_per_repository,
            concurrency: 8,
            fix_round: false,
            required_check: false,
            budget_per_hour: UNLIMITED,
        }
    }
}

/// Runs the scale, recovery and replica sections.
pub async fn run(options: &BenchOptions) -> anyhow::Result<Vec<Section>> {
    let window = Duration::from_secs(if options.quick { 15 } else { 60 });
    let repeats = if options.quick {
        1
    } else {
        options.repeats.clamp(1, 2)
    };
    let mut windows = Vec::new();
    let mut recoveries = Vec::new();
    for repeat in 0..repeats {
        for setup in setups(options) {
            eprintln!(
                "scale: repeat {repeat}: {} runs, {} replica(s), concurrency {}",
                setup.size.runs(),
                setup.replicas,
                setup.size.concurrency
            );
            let fleet = Fleet::seed(setup.size).await?;
            let mut replicas = Vec::new();
            for index in 0..setup.replicas {
                replicas.push(fleet.start_replica(index).await?);
            }
            let measured = measure(&fleet, &replicas, window, setup.size).await?;
            eprintln!(
                "scale: {:.1} transitions/s, {:.1} effects/s, peak RSS {} MB, p99 {:.0} ms",
                measured.transitions_per_second(),
                measured.effects_per_second(),
                measured.peak_rss / 1_000_000,
                measured.latency(0.99)
            );
            windows.push(measured);
            if setup.recover {
                let replica = replicas.pop().context("the replica to kill")?;
                let recovered = recovery::kill_and_restart(&fleet, replica).await?;
                eprintln!("scale: recovery {recovered:?}");
                recoveries.push(recovered);
            }
            for replica in replicas {
                replica.kill().await?;
            }
        }
    }
    report::sections(options, window, &windows, &recoveries)
}

/// Labels every issue and measures the window from the first label on.
async fn measure(
    fleet: &Fleet,
    replicas: &[Replica],
    window: Duration,
    size: Size,
) -> anyhow::Result<Window> {
    let requests_before = fleet.hub.requests().len();
    let postmaster = u32::try_from(fleet.postgres.postmaster_pid()).context("postmaster pid")?;
    let cpu_before: Vec<_> = replicas
        .iter()
        .map(|r| cpu_times(r.pid))
        .collect::<Result<_, _>>()?;
    let postgres_before = server_cpu(postmaster)?;
    let fakehub_before = cpu_times(std::process::id())?;
    let machine_before = machine_busy()?;
    // The database's clock, as text: the window is compared with the
    // journal's own timestamps.
    let opened: String = sqlx::query_scalar("SELECT clock_timestamp()::text")
        .fetch_one(&fleet.pool)
        .await?;
    let started = Instant::now();
    let labelling = async {
        fleet.label_all().await?;
        anyhow::Ok(started.elapsed().as_secs_f64())
    };
    let sampling = async {
        let mut connections_max = 0i64;
        while started.elapsed() < window {
            let open: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            )
            .fetch_one(&fleet.pool)
            .await?;
            connections_max = connections_max.max(open);
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        anyhow::Ok(connections_max)
    };
    let (labelled_after, connections_max) = tokio::try_join!(labelling, sampling)?;
    let seconds = started.elapsed().as_secs_f64();
    let points = fleet
        .hub
        .requests()
        .iter()
        .skip(requests_before)
        .filter(|r| matches!(r.token_kind.as_str(), "installation" | "app_jwt"))
        .map(|r| r.cost)
        .sum();
    let mut serve_cpu = Duration::ZERO;
    let mut children_cpu = Duration::ZERO;
    let mut peak_rss = 0;
    for (replica, before) in replicas.iter().zip(&cpu_before) {
        let spent = cpu_times(replica.pid)?.since(before);
        serve_cpu += spent.own;
        children_cpu += spent.children;
        peak_rss = peak_rss.max(memory(replica.pid)?.peak_rss);
    }
    let postgres_cpu = server_cpu(postmaster)?.saturating_sub(postgres_before);
    let fakehub = cpu_times(std::process::id())?.since(&fakehub_before);
    let machine_cpu = machine_busy()?.saturating_sub(machine_before);
    let counts = sqlx::query(
        "SELECT \
           (SELECT count(*) FROM audit_events WHERE kind = 'transition' AND recorded_at >= $1::timestamptz) \
             AS transitions, \
           (SELECT count(*) FROM effects WHERE stage = 'observed' AND updated_at >= $1::timestamptz) \
             AS effects, \
           (SELECT count(*) FROM runs WHERE phase = 'DONE') AS done, \
           (SELECT count(*) FROM runs WHERE active) AS active",
    )
    .bind(&opened)
    .fetch_one(&fleet.pool)
    .await?;
    let first_transition_ms: Vec<f64> = sqlx::query_scalar(
        "WITH labelled AS ( \
             SELECT d.received_at, d.repository, \
                 (convert_from(d.payload, 'UTF8')::jsonb #>> '{issue,number}')::bigint AS issue \
             FROM deliveries d WHERE d.event = 'issues' AND d.action = 'labeled'), \
         first AS ( \
             SELECT r.repository, r.current_issue, min(a.recorded_at) AS at \
             FROM runs r JOIN audit_events a ON a.run_id = r.id AND a.kind = 'transition' \
             GROUP BY r.id) \
         SELECT (extract(epoch FROM (f.at - l.received_at)) * 1000)::float8 \
         FROM labelled l JOIN first f \
             ON f.repository = l.repository AND f.current_issue = l.issue \
         ORDER BY 1",
    )
    .fetch_all(&fleet.pool)
    .await?;
    Ok(Window {
        runs: fleet.issues.len(),
        replicas: replicas.len(),
        concurrency: size.concurrency,
        budget_per_hour: size.budget_per_hour,
        points,
        seconds,
        labelled_after,
        transitions: counts.try_get("transitions")?,
        effects_observed: counts.try_get("effects")?,
        runs_done: counts.try_get("done")?,
        active_at_end: counts.try_get("active")?,
        peak_rss,
        serve_cpu,
        children_cpu,
        postgres_cpu,
        fakehub_cpu: fakehub.own + fakehub.children,
        machine_cpu,
        connections_max,
        first_transition_ms,
    })
}
