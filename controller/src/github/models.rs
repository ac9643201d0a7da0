//! What we read from GitHub's REST answers: only the fields the controller
//! uses. Required fields are required here too, so a shape change is a
//! decode error naming the field, not a silently missing value.

use crate::commands::{Actor, ActorKind, Permission};
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Account {
    pub login: String,
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
}

impl Account {
    /// The account as an actor for the operator decision.
    pub fn actor(&self) -> Actor {
        Actor {
            login: self.login.clone(),
            kind: if self.kind == "Bot" {
                ActorKind::Bot
            } else {
                ActorKind::User
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Label {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Issue {
    pub id: u64,
    pub number: IssueNumber,
    pub title: String,
    pub body: Option<String>,
    /// `open` or `closed`.
    pub state: String,
    pub labels: Vec<Label>,
    /// `null` when GitHub no longer knows the author.
    pub user: Option<Account>,
    pub html_url: String,
    /// Present exactly when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

impl Issue {
    pub fn is_open(&self) -> bool {
        self.state == "open"
    }

    pub fn is_pull_request(&self) -> bool {
        self.pull_request.is_some()
    }

    /// A digest of the title and body, the text a run works from: the run
    /// freezes it at its start and notices any later edit by comparing.
    /// Both parts are length-prefixed, so no title/body split of one string
    /// can collide with another.
    pub fn text_digest(&self) -> String {
        use sha2::Digest;
        let body = self.body.as_deref().unwrap_or_default();
        let mut hasher = sha2::Sha256::new();
        for part in [self.title.as_str(), body] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        hex::encode(&hasher.finalize()[..16])
    }

    pub fn has_label(&self, name: &str) -> bool {
        self.labels
            .iter()
            .any(|label| label.name.eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AppRef {
    pub slug: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IssueComment {
    pub id: u64,
    /// Required on purpose: GitHub omits it only for non-JSON media types,
    /// and reading "no body" as empty would hide our markers.
    pub body: String,
    /// `null` when GitHub no longer knows the author.
    pub user: Option<Account>,
    pub html_url: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub performed_via_github_app: Option<AppRef>,
    /// `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …: shown
    /// to agents next to the author, never used for a decision.
    #[serde(default)]
    pub author_association: Option<String>,
}

/// One entry of `/issues/{n}/events` (labeled, unlabeled, closed, …).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IssueEvent {
    pub id: u64,
    pub event: String,
    pub actor: Option<Account>,
    #[serde(default)]
    pub label: Option<Label>,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RepoRef {
    pub full_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BranchTip {
    #[serde(rename = "ref")]
    pub ref_name: String,
    pub sha: CommitSha,
    /// `null` when the head repository was deleted.
    pub repo: Option<RepoRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequest {
    pub number: PullNumber,
    pub state: String,
    pub title: String,
    pub body: Option<String>,
    pub html_url: String,
    pub user: Account,
    pub head: BranchTip,
    pub base: BranchTip,
    #[serde(default)]
    pub draft: Option<bool>,
    #[serde(default)]
    pub merged: Option<bool>,
    pub merged_at: Option<String>,
    pub merge_commit_sha: Option<CommitSha>,
    /// Only on single-PR reads; `null` while GitHub computes it.
    #[serde(default)]
    pub mergeable: Option<bool>,
    #[serde(default)]
    pub mergeable_state: Option<String>,
    #[serde(default)]
    pub closed_at: Option<String>,
    /// Only on single-PR reads: how many files the PR changes.
    #[serde(default)]
    pub changed_files: Option<u64>,
}

/// Result of `compare/{base}...{head}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Comparison {
    /// `ahead`, `behind`, `diverged` or `identical`.
    pub status: String,
    pub ahead_by: u64,
    pub behind_by: u64,
    pub total_commits: u64,
    pub merge_base_commit: CommitRef,
    /// The files the comparison changes, with their patches: on the first
    /// page only, and at most 300 of them (GitHub's cap).
    #[serde(default)]
    pub files: Vec<PullRequestFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitRef {
    pub sha: CommitSha,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequestFile {
    pub filename: String,
    /// `added`, `removed`, `modified`, `renamed`, …
    pub status: String,
    #[serde(default)]
    pub previous_filename: Option<String>,
    /// The unified diff hunks (from the first `@@`); absent for a binary
    /// file and for one whose diff GitHub finds too large to show.
    #[serde(default)]
    pub patch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckRun {
    pub id: u64,
    pub name: String,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    pub conclusion: Option<String>,
    pub head_sha: CommitSha,
    /// What the App that wrote the check identifies it by.
    #[serde(default)]
    pub external_id: Option<String>,
    #[serde(default)]
    pub output: CheckRunOutput,
    #[serde(default)]
    pub html_url: Option<String>,
}

/// The visible part of a check run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CheckRunOutput {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommitStatus {
    pub context: String,
    pub state: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
}

/// `commits/{ref}/status`: the combined legacy status.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CombinedStatus {
    /// `success`, `pending` or `failure`.
    pub state: String,
    pub sha: CommitSha,
    pub total_count: u64,
    pub statuses: Vec<CommitStatus>,
}

/// `collaborators/{user}/permission`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CollaboratorPermission {
    pub permission: String,
    pub role_name: String,
}

impl CollaboratorPermission {
    /// The finer `role_name` (it knows triage and maintain) when GitHub
    /// uses a name we know, else the coarse `permission`. A custom role
    /// falls back to its base permission.
    pub fn level(&self) -> Result<Permission, crate::commands::UnknownPermission> {
        self.role_name.parse().or_else(|_| self.permission.parse())
    }
}

/// A file read through the contents API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub sha: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Installation {
    pub id: u64,
    pub app_slug: String,
    pub account: Option<Account>,
    pub suspended_at: Option<String>,
    #[serde(default)]
    pub suspended_by: Option<Account>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Repository {
    pub id: u64,
    pub full_name: String,
    pub default_branch: String,
    pub archived: bool,
    /// The merge methods the settings allow; GitHub leaves them out of
    /// listings, and a new repository allows all three.
    #[serde(default = "allowed")]
    pub allow_merge_commit: bool,
    #[serde(default = "allowed")]
    pub allow_squash_merge: bool,
    #[serde(default = "allowed")]
    pub allow_rebase_merge: bool,
}

fn allowed() -> bool {
    true
}

/// One review of a pull request (`pulls/{n}/reviews`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PullRequestReview {
    pub id: u64,
    /// `null` for a deleted account.
    pub user: Option<Account>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`, `PENDING`.
    pub state: String,
    /// The head the review was given at.
    #[serde(default)]
    pub commit_id: Option<String>,
    /// The review's summary text; empty or `null` for a bare verdict.
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub submitted_at: Option<String>,
    #[serde(default)]
    pub author_association: Option<String>,
    #[serde(default)]
    pub html_url: Option<String>,
}

/// One inline comment of a pull request review
/// (`pulls/{n}/reviews/{id}/comments`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReviewComment {
    pub id: u64,
    pub path: String,
    pub body: String,
    /// The last line the comment is on; `null` once outdated.
    #[serde(default)]
    pub line: Option<u32>,
    /// The line it was written on, kept when it is outdated.
    #[serde(default)]
    pub original_line: Option<u32>,
    /// The first line of a multi-line comment.
    #[serde(default)]
    pub start_line: Option<u32>,
    #[serde(default)]
    pub side: Option<String>,
}

/// One rule that applies to a branch (`rules/branches/{branch}`), from any
/// active ruleset of the repository or its organisation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BranchRule {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
}

/// One entry of `/app/hook/deliveries`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HookDelivery {
    pub id: u64,
    pub guid: String,
    pub delivered_at: String,
    pub redelivery: bool,
    pub status: String,
    pub status_code: u16,
    pub event: String,
    pub action: Option<String>,
    pub installation_id: Option<u64>,
    pub repository_id: Option<u64>,
}

/// `PUT pulls/{n}/merge` answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MergeResult {
    pub merged: bool,
    pub sha: CommitSha,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Reaction {
    pub id: u64,
    pub content: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_name_wins_over_coarse_permission() {
        let maintain = CollaboratorPermission {
            permission: "write".into(),
            role_name: "maintain".into(),
        };
        assert_eq!(maintain.level(), Ok(Permission::Maintain));
        let custom = CollaboratorPermission {
            permission: "read".into(),
            role_name: "security-reviewer".into(),
        };
        assert_eq!(custom.level(), Ok(Permission::Read));
    }

    #[test]
    fn bot_accounts_become_bot_actors() {
        let account = Account {
            login: "ci[bot]".into(),
            id: 1,
            kind: "Bot".into(),
        };
        assert_eq!(account.actor().kind, ActorKind::Bot);
    }

    fn issue(title: &str, body: Option<&str>) -> Issue {
        Issue {
            id: 1,
            number: autoforge_journal::testing::issue(1),
            title: title.into(),
            body: body.map(Into::into),
            state: "open".into(),
            labels: Vec::new(),
            user: None,
            html_url: String::new(),
            pull_request: None,
        }
    }

    #[test]
    fn the_text_digest_changes_with_title_or_body_and_never_with_the_split() {
        let original = issue("Add a flag", Some("body"));
        assert_eq!(
            original.text_digest(),
            issue("Add a flag", Some("body")).text_digest()
        );
        assert_ne!(
            original.text_digest(),
            issue("Add a flag!", Some("body")).text_digest()
        );
        assert_ne!(
            original.text_digest(),
            issue("Add a flag", Some("body.")).text_digest()
        );
        assert_ne!(
            issue("ab", Some("c")).text_digest(),
            issue("a", Some("bc")).text_digest()
        );
        assert_eq!(
            issue("t", None).text_digest(),
            issue("t", Some("")).text_digest()
        );
    }
}
