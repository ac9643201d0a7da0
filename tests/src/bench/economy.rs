//! GitHub API economy (#19 §2): the requests the controller makes for the
//! demo's workload (an EPIC of three issues: implement, review rounds with
//! a finding and its fix, a follow-up issue, auto merge, EPIC updates), as
//! fakehub counts them, by route and split into reads and writes, with the
//! rate-limit points they cost (a `304` costs none), next to the fewest the
//! SPEC allows for the same work.
//!
//! The minimum is derived from what the run did (its effects, launches and
//! merges, from the demo's report), one rule per line:
//!
//! - every write is one request (SPEC §6 rule 2: sent once);
//! - every effect reads its identity before the send and again after it
//!   (rule 2: reconcile, send, reconcile; rule 5: the append kinds digest
//!   the body before and read it back after): two reads;
//! - a push is sent over git, but its ref is read before and after: two
//!   reads;
//! - a launch's read-context needs its subject and that subject's
//!   conversation (the issue or PR and its comments, or the EPIC and its
//!   sub-issues): two reads;
//! - a merge is gated on the head's checks: one read beyond the merge
//!   effect's own;
//! - a run starts on a fresh read of the labeller's permission and of the
//!   issue: two reads;
//! - installation tokens are minted as the controller needs them: counted
//!   as made.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use super::chart::bar_chart;
use super::{BenchOptions, Section};

/// One line of the derived minimum.
struct Need {
    what: String,
    reads: u64,
    writes: u64,
    rule: &'static str,
}

/// Runs the demo in-process and reads its report.
pub(crate) async fn demo_report() -> anyhow::Result<Value> {
    let folder = tempfile::tempdir()?;
    let report = folder.path().join("report.json");
    let options = autoforge::demo::DemoOptions {
        // The demo's own temporary state folder, which it makes reachable
        // for the managed Postgres's user (a 0700 folder of ours is not).
        state_dir: None,
        report: Some(report.clone()),
        keep: false,
        timeout: Duration::from_secs(600),
        config: None,
        agents: None,
    };
    let end = autoforge::demo::run(&options).await?;
    if end != autoforge::demo::DemoEnd::Done {
        bail!("the demo did not finish: {end:?}");
    }
    let text = std::fs::read_to_string(&report).context("the demo's report")?;
    Ok(serde_json::from_str(&text)?)
}

