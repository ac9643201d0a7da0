//! The dashboard's HTML: server-rendered, no JavaScript, readable on a
//! phone. `maud` escapes every interpolated value, so agent- or
//! user-written text (a blocked reason, a log line) is shown, never run.

use autoforge_journal::PullNumber;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::Site;
use super::view::{RunDetail, RunSummary};
use crate::sandbox::SandboxMode;

/// Where links to GitHub point (`https://github.com` for github.com).
#[derive(Debug, Clone)]
pub struct Links {
    pub html_base: String,
}

impl Links {
    fn issue(&self, repository: &str, number: i64) -> String {
        format!(
            "{}/{repository}/issues/{number}",
            self.html_base.trim_end_matches('/')
        )
    }

    fn pull(&self, repository: &str, number: PullNumber) -> String {
        format!(
            "{}/{repository}/pull/{number}",
            self.html_base.trim_end_matches('/')
        )
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1rem;max-width:72rem}\
table{border-collapse:collapse;width:100%;font-size:.9rem}\
th,td{border-bottom:1px solid #ddd;padding:.3rem .4rem;text-align:left;vertical-align:top}\
.scroll{overflow-x:auto}code,pre{font-size:.8rem}pre{white-space:pre-wrap;background:#f6f6f6;padding:.4rem}\
.BLOCKED,.FAILED{color:#b00}.DONE{color:#070}.STOPPED{color:#777}\
.unsandboxed{border:2px solid #b00;background:#fff0f0;padding:.5rem .8rem}";

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

fn page(title: &str, site: &Site, now: DateTime<Utc>, body: Markup) -> Markup {
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

/// `/`: every run, newest first.
pub fn index(runs: &[RunSummary], site: &Site, now: DateTime<Utc>) -> Markup {
    let active = runs.iter().filter(|r| r.active).count();
    let links = &site.links;
    page(
        "runs",
        site,
        now,
        html! {
            h1 { "Runs" }
            p { (active) " active, " (runs.len()) " shown" }
            @if runs.is_empty() {
                p { "No run yet. Label an issue with the trigger label to start one." }
            } @else {
                div.scroll { table {
                    thead { tr { th { "run" } th { "repository" } th { "issue" } th { "EPIC" }
                        th { "phase" } th { "age" } th { "last change" } } }
                    tbody { @for run in runs { tr {
                        td { a href={ "/runs/" (run.id) } { "#" (run.id) } }
                        td { (run.repository) }
                        td { a href=(links.issue(&run.repository, run.issue)) { "#" (run.issue) } }
                        td { @if let Some(epic) = run.epic {
                            a href=(links.issue(&run.repository, epic)) { "#" (epic) } } }
                        td class=(run.phase) { (run.phase) }
                        td { (age(run.created_at, now)) }
                        td { (age(run.updated_at, now)) " ago" }
                    } } }
                } }
            }
        },
    )
}

fn duration(ms: Option<i64>) -> String {
    match ms {
        Some(ms) if ms >= 1_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        Some(ms) => format!("{ms} ms"),
        None => "running".to_owned(),
    }
}

/// `/runs/{id}`: one run's timeline, writes, launches and validations.
pub fn run(detail: &RunDetail, site: &Site, now: DateTime<Utc>) -> Markup {
    let run = &detail.summary;
    let links = &site.links;
    page(
        &format!("run {}", run.id),
        site,
        now,
        html! {
            h1 { "Run #" (run.id) " · " span class=(run.phase) { (run.phase) } }
            ul {
                li { "Issue " a href=(links.issue(&run.repository, run.issue)) { (run.repository) "#" (run.issue) } }
                @if let Some(epic) = run.epic { li { "EPIC " a href=(links.issue(&run.repository, epic)) { "#" (epic) } } }
                @if let Some(pr) = detail.pr { li { "Pull request " a href=(links.pull(&run.repository, pr)) { "#" (pr) } } }
                @if let Some(round) = detail.round { li { "Review round " (round) } }
                li { "Started " (age(run.created_at, now)) " ago; last change " (age(run.updated_at, now)) " ago" }
                @if let Some(reason) = &detail.blocked_reason { li.BLOCKED { "Blocked: " (reason) } }
                @if let Some(failure) = &detail.failure { li.FAILED { "Failure: " (failure) } }
            }
            h2 { "Timeline" }
            div.scroll { table {
                thead { tr { th { "when" } th { "what" } th { "detail" } } }
                tbody { @for entry in &detail.timeline { tr {
                    td { (entry.at.format("%H:%M:%S")) }
                    td { (entry.kind) }
                    td { code { (entry.text) } }
                } } }
            } }
            h2 { "GitHub writes" }
            div.scroll { table {
                thead { tr { th { "kind" } th { "identity" } th { "stage" } th { "attempts" } th { "result" } } }
                tbody { @for effect in &detail.effects { tr {
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
            h2 { "Agent launches" }
            @for launch in &detail.launches {
                details {
                    summary {
                        (launch.phase) " · " (launch.role) " · " (launch.profile)
                        " · attempt " (launch.attempt) " · " (duration(launch.duration_ms))
                        @if let Some(code) = launch.exit_status { " · exit " (code) }
                        @if let Some(tokens) = launch.tokens { " · " (tokens) " tokens" }
                        @if let Some(outcome) = &launch.outcome { " · " (outcome) }
                    }
                    p { "started " (launch.started_at.format("%H:%M:%S")) }
                    @if launch.log_tail.is_empty() { p { "no output captured" } }
                    @else { pre { @for line in &launch.log_tail { (line) "\n" } } }
                }
            }
            h2 { "Validations" }
            div.scroll { table {
                thead { tr { th { "commit" } th { "command" } th { "outcome" } th { "took" } } }
                tbody { @for record in &detail.validations { tr {
                    td { code { (record.sha.chars().take(12).collect::<String>()) } }
                    td { code { (record.command) } }
                    td { (record.outcome) }
                    td { (duration(Some(record.duration_ms))) }
                } } }
            } }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::view::{EffectRow, TimelineEntry};
    use chrono::TimeZone;

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0)
            .single()
            .expect("valid time")
    }

    fn summary() -> RunSummary {
        RunSummary {
            id: 7,
            repository: "acme/widgets".into(),
            issue: 12,
            epic: Some(3),
            phase: "BLOCKED".into(),
            active: true,
            created_at: at(0),
            updated_at: at(30),
        }
    }

    fn site(sandbox: SandboxMode) -> Site {
        Site {
            links: Links {
                html_base: "https://github.com/".into(),
            },
            sandbox,
        }
    }

    #[test]
    fn ages_read_in_the_two_largest_units() {
        assert_eq!(age(at(0), at(5)), "5s");
        assert_eq!(age(at(0), at(125)), "2m 5s");
        assert_eq!(age(at(0), at(3 * 3600 + 120)), "3h 2m");
        assert_eq!(age(at(0), at(2 * 86_400 + 3600)), "2d 1h");
        assert_eq!(age(at(10), at(0)), "0s");
    }

    #[test]
    fn the_index_links_each_run_and_its_issue() {
        let html = index(&[summary()], &site(SandboxMode::Bubblewrap), at(90)).into_string();
        assert!(html.contains(r#"href="/runs/7""#), "{html}");
        assert!(html.contains(r#"href="https://github.com/acme/widgets/issues/12""#));
        assert!(html.contains(r#"href="https://github.com/acme/widgets/issues/3""#));
        assert!(html.contains("1 active, 1 shown"));
        assert!(!html.contains("<script"));
    }

    fn detail() -> RunDetail {
        RunDetail {
            summary: summary(),
            round: None,
            pr: None,
            blocked_reason: None,
            failure: None,
            timeline: Vec::new(),
            effects: Vec::new(),
            launches: Vec::new(),
            validations: Vec::new(),
        }
    }

    #[test]
    fn every_page_warns_while_agents_run_unsandboxed() {
        let off = site(SandboxMode::Off);
        for html in [
            index(&[summary()], &off, at(90)).into_string(),
            index(&[], &off, at(90)).into_string(),
            run(&detail(), &off, at(90)).into_string(),
        ] {
            assert!(
                html.contains(r#"class="unsandboxed" role="alert""#),
                "{html}"
            );
            assert!(html.contains("Agents run unsandboxed."), "{html}");
            assert!(
                html.contains("agents.sandbox = &quot;bubblewrap&quot;"),
                "{html}"
            );
        }
        let on = site(SandboxMode::Bubblewrap);
        for html in [
            index(&[summary()], &on, at(90)).into_string(),
            run(&detail(), &on, at(90)).into_string(),
        ] {
            assert!(!html.contains("Agents run unsandboxed"), "{html}");
            assert!(!html.contains(r#"role="alert""#), "{html}");
        }
    }

    #[test]
    fn the_unsandboxed_banner_reads_as_written() {
        insta::assert_snapshot!(unsandboxed_banner().into_string());
    }

    #[test]
    fn text_written_by_agents_or_users_is_escaped_not_rendered() {
        let detail = RunDetail {
            summary: summary(),
            round: Some(2),
            pr: Some(autoforge_journal::testing::pull(40)),
            blocked_reason: Some("<script>alert(1)</script>".into()),
            failure: None,
            timeline: vec![TimelineEntry {
                at: at(1),
                kind: "event_refused".into(),
                text: r#"{"x":"<img src=x onerror=alert(1)>"}"#.into(),
            }],
            effects: vec![EffectRow {
                kind: "post_comment".into(),
                identity: "ai-review-result:pr=40".into(),
                stage: "observed".into(),
                attempts: 1,
                reason: Some("\"><b>bold</b>".into()),
                link: Some("https://github.com/acme/widgets/pull/40#c1".into()),
                updated_at: at(2),
            }],
            launches: Vec::new(),
            validations: Vec::new(),
        };
        let html = run(&detail, &site(SandboxMode::Bubblewrap), at(60)).into_string();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<img src=x"));
        assert!(!html.contains("<b>bold</b>"));
        assert!(html.contains(r#"href="https://github.com/acme/widgets/pull/40""#));
        assert!(html.contains("Review round 2"));
    }
}
