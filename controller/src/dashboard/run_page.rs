//! `/runs/{id}`: one run the way people follow it. At the top what it is
//! doing now (the running launch or what it waits for; why it is blocked
//! and which commands it would accept), then its SVG timeline, then one
//! section per issue with the review rounds, launches, validations and
//! GitHub writes of that issue. Bookkeeping transitions are folded away.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::Site;
use super::pages::{age, cost_words, duration, page};
use super::story::{IssueSection, Story, accepted_commands, arrange, awaiting_words};
use super::svg;
use super::view::{LaunchRow, LiveLaunch, RunDetail};

/// `/runs/{id}`.
pub fn run(detail: &RunDetail, site: &Site, now: DateTime<Utc>) -> Markup {
    let run = &detail.summary;
    let story = arrange(detail, now);
    page(
        &format!("run {}", run.id),
        site,
        now,
        html! {
            h1 { "Run #" (run.id) " · " span class=(run.phase) { (run.phase) } }
            (facts(detail, site, now))
            (live(detail))
            h2 { "Timeline" }
            // On a phone the picture keeps a readable size and scrolls.
            div.scroll { (svg::timeline(&story)) }
            (svg::legend())
            @for section in &story.sections {
                (issue_section(detail, section, site))
            }
            (transitions(&story))
        },
    )
}

fn facts(detail: &RunDetail, site: &Site, now: DateTime<Utc>) -> Markup {
    let run = &detail.summary;
    let links = &site.links;
    html! {
        ul {
            li { "Issue " a href=(links.issue(&run.repository, run.issue)) { (run.repository) "#" (run.issue) } }
            @if let Some(epic) = run.epic { li { "EPIC " a href=(links.issue(&run.repository, epic)) { "#" (epic) } } }
            @if let Some(pr) = detail.pr { li { "Pull request " a href=(links.pull(&run.repository, pr)) { "#" (pr) } } }
            @if let Some(round) = detail.round { li { "Review round " (round) } }
            li { "Started " (age(run.created_at, now)) " ago; last change " (age(run.updated_at, now)) " ago" }
            li { (run.tokens) " tokens over " (detail.launches.len()) " launches"
                @if run.cost_micros.is_some() { ", an estimated cost of " (cost_words(run.cost_micros)) }
                @if run.epic.is_some() { " (the whole EPIC so far)" } }
            @if let Some(failure) = &detail.failure { li.FAILED { "Failure: " (failure) } }
        }
    }
}

/// What the run does now, and what an operator can do about it.
fn live(detail: &RunDetail) -> Markup {
    let commands = accepted_commands(detail);
    html! {
        @if let Some(reason) = &detail.blocked_reason {
            div.blocked { strong { "Blocked: " } (reason) }
        }
        @if detail.summary.active {
            div.live {
                @if let Some(live) = &detail.running {
                    p.running { (live_words(live)) }
                } @else if let Some(awaiting) = &detail.awaiting {
                    p { "Waiting for " (awaiting_words(awaiting)) "." }
                }
                p { "Commands it accepts now:" }
                ul { @for (comment, cli) in &commands {
                    li { code { (comment) } @if let Some(cli) = cli { " or " code { (cli) } } }
                } }
            }
        }
    }
}

/// "Running: review with `codex` (attempt 2) for 12 min, 40 KB output,
/// 5120 tokens so far; last heartbeat 10:42:05".
pub(super) fn live_words(live: &LiveLaunch) -> String {
    let mut words = format!(
        "Running: {} with `{}` (attempt {})",
        live.role,
        live.profile,
        live.attempt + 1
    );
    if let Some(ms) = live.elapsed_ms {
        let minutes = ms / 60_000;
        words.push_str(&match minutes {
            0 => format!(" for {} s", ms / 1_000),
            m => format!(" for {m} min"),
        });
    }
    if let Some(bytes) = live.output_bytes {
        words.push_str(&format!(", {} KB output", (bytes + 1023) / 1024));
    }
    if let Some(tokens) = live.tokens {
        words.push_str(&format!(", {tokens} tokens so far"));
    }
    match live.heartbeat_at {
        Some(at) => words.push_str(&format!("; last heartbeat {}", at.format("%H:%M:%S"))),
        None => words.push_str(&format!("; started {}", live.started_at.format("%H:%M:%S"))),
    }
    words
}