pub(crate) fn count(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// The fewest requests the SPEC allows for what the demo's run did.
fn minimum(report: &Value) -> anyhow::Result<Vec<Need>> {
    let effects = report["effects"]
        .as_object()
        .context("the report's effects")?;
    let observed = |kind: &str| {
        effects
            .get(kind)
            .map_or(0, |stages| count(&stages["observed"]))
    };
    let mut needs = Vec::new();
    for (kind, stages) in effects {
        let n = count(&stages["observed"]);
        if kind == "push" {
            needs.push(Need {
                what: format!("{n} × push (over git)"),
                reads: 2 * n,
                writes: 0,
                rule: "the ref read before and after the push",
            });
        } else {
            needs.push(Need {
                what: format!("{n} × {kind}"),
                reads: 2 * n,
                writes: n,
                rule: "one send; the identity read before and after it",
            });
        }
    }
    let launches = count(&report["agent_launches"]);
    needs.push(Need {
        what: format!("{launches} agent launches"),
        reads: 2 * launches,
        writes: 0,
        rule: "each launch's subject and its conversation",
    });
    let merges = observed("merge_pr");
    needs.push(Need {
        what: format!("{merges} merge gates"),
        reads: merges,
        writes: 0,
        rule: "the head's checks before merging",
    });
    let runs = report["runs"].as_array().map_or(0, Vec::len) as u64;
    needs.push(Need {
        what: format!("{runs} run start"),
        reads: 2 * runs,
        writes: 0,
        rule: "the labeller's permission and the issue, read fresh",
    });
    let routes = &report["github_requests"]["controller_by_route"];
    let tokens = count(&routes["POST /app/installations/{id}/access_tokens"]);
    needs.push(Need {
        what: format!("{tokens} installation tokens"),
        reads: 0,
        writes: tokens,
        rule: "minted as needed",
    });
    Ok(needs)
}

/// Runs the economy section.
pub async fn run(options: &BenchOptions) -> anyhow::Result<Section> {
    // Counts vary a little with timing (whether a change arrives as a
    // webhook or is seen by a poll first): the run with the median points
    // is the one shown, with the others' range.
    let mut reports = Vec::new();
    for _ in 0..options.repeats {
        let report = demo_report().await?;
        let by_controller = &report["github_requests"]["by_controller"];
        reports.push((count(&by_controller["points"]), report));
    }
    reports.sort_by_key(|(total, _)| *total);
    let totals: Vec<u64> = reports.iter().map(|(total, _)| *total).collect();
    let (_, report) = reports.swap_remove(reports.len() / 2);
    let requests = &report["github_requests"];
    let made_reads = count(&requests["by_controller"]["reads"]);
    let made_writes = count(&requests["by_controller"]["writes"]);
    let not_modified = count(&requests["by_controller"]["not_modified"]);
    let points = count(&requests["by_controller"]["points"]);
    let points_by_route = &requests["controller_points_by_route"];
    let routes: BTreeMap<String, u64> = requests["controller_by_route"]
        .as_object()
        .context("the report's controller routes")?
        .iter()
        .map(|(route, n)| (route.clone(), count(n)))
        .collect();
    let mut by_count: Vec<(&String, &u64)> = routes.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let needs = minimum(&report)?;
    let least_reads: u64 = needs.iter().map(|n| n.reads).sum();
    let least_writes: u64 = needs.iter().map(|n| n.writes).sum();
    let made = made_reads + made_writes;
    let least = least_reads + least_writes;
    let issues = count(&report["effects"]["merge_pr"]["observed"]).max(1);
    let ratio = made as f64 / least.max(1) as f64;
    // The minimum spends a point per request: none of its reads can be
    // a `304`, since each follows a change or is the first of its kind.
    let points_ratio = points as f64 / least.max(1) as f64;

    let chart = "economy-routes.svg";
    let bars: Vec<(String, f64)> = by_count
        .iter()
        .take(12)
        .map(|(route, n)| ((*route).clone(), **n as f64))
        .collect();
    bar_chart(
        &options.chart_path(chart),
        "Controller requests by route (demo EPIC of 3)",
        "requests",
        &bars,
    )?;
    let route_rows: Vec<String> = by_count
        .iter()
        .map(|(route, n)| {
            let spent = count(&points_by_route[route.as_str()]);
            format!("| `{route}` | {n} | {spent} |")
        })
        .collect();
    let need_rows: Vec<String> = needs
        .iter()
        .map(|n| format!("| {} | {} | {} | {} |", n.what, n.reads, n.writes, n.rule))
        .collect();
    let idle = super::idle::measure().await?;
    let markdown = format!(
        "The demo's workload (`autoforge demo`: an EPIC of three issues with a review \
         finding, its fix, a follow-up issue, auto merge and EPIC updates), run \
         in-process {} times; requests counted by fakehub, the controller's own only (the \
         demo's operator seeding the world is left out). The run with the median total is \
         shown; the points of all runs ranged {}–{}.\n\n\
         Every read the controller makes is conditional (`If-None-Match` with the \
         ETag of its last answer), and GitHub answers an unchanged one `304 Not \
         Modified` without spending rate limit: requests are round trips, points are \
         what they cost the installation's budget (the target is on points).\n\n\
         | | reads | writes | requests | of which `304` | rate-limit points | points per merged issue |\n\
         |---|---|---|---|---|---|---|\n\
         | made | {made_reads} | {made_writes} | {made} | {not_modified} | {points} | {:.0} |\n\
         | minimum (derived below) | {least_reads} | {least_writes} | {least} | 0 | {least} | {:.0} |\n\
         | made ÷ minimum | | | {ratio:.2}× | | **{points_ratio:.2}×** | |\n\n\
         The minimum, from what the run did (its effects, launches and merges):\n\n\
         | work | reads | writes | rule (SPEC §6) |\n|---|---|---|---|\n{}\n\n\
         Requests made, by route:\n\n| route | requests | points |\n|---|---|---|\n{}\n\n{}",
        totals.len(),
        totals.first().copied().unwrap_or(0),
        totals.last().copied().unwrap_or(0),
        points as f64 / issues as f64,
        least as f64 / issues as f64,
        need_rows.join("\n"),
        route_rows.join("\n"),
        idle.markdown(),
    );
    Ok(Section {
        title: "GitHub API economy".into(),
        markdown,
        charts: vec![chart.into()],
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_minimum_counts_a_send_and_two_reads_per_effect_and_the_fixed_reads() {
        let report = json!({
            "effects": {
                "post_comment": {"observed": 2},
                "push": {"observed": 1},
                "merge_pr": {"observed": 1}
            },
            "agent_launches": 3,
            "runs": [{"id": "1"}],
            "github_requests": {"controller_by_route": {
                "POST /app/installations/{id}/access_tokens": 1
            }}
        });
        let needs = minimum(&report).unwrap();
        let reads: u64 = needs.iter().map(|n| n.reads).sum();
        let writes: u64 = needs.iter().map(|n| n.writes).sum();
        // Effects 2×2 + 1×2 (push) + 1×2 (merge); launches 3×2; one merge
        // gate; the run's start 2.
        assert_eq!(reads, 4 + 2 + 2 + 6 + 1 + 2);
        // Two comments, one merge, one token; the push goes over git.
        assert_eq!(writes, 2 + 1 + 1);
    }
}
