//! Thin typed GitHub writes, for the effect executor only.
//!
//! Each call sends its request exactly once: no retry, no reconcile, no
//! interpretation. A refusal comes back as [`GitHubError::Status`]; a
//! timeout, transport failure or 5xx as an error whose
//! [`GitHubError::is_outcome_unknown`] is true, and the executor must then
//! reconcile by reading before deciding anything. Bodies passed in are sent
//! byte for byte (the executor journalled exactly these bytes).
//!
//! Only `crate::effects` calls these, after journalling the write; the one
//! exception is [`redeliver_hook_delivery`] (its doc says why), and
//! `tests/cli/source_rules.rs` fails on any other caller. The module
//! is crate-private; the `test-github-writes` feature makes it public so
//! integration tests can play the humans on fakehub.

use super::client::{GitHubApi, decode};
use super::error::GitHubError;
use super::models::{
    CheckRun, Issue, IssueComment, Label, MergeResult, PullRequest, PullRequestReview, Reaction,
};
use super::paths::{RepoName, encode_component};
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use http::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

async fn send<T: DeserializeOwned>(
    api: &GitHubApi,
    method: Method,
    path: String,
    body: Option<Value>,
) -> Result<T, GitHubError> {
    let response = api.write(method, &path, body.as_ref()).await?;
    decode(&path, &response.body)
}

pub async fn create_comment(
    api: &GitHubApi,
    repo: &RepoName,
    issue: IssueNumber,
    body: &str,
) -> Result<IssueComment, GitHubError> {
    let path = repo.api_path(&format!("/issues/{issue}/comments"));
    send(api, Method::POST, path, Some(json!({ "body": body }))).await
}

pub async fn update_comment(
    api: &GitHubApi,
    repo: &RepoName,
    comment_id: u64,
    body: &str,
) -> Result<IssueComment, GitHubError> {
    let path = repo.api_path(&format!("/issues/comments/{comment_id}"));
    send(api, Method::PATCH, path, Some(json!({ "body": body }))).await
}

pub async fn create_issue(
    api: &GitHubApi,
    repo: &RepoName,
    title: &str,
    body: &str,
    labels: &[String],
) -> Result<Issue, GitHubError> {
    let path = repo.api_path("/issues");
    let payload = json!({ "title": title, "body": body, "labels": labels });
    send(api, Method::POST, path, Some(payload)).await
}

pub async fn update_issue_body(
    api: &GitHubApi,
    repo: &RepoName,
    issue: IssueNumber,
    body: &str,
) -> Result<Issue, GitHubError> {
    let path = repo.api_path(&format!("/issues/{issue}"));
    send(api, Method::PATCH, path, Some(json!({ "body": body }))).await
}

/// Adds labels; returns the issue's labels afterwards.
pub async fn add_labels(
    api: &GitHubApi,
    repo: &RepoName,
    issue: IssueNumber,
    labels: &[String],
) -> Result<Vec<Label>, GitHubError> {
    let path = repo.api_path(&format!("/issues/{issue}/labels"));
    send(api, Method::POST, path, Some(json!({ "labels": labels }))).await
}

/// Removes one label; returns the issue's labels afterwards.
pub async fn remove_label(
    api: &GitHubApi,
    repo: &RepoName,
    issue: IssueNumber,
    label: &str,
) -> Result<Vec<Label>, GitHubError> {
    let path = repo.api_path(&format!(
        "/issues/{issue}/labels/{}",
        encode_component(label)
    ));
    send(api, Method::DELETE, path, None).await
}

/// Reaction content as GitHub names it (`eyes`, `+1`, `rocket`, …).
pub async fn add_comment_reaction(
    api: &GitHubApi,
    repo: &RepoName,
    comment_id: u64,
    content: &str,
) -> Result<Reaction, GitHubError> {
    let path = repo.api_path(&format!("/issues/comments/{comment_id}/reactions"));
    send(api, Method::POST, path, Some(json!({ "content": content }))).await
}

