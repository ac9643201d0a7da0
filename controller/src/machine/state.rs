//! The run's state document: everything `decide` needs, persisted by the
//! driver (as JSON) in the same transaction as the effect intents.
//!
//! It carries no clock and no randomness; ids and times arrive in events.

use super::agent_result::{ApprovedPlan, Finding, PhaseResult, PlanResult, Resolution};
use super::bounds::{Counters, MergeMethod, RunSettings};
use super::decision::{CheckRunView, LaunchRequest};
use super::phase::Phase;
use super::repository::RepositorySettings;
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use serde::{Deserialize, Serialize};

/// The exact diff a review round judged: PR, HEAD, base name and merge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundBinding {
    pub pr: PullNumber,
    pub head_sha: CommitSha,
    pub base_ref: String,
    pub merge_base_sha: CommitSha,
}

/// Findings of a stale round shown to the next reviewer to re-check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedFindings {
    pub round: u32,
    pub head_sha: CommitSha,
    pub comment_url: Option<String>,
    pub findings: Vec<Finding>,
}

/// How a completed round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundOutcome {
    NeedsFix,
    Clean,
    /// The revision moved before a fixer could act on it.
    Stale,
}

/// One entry of the review history, used for stagnation detection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub round: u32,
    pub head_sha: CommitSha,
    pub outcome: RoundOutcome,
    pub finding_count: u32,
    /// Digest over the sorted, normalised `required_resolution` texts.
    pub fingerprint: String,
    /// One digest per finding's normalised `required_resolution`, sorted.
    pub finding_digests: Vec<String>,
}

/// Review bookkeeping of the current PR; a new issue starts it afresh.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewState {
    /// Rounds consumed on this PR (stale rounds included).
    pub round: u32,
    /// The binding of the current (or last) round.
    pub binding: Option<RoundBinding>,
    /// URL of the last review comment the controller posted and read back.
    pub comment_url: Option<String>,
    /// Findings the next FIX must resolve.
    pub open_findings: Vec<Finding>,
    /// Findings of a stale round; replaced, never accumulated.
    pub prior_findings: Option<CarriedFindings>,
    /// Resolutions of the last FIX, shown to the next reviewer.
    pub last_resolutions: Vec<Resolution>,
    pub history: Vec<RoundRecord>,
    /// The binding of the last clean round: what a merge is allowed to merge.
    pub clean: Option<RoundBinding>,
    /// Human rounds started on this PR: numbers the next one's `H<n>-F<k>`.
    #[serde(default)]
    pub human_rounds: u32,
    /// Where each human round came from (`review-<id>`, `comment-<id>`):
    /// the same review seen twice starts one round.
    #[serde(default)]
    pub human_sources: Vec<String>,
    /// Human findings that arrived while an agent round was in progress:
    /// they join the findings of the round's end and go to the next FIX.
    #[serde(default)]
    pub pending_human: Vec<Finding>,
    /// The human findings the last FIX resolved: the next reviewer is shown
    /// them beside `last_resolutions`, then they are dropped.
    #[serde(default)]
    pub resolved_human: Vec<Finding>,
}

/// Whether `id` names a finding a person raised (`H<n>-F<k>`), not a reviewer.
pub fn is_human_finding(id: &str) -> bool {
    id.strip_prefix('H')
        .and_then(|rest| rest.split_once("-F"))
        .is_some_and(|(n, k)| n.parse::<u32>().is_ok() && k.parse::<u32>().is_ok())
}

/// The text an operator gave with `/autoforge unblock` or `/autoforge retry`:
/// the next agent launch is shown it as the operator's guidance, and it is
/// dropped once a launch has answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorGuidance {
    pub actor: String,
    /// The verb that carried it (`unblock`, `retry`).
    pub command: String,
    pub text: String,
}

/// The PLAN phase's bookkeeping for the current issue (SPEC §4 PLAN); a
/// new issue starts it afresh.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanState {
    /// Plans written for this issue: the version of the latest one.
    pub version: u32,
    /// The latest plan, once the planner answered.
    pub latest: Option<PlanResult>,
    /// The plan IMPLEMENT is given; set when PLAN passes to IMPLEMENT.
    pub approved: Option<ApprovedPlan>,
}

