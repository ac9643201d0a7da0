//! Cycle cost (#19 §3): the CPU an issue cycle costs, measured on the
//! demo's workload (an EPIC of three issues, instant scripted agents) run
//! in-process, repeated.
//!
//! The bench process's own CPU time while the demo runs holds the
//! controller and, in the same process, fakehub answering it; so it is an
//! upper bound on the controller's share; the demo's start (a Postgres
//! cluster, fakehub's repository, serve's start-up) is in it too, spread
//! over the three issues. Child processes (the scripted
//! agents in their sandboxes, git, the managed Postgres) are counted apart
//! from their exit.
//!
//! Beside it, the same cost on `autoforge serve` alone (`profile.rs`): a
//! small fleet of plain issues carried to their end by one serve process,
//! and its instructions under callgrind split by component.

mod profile;

use std::time::{Duration, Instant};

use super::economy::{count, demo_report};
use super::procstat::cpu_times;
use super::scale::fleet::{GITHUB_BUDGET, Size};
use super::stats::Spread;
use super::{BenchOptions, Section};

/// One demo run's costs, per merged issue.
struct Cycle {
    own_ms: f64,
    children_ms: f64,
    wall_ms: f64,
}

/// Runs the cycle section.
pub async fn run(options: &BenchOptions) -> anyhow::Result<Section> {
    let pid = std::process::id();
    let mut cycles = Vec::new();
    for _ in 0..options.repeats {
        let before = cpu_times(pid)?;
        let started = Instant::now();
        let report = demo_report().await?;
        let wall = started.elapsed();
        let spent = cpu_times(pid)?.since(&before);
        let issues = count(&report["effects"]["merge_pr"]["observed"]).max(1) as f64;
        let per = |d: Duration| d.as_secs_f64() * 1000.0 / issues;
        cycles.push(Cycle {
            own_ms: per(spent.own),
            children_ms: per(spent.children),
            wall_ms: per(wall),
        });
    }
    let spread = |pick: fn(&Cycle) -> f64| {
        Spread::of(&cycles.iter().map(pick).collect::<Vec<_>>()).unwrap_or_default()
    };
    let alone_size = if options.quick {
        Size {
            repositories: 1,
            issues_per_repository: 2,
            concurrency: 8,
            fix_round: true,
            required_check: false,
            budget_per_hour: GITHUB_BUDGET,
        }
    } else {
        Size {
            repositories: 2,
            issues_per_repository: 5,
            concurrency: 8,
            fix_round: true,
            required_check: false,
            budget_per_hour: GITHUB_BUDGET,
        }
    };
    let mut alone = Vec::new();
    for _ in 0..options.repeats.clamp(1, 3) {
        alone.push(profile::serve_alone(alone_size).await?);
    }
    let alone_spread = |pick: fn(&profile::ServeCycle) -> f64| {
        Spread::of(&alone.iter().map(pick).collect::<Vec<_>>()).unwrap_or_default()
    };
    let profiled_size = Size {
        repositories: 2,
        issues_per_repository: if options.quick { 1 } else { 5 },
        concurrency: 8,
        fix_round: true,
        required_check: false,
        budget_per_hour: GITHUB_BUDGET,
    };
    let split = match profile::callgrind_split(profiled_size).await? {
        Some(profile::Split {
            components,
            total,
            hottest,
        }) => {
            let per_run = |count: u64| count as f64 / 1e6 / profiled_size.runs() as f64;
            let hot: Vec<String> = hottest
                .iter()
                .map(|(function, count)| format!("| `{function}` | {:.1} |", per_run(*count)))
                .collect();
            let rows: Vec<String> = components
                .iter()
                .map(|(name, count)| {
                    format!(
                        "| {name} | {:.1} | {:.1}% |",
                        *count as f64 / 1e6 / profiled_size.runs() as f64,
                        100.0 * *count as f64 / total.max(1) as f64
                    )
                })
                .collect();
            format!(
                "Where serve's instructions go, under callgrind, for {} runs carried to \
                 their end after start-up (each function's own instructions, by the \
                 component its symbol belongs to; millions per run):\n\n\
                 | component | M instructions per run | share |\n|---|---|---|\n{}\n\
                 | total | {:.1} | 100% |\n\n\
                 What is paid once per database connection or installation token (the \
                 SCRAM handshake of each connection the pool opens as the runs arrive, \
                 the App's RS256 signature) is spread over these {} runs; over a day of \
                 runs it vanishes, so the split overstates cryptography.\n\n\
                 The functions with the most instructions of their own:\n\n\
                 | function | M instructions per run |\n|---|---|\n{}\n",
                profiled_size.runs(),
                rows.join("\n"),
                per_run(total),
                profiled_size.runs(),
                hot.join("\n"),
            )
        }
        None => "The split by component was not measured: valgrind is not installed \
                 (`apt-get install valgrind`)."
            .to_owned(),
    };
    let markdown = format!(
        "The demo's EPIC of three issues (each: implement, review rounds, merge, EPIC \
         update; one finding and its fix, one follow-up issue) with instant scripted \
         agents, run in-process {} times; per merged issue, median (min–max):\n\n\
         | per issue cycle | ms |\n|---|---|\n\
         | CPU of the controller and the in-process fakehub (upper bound on the controller's) | {} |\n\
         | CPU of child processes (agents, sandbox, git, Postgres) | {} |\n\
         | wall time | {} |\n\n\
         On `autoforge serve` alone (this build's binary as a child process, fakehub and \
         Postgres in other processes): {} issues outside an EPIC, each implemented and \
         validated, reviewed with two findings, fixed (one finding fixed, one deferred to \
         a follow-up issue the controller creates), reviewed clean and merged by the \
         scripted agents, carried to their end by one serve process (the EPIC update is \
         the one step of the demo's cycle missing here); {} repeats, per run, median \
         (min–max):\n\n\
         | per run, serve alone | ms |\n|---|---|\n\
         | CPU of serve itself (the controller) | {} |\n\
         | CPU of its child processes (agents, sandbox, git, validation) | {} |\n\
         | wall time (runs overlap, 8 at once) | {} |\n\n\
         Target: < 200 ms of controller CPU per cycle.\n\n{split}",
        options.repeats,
        spread(|c| c.own_ms).display(0),
        spread(|c| c.children_ms).display(0),
        spread(|c| c.wall_ms).display(0),
        alone_size.runs(),
        alone.len(),
        alone_spread(|c| c.own_ms).display(0),
        alone_spread(|c| c.children_ms).display(0),
        alone_spread(|c| c.wall_ms).display(0),
    );
    Ok(Section {
        title: "Cycle cost".into(),
        markdown,
        charts: Vec::new(),
    })
}
