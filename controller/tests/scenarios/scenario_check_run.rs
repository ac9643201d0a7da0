//! The `autoforge` check run on the real `autoforge serve`: one check per
//! PR head through a round with a finding, a fix and a clean round, the
//! success at the merged head, a blocked run's neutral check and a failed
//! run's failure. Our own check's webhook is ignored: it writes no other
//! check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use std::time::Duration;

use autoforge_journal::EffectKind;
use scenario::{Agents, PATIENCE, Phase, Running, Scenario, eventually};
use serde_json::Value;

/// One `autoforge` check run as fakehub holds it.
#[derive(Debug, Clone, PartialEq)]
struct CheckSeen {
    id: u64,
    status: String,
    conclusion: Option<String>,
    title: String,
    summary: String,
    external_id: String,
    app: String,
}

/// Every check run named `autoforge` on `sha`.
async fn checks_at(s: &Running, sha: &str) -> Vec<CheckSeen> {
    let listed = s
        .get(&format!("/commits/{sha}/check-runs?check_name=autoforge"))
        .await;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    listed["check_runs"]
        .as_array()
        .expect("a check run listing")
        .iter()
        .map(|run| CheckSeen {
            id: run["id"].as_u64().unwrap(),
            status: text(&run["status"]),
            conclusion: run["conclusion"].as_str().map(str::to_owned),
            title: text(&run["output"]["title"]),
            summary: text(&run["output"]["summary"]),
            external_id: text(&run["external_id"]),
            app: text(&run["app"]["slug"]),
        })
        .collect()
}

/// The one `autoforge` check on `sha`.
async fn the_check_at(s: &Running, sha: &str) -> CheckSeen {
    let checks = checks_at(s, sha).await;
    assert_eq!(checks.len(), 1, "one autoforge check on {sha}: {checks:?}");
    checks[0].clone()
}

/// What each journalled check write asked for, in order: head, status or
/// conclusion, title.
async fn check_writes(s: &Running, run: autoforge_journal::RunId) -> Vec<(String, String, String)> {
    let effects = s.world.db.journal().list_effects(run).await.unwrap();
    effects
        .iter()
        .filter(|e| e.kind == EffectKind::CheckRun)
        .map(|e| {
            let payload: Value = serde_json::from_slice(&e.payload).unwrap();
            let shown = payload["conclusion"]
                .as_str()
                .or(payload["status"].as_str())
                .unwrap_or_default()
                .to_owned();
            let title = payload["output"]["title"].as_str().unwrap().to_owned();
            (
                payload["head_sha"].as_str().unwrap().to_owned(),
                shown,
                title,
            )
        })
        .collect()
}

/// POSTs that created a check run.
fn check_creations(s: &Running) -> usize {
    let path = format!("/repos/{}/check-runs", s.world.repository());
    s.world
        .hub
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == path)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_and_merged_pr_has_one_check_per_head_ending_in_success() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["findings", "clean"])
                .fix(["good", "R1-F1"]),
        )
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;

    let first = state.review.history[0].head_sha.to_string();
    let last = state.review.clean.as_ref().unwrap().head_sha.to_string();
    assert_ne!(first, last, "the fix pushed a new head");
    let writes = check_writes(&s, run.id).await;
    let expected = [
        (
            first.clone(),
            "in_progress".into(),
            "REVIEW (round 1)".into(),
        ),
        (first.clone(), "in_progress".into(), "FIX (round 1)".into()),
        (
            first.clone(),
            "neutral".into(),
            "Superseded by a newer head".into(),
        ),
        (
            last.clone(),
            "in_progress".into(),
            "REVIEW (round 2)".into(),
        ),
        (
            last.clone(),
            "success".into(),
            "Reviewed clean and validated".into(),
        ),
    ];
    assert_eq!(writes, expected);
    let old = the_check_at(&s, &first).await;
    assert_eq!(
        (old.status.as_str(), old.conclusion.as_deref()),
        ("completed", Some("neutral"))
    );
    let new = the_check_at(&s, &last).await;
    assert_eq!(new.conclusion.as_deref(), Some("success"), "{new:?}");
    assert_eq!(new.app, crate::common::APP_SLUG, "written as the App");
    assert!(
        new.external_id.contains(&format!("run={}", run.id.0)) && new.external_id.ends_with(&last),
        "{new:?}"
    );
    assert_eq!(check_creations(&s), 2, "one check created per head");

    // GitHub tells every App about the completed check, ours included: the
    // delivery is processed and no other check is written.
    let delivered = eventually(PATIENCE, "our check's completion delivered", || async {
        s.world
            .hub
            .deliveries()
            .into_iter()
            .find(|d| {
                d.event == "check_run"
                    && d.action.as_deref() == Some("completed")
                    && d.payload["check_run"]["id"].as_u64() == Some(new.id)
            })
            .map(|d| d.guid)
    })
    .await;
    let journal = s.world.db.journal();
    eventually(PATIENCE, "the delivery processed", || async {
        journal
            .get_delivery(&delivered)
            .await
            .unwrap()
            .and_then(|d| d.processed_at)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    run.reaches(Phase::ReadyForMerge).await;
    assert_eq!(run.effect_count(EffectKind::CheckRun).await, expected.len());

    let pull = s.pull().await;
    pull.merge_as(&s.owner).await;
    run.reaches(Phase::Done).await;
    assert_eq!(pull.head_sha().await, last);
    assert_eq!(
        the_check_at(&s, &last).await.conclusion.as_deref(),
        Some("success"),
        "the merged head keeps its success"
    );
    assert_eq!(run.effect_count(EffectKind::CheckRun).await, expected.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_run_shows_a_neutral_check_with_its_reason_and_commands() {
    let s = Scenario::new()
        .agents(Agents::scripted().review(["blocked"]))
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    let head = s.pull().await.head_sha().await;
    let check = the_check_at(&s, &head).await;
    assert_eq!(check.conclusion.as_deref(), Some("neutral"), "{check:?}");
    assert_eq!(check.title, "Blocked");
    assert!(
        check.summary.contains("cannot tell which behaviour"),
        "{check:?}"
    );
    assert!(check.summary.contains("`/autoforge unblock <reason>`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_shows_a_failed_check() {
    let s = Scenario::new()
        .agents(Agents::scripted().review(["failure"]))
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Failed).await;
    let head = s.pull().await.head_sha().await;
    let check = the_check_at(&s, &head).await;
    assert_eq!(check.conclusion.as_deref(), Some("failure"), "{check:?}");
    assert!(check.summary.contains("out of scope"), "{check:?}");
}