/// EPIC bookkeeping (SPEC §9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpicState {
    pub epic: IssueNumber,
    /// Merges counted since the roadmap section was last read back.
    pub merges_since_roadmap: u32,
    /// Whether this UPDATE_EPIC's progress comment has been observed.
    pub progress_posted: bool,
    /// The issue and PR the current UPDATE_EPIC reports on.
    pub finished_issue: Option<IssueNumber>,
    pub finished_pr: Option<PullNumber>,
}

impl EpicState {
    pub fn new(epic: IssueNumber) -> Self {
        Self {
            epic,
            merges_since_roadmap: 0,
            progress_posted: false,
            finished_issue: None,
            finished_pr: None,
        }
    }
}

/// Why the run is parked in BLOCKED, and where it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedInfo {
    pub from: Phase,
    pub reason: String,
}

/// What read the driver must feed back as `GitHubObserved`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactsPurpose {
    /// Before publishing a validated candidate: branch head and PRs on it.
    Publish,
    /// Before launching a reviewer: bind the round.
    BindRound,
    /// After the review comment was read back: did the revision move?
    AfterReviewComment,
    /// FIX entry: is the PR still at the reviewed revision?
    FixEntry,
    /// READY_FOR_MERGE / MERGE: the pre-merge gate or a human's merge.
    MergeGate,
}

/// Which group of effect intents the run waits to see observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStep {
    PublishCandidate,
    ReviewComment,
    FixPublish,
    EpicUpdate,
    /// The plan comment of the latest plan version.
    PlanComment,
}

/// What the run waits for next. The driver reads it to know what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "awaiting", rename_all = "snake_case")]
pub enum Awaiting {
    /// INITIALIZING before `Started`.
    Start,
    /// An agent launch is running.
    Agent {
        launch: Box<LaunchRequest>,
    },
    Validation {
        sha: CommitSha,
    },
    Effects {
        step: EffectStep,
    },
    Facts {
        purpose: FactsPurpose,
    },
    /// The `merge_pr` effect was sent; the merge read-back is due.
    MergeOutcome,
    /// The EPIC agent picked an issue; the driver reads its facts.
    NextIssueCheck {
        issue: IssueNumber,
    },
    /// Automatic retries are exhausted: `/autoforge retry` resumes `resume`.
    OperatorRetry {
        resume: Box<Awaiting>,
    },
    /// PLAN under `plan.mode = "approve"`: the plan is posted and the run
    /// waits for `/autoforge approve` or `/autoforge replan`.
    PlanApproval,
    /// BLOCKED waits for an unblock; terminal phases wait for nothing.
    Nothing,
}

impl Awaiting {
    /// A stable name for what the run waits for (refusals, status).
    pub fn name(&self) -> &'static str {
        match self {
            Awaiting::Start => "start",
            Awaiting::Agent { .. } => "agent",
            Awaiting::Validation { .. } => "validation",
            Awaiting::Effects { .. } => "effects",
            Awaiting::Facts { .. } => "github_facts",
            Awaiting::MergeOutcome => "merge_outcome",
            Awaiting::NextIssueCheck { .. } => "next_issue_check",
            Awaiting::OperatorRetry { .. } => "operator_retry",
            Awaiting::PlanApproval => "plan_approval",
            Awaiting::Nothing => "nothing",
        }
    }
}

