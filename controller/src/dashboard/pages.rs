//! The dashboard's HTML: the page layout and the runs list (the run page
//! is [`super::run_page`]). Server-rendered, no JavaScript, readable on a
//! phone. `maud` escapes every interpolated value, so agent- or
//! user-written text (a blocked reason, a log line) is shown, never run.

use autoforge_journal::PullNumber;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::Site;
use super::view::{IndexFilter, IndexPage, PAGE_SIZE};
use crate::sandbox::SandboxMode;

/// Where links to GitHub point (`https://github.com` for github.com).
#[derive(Debug, Clone)]
pub struct Links {
    pub html_base: String,
}

impl Links {
    pub(super) fn issue(&self, repository: &str, number: i64) -> String {
        format!(
            "{}/{repository}/issues/{number}",
            self.html_base.trim_end_matches('/')
        )
    }

    pub(super) fn pull(&self, repository: &str, number: PullNumber) -> String {
        format!(
            "{}/{repository}/pull/{number}",
            self.html_base.trim_end_matches('/')
        )
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:.8rem;max-width:72rem;line-height:1.35}\
table{border-collapse:collapse;width:100%;font-size:.9rem}\
th,td{border-bottom:1px solid #ddd;padding:.3rem .4rem;text-align:left;vertical-align:top}\
.scroll{overflow-x:auto}code,pre{font-size:.8rem;overflow-wrap:anywhere}\
pre{white-space:pre-wrap;background:#f6f6f6;padding:.4rem;max-height:20rem;overflow:auto}\
.BLOCKED,.FAILED,.conflict{color:#b00}.DONE,.observed{color:#070}.STOPPED{color:#777}\
.unsandboxed{border:2px solid #b00;background:#fff0f0;padding:.5rem .8rem}\
.blocked{border-left:4px solid #b00;background:#fff4f4;padding:.4rem .8rem}\
.live{border-left:4px solid #2f6fca;background:#f2f6fd;padding:.4rem .8rem}\
section.issue{border:1px solid #ddd;border-radius:6px;padding:.2rem .8rem;margin:.8rem 0}\
svg.timeline{width:100%;min-width:40rem;height:auto;background:#fff;border:1px solid #eee}\
.key{display:inline-block;width:.9rem;height:.6rem}.legend{font-size:.8rem}\
form.filters{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end;margin-bottom:.6rem}\
form.filters label{display:flex;flex-direction:column;font-size:.8rem}\
nav.pages a,nav.pages span{margin-right:.8rem}";

/// Shown on every page while agents run outside the sandbox: whoever
/// looks at runs should know that a prompt-injected agent could have
/// reached everything the controller can.
fn unsandboxed_banner() -> Markup {
    html! {
        div.unsandboxed role="alert" {
            strong { "Agents run unsandboxed." }
            " " code { "agents.sandbox = \"off\"" } " is set, so agent launches and validation \
            commands run as plain processes of the controller and can read everything it can \
            (its database, keys and every repository mirror). To turn the sandbox back on, \
            remove the setting (or set " code { "agents.sandbox = \"bubblewrap\"" } ") and \
            restart; " code { "autoforge config check" } " shows what each launch would see."
        }
    }
}

pub(super) fn page(title: &str, site: &Site, now: DateTime<Utc>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // A plain refresh keeps the page current without scripts.
                meta http-equiv="refresh" content="15";
                title { (title) " · autoforge" }
                style { (STYLE) }
            }
            body {
                p { a href="/" { "autoforge" } " · rendered " (now.format("%Y-%m-%d %H:%M:%S UTC")) }
                @if site.sandbox == SandboxMode::Off { (unsandboxed_banner()) }
                (body)
            }
        }
    }
}

/// `3d 4h`, `12m 5s`: how long ago `then` was.
/// An estimated cost for a table cell: `-` when nothing was priced.
pub fn cost_words(micros: Option<i64>) -> String {
    micros
        .and_then(|m| u64::try_from(m).ok())
        .map_or_else(|| "-".to_owned(), crate::machine::budget::format_cost)
}

pub fn age(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - then).num_seconds().max(0);
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds % 86_400 / 3_600,
        seconds % 3_600 / 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// The index's filter form: no script, a plain GET.
fn filters(page: &IndexPage) -> Markup {
    let filter = &page.filter;
    let chosen_repo = filter.repo().unwrap_or_default();
    let chosen_phase = filter.phase().unwrap_or_default();
    html! {
        form.filters method="get" action="/" {
            label { "repository"
                select name="repo" {
                    option value="" { "any" }
                    @for repository in &page.repositories {
                        option value=(repository) selected[*repository == chosen_repo] { (repository) }
                    }
                }
            }
            label { "phase"
                select name="phase" {
                    option value="" { "any" }
                    @for phase in crate::machine::Phase::ALL {
                        option value=(phase.as_str()) selected[phase.as_str() == chosen_phase] { (phase.as_str()) }
                    }
                }
            }
            label { "blocked only"
                input type="checkbox" name="blocked" value="1" checked[filter.blocked_only()];
            }
            button type="submit" { "filter" }
        }
    }
}

/// The query string of `filter` on page `number`.
fn page_link(filter: &IndexFilter, number: i64) -> String {
    let mut parts = Vec::new();
    if let Some(repo) = filter.repo() {
        parts.push(format!("repo={}", form_escape(&repo)));
    }
    if let Some(phase) = filter.phase() {
        parts.push(format!("phase={}", form_escape(&phase)));
    }
    if filter.blocked_only() {
        parts.push("blocked=1".to_owned());
    }
    parts.push(format!("page={number}"));
    format!("/?{}", parts.join("&"))
}

/// Percent-encodes everything but unreserved characters.
fn form_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `/`: the runs the filter selects, newest first, a page at a time.
pub fn index(page: &IndexPage, site: &Site, now: DateTime<Utc>) -> Markup {
    let links = &site.links;
    let number = page.filter.page();
    let pages = ((page.matching + PAGE_SIZE - 1) / PAGE_SIZE).max(1);
    super::pages::page(
        "runs",
        site,
        now,
        html! {
            h1 { "Runs" }
            (filters(page))
            p { (page.matching) " matching · page " (number) " of " (pages) }
            @if page.runs.is_empty() {
                p { "No run yet. Label an issue with the trigger label to start one." }
            } @else {
                div.scroll { table {
                    thead { tr { th { "run" } th { "repository" } th { "issue" } th { "EPIC" }
                        th { "phase" } th { "round" } th { "age" } th { "tokens" } th { "est. cost" } th { "blocked because" } } }
                    tbody { @for run in &page.runs { tr {
                        td { a href={ "/runs/" (run.id) } { "#" (run.id) } }
                        td { (run.repository) }
                        td { a href=(links.issue(&run.repository, run.issue)) { "#" (run.issue) } }
                        td { @if let Some(epic) = run.epic {
                            a href=(links.issue(&run.repository, epic)) { "#" (epic) } } }
                        td class=(run.phase) { (run.phase) }
                        td { @if let Some(round) = run.round { (round) } }
                        td { (age(run.created_at, now)) }
                        td { (run.tokens) }
                        td { (cost_words(run.cost_micros)) }
                        td { @if let Some(reason) = &run.blocked_reason { (reason) } }
                    } } }
                } }
            }
            nav.pages {
                @if number > 1 { a href=(page_link(&page.filter, number - 1)) { "← newer" } }
                @if number < pages { a href=(page_link(&page.filter, number + 1)) { "older →" } }
            }
        },
    )
}

/// `2.5 s`, `300 ms`, or `running` while a launch has no end.
pub(super) fn duration(ms: Option<i64>) -> String {
    match ms {
        Some(ms) if ms >= 1_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        Some(ms) => format!("{ms} ms"),
        None => "running".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::fixtures::at;

    #[test]
    fn ages_read_in_the_two_largest_units() {
        assert_eq!(age(at(0), at(5)), "5s");
        assert_eq!(age(at(0), at(125)), "2m 5s");
        assert_eq!(age(at(0), at(3 * 3600 + 120)), "3h 2m");
        assert_eq!(age(at(0), at(2 * 86_400 + 3600)), "2d 1h");
        assert_eq!(age(at(10), at(0)), "0s");
    }

    #[test]
    fn the_unsandboxed_banner_reads_as_written() {
        insta::assert_snapshot!(unsandboxed_banner().into_string());
    }

    #[test]
    fn page_links_keep_the_filter_and_encode_it() {
        let filter = IndexFilter {
            repo: Some("acme/widgets".into()),
            phase: Some("blocked".into()),
            blocked: Some("1".into()),
            page: None,
        };
        assert_eq!(
            page_link(&filter, 2),
            "/?repo=acme%2Fwidgets&phase=BLOCKED&blocked=1&page=2"
        );
        assert_eq!(page_link(&IndexFilter::default(), 1), "/?page=1");
    }
}
