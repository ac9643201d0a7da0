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
//! from their exit. A split by component needs a profile (`perf` or
//! callgrind), which this section does not take.

use std::time::{Duration, Instant};

use super::economy::{count, demo_report};
use super::procstat::cpu_times;
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
    let markdown = format!(
        "The demo's EPIC of three issues (each: implement, review rounds, merge, EPIC \
         update; one finding and its fix, one follow-up issue) with instant scripted \
         agents, run in-process {} times; per merged issue, median (min–max):\n\n\
         | per issue cycle | ms |\n|---|---|\n\
         | CPU of the controller and the in-process fakehub (upper bound on the controller's) | {} |\n\
         | CPU of child processes (agents, sandbox, git, Postgres) | {} |\n\
         | wall time | {} |\n\n\
         Target: < 200 ms of controller CPU per cycle.\n",
        options.repeats,
        spread(|c| c.own_ms).display(0),
        spread(|c| c.children_ms).display(0),
        spread(|c| c.wall_ms).display(0),
    );
    Ok(Section {
        title: "Cycle cost".into(),
        markdown,
        charts: Vec::new(),
    })
}