/// The persisted state of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: String,
    pub phase: Phase,
    pub awaiting: Awaiting,
    /// `owner/name` of the repository.
    pub repository: String,
    pub issue: IssueNumber,
    pub epic: Option<EpicState>,
    /// The issue branch, `autoforge/<issue>`.
    pub branch: String,
    pub base_branch: String,
    /// Default-branch head fetched when the run (or issue) started.
    pub base_sha: Option<CommitSha>,
    /// Head of the issue branch when the issue started, if it existed:
    /// the implementer continues from it and the push must fast-forward it.
    #[serde(default)]
    pub prior_branch_head: Option<CommitSha>,
    pub pr: Option<PullNumber>,
    pub review: ReviewState,
    pub counters: Counters,
    /// Candidate commit awaiting validation or publication.
    pub candidate: Option<CommitSha>,
    /// The validated agent output whose effects are not yet all observed.
    pub pending: Option<PhaseResult>,
    /// Last validation failure of this phase, handed to the relaunch.
    pub last_validation_failure: Option<String>,
    /// PRs whose merge was counted (merge order); a PR counts once.
    pub merged_prs: Vec<PullNumber>,
    /// `/autoforge merge` seen for the current clean round.
    pub merge_approved: bool,
    pub blocked: Option<BlockedInfo>,
    pub failure: Option<String>,
    pub settings: RunSettings,
    /// The outcome of the latest validation, shown in the status comment.
    #[serde(default)]
    pub last_validation: Option<LastValidation>,
    /// The repository's own settings, frozen when the run started: a later
    /// edit of the file (or a PR changing it) never changes them.
    #[serde(default)]
    pub repository_settings: RepositorySettings,
    /// Digest of the issue title and body the run works from: frozen when
    /// the run (or its current issue) started, replaced only by an
    /// operator's edit or an operator's unblock. `None` for runs recorded
    /// before texts were frozen, which adopt the first digest they see.
    #[serde(default)]
    pub issue_text: Option<String>,
    /// The operator who started the run (mentioned once per block).
    #[serde(default)]
    pub started_by: Option<String>,
    /// How many times the run has been blocked: names each block's notice.
    #[serde(default)]
    pub blocks: u32,
    /// What the run's check run was last told to show, once a PR head is
    /// bound and check runs are on ([`RunSettings::check_run`]).
    #[serde(default)]
    pub check_run: Option<CheckRunView>,
    /// What the pre-merge gate waits for now (checks, an approving review),
    /// shown in the status comment; `None` when it waits for nothing.
    #[serde(default)]
    pub merge_wait: Option<String>,
    /// How the gate decided to merge: set when READY_FOR_MERGE passes to
    /// MERGE, read by MERGE's entry.
    #[serde(default)]
    pub merging: Option<MergePlan>,
    /// See [`OperatorGuidance`].
    #[serde(default)]
    pub operator_guidance: Option<OperatorGuidance>,
    /// See [`PlanState`].
    #[serde(default)]
    pub plan: PlanState,
    /// The running launch the status comment last showed; only shown
    /// while the run still waits for that launch.
    #[serde(default)]
    pub running_shown: Option<RunningLine>,
}

/// A running launch as the status comment shows it: "implementer `claude`
/// running for 12 min, 40 KB output". Minutes and KiB, so that a refresh
/// that would change nothing visible is not an edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningLine {
    pub launch: u32,
    pub role: super::phase::AgentPhase,
    pub profile: String,
    pub minutes: u64,
    pub output_kib: u64,
}

/// The merge the gate chose: the method, and the title the PR had when
/// the gate passed (a squash commit is titled after it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergePlan {
    pub method: MergeMethod,
    pub pr_title: String,
}

/// One validation outcome as the status comment shows it (SPEC §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastValidation {
    pub sha: CommitSha,
    pub passed: bool,
    /// 0-based index of the command that failed. The command's text stays
    /// out of the status comment: a repository may supply it.
    pub failed_index: Option<u32>,
}

impl RunState {
    /// The state of a run the driver created but has not started.
    pub fn new(run_id: impl Into<String>, issue: IssueNumber, settings: RunSettings) -> Self {
        Self {
            run_id: run_id.into(),
            phase: Phase::Initializing,
            awaiting: Awaiting::Start,
            repository: String::new(),
            issue,
            epic: None,
            branch: String::new(),
            base_branch: String::new(),
            base_sha: None,
            prior_branch_head: None,
            pr: None,
            review: ReviewState::default(),
            counters: Counters::default(),
            candidate: None,
            pending: None,
            last_validation_failure: None,
            merged_prs: Vec::new(),
            merge_approved: false,
            blocked: None,
            failure: None,
            settings,
            last_validation: None,
            repository_settings: RepositorySettings::default(),
            issue_text: None,
            started_by: None,
            blocks: 0,
            check_run: None,
            merge_wait: None,
            merging: None,
            operator_guidance: None,
            plan: PlanState::default(),
            running_shown: None,
        }
    }

    /// The controller-derived issue branch name.
    pub fn branch_for(issue: IssueNumber) -> String {
        format!("autoforge/{issue}")
    }

    /// Forget everything tied to the finished issue before the next one.
    pub(crate) fn switch_to_issue(&mut self, issue: IssueNumber) {
        self.issue = issue;
        self.branch = Self::branch_for(issue);
        self.pr = None;
        self.review = ReviewState::default();
        self.candidate = None;
        self.pending = None;
        self.last_validation_failure = None;
        self.merge_approved = false;
        self.merge_wait = None;
        self.merging = None;
        self.plan = PlanState::default();
        // The next issue's spend starts from nothing; the run's total goes on.
        self.counters.issue_tokens = 0;
        self.counters.issue_cost_micros = 0;
    }
}
