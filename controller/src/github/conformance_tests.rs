//! Every model decodes the example response GitHub documents for its
//! endpoint (copied into `testdata/rest_examples.json`), so a field we
//! require that GitHub does not send fails here rather than in production.
#![allow(clippy::unwrap_used)]

use super::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn example(key: &str) -> Value {
    let all: Value = serde_json::from_str(include_str!("testdata/rest_examples.json")).unwrap();
    all.get(key)
        .unwrap_or_else(|| panic!("no documented example for {key}"))
        .clone()
}

fn decode<T: DeserializeOwned>(key: &str) -> T {
    serde_json::from_value(example(key)).unwrap_or_else(|e| panic!("{key}: {e}"))
}

#[test]
fn issues_decode_from_every_documented_issue_answer() {
    let issue: Issue = decode("GET /repos/{owner}/{repo}/issues/{issue_number} 200");
    assert_eq!(issue.number, autoforge_journal::testing::issue(1347));
    assert!(issue.is_open());
    decode::<Issue>("POST /repos/{owner}/{repo}/issues 201");
    decode::<Issue>("GET /repos/{owner}/{repo}/issues/{issue_number}/parent 200");
    assert!(!decode::<Vec<Issue>>("GET /repos/{owner}/{repo}/issues 200").is_empty());
    decode::<Vec<Issue>>("GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues 200");
}

#[test]
fn comments_events_labels_and_reactions_decode() {
    let comments: Vec<IssueComment> =
        decode("GET /repos/{owner}/{repo}/issues/{issue_number}/comments 200");
    assert!(!comments[0].body.is_empty());
    decode::<IssueComment>("POST /repos/{owner}/{repo}/issues/{issue_number}/comments 201");
    let events: Vec<IssueEvent> =
        decode("GET /repos/{owner}/{repo}/issues/{issue_number}/events 200");
    assert!(!events.is_empty());
    decode::<Vec<Label>>("POST /repos/{owner}/{repo}/issues/{issue_number}/labels 200");
    decode::<Vec<Label>>("DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name} 200");
    let reaction: Reaction =
        decode("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions 201");
    assert!(!reaction.content.is_empty());
}

#[test]
fn pull_requests_files_and_merges_decode() {
    let pull: PullRequest = decode("GET /repos/{owner}/{repo}/pulls/{pull_number} 200");
    assert_eq!(pull.head.sha.as_str().len(), 40);
    assert!(!decode::<Vec<PullRequest>>("GET /repos/{owner}/{repo}/pulls 200").is_empty());
    decode::<Vec<PullRequestFile>>("GET /repos/{owner}/{repo}/pulls/{pull_number}/files 200");
    let merged: MergeResult = decode("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge 200");
    assert!(merged.merged);
    let comparison: Comparison = decode("GET /repos/{owner}/{repo}/compare/{basehead} 200");
    assert_eq!(comparison.merge_base_commit.sha.as_str().len(), 40);
}

#[test]
fn checks_statuses_and_permissions_decode() {
    let runs = example("GET /repos/{owner}/{repo}/commits/{ref}/check-runs 200");
    let runs: Vec<CheckRun> = serde_json::from_value(runs["check_runs"].clone()).unwrap();
    assert!(!runs.is_empty());
    let status: CombinedStatus = decode("GET /repos/{owner}/{repo}/commits/{ref}/status 200");
    assert_eq!(status.statuses.len() as u64, status.total_count);
    let permission: CollaboratorPermission =
        decode("GET /repos/{owner}/{repo}/collaborators/{username}/permission 200");
    assert_eq!(permission.level(), Ok(crate::commands::Permission::Admin));
}

#[test]
fn contents_installations_and_deliveries_decode() {
    let file = example("GET /repos/{owner}/{repo}/contents/{path} 200");
    assert_eq!(file["type"], "file");
    assert_eq!(file["encoding"], "base64");
    decode::<Vec<Installation>>("GET /app/installations 200");
    let repositories = example("GET /installation/repositories 200");
    let repositories: Vec<Repository> =
        serde_json::from_value(repositories["repositories"].clone()).unwrap();
    assert!(!repositories.is_empty());
    let deliveries: Vec<HookDelivery> = decode("GET /app/hook/deliveries 200");
    assert!(!deliveries[0].guid.is_empty());
}
