//! The pages on fixed data: what they show, how they are arranged, that
//! nothing written by agents or users is rendered as markup, and
//! snapshots of the whole HTML.

use super::fixtures::{at, epic_run, index_page, site, summary};
use super::pages::index;
use super::run_page::run;
use super::story::{accepted_commands, arrange};
use super::view::{EffectRow, RunDetail, TimelineEntry};
use crate::sandbox::SandboxMode;

#[test]
fn the_index_links_each_run_its_issue_and_epic_and_shows_round_tokens_and_reason() {
    let html = index(&index_page(), &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    assert!(html.contains(r#"href="/runs/7""#), "{html}");
    assert!(html.contains(r#"href="https://github.com/acme/widgets/issues/13""#));
    assert!(html.contains(r#"href="https://github.com/acme/widgets/issues/3""#));
    assert!(html.contains("validation failed twice on the candidate"));
    assert!(html.contains("<td>4200</td>"), "{html}");
    assert!(html.contains("120 matching · page 2 of 3"), "{html}");
    assert!(
        html.contains(r#"<option value="acme/widgets" selected>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"href="/?repo=acme%2Fwidgets&amp;page=1""#),
        "{html}"
    );
    assert!(
        html.contains(r#"href="/?repo=acme%2Fwidgets&amp;page=3""#),
        "{html}"
    );
    assert!(!html.contains("<script"));
}

#[test]
fn an_epic_run_is_arranged_per_issue_with_its_rounds_launches_and_merge() {
    let detail = epic_run();
    let story = arrange(&detail, at(1_000));
    let issues: Vec<Option<i64>> = story.sections.iter().map(|s| s.issue).collect();
    assert_eq!(issues, [Some(12), Some(13)]);
    let first = &story.sections[0];
    assert_eq!(first.rounds.len(), 2);
    assert_eq!(first.rounds[0].outcome(), "needs a fix round");
    assert_eq!(first.rounds[1].outcome(), "clean");
    assert_eq!(first.launches.len(), 4);
    assert!(first.merged_at.is_some());
    let second = &story.sections[1];
    assert_eq!(second.launches.len(), 1);
    assert_eq!(second.validations.len(), 1);
    assert!(second.merged_at.is_none());
    assert_eq!(story.folded, 1, "the IMPLEMENT → IMPLEMENT bookkeeping");
    assert_eq!(story.blocks.len(), 1);
    assert!(story.blocks[0].open);
}

#[test]
fn a_blocked_run_offers_unblock_and_stop_and_a_finished_one_nothing() {
    let detail = epic_run();
    let commands: Vec<&str> = accepted_commands(&detail).iter().map(|c| c.0).collect();
    assert_eq!(
        commands,
        [
            "/autoforge status",
            "/autoforge unblock <reason>",
            "/autoforge stop"
        ]
    );
    let mut done = epic_run();
    done.summary.active = false;
    done.summary.phase = "DONE".into();
    assert!(accepted_commands(&done).is_empty());
}

#[test]
fn the_run_page_shows_live_state_the_timeline_and_one_section_per_issue() {
    let html = run(&epic_run(), &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    for expected in [
        "Blocked: </strong>validation failed twice on the candidate",
        "autoforge unblock 7 --reason TEXT",
        "Waiting for an operator: nothing runs until one acts.",
        r#"<svg class="timeline""#,
        "review round 1: needs a fix round",
        "<title>merged</title>",
        r#"Issue <a href="https://github.com/acme/widgets/issues/12">#12</a> · merged"#,
        r#"Issue <a href="https://github.com/acme/widgets/issues/13">#13</a>"#,
        "test widgets::fits ... FAILED",
        "1 without a change folded away",
    ] {
        assert!(html.contains(expected), "missing `{expected}` in {html}");
    }
    assert!(!html.contains("<script"));
}

#[test]
fn every_page_warns_while_agents_run_unsandboxed() {
    let off = site(SandboxMode::Off);
    let mut empty = index_page();
    empty.runs.clear();
    for html in [
        index(&index_page(), &off, at(90)).into_string(),
        index(&empty, &off, at(90)).into_string(),
        run(&epic_run(), &off, at(90)).into_string(),
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
        index(&index_page(), &on, at(90)).into_string(),
        run(&epic_run(), &on, at(90)).into_string(),
    ] {
        assert!(!html.contains("Agents run unsandboxed"), "{html}");
        assert!(!html.contains(r#"role="alert""#), "{html}");
    }
}

#[test]
fn text_written_by_agents_or_users_is_escaped_not_rendered() {
    let mut detail: RunDetail = epic_run();
    detail.blocked_reason = Some("<script>alert(1)</script>".into());
    detail.timeline.push(TimelineEntry {
        at: at(801),
        kind: "event_refused".into(),
        text: r#"{"x":"<img src=x onerror=alert(1)>"}"#.into(),
        from: None,
        to: None,
        no_op: false,
    });
    detail.effects.push(EffectRow {
        reason: Some("\"><b>bold</b>".into()),
        ..detail.effects[0].clone()
    });
    detail.launches[0].log_tail = vec!["<script>steal()</script>".into()];
    let html = run(&detail, &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;script&gt;steal()&lt;/script&gt;"));
    assert!(!html.contains("<img src=x"));
    assert!(!html.contains("<b>bold</b>"));
}

#[test]
fn the_runs_list_renders_as_recorded() {
    let html = index(&index_page(), &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    insta::assert_snapshot!(html.replace('>', ">\n"));
}

#[test]
fn the_run_page_renders_as_recorded() {
    let html = run(&epic_run(), &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    insta::assert_snapshot!(html.replace('>', ">\n"));
}

#[test]
fn a_finished_single_issue_run_has_one_lane_and_no_commands() {
    let mut detail = epic_run();
    detail.summary = summary();
    detail.summary.active = false;
    detail.summary.phase = "DONE".into();
    detail.timeline.retain(|e| e.at < at(550));
    detail.effects.retain(|e| e.created_at < at(550));
    detail.launches.truncate(4);
    let html = run(&detail, &site(SandboxMode::Bubblewrap), at(5_000)).into_string();
    assert!(!html.contains("Commands it accepts now"), "{html}");
    assert_eq!(arrange(&detail, at(5_000)).sections.len(), 1);
}

#[test]
fn a_running_launch_shows_its_heartbeat_figures_on_the_run_page() {
    let mut detail = epic_run();
    detail.summary.active = true;
    detail.running = Some(super::view::LiveLaunch {
        role: "review".into(),
        profile: "codex-review".into(),
        attempt: 1,
        started_at: at(900),
        heartbeat_at: Some(at(960)),
        elapsed_ms: Some(12 * 60_000 + 5_000),
        output_bytes: Some(40 * 1024),
        tokens: Some(5_120),
    });
    let html = run(&detail, &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    assert!(
        html.contains("Running: review with `codex-review` (attempt 2) for 12 min, 40 KB output, 5120 tokens so far; last heartbeat"),
        "{html}"
    );
    detail.running = None;
    let html = run(&detail, &site(SandboxMode::Bubblewrap), at(1_000)).into_string();
    assert!(!html.contains("last heartbeat"));
}