fn issue_section(detail: &RunDetail, section: &IssueSection<'_>, site: &Site) -> Markup {
    let repository = &detail.summary.repository;
    html! {
        section.issue {
            h2 {
                @if let Some(issue) = section.issue {
                    "Issue " a href=(site.links.issue(repository, issue)) { "#" (issue) }
                } @else { "Issue (not recorded)" }
                @if section.merged_at.is_some() { " · merged" }
            }
            @if !section.rounds.is_empty() {
                h3 { "Review rounds" }
                div.scroll { table {
                    thead { tr { th { "round" } th { "reviewed HEAD" } th { "findings" } th { "outcome" } th { "comment" } } }
                    tbody { @for round in &section.rounds { tr {
                        td { (round.mark.round) }
                        td { code { (round.mark.head.chars().take(12).collect::<String>()) } }
                        td { (round.mark.findings) }
                        td { (round.outcome()) }
                        td { @if let Some(link) = round.link { a href=(link) { "open" } } @else { (round.stage) } }
                    } } }
                } }
            }
            h3 { "Agent launches" }
            @if section.launches.is_empty() { p { "none" } }
            @else { p.spent { (section_spend(section)) } }
            @for launch in &section.launches { (launch_row(launch)) }
            @if !section.validations.is_empty() {
                h3 { "Validations" }
                @for record in &section.validations {
                    details {
                        summary { code { (record.sha.chars().take(12).collect::<String>()) } " · "
                            span class=(record.outcome) { (record.outcome) } " · " code { (record.command) }
                            " · " (duration(Some(record.duration_ms))) }
                        @if record.output_tail.is_empty() { p { "no output" } }
                        @else { pre { (record.output_tail) } }
                    }
                }
            }
            h3 { "GitHub writes" }
            div.scroll { table {
                thead { tr { th { "kind" } th { "identity" } th { "stage" } th { "attempts" } th { "result" } } }
                tbody { @for effect in &section.effects { tr {
                    td { (effect.kind) }
                    td { code { (effect.identity) } }
                    td class=(effect.stage) { (effect.stage) }
                    td { (effect.attempts) }
                    td {
                        @if let Some(link) = &effect.link { a href=(link) { "open" } }
                        @if let Some(reason) = &effect.reason { " " (reason) }
                    }
                } } }
            } }
        }
    }
}

/// What the launches of one issue spent: "3 launches, 2700 tokens, an
/// estimated cost of 0.0054".
fn section_spend(section: &IssueSection<'_>) -> String {
    let tokens: i64 = section.launches.iter().filter_map(|l| l.tokens).sum();
    let priced: Vec<i64> = section
        .launches
        .iter()
        .filter_map(|l| l.cost_micros)
        .collect();
    let count = section.launches.len();
    let mut words = format!(
        "{count} launch{} on this issue, {tokens} tokens",
        if count == 1 { "" } else { "es" }
    );
    if !priced.is_empty() {
        words.push_str(&format!(
            ", an estimated cost of {}",
            cost_words(Some(priced.iter().sum()))
        ));
    }
    words
}

fn launch_row(launch: &LaunchRow) -> Markup {
    html! {
        details {
            summary {
                (launch.role) " · " (launch.profile)
                " · attempt " (launch.attempt) " · " (duration(launch.duration_ms))
                @if let Some(code) = launch.exit_status { " · exit " (code) }
                @if let Some(tokens) = launch.tokens { " · " (tokens) " tokens" }
                @if launch.cost_micros.is_some() { " · est. " (cost_words(launch.cost_micros)) }
                @if let Some(outcome) = &launch.outcome { " · " (outcome) }
            }
            p { (launch.phase) ", started " (launch.started_at.format("%H:%M:%S")) }
            @if launch.log_tail.is_empty() { p { "no output captured" } }
            @else { pre { @for line in &launch.log_tail { (line) "\n" } } }
        }
    }
}

/// Every transition that changed something; bookkeeping ones are counted.
fn transitions(story: &Story<'_>) -> Markup {
    html! {
        details {
            summary { "All transitions (" (story.transitions.len()) "; " (story.folded)
                " without a change folded away)" }
            div.scroll { table {
                thead { tr { th { "when" } th { "what" } th { "detail" } } }
                tbody { @for entry in &story.transitions { tr {
                    td { (entry.at.format("%H:%M:%S")) }
                    td { (entry.kind) }
                    td { code { (entry.text) } }
                } } }
            } }
        }
    }
}
