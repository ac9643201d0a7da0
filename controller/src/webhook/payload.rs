//! Typed views of the webhook payloads we act on, holding only the fields we
//! read. Every field is required unless GitHub documents it as optional, so
//! a change in GitHub's payload shape fails loudly at deserialisation
//! instead of being read as "absent".

use autoforge_journal::{IssueNumber, PullNumber};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub(super) struct Account {
    pub login: String,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Repository {
    pub full_name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Label {
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Issue {
    pub number: IssueNumber,
    pub state: String,
    /// Present (with links) exactly when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct PreviousValue {
    pub from: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct IssueChanges {
    pub title: Option<PreviousValue>,
    pub body: Option<PreviousValue>,
}

/// `issues` event.
#[derive(Debug, Deserialize)]
pub(super) struct IssuesEvent {
    pub issue: Issue,
    pub label: Option<Label>,
    pub changes: Option<IssueChanges>,
    pub repository: Repository,
    pub sender: Account,
}

#[derive(Debug, Deserialize)]
pub(super) struct GitHubApp {
    pub slug: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Comment {
    pub id: u64,
    pub body: String,
    pub user: Account,
    pub performed_via_github_app: Option<GitHubApp>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CommentChanges {
    pub body: Option<PreviousValue>,
}

/// `issue_comment` event.
#[derive(Debug, Deserialize)]
pub(super) struct IssueCommentEvent {
    pub issue: Issue,
    pub comment: Comment,
    pub changes: Option<CommentChanges>,
    pub repository: Repository,
    /// Who performed the action; for an edit, the editor (who may not be
    /// the comment's author).
    pub sender: Account,
}

#[derive(Debug, Deserialize)]
pub(super) struct BranchTip {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub sha: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct PullRequest {
    pub number: PullNumber,
    #[serde(default)]
    pub merged: Option<bool>,
    pub merge_commit_sha: Option<String>,
    pub head: BranchTip,
    pub base: BranchTip,
}

#[derive(Debug, Deserialize)]
pub(super) struct BaseChange {
    #[serde(rename = "ref")]
    pub ref_name: PreviousValue,
}

#[derive(Debug, Deserialize)]
pub(super) struct PullRequestChanges {
    pub base: Option<BaseChange>,
}

/// The `review` of a `pull_request_review` event.
#[derive(Debug, Deserialize)]
pub(super) struct SubmittedReview {
    pub id: u64,
    pub state: String,
    pub user: Option<Account>,
}

/// `pull_request_review` event: the PR and the review.
#[derive(Debug, Deserialize)]
pub(super) struct PullRequestReviewEvent {
    pub pull_request: PullRequest,
    pub repository: Repository,
    pub review: Option<SubmittedReview>,
}

/// `pull_request` event.
#[derive(Debug, Deserialize)]
pub(super) struct PullRequestEvent {
    pub pull_request: PullRequest,
    pub changes: Option<PullRequestChanges>,
    pub repository: Repository,
}

#[derive(Debug, Deserialize)]
pub(super) struct PullRequestNumber {
    pub number: PullNumber,
}

#[derive(Debug, Deserialize)]
pub(super) struct CheckTarget {
    pub head_sha: String,
    #[serde(default)]
    pub pull_requests: Vec<PullRequestNumber>,
    /// The App that wrote the check (or owns the suite).
    #[serde(default)]
    pub app: Option<CheckApp>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CheckApp {
    /// Absent from some of GitHub's own examples.
    #[serde(default)]
    pub slug: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Installation {
    pub id: u64,
}

/// `check_run` event.
#[derive(Debug, Deserialize)]
pub(super) struct CheckRunEvent {
    pub check_run: CheckTarget,
    pub repository: Repository,
    /// Absent when a repository or organisation hook sent it.
    pub installation: Option<Installation>,
}

/// `check_suite` event.
#[derive(Debug, Deserialize)]
pub(super) struct CheckSuiteEvent {
    pub check_suite: CheckTarget,
    pub repository: Repository,
    /// Absent when a repository or organisation hook sent it.
    pub installation: Option<Installation>,
}

/// `status` event (a commit status was created).
#[derive(Debug, Deserialize)]
pub(super) struct StatusEvent {
    pub sha: String,
    pub state: String,
    pub repository: Repository,
    /// Absent when a repository or organisation hook sent it.
    pub installation: Option<Installation>,
}

/// `installation` and `installation_repositories` events.
#[derive(Debug, Deserialize)]
pub(super) struct InstallationEvent {
    pub installation: Installation,
    #[serde(default)]
    pub repositories: Vec<Repository>,
    #[serde(default)]
    pub repositories_added: Vec<Repository>,
    #[serde(default)]
    pub repositories_removed: Vec<Repository>,
}

/// Every payload starts with this; events without an action (ping) omit it.
#[derive(Debug, Deserialize)]
pub(super) struct ActionOnly {
    pub action: Option<String>,
}
