//! The simulated GitHub: every object fakehub knows, held in one `World`
//! behind one mutex, serialisable as a JSON snapshot for `--state`.

mod ops;

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use ops::{Access, NewCheck, NewRepo, Permission};

/// Account kind as GitHub reports it in `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserKind {
    User,
    Bot,
    Organization,
}

impl UserKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UserKind::User => "User",
            UserKind::Bot => "Bot",
            UserKind::Organization => "Organization",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct User {
    pub id: u64,
    pub login: String,
    pub kind: UserKind,
    pub created_at: DateTime<Utc>,
}

/// What a bearer token stands for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Grant {
    /// A personal access token bound to a user.
    Personal { user_id: u64 },
    /// An installation token: acts as the app's bot, scoped to the installation.
    Installation {
        installation_id: u64,
        expires_at: DateTime<Utc>,
        /// What the token was narrowed to when it was minted.
        #[serde(default)]
        scope: TokenScope,
    },
}

/// The narrowing an installation token was minted with (`repositories` /
/// `repository_ids` and `permissions` of `POST
/// /app/installations/{id}/access_tokens`). Empty means the whole
/// installation with the app's permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenScope {
    /// Only these repositories of the installation.
    #[serde(default)]
    pub repository_ids: Option<Vec<u64>>,
    /// Only these permissions (each at most what the app was granted).
    #[serde(default)]
    pub permissions: Option<BTreeMap<String, String>>,
}