/// What a new pull request is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest<'a> {
    pub title: &'a str,
    pub body: &'a str,
    /// Branch name in the same repository.
    pub head: &'a str,
    pub base: &'a str,
    pub draft: bool,
}

pub async fn create_pull_request(
    api: &GitHubApi,
    repo: &RepoName,
    new: &NewPullRequest<'_>,
) -> Result<PullRequest, GitHubError> {
    let payload = json!({
        "title": new.title,
        "body": new.body,
        "head": new.head,
        "base": new.base,
        "draft": new.draft,
    });
    send(api, Method::POST, repo.api_path("/pulls"), Some(payload)).await
}

/// Fields of a PR to change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullRequestUpdate<'a> {
    pub title: Option<&'a str>,
    pub body: Option<&'a str>,
    pub base: Option<&'a str>,
}

pub async fn update_pull_request(
    api: &GitHubApi,
    repo: &RepoName,
    number: PullNumber,
    update: &PullRequestUpdate<'_>,
) -> Result<PullRequest, GitHubError> {
    let mut payload = serde_json::Map::new();
    for (key, value) in [
        ("title", update.title),
        ("body", update.body),
        ("base", update.base),
    ] {
        if let Some(value) = value {
            payload.insert(key.to_owned(), Value::from(value));
        }
    }
    let path = repo.api_path(&format!("/pulls/{number}"));
    send(api, Method::PATCH, path, Some(Value::Object(payload))).await
}

/// Merges only if the PR head is still `expected_head_sha` (GitHub answers
/// 409 otherwise) by `method`; `commit` is the new commit's title and
/// message (a merge or squash commit), GitHub's own when `None`.
pub async fn merge_pull_request(
    api: &GitHubApi,
    repo: &RepoName,
    number: PullNumber,
    expected_head_sha: &CommitSha,
    method: crate::machine::MergeMethod,
    commit: Option<(&str, &str)>,
) -> Result<MergeResult, GitHubError> {
    let path = repo.api_path(&format!("/pulls/{number}/merge"));
    let mut payload = json!({ "sha": expected_head_sha, "merge_method": method });
    if let Some((title, message)) = commit {
        payload["commit_title"] = json!(title);
        payload["commit_message"] = json!(message);
    }
    send(api, Method::PUT, path, Some(payload)).await
}

/// Creates a check run; `body` carries its name, head, `external_id`,
/// status and output.
pub async fn create_check_run(
    api: &GitHubApi,
    repo: &RepoName,
    body: &Value,
) -> Result<CheckRun, GitHubError> {
    let path = repo.api_path("/check-runs");
    send(api, Method::POST, path, Some(body.clone())).await
}

/// Updates check run `id` (only the App that created it may).
pub async fn update_check_run(
    api: &GitHubApi,
    repo: &RepoName,
    id: u64,
    body: &Value,
) -> Result<CheckRun, GitHubError> {
    let path = repo.api_path(&format!("/check-runs/{id}"));
    send(api, Method::PATCH, path, Some(body.clone())).await
}

/// Asks GitHub to deliver a failed webhook delivery again (App handle).
///
/// The one write not journalled, on purpose: it changes no repository
/// state, and GitHub treats asking twice like asking once (the delivery
/// arrives again with its original GUID, which the inbox dedupes). There is
/// nothing to reconcile, so the poller calls it directly.
pub async fn redeliver_hook_delivery(api: &GitHubApi, delivery_id: u64) -> Result<(), GitHubError> {
    let path = format!("/app/hook/deliveries/{delivery_id}/attempts");
    api.write(Method::POST, &path, None).await.map(|_| ())
}

/// Submits a pull request review: `review` is GitHub's create request
/// (`commit_id`, `body`, `event`, `comments`), sent as journalled.
pub async fn create_review(
    api: &GitHubApi,
    repo: &RepoName,
    pr: PullNumber,
    review: &Value,
) -> Result<PullRequestReview, GitHubError> {
    let path = repo.api_path(&format!("/pulls/{pr}/reviews"));
    send(api, Method::POST, path, Some(review.clone())).await
}
