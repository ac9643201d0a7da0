//! Installations change while `serve` runs: a repository added to the
//! App's installation is served without a restart, and the runs of one
//! removed from it stop with the reason recorded and nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::{IssueNumber, testing};
use reqwest::Method;
use scenario::{Agents, OWNER, Phase, REPO, Running, Scenario};
use serde_json::json;

const ADDED: &str = "gadgets";

/// Opens an issue in `repository` as the owner and labels it; its number
/// (an [`scenario::Issue`] handle names the scenario's own repository).
async fn labelled_issue_in(s: &Running, repository: &str) -> IssueNumber {
    let number = s
        .world
        .rest_as(
            &s.owner,
            Method::POST,
            &format!("/repos/{OWNER}/{repository}/issues"),
            json!({"title": "a gadget", "body": "please"}),
        )
        .await["number"]
        .as_u64()
        .unwrap();
    let issue = testing::issue(number);
    s.world
        .rest_as(
            &s.owner,
            Method::POST,
            &format!("/repos/{OWNER}/{repository}/issues/{issue}/labels"),
            json!({"labels": ["autoforge"]}),
        )
        .await;
    issue
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_added_to_the_installation_later_is_served_without_a_restart() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["per_issue", "-"]))
        .start()
        .await;
    s.world.add_repository_to_installation(ADDED).await;
    let issue = labelled_issue_in(&s, ADDED).await;

    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;
    assert_eq!(state.repository, format!("{OWNER}/{ADDED}"));
    let pulls = s
        .world
        .rest_as(
            &s.owner,
            Method::GET,
            &format!("/repos/{OWNER}/{ADDED}/pulls"),
            json!({}),
        )
        .await;
    assert_eq!(pulls.as_array().map(Vec::len), Some(1), "{pulls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_a_repository_removed_from_the_installation_stops_and_writes_nothing_more() {
    let s = Scenario::new().start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let writes_before = s.world.all_writes();

    s.world.add_repository_to_installation(ADDED).await;
    s.world.set_installation_repositories(&[ADDED]);
    let stopped = run.reaches(Phase::Stopped).await;
    let reason = stopped.failure.expect("the reason is recorded");
    assert!(
        reason.contains(&format!("{OWNER}/{REPO} is no longer served")),
        "{reason}"
    );
    let audit = s
        .world
        .db
        .journal()
        .list_audit_events_of_kind("repository_access_lost", 10)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    // Adding the second repository wrote nothing either: no write reached
    // GitHub after the run parked.
    assert_eq!(s.world.all_writes(), writes_before);
}
