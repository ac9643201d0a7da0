//! What wakes a run waiting at the merge gate, on the real `autoforge
//! serve` with signed webhooks: a required check that has never reported
//! is a wait shown in the status comment (not a block), and the `status`
//! delivery of an external CI's commit status wakes the run, which then
//! merges; a `pull_request_review` delivery wakes it through its own
//! signal, not the finished-check one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fakehub::MergeRules;
use reqwest::Method;
use serde_json::json;

use crate::common::scenario;

use scenario::{Marker, OWNER, PATIENCE, Phase, REPO, RunRef, Running, Scenario};

fn set_rules(s: &Running, rules: MergeRules) {
    s.world
        .hub
        .set_merge_rules(OWNER, REPO, &rules)
        .expect("fakehub sets the merge rules");
}

/// Waits until the status comment of issue 1 contains `text`.
async fn status_shows(s: &Running, text: &str) -> String {
    scenario::eventually(
        PATIENCE,
        &format!("the status showing {text:?}"),
        || async {
            s.issue(autoforge_journal::testing::issue(1))
                .comments_with(Marker::Status)
                .await
                .into_iter()
                .map(|c| c.body)
                .find(|body| body.contains(text))
        },
    )
    .await
}

/// The kinds of the run events stored under a dedupe key starting `prefix`.
async fn events_keyed(s: &Running, run: &RunRef<'_>, prefix: &str) -> Vec<String> {
    s.world
        .db
        .journal()
        .list_run_events(run.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.dedupe_key.starts_with(prefix))
        .map(|e| e.event["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_check_that_never_reported_waits_until_its_status_delivery_wakes_the_merge() {
    let s = Scenario::new().merge_mode("auto").start().await;
    set_rules(
        &s,
        MergeRules {
            required_checks: Some(vec!["ci/build".into()]),
            ..MergeRules::default()
        },
    );
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let status = status_shows(
        &s,
        "- Waiting: waiting for required checks that have not reported yet: `ci/build`",
    )
    .await;
    assert!(status.contains("**READY_FOR_MERGE**"), "{status}");
    assert_eq!(
        run.state().await.phase,
        Phase::ReadyForMerge,
        "a wait, not a block"
    );
    let pr = s.pull().await;
    assert_eq!(pr.merge_requests(), 0);

    s.world
        .hub
        .add_status(&fakehub::control::StatusSpec {
            owner: OWNER.into(),
            repo: REPO.into(),
            sha: pr.head_sha().await,
            context: "ci/build".into(),
            state: "success".into(),
            description: None,
            target_url: None,
        })
        .unwrap();

    run.reaches(Phase::Done).await;
    pr.assert_merged_once().await;
    assert_eq!(
        events_keyed(&s, &run, &format!("status:{OWNER}/{REPO}@")).await,
        ["checks_completed"],
        "the status delivery woke the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_delivery_wakes_the_run_with_its_own_signal() {
    let s = Scenario::new().merge_mode("auto").start().await;
    set_rules(
        &s,
        MergeRules {
            required_approving_reviews: Some(1),
            ..MergeRules::default()
        },
    );
    let reviewer = s.person("reviewer", "write");
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    status_shows(
        &s,
        "Waiting: waiting for an approving review (0 of 1 required)",
    )
    .await;
    let pr = s.pull().await;
    s.world
        .rest_as(
            &reviewer,
            Method::POST,
            &format!("/repos/{OWNER}/{REPO}/pulls/{}/reviews", pr.number),
            json!({"event": "APPROVE"}),
        )
        .await;

    run.reaches(Phase::Done).await;
    pr.assert_merged_once().await;
    assert_eq!(
        events_keyed(&s, &run, &format!("review:{OWNER}/{REPO}#{}@", pr.number)).await,
        ["pr_reviewed"]
    );
    assert!(
        events_keyed(&s, &run, "checks:").await.is_empty(),
        "a review is not told as a finished check"
    );
}
