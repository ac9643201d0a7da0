//! The inputs of `decide`: observations the driver made and commands the
//! commands layer already authorised. Ids and times travel inside them.

use super::agent_result::{AgentOutcome, PlanAnswer};
use super::bounds::{MergeMethod, RunSettings};
use super::repository::RepositorySettings;
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use serde::{Deserialize, Serialize};

/// State of a pull request as GitHub reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrState {
    Open,
    Closed,
    Merged,
}

/// Combined state of every check on the PR head (all, not only required).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChecksState {
    Success,
    Pending,
    Failed,
}

/// GitHub's `mergeable_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeableState {
    Clean,
    HasHooks,
    Behind,
    Blocked,
    Dirty,
    Draft,
    Unstable,
    Unknown,
}

/// A fresh read of the run's pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrFacts {
    pub number: PullNumber,
    pub state: PrState,
    pub head_sha: CommitSha,
    pub base_ref: String,
    /// Merge base of head and base, read now (compare endpoint).
    pub merge_base_sha: CommitSha,
    pub draft: bool,
    /// Set when merged: the merge commit GitHub reports.
    pub merge_commit: Option<CommitSha>,
    pub checks: ChecksState,
    /// `None` while GitHub is still computing it.
    pub mergeable: Option<bool>,
    pub mergeable_state: MergeableState,
    /// The clean review comment is still there, unchanged, at the binding.
    pub clean_review_intact: bool,
    /// A changed file matches a protected path (default `.github/workflows/`).
    pub protected_paths_changed: bool,
    /// The title as GitHub shows it now: a squash commit is titled after it.
    #[serde(default)]
    pub title: String,
    /// The merge methods the repository's settings allow, read now.
    #[serde(default)]
    pub merge_methods: AllowedMergeMethods,
    /// Approving reviews the base branch's rules require, with the count
    /// that stands now; `None` when no rule requires one.
    #[serde(default)]
    pub reviews: Option<ReviewRequirement>,
    /// GitHub's `changed_files` count of the pull request.
    #[serde(default)]
    pub changed_files: u64,
    /// How many files the files listing returned: fewer than
    /// `changed_files` (GitHub stops listing at 3,000) means paths went
    /// unseen by the protected-path check.
    #[serde(default)]
    pub listed_files: u64,
    /// Checks the base branch's rules require that have not reported at
    /// the head at all (no check run, no commit status of that name yet).
    #[serde(default)]
    pub required_checks_missing: Vec<String>,
}

/// `allow_merge_commit`, `allow_squash_merge` and `allow_rebase_merge` of
/// the repository. GitHub allows all three on a new repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowedMergeMethods {
    pub merge: bool,
    pub squash: bool,
    pub rebase: bool,
}

impl Default for AllowedMergeMethods {
    fn default() -> Self {
        Self {
            merge: true,
            squash: true,
            rebase: true,
        }
    }
}

impl AllowedMergeMethods {
    pub fn allows(&self, method: MergeMethod) -> bool {
        match method {
            MergeMethod::Merge => self.merge,
            MergeMethod::Squash => self.squash,
            MergeMethod::Rebase => self.rebase,
        }
    }
}

/// A review rule on the base branch (branch protection or a ruleset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewRequirement {
    /// `required_approving_review_count` of the strictest rule.
    pub required: u32,
    /// Approvals at the current head by people with write access.
    pub approvals: u32,
}

/// The driver's fresh read of the GitHub facts the machine decides from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitHubFacts {
    pub issue_open: bool,
    /// Current head of the issue branch, if it exists.
    pub branch_head: Option<CommitSha>,
    /// The run's PR (the bound number, or our marked PR on the branch).
    pub pr: Option<PrFacts>,
    /// Open PRs on the issue branch without our marker (adoption candidates).
    pub adoptable_prs: Vec<PullNumber>,
    /// Digest of the issue's title and body as read now
    /// (`github::Issue::text_digest`); `None` in facts recorded before the
    /// text was frozen.
    #[serde(default)]
    pub issue_text: Option<String>,
}

/// One effect the driver saw land, with what the read-back showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "observed", rename_all = "snake_case")]
pub enum EffectReadBack {
    Pushed {
        sha: CommitSha,
    },
    PullRequest {
        number: PullNumber,
    },
    Comment {
        url: String,
    },
    FollowUpIssue {
        finding_id: String,
        issue: IssueNumber,
    },
    MarkersAppended {
        issue: IssueNumber,
    },
    RoadmapSpliced,
    /// The EPIC body changed outside the managed section since the phase
    /// began, so the splice was not written; the section must be asked again.
    RoadmapVoided,
}