impl TokenScope {
    /// Whether the token may act on repository `id` at all.
    pub fn covers(&self, id: u64) -> bool {
        self.repository_ids
            .as_ref()
            .is_none_or(|ids| ids.contains(&id))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct App {
    pub id: u64,
    pub slug: String,
    pub name: String,
    pub owner_id: u64,
    pub bot_user_id: u64,
    pub hook_id: u64,
    pub webhook_url: Option<String>,
    pub webhook_secret: Option<String>,
    pub permissions: BTreeMap<String, String>,
    pub events: Vec<String>,
    /// SubjectPublicKeyInfo PEM used to verify the app's JWTs.
    pub public_key_pem: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Installation {
    pub id: u64,
    pub app_id: u64,
    pub account_id: u64,
    pub repository_ids: Vec<u64>,
    pub created_at: DateTime<Utc>,
    /// Set while the installation is suspended: no token can be minted for
    /// it, its tokens are refused and no webhook but `installation` is sent.
    #[serde(default)]
    pub suspended_at: Option<DateTime<Utc>>,
    /// The user who suspended it.
    #[serde(default)]
    pub suspended_by: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Label {
    pub id: u64,
    pub name: String,
    pub color: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reaction {
    pub id: u64,
    pub user_id: u64,
    pub content: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssueEvent {
    pub id: u64,
    pub actor_id: u64,
    pub event: String,
    pub label: Option<String>,
    pub commit_id: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The GitHub App that acted, when the actor is an app's bot.
    pub app_id: Option<u64>,
}

/// Pull-request data carried by an issue that is a PR (GitHub shares the
/// number sequence between issues and pulls).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullData {
    pub head_ref: String,
    pub head_sha: String,
    pub base_ref: String,
    pub draft: bool,
    pub merged_at: Option<DateTime<Utc>>,
    pub merged_by: Option<u64>,
    pub merge_commit_sha: Option<String>,
    /// Until this instant GitHub has not finished computing mergeability and
    /// reports `mergeable: null`.
    pub mergeable_known_at: DateTime<Utc>,
    /// Git-derived facts, recomputed whenever the head or base moves.
    #[serde(default)]
    pub stats: PullStats,
    /// Reviews in the order they were submitted.
    #[serde(default)]
    pub reviews: Vec<Review>,
}

/// One submitted pull-request review.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Review {
    pub id: u64,
    pub user_id: u64,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED` or `DISMISSED`.
    pub state: String,
    pub body: String,
    /// The head the review was given at.
    pub commit_id: String,
    pub submitted_at: DateTime<Utc>,
    /// The inline comments submitted with it.
    #[serde(default)]
    pub comments: Vec<ReviewComment>,
}

/// One inline comment of a review, on lines its diff shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewComment {
    pub id: u64,
    pub path: String,
    pub body: String,
    /// The last line the comment is on, on `side`.
    pub line: u32,
    /// `RIGHT` (the head's lines) or `LEFT` (the base's).
    pub side: String,
    /// The first line of a multi-line comment.
    pub start_line: Option<u32>,
    pub start_side: Option<String>,
    /// The diff hunk the comment sits in, as GitHub shows it.
    pub diff_hunk: String,
}

/// The merge settings of a repository as GitHub's repository answer and
/// `PATCH /repos/{owner}/{repo}` name them; GitHub's defaults for a new
/// repository.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RepoSettings {
    pub allow_squash_merge: bool,
    pub allow_merge_commit: bool,
    pub allow_rebase_merge: bool,
    pub allow_auto_merge: bool,
    pub delete_branch_on_merge: bool,
    pub allow_update_branch: bool,
    pub use_squash_pr_title_as_default: bool,
}

impl Default for RepoSettings {
    fn default() -> Self {
        Self {
            allow_squash_merge: true,
            allow_merge_commit: true,
            allow_rebase_merge: true,
            allow_auto_merge: false,
            delete_branch_on_merge: false,
            allow_update_branch: false,
            use_squash_pr_title_as_default: false,
        }
    }
}

/// What git says about a pull request's head against its base.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PullStats {
    pub base_sha: String,
    pub merge_base_sha: Option<String>,
    /// The three-way merge of head into base conflicts.
    pub conflict: bool,
    /// The base has commits the head does not contain.
    pub behind: bool,
    pub commits: usize,
    pub additions: usize,
    pub deletions: usize,
    pub changed_files: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Issue {
    pub id: u64,
    pub number: u64,
    pub title: String,
    pub body: Option<String>,
    pub user_id: u64,
    pub state_open: bool,
    pub state_reason: Option<String>,
    pub labels: Vec<String>,
    pub assignees: Vec<u64>,
    pub locked: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    pub closed_by: Option<u64>,
    pub reactions: Vec<Reaction>,
    pub events: Vec<IssueEvent>,
    pub comment_ids: Vec<u64>,
    /// `(repo_id, number)` of the parent issue.
    pub parent: Option<(u64, u64)>,
    pub sub_issues: Vec<(u64, u64)>,
    pub pull: Option<PullData>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comment {
    pub id: u64,
    pub repo_id: u64,
    pub issue_number: u64,
    pub user_id: u64,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub reactions: Vec<Reaction>,
    pub app_id: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckRun {
    pub id: u64,
    pub repo_id: u64,
    pub head_sha: String,
    pub name: String,
    pub status: String,
    pub conclusion: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub external_id: Option<String>,
    pub details_url: Option<String>,
    pub output_title: Option<String>,
    pub output_summary: Option<String>,
    pub output_text: Option<String>,
    pub app_id: Option<u64>,
    pub check_suite_id: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Repo {
    pub id: u64,
    pub owner_id: u64,
    pub name: String,
    pub default_branch: String,
    pub private: bool,
    pub collaborators: BTreeMap<u64, Permission>,
    pub labels: Vec<Label>,
    pub issues: BTreeMap<u64, Issue>,
    pub next_number: u64,
    /// Check names that branch protection requires before a merge.
    pub required_checks: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub pushed_at: DateTime<Utc>,
    #[serde(default)]
    pub settings: RepoSettings,
    /// Approving reviews a ruleset on the default branch requires before
    /// a merge (`required_approving_review_count`); 0 is no such rule.
    #[serde(default)]
    pub required_approving_reviews: u32,
    /// Branch protection's "require branches to be up to date before
    /// merging" (`required_status_checks.strict`). Only then is a pull
    /// request whose head lacks the base tip `behind` and refused a merge;
    /// GitHub merges such a pull request otherwise.
    #[serde(default)]
    pub require_up_to_date: bool,
}

/// A commit status (the older statuses API), as CI systems report it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitStatus {
    pub id: u64,
    pub repo_id: u64,
    pub sha: String,
    pub context: String,
    pub state: String,
    pub description: Option<String>,
    pub target_url: Option<String>,
    pub creator_id: Option<u64>,
    pub created_at: DateTime<Utc>,
}

/// One webhook delivery attempt as `/app/hook/deliveries` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delivery {
    pub id: u64,
    pub guid: String,
    pub app_id: u64,
    pub event: String,
    pub action: Option<String>,
    pub installation_id: Option<u64>,
    pub repository_id: Option<u64>,
    pub payload: serde_json::Value,
    pub redelivery: bool,
    pub delivered_at: DateTime<Utc>,
    pub status_code: u16,
    pub status: String,
    pub duration_secs: f64,
}

/// One answered API request, for `GET /_fakehub/requests`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestRecord {
    pub method: String,
    pub route: String,
    pub path: String,
    pub status: u16,
    pub token_kind: String,
    pub conditional_hit: bool,
    pub duration_ms: f64,
    /// Whose rate limit the request was counted against, as
    /// [`crate::auth::Caller::rate_scope`] names it.
    #[serde(default)]
    pub rate_scope: String,
    /// Points it cost: 1, or 0 for a `304` and for an answer refused
    /// before it was served (rate limit exhausted, bad credentials).
    #[serde(default)]
    pub cost: u64,
    /// What the handler answered when it ran but a fault (an ambiguous
    /// write) answered the client something else: such a write landed
    /// although the client saw a 502 or a cut connection.
    #[serde(default)]
    pub applied_status: Option<u16>,
}

impl RequestRecord {
    /// The status of what the request did on the world: the handler's own
    /// answer, whatever the client was told.
    pub fn effective_status(&self) -> u16 {
        self.applied_status.unwrap_or(self.status)
    }
}

/// One ref a git push created, moved or deleted (all-zero SHAs for an
/// absent side). The request log covers the REST API only; git's smart
/// HTTP traffic is recorded here instead.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefUpdate {
    pub repo_id: u64,
    pub name: String,
    pub before: String,
    pub after: String,
    pub pusher: u64,
}

/// Primary rate-limit window of one token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RateWindow {
    pub limit: u64,
    pub used: u64,
    pub reset: i64,
}

/// Everything fakehub simulates.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct World {
    pub next_id: u64,
    pub users: BTreeMap<u64, User>,
    pub tokens: HashMap<String, Grant>,
    pub apps: BTreeMap<u64, App>,
    pub installations: BTreeMap<u64, Installation>,
    pub repos: BTreeMap<u64, Repo>,
    pub comments: BTreeMap<u64, Comment>,
    pub check_runs: BTreeMap<u64, CheckRun>,
    #[serde(default)]
    pub statuses: Vec<CommitStatus>,
    pub deliveries: Vec<Delivery>,
    #[serde(skip)]
    pub requests: Vec<RequestRecord>,
    #[serde(skip)]
    pub ref_updates: Vec<RefUpdate>,
    #[serde(skip)]
    pub rate: HashMap<String, RateWindow>,
    /// Points spent per rate scope since fakehub started, never reset by a
    /// window (`GET /_fakehub/rate_usage`): what a test measures a cost by.
    #[serde(skip)]
    pub points: BTreeMap<String, u64>,
}
