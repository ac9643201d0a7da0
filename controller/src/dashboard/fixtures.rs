//! Fixed runs for the page tests and their snapshots: an EPIC run over two
//! issues (a round with findings, a fix, a clean round, a merge, a block)
//! at fixed times, so the rendered HTML is the same on every machine.

use chrono::{DateTime, TimeZone, Utc};

use super::view::{
    EffectRow, IndexFilter, IndexPage, LaunchRow, ReviewMark, RunDetail, RunSummary, TimelineEntry,
    ValidationRow,
};
use super::{Links, Site};
use crate::sandbox::SandboxMode;

pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0)
        .single()
        .expect("valid time")
}

pub fn site(sandbox: SandboxMode) -> Site {
    Site {
        links: Links {
            html_base: "https://github.com/".into(),
        },
        sandbox,
    }
}

pub fn summary() -> RunSummary {
    RunSummary {
        id: 7,
        repository: "acme/widgets".into(),
        issue: 13,
        epic: Some(3),
        phase: "BLOCKED".into(),
        active: true,
        round: Some(1),
        blocked_reason: Some("validation failed twice on the candidate".into()),
        tokens: 4_200,
        cost_micros: Some(8_400),
        created_at: at(0),
        updated_at: at(900),
    }
}

pub fn index_page() -> IndexPage {
    let mut done = summary();
    done.id = 6;
    done.issue = 9;
    done.epic = None;
    done.phase = "DONE".into();
    done.active = false;
    done.blocked_reason = None;
    IndexPage {
        runs: vec![summary(), done],
        matching: 120,
        filter: IndexFilter {
            repo: Some("acme/widgets".into()),
            page: Some(2),
            ..IndexFilter::default()
        },
        repositories: vec!["acme/gadgets".into(), "acme/widgets".into()],
    }
}

fn transition(seconds: i64, from: &str, to: &str, effects: u32) -> TimelineEntry {
    TimelineEntry {
        at: at(seconds),
        kind: "transition".into(),
        text: format!("{from} → {to} ({effects} GitHub writes)"),
        from: Some(from.into()),
        to: Some(to.into()),
        no_op: from == to && effects == 0,
    }
}

fn launch(seconds: i64, role: &str, took: i64, tokens: i64) -> LaunchRow {
    LaunchRow {
        phase: role.to_ascii_uppercase(),
        role: role.into(),
        profile: "scripted".into(),
        attempt: 0,
        started_at: at(seconds),
        ended_at: Some(at(seconds + took)),
        exit_status: Some(0),
        duration_ms: Some(took * 1_000),
        tokens: Some(tokens),
        // Priced at 2 micro-units a token, as a price table would.
        cost_micros: Some(tokens * 2),
        outcome: Some("success".into()),
        log_tail: vec![format!("{role} done")],
    }
}

fn effect(seconds: i64, kind: &str, identity: &str) -> EffectRow {
    EffectRow {
        kind: kind.into(),
        identity: identity.into(),
        stage: "observed".into(),
        attempts: 1,
        reason: None,
        link: Some(format!(
            "https://github.com/acme/widgets/issues/1#{seconds}"
        )),
        created_at: at(seconds),
        updated_at: at(seconds + 1),
        review: None,
    }
}

fn review(seconds: i64, round: u64, findings: usize) -> EffectRow {
    EffectRow {
        review: Some(ReviewMark {
            round,
            head: "1111111111111111111111111111111111111111".into(),
            findings,
            needs_fix: findings > 0,
        }),
        ..effect(
            seconds,
            "post_comment",
            &format!("ai-review-result:pr=20:round={round}"),
        )
    }
}

/// Issue 12 implemented, reviewed with a finding, fixed, reviewed clean
/// and merged; then issue 13 implemented and blocked on validation.
pub fn epic_run() -> RunDetail {
    RunDetail {
        summary: summary(),
        round: Some(1),
        pr: Some(autoforge_journal::testing::pull(21)),
        blocked_reason: summary().blocked_reason,
        failure: None,
        awaiting: Some("nothing".into()),
        timeline: vec![
            transition(0, "INITIALIZING", "IMPLEMENT", 1),
            transition(60, "IMPLEMENT", "IMPLEMENT", 0),
            transition(100, "IMPLEMENT", "REVIEW", 2),
            transition(200, "REVIEW", "FIX", 1),
            transition(300, "FIX", "REVIEW", 1),
            transition(400, "REVIEW", "READY_FOR_MERGE", 1),
            transition(450, "READY_FOR_MERGE", "MERGE", 1),
            transition(500, "MERGE", "UPDATE_EPIC", 1),
            transition(550, "UPDATE_EPIC", "IMPLEMENT", 2),
            transition(800, "IMPLEMENT", "BLOCKED", 1),
        ],
        effects: vec![
            effect(1, "edit_status_comment", "autoforge-status:run=7"),
            effect(101, "create_pr", "ai-implementation:issue=12"),
            review(190, 1, 1),
            review(390, 2, 0),
            effect(451, "merge_pr", "merge:pr=20:sha=1111"),
            effect(551, "edit_status_comment", "autoforge-status:run=7"),
            effect(801, "edit_status_comment", "autoforge-status:run=7"),
        ],
        launches: vec![
            launch(5, "implement", 50, 1_000),
            launch(110, "review", 70, 800),
            launch(210, "fix", 60, 900),
            launch(310, "review", 60, 700),
            launch(555, "implement", 200, 800),
        ],
        validations: vec![
            ValidationRow {
                sha: "2222222222222222222222222222222222222222".into(),
                command: "cargo test".into(),
                outcome: "PASS".into(),
                duration_ms: 4_000,
                output_tail: "ok".into(),
                recorded_at: at(95),
            },
            ValidationRow {
                sha: "3333333333333333333333333333333333333333".into(),
                command: "cargo test".into(),
                outcome: "FAIL".into(),
                duration_ms: 5_000,
                output_tail: "test widgets::fits ... FAILED".into(),
                recorded_at: at(790),
            },
        ],
        running: None,
    }
}
