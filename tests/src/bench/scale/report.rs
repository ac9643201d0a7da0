//! The three sections the scale measurements fill: scale on one host
//! (with its charts against the number of runs), recovery after SIGKILL,
//! and beyond one host (one replica against three, and the design past one
//! database, on paper).

use std::time::Duration;

use super::fleet::{GITHUB_BUDGET, LEASE_SECONDS};
use super::recovery::Recovery;
use super::{UNLIMITED, Window};
use crate::bench::chart::{Series, line_chart};
use crate::bench::stats::Spread;
use crate::bench::{BenchOptions, Section};

const MB: f64 = 1_000_000.0;

fn spread(values: impl Iterator<Item = f64>) -> Spread {
    Spread::of(&values.collect::<Vec<_>>()).unwrap_or_default()
}

/// A configuration: runs, replicas, driver concurrency, budget per hour.
type Configuration = (usize, usize, usize, u64);

fn configuration(window: &Window) -> Configuration {
    (
        window.runs,
        window.replicas,
        window.concurrency,
        window.budget_per_hour,
    )
}

fn budget_text(budget: u64) -> String {
    if budget >= UNLIMITED {
        "unlimited".to_owned()
    } else {
        format!("{budget} points/h")
    }
}

/// The windows of one configuration.
fn of(windows: &[Window], wanted: Configuration) -> Vec<&Window> {
    windows
        .iter()
        .filter(|w| configuration(w) == wanted)
        .collect()
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

/// One table row per configuration: medians (min–max) of its windows.
fn rows(windows: &[Window]) -> Vec<String> {
    let mut configurations: Vec<Configuration> = windows.iter().map(configuration).collect();
    configurations.sort_unstable();
    configurations.dedup();
    configurations
        .into_iter()
        .map(|wanted| {
            let (runs, replicas, concurrency, budget) = wanted;
            let budget = budget_text(budget);
            let these = of(windows, wanted);
            let figure = |pick: fn(&Window) -> f64, decimals: usize| {
                spread(these.iter().map(|w| pick(w))).display(decimals)
            };
            format!(
                "| {runs} | {replicas} | {concurrency} | {budget} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                figure(|w| w.labelled_after, 1),
                figure(|w| w.started() as f64, 0),
                figure(Window::transitions_per_second, 1),
                figure(Window::effects_per_second, 1),
                figure(Window::points_per_transition, 1),
                figure(|w| w.runs_done as f64, 0),
                figure(|w| w.peak_rss as f64 / MB, 0),
                figure(|w| seconds(w.serve_cpu), 1),
                figure(|w| seconds(w.children_cpu), 1),
                figure(|w| seconds(w.postgres_cpu), 1),
                figure(|w| seconds(w.fakehub_cpu), 1),
                figure(Window::machine_busy, 0),
                figure(|w| w.connections_max as f64, 0),
                figure(|w| w.latency(0.5), 0),
                figure(|w| w.latency(0.99), 0),
            )
        })
        .collect()
}

const TABLE_HEAD: &str = "| runs | replicas | driven at once (each) | GitHub budget | all labelled \
after (s) | runs started in the window | transitions/s | effects observed/s | points per \
transition | runs done | peak RSS of a replica (MB) | serve CPU (s) | its children's CPU (s) | \
Postgres CPU (s) | fakehub and its git CPU (s) | machine busy (%) | database connections (max) | \
webhook → first transition p50 (ms) | p99 (ms) |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// Where the CPU of a configuration's windows went, as shares of what the
/// machine had in the window.
fn where_cpu_went(windows: &[&Window]) -> String {
    let cores = super::cores();
    let share = |part: usize| spread(windows.iter().map(|w| w.cpu_shares()[part])).median;
    format!(
        "of the machine's {cores} cores over the window, serve used {:.0}%, its children \
         (agents in bubblewrap, git, validation) {:.0}%, Postgres {:.0}%, fakehub with its \
         git processes {:.0}%, and the kernel's own threads with processes nobody waited \
         for {:.0}%",
        share(0),
        share(1),
        share(2),
        share(3),
        share(4),
    )
}

/// What the default and the wide concurrency at the largest size say
/// about the limit.
fn saturation(windows: &[Window], largest: usize) -> String {
    let mut concurrencies: Vec<usize> = windows
        .iter()
        .filter(|w| w.runs == largest && w.replicas == 1 && w.budget_per_hour >= UNLIMITED)
        .map(|w| w.concurrency)
        .collect();
    concurrencies.sort_unstable();
    concurrencies.dedup();
    let rate = |concurrency: usize| {
        spread(
            of(windows, (largest, 1, concurrency, UNLIMITED))
                .iter()
                .map(|w| w.transitions_per_second()),
        )
        .median
    };
    let busy = |concurrency: usize| {
        spread(
            of(windows, (largest, 1, concurrency, UNLIMITED))
                .iter()
                .map(|w| w.machine_busy()),
        )
        .median
    };
    // What the controller's side (serve, its children, Postgres) took at
    // the wide concurrency, against fakehub's side.
    let side = |concurrency: usize, parts: &[usize]| {
        spread(
            of(windows, (largest, 1, concurrency, UNLIMITED))
                .iter()
                .map(|w| parts.iter().map(|&p| w.cpu_shares()[p]).sum::<f64>()),
        )
        .median
    };
    let parts: Vec<String> = concurrencies
        .iter()
        .map(|&c| {
            format!(
                "{c} runs driven at once: {:.1} transitions/s, CPU {:.0}% busy ({})",
                rate(c),
                busy(c),
                where_cpu_went(&of(windows, (largest, 1, c, UNLIMITED)))
            )
        })
        .collect();
    let finished = windows
        .iter()
        .filter(|w| w.runs == largest && w.replicas == 1 && w.budget_per_hour >= UNLIMITED)
        .all(|w| w.runs_done as f64 >= 0.9 * w.runs as f64);
    let verdict = match (concurrencies.first(), concurrencies.last()) {
        _ if finished => "the window outlasted the work (nine in ten runs or more were done \
            before its end), so these rates are the work on hand, not a limit"
            .to_owned(),
        (Some(&low), Some(&high)) if low != high => {
            let gain = rate(high) / rate(low).max(f64::MIN_POSITIVE);
            if busy(high) >= 85.0 {
                format!(
                    "{gain:.1}× the rate with {high} at once, and the machine's CPU is then \
                     saturated ({:.0}% busy): more drivers cannot help on this host. The \
                     controller's side (serve, the processes it runs, Postgres) took {:.0}% \
                     of the machine, the fake GitHub's side (fakehub and its git) {:.0}%; on \
                     a host of its own, with GitHub elsewhere, the controller would have the \
                     whole machine",
                    busy(high),
                    side(high, &[0, 1, 2]),
                    side(high, &[3]),
                )
            } else if gain >= 1.3 {
                format!(
                    "{gain:.1}× the rate with {high} at once while the CPU is not saturated: \
                     at the default the limit is the driver's concurrency (each driven run \
                     mostly waits for its agent, git and validation processes), not the \
                     machine or the database"
                )
            } else {
                format!(
                    "{gain:.1}× the rate with {high} at once although neither serve, its \
                     children nor Postgres saturate the CPU: the limit lies outside what \
                     is counted here, most likely fakehub, which serves every REST call \
                     and git transfer of the fleet from the bench's own process (not \
                     counted) behind one lock over its world"
                )
            }
        }
        _ => "one concurrency only was measured".to_owned(),
    };
    format!("{}. So: {verdict}.", parts.join("; "))
}

/// What GitHub's budget of one installation does to the rate.
fn budget_verdict(unbounded: &[&Window], budgeted: &[&Window]) -> String {
    if unbounded.is_empty() || budgeted.is_empty() {
        return "not measured.".to_owned();
    }
    let rate =
        |windows: &[&Window]| spread(windows.iter().map(|w| w.transitions_per_second())).median;
    let per_transition = spread(unbounded.iter().map(|w| w.points_per_transition())).median;
    let sustained = GITHUB_BUDGET as f64 / 3600.0 / per_transition.max(f64::MIN_POSITIVE);
    format!(
        "{:.1} transitions/s in the window against {:.1} without a limit. At {:.1} \
         points per transition, {GITHUB_BUDGET} points an hour sustain {sustained:.2} \
         transitions a second for one installation: past its first minutes a fleet this \
         size waits for GitHub's budget, which only more installations (each its own \
         budget) raise. The controller waits at its rate-limit gate rather than being \
         refused.",
        rate(budgeted),
        rate(unbounded),
        per_transition,
    )
}

/// What one replica against three says about the limit.
fn replicas_verdict(one: &[&Window], three: &[&Window]) -> String {
    if one.is_empty() || three.is_empty() {
        return "One of the two configurations was not measured.".to_owned();
    }
    let rate =
        |windows: &[&Window]| spread(windows.iter().map(|w| w.transitions_per_second())).median;
    let postgres = spread(three.iter().map(|w| w.cpu_shares()[2])).median;
    let busy = spread(three.iter().map(|w| w.machine_busy())).median;
    let gain = rate(three) / rate(one).max(f64::MIN_POSITIVE);
    let limit = if postgres >= 60.0 {
        "Postgres is the limit: it takes most of the machine".to_owned()
    } else if busy >= 85.0 {
        "the machine's CPU is the limit, shared by the replicas, their agents, Postgres \
         and the fake GitHub; Postgres itself is not, so on this host the database's limit \
         cannot be reached: it needs more cores than the rest of the fleet leaves it"
            .to_owned()
    } else if gain >= 1.3 {
        "neither Postgres nor the CPU is saturated and replicas add throughput as \
         drivers would: each replica's drivers mostly wait on their runs' processes"
            .to_owned()
    } else {
        "neither Postgres nor the CPU counted here is saturated, yet replicas add \
         nothing: the limit lies outside the controller's processes, most likely \
         fakehub (every REST call and git transfer of the fleet, served from the \
         bench's own process behind one lock over its world)"
            .to_owned()
    };
    format!(
        "Three replicas reach {gain:.2}× one replica's transitions per second; {}. With \
         three, Postgres used {postgres:.0}% of the machine and the machine was {busy:.0}% \
         busy: {limit}.",
        where_cpu_went(three),
    )
}

/// What one shard carries, from the database CPU each transition cost in
/// the windows and what GitHub's budget lets one installation do.
fn shard_numbers(windows: &[Window]) -> String {
    let per_transition_ms = spread(
        windows
            .iter()
            .map(|w| 1000.0 * w.postgres_cpu.as_secs_f64() / (w.transitions.max(1) as f64)),
    )
    .median;
    let points = spread(windows.iter().map(Window::points_per_transition)).median;
    if !(per_transition_ms > 0.0 && points > 0.0) {
        return "not measured.".to_owned();
    }
    let per_core = 1000.0 / per_transition_ms;
    let per_installation = GITHUB_BUDGET as f64 / 3600.0 / points;
    format!(
        "Postgres spent {per_transition_ms:.1} ms of CPU per transition in these windows \
         (median), so one database core carries about {per_core:.0} transitions a second. \
         GitHub lets one installation make {per_installation:.2} transitions a second \
         ({GITHUB_BUDGET} points an hour at {points:.1} points each), so one core keeps up \
         with about {:.0} installations working flat out. A shard is split when its \
         Postgres CPU, not the replicas', approaches its cores; until then more replicas \
         on one database is the cheaper step.",
        per_core / per_installation,
    )
}

/// The three sections.
pub fn sections(
    options: &BenchOptions,
    window: Duration,
    windows: &[Window],
    recoveries: &[Recovery],
) -> anyhow::Result<Vec<Section>> {
    let single: Vec<Window> = windows
        .iter()
        .filter(|w| w.replicas == 1)
        .cloned()
        .collect();
    let largest = single.iter().map(|w| w.runs).max().unwrap_or(0);
    let default_concurrency = single.iter().map(|w| w.concurrency).min().unwrap_or(0);
    let budgeted = of(&single, (largest, 1, default_concurrency, GITHUB_BUDGET));
    let unbounded = of(&single, (largest, 1, default_concurrency, UNLIMITED));
    let mut sizes: Vec<usize> = single.iter().map(|w| w.runs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let by_size = |pick: fn(&Window) -> f64| -> Vec<(f64, f64)> {
        sizes
            .iter()
            .map(|&runs| {
                let these = of(&single, (runs, 1, default_concurrency, UNLIMITED));
                let median = spread(these.iter().map(|w| pick(w))).median;
                (runs as f64, median)
            })
            .collect()
    };
    let rss_chart = "scale-rss.svg";
    line_chart(
        &options.chart_path(rss_chart),
        "Peak RSS of autoforge serve by runs started",
        "runs",
        "MB",
        &[Series {
            name: "peak RSS".into(),
            points: by_size(|w| w.peak_rss as f64 / MB),
        }],
    )?;
    let rate_chart = "scale-transitions.svg";
    line_chart(
        &options.chart_path(rate_chart),
        "Transitions and effects per second by runs started",
        "runs",
        "per second",
        &[
            Series {
                name: "transitions/s".into(),
                points: by_size(Window::transitions_per_second),
            },
            Series {
                name: "effects observed/s".into(),
                points: by_size(Window::effects_per_second),
            },
        ],
    )?;
    let repeats = unbounded.len();
    let scale = Section {
        title: "Scale on one host".into(),
        markdown: format!(
            "Many repositories of one account, the App installed on all, one issue per run; \
             every issue is labelled at once (16 label requests in flight, each a signed \
             `issues.labeled` webhook from fakehub to `autoforge serve`), and the demo's \
             instant scripted agents carry each run through implement, validation, one \
             clean review and an auto merge. `autoforge serve` is this build's binary as a \
             child process (leases of {LEASE_SECONDS} s), on a \
             local Postgres with fsync and synchronous commit on. Each window is {} s from \
             the first label; {repeats} window(s) per size, median (min–max).\n\n\
             {TABLE_HEAD}\n{}\n\n\
             A run waits in the journal (active, not leased) until a driver is free, so \
             \"runs started\" counts those that made their first transition in the window, \
             and the webhook → first transition times are theirs: past the first few \
             dozen they are the wait for a driver.\n\n\
             Where it saturates, at {largest} runs, with a budget no window can spend \
             (the controller measured, not GitHub): {}\n\n\
             With GitHub's own budget: {}\n",
            window.as_secs(),
            rows(&single).join("\n"),
            saturation(&single, largest),
            budget_verdict(&unbounded, &budgeted),
        ),
        charts: vec![rss_chart.into(), rate_chart.into()],
    };

    let recovery_rows: Vec<String> = recoveries
        .iter()
        .map(|r| {
            let after = |value: Option<f64>| {
                value.map_or_else(|| "not reached".to_owned(), |s| format!("{s:.2}"))
            };
            let beyond = r
                .recovered_after()
                .map_or_else(|| "—".to_owned(), |s| format!("{:.2}", s - r.lease_remaining));
            format!(
                "| {} ({} leased, {} queued, {} sleeping) | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {beyond} | {} / {} / {} |",
                r.active_runs,
                r.leased_runs,
                r.queued_runs,
                r.sleeping_runs,
                r.in_flight_runs,
                r.open_launches,
                r.pending_effects,
                r.lease_remaining,
                r.ready_after,
                after(r.leased_after),
                after(r.launches_closed_after),
                after(r.settled_after),
                r.reads,
                r.writes,
                r.points,
            )
        })
        .collect();
    let recovery = Section {
        title: "Recovery after SIGKILL".into(),
        markdown: format!(
            "At the end of each {largest}-run window the single replica is killed with \
             SIGKILL and started again at once on the same database. The runs it was \
             working on (in flight: leased, or with an agent launch or an effect \
             unfinished) can be taken back only once their leases expire (leases of \
             {LEASE_SECONDS} s, renewed while held); their agents died with the killed \
             supervisor. The new process takes begun work first (runs whose lease ran \
             out unreleased, then runs with writes unfinished) before runs that never \
             started. Recovered means every run in flight is leased again by the new \
             process (or has ended), every launch open at the kill is ended (found lost, \
             to be launched again), and every effect those runs had `intended` or \
             `attempted` is settled. Times are seconds after the restart; \"beyond the \
             lease\" is recovery minus the time the latest lease still had at the kill \
             (target: < 2 s). Requests are those made from the restart until recovered: \
             reads / writes / rate-limit points.\n\n\
             | active runs at the kill | in flight | open launches | their pending effects \
             | lease time left | ready after | in flight leased again after | launches \
             ended after | effects settled after | beyond the lease | requests |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n{}\n",
            recovery_rows.join("\n"),
        ),
        charts: Vec::new(),
    };

    let replicated: Vec<Window> = windows
        .iter()
        .filter(|w| {
            w.runs == largest
                && w.concurrency == default_concurrency
                && w.budget_per_hour >= UNLIMITED
        })
        .cloned()
        .collect();
    let three = of(&replicated, (largest, 3, default_concurrency, UNLIMITED));
    let beyond = Section {
        title: "Beyond one host".into(),
        markdown: format!(
            "The same {largest}-run window with one replica and with three on one \
             Postgres (each replica its own process and state directory; webhooks go to \
             the first, every replica takes runs through leases):\n\n\
             {TABLE_HEAD}\n{}\n\n\
             {}\n\n\
             How the design goes past one database, on paper:\n\n\
             - What partitions by installation: runs, their effects, launches, \
             validation records, run events and lease holdings all belong to one \
             repository and so to one installation; no query joins two installations. \
             Each installation is assigned to one database (a shard) by a small global \
             table, and every replica connects to every shard, leasing runs from each.\n\
             - What stays global: the webhook inbox (a delivery is stored before its \
             installation is known to be ours, and GitHub's delivery ids are global), \
             answers to commands, rate-limit readings per installation (read by all \
             replicas), and the shard map. The inbox is the ingest path: at the \
             measured c64 ingest rate above, one Postgres commits several thousand \
             deliveries a second, far beyond what a fleet's runs make (each run's \
             cycle is a few dozen webhooks).\n\
             - The numbers that motivate it: {}\n",
            rows(&replicated).join("\n"),
            replicas_verdict(
                &of(&replicated, (largest, 1, default_concurrency, UNLIMITED)),
                &three
            ),
            shard_numbers(&replicated),
        ),
        charts: Vec::new(),
    };
    Ok(vec![scale, recovery, beyond])
}