/// Operator commands (SPEC §2), already authorised by the commands layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum OperatorRequest {
    /// The driver reads GitHub before handing the command over, so the
    /// decision is a pure function of these facts.
    Unblock {
        reason: String,
        facts: Box<GitHubFacts>,
    },
    /// `notes`, when given, go to the next launch as operator guidance.
    Retry {
        #[serde(default)]
        notes: Option<String>,
    },
    Stop,
    Merge,
    Status,
    /// `/autoforge fix <notes>`: a human round with one finding.
    Fix {
        notes: String,
    },
    /// `/autoforge help`: the commands accepted now.
    Help,
    /// `/autoforge approve [answers]`: IMPLEMENT starts from the posted
    /// plan; a question without an answer takes its default.
    Approve {
        #[serde(default)]
        answers: Vec<PlanAnswer>,
    },
    /// `/autoforge replan <notes>`: a new plan, the notes shown to the
    /// planner as the operator's guidance.
    Replan {
        notes: String,
    },
}

/// One point a person raised: an inline review comment (with its place in
/// the diff), a review's body, or the notes of `/autoforge fix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanNote {
    /// `path:line` of an inline comment; `None` for a body or notes.
    pub location: Option<String>,
    pub text: String,
}

/// Feedback an operator gave that starts a human round, as plain data: the
/// driver read the review and its comments (or the command) and checked
/// the author. `source` identifies it (`review-<id>`, `comment-<id>`), so
/// the same feedback seen twice starts one round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanFeedback {
    pub source: String,
    pub author: String,
    pub notes: Vec<HumanNote>,
}

/// An operator command with the comment it came from and who sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorCommand {
    /// The issue or PR number the command comment was posted on.
    pub thread: IssueNumber,
    pub comment_id: u64,
    pub actor: String,
    pub command: OperatorRequest,
}

/// An operator command given on the controller's own host (`autoforge
/// unblock|stop`), by the local operator `actor`. It is decided like the
/// comment command, but there is no comment to react to or to answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalOperatorCommand {
    pub actor: String,
    pub command: OperatorRequest,
}

/// What GitHub reported after the `merge_pr` effect.
/// What the driver found in the repository's settings file when the run
/// started (SPEC §16). An absent file reads as the default settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "read", rename_all = "snake_case")]
pub enum RepositorySettingsRead {
    Valid {
        settings: RepositorySettings,
    },
    /// The file exists but cannot be used; the run blocks with `reason`.
    Invalid {
        reason: String,
    },
}

impl Default for RepositorySettingsRead {
    fn default() -> Self {
        RepositorySettingsRead::Valid {
            settings: RepositorySettings::default(),
        }
    }
}

/// A command refused by authorisation or parsing; `command` is its verb, or
/// `malformed` for a line that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedCommand {
    pub thread: IssueNumber,
    pub comment_id: u64,
    pub actor: String,
    pub command: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeReport {
    pub pr: PrFacts,
}

/// Facts about the issue the EPIC agent picked next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextIssueFacts {
    pub issue: IssueNumber,
    /// `owner/name` the issue lives in.
    pub repository: String,
    pub open: bool,
    /// Default-branch head, to start the next issue from.
    pub base_sha: CommitSha,
    /// Head of the next issue's branch `autoforge/<n>` if it exists
    /// (earlier work the implementer continues from).
    #[serde(default)]
    pub branch_head: Option<CommitSha>,
    /// Digest of the issue's title and body as read: frozen for the run's
    /// work on it when the pick is accepted.
    #[serde(default)]
    pub issue_text: Option<String>,
    /// The EPIC's own issues (its sub-issues, or the issues its body lists
    /// outside the managed roadmap section), read now. A pick must be one
    /// of them; a row without the field names none, so nothing is accepted
    /// on a membership that was never read.
    #[serde(default)]
    pub epic_issues: Vec<IssueNumber>,
}

/// The trigger label was removed by someone whose removal does not count
/// (not an operator, or not known): the run goes on, and they are told so
/// once per removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedLabelRemoval {
    /// The issue the label was removed from.
    pub issue: IssueNumber,
    /// The login of who removed it, when known.
    pub actor: Option<String>,
    pub reason: String,
    /// Identifies this removal (its `unlabeled` issue event, or the
    /// delivery): the reply's identity.
    pub removal: String,
}

/// An input to [`super::decide`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Started {
        repository: String,
        issue: IssueNumber,
        epic: Option<IssueNumber>,
        base_branch: String,
        base_sha: CommitSha,
        /// Head of `autoforge/<issue>` if the branch exists already: earlier
        /// work (SPEC §4 IMPLEMENT, `START_SHA`).
        #[serde(default)]
        branch_head: Option<CommitSha>,
        settings: RunSettings,
        /// The repository's `.github/autoforge.toml` as read from the
        /// default branch; frozen into the run.
        repository_settings: RepositorySettingsRead,
        /// Digest of the issue's title and body when the run started: the
        /// text the agents are given until an operator accepts an edit.
        #[serde(default)]
        issue_text: Option<String>,
        /// The operator who added the trigger label: told when the run blocks.
        #[serde(default)]
        started_by: Option<String>,
    },
    AgentFinished {
        launch: u32,
        outcome: AgentOutcome,
        /// Tokens the launch (its corrections included) reported through
        /// the profile's `usage_pattern`; `None` when it reported none.
        #[serde(default)]
        tokens: Option<u64>,
        /// The launch's estimated cost in millionths of the price unit;
        /// `None` without a price table or usage reported apart.
        #[serde(default)]
        cost_micros: Option<u64>,
    },
    ValidationFinished {
        sha: CommitSha,
        passed: bool,
        /// Index of the first failing command, with its redacted summary.
        failed_index: Option<u32>,
        summary: String,
        /// Paths the candidate changes since the run's base (the merge base
        /// with the default-branch head the run started from) that match
        /// `merge.protected_paths`; such a candidate is never pushed.
        #[serde(default)]
        protected_paths: Vec<String>,
    },
    EffectsObserved {
        observed: Vec<EffectReadBack>,
    },
    /// An effect ended in `conflict` (refusal, two objects, foreign marker…).
    EffectConflict {
        identity: String,
        reason: String,
    },
    GitHubObserved {
        facts: GitHubFacts,
    },
    Operator(OperatorCommand),
    /// See [`LocalOperatorCommand`].
    LocalOperator(LocalOperatorCommand),
    /// A command the commands layer refused before the machine saw it (the
    /// author is not an operator, or the line is malformed): it is answered
    /// with a reply saying why, and nothing else changes.
    CommandRefused(RefusedCommand),
    LabelRemoved,
    /// See [`RefusedLabelRemoval`].
    LabelRemovalRefused(RefusedLabelRemoval),
    /// An operator's pull request review requesting changes (SPEC §8a).
    HumanReview(HumanFeedback),
    /// The run's issue has a title or body other than the one the run
    /// works from. An operator's edit is accepted as the new text; any
    /// other blocks the run until an operator unblocks it.
    IssueTextChanged {
        issue: IssueNumber,
        digest: String,
        /// Who edited, when the webhook said so.
        editor: Option<String>,
        by_operator: bool,
    },
    /// An issue the run is bound to was closed. Only a close of the issue
    /// the run works on now means anything: an EPIC run's earlier issue is
    /// closed by its own merge, and that close may arrive late.
    IssueClosed {
        issue: IssueNumber,
    },
    /// The run's repository is no longer served (removed from the App's
    /// installation or the configuration): the run stops, and nothing is
    /// written to a repository the controller cannot reach.
    RepositoryAccessLost {
        reason: String,
    },
    /// A GitHub outage or similar failure while doing the awaited step.
    TransientFailure {
        detail: String,
    },
    MergeResult(MergeReport),
    NextIssue(NextIssueFacts),
    /// A heartbeat of the launch the run waits for, as its journal row has
    /// it; the driver feeds one at most every `agents.status_refresh_seconds`
    /// while the launch runs, for the status comment.
    LaunchRunning {
        launch: u32,
        profile: String,
        elapsed_seconds: u64,
        output_bytes: u64,
    },
}

impl Event {
    /// A short name for refusals and logs (never carries payload text).
    pub fn name(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::AgentFinished { .. } => "agent_finished",
            Event::ValidationFinished { .. } => "validation_finished",
            Event::EffectsObserved { .. } => "effects_observed",
            Event::EffectConflict { .. } => "effect_conflict",
            Event::GitHubObserved { .. } => "github_observed",
            Event::Operator(_) => "operator_command",
            Event::LocalOperator(_) => "local_operator_command",
            Event::CommandRefused(_) => "command_refused",
            Event::LabelRemoved => "label_removed",
            Event::LabelRemovalRefused(_) => "label_removal_refused",
            Event::HumanReview(_) => "human_review",
            Event::IssueTextChanged { .. } => "issue_text_changed",
            Event::IssueClosed { .. } => "issue_closed",
            Event::RepositoryAccessLost { .. } => "repository_access_lost",
            Event::TransientFailure { .. } => "transient_failure",
            Event::MergeResult(_) => "merge_result",
            Event::NextIssue(_) => "next_issue",
            Event::LaunchRunning { .. } => "launch_running",
        }
    }
}
