//! The outputs of `decide`: the next state, the GitHub writes it intends
//! (journalled with it in one transaction), the agent launches and
//! validations to start, or a typed refusal that changes nothing.

use super::agent_result::Resolution;
use super::agent_result::{ApprovedPlan, Finding, PlanResult, ReviewSections};
use super::bounds::{MergeMethod, MergeMode};
use super::phase::{AgentPhase, IllegalEdge, Phase};
use super::state::{
    Awaiting, CarriedFindings, LastValidation, RoundBinding, RunState, RunningLine,
};
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use serde::{Deserialize, Serialize};

/// The closed set of effect kinds of SPEC §6. The journal owns the
/// persisted vocabulary (its spellings are the `effects.kind` column); the
/// machine names the same enum so that a decision and its journal row can
/// never disagree about a kind.
pub use autoforge_journal::EffectKind;

/// What the status comment shows (SPEC §15); `publish` renders it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    pub phase: Phase,
    pub round: u32,
    pub pr: Option<PullNumber>,
    pub blocked_reason: Option<String>,
    pub failure: Option<String>,
    /// What the run waits for ([`crate::machine::Awaiting::name`]); tells
    /// the status comment which commands apply (e.g. `retry` when parked).
    pub waiting_for: String,
    #[serde(default)]
    pub last_validation: Option<LastValidation>,
    /// Whether `/autoforge merge` means anything for this run.
    #[serde(default)]
    pub merge_mode: MergeMode,
    /// The phase a BLOCKED run was blocked in: blocked at INITIALIZING, it
    /// cannot be unblocked, only started again.
    #[serde(default)]
    pub blocked_from: Option<Phase>,
    /// What the pre-merge gate waits for (an approving review, checks).
    #[serde(default)]
    pub merge_wait: Option<String>,
    /// Tokens the run's agents reported so far (`limits.tokens_per_run`
    /// counts these); 0 when none reported any.
    #[serde(default)]
    pub tokens: u64,
    /// Estimated cost of the run's launches so far, in millionths of the
    /// price unit (`limits.cost_per_run` counts it); 0 when none was priced.
    #[serde(default)]
    pub cost_micros: u64,
    /// The EPIC whose run this is; the totals above are then the EPIC's,
    /// and the two below this issue's.
    #[serde(default)]
    pub epic: Option<IssueNumber>,
    /// Tokens of this issue's launches (an EPIC's run; else the run's).
    #[serde(default)]
    pub issue_tokens: u64,
    /// Estimated cost of this issue's launches.
    #[serde(default)]
    pub issue_cost_micros: u64,
    /// The launch running now, while the run waits for it (boxed: most
    /// snapshots have none, and `Reply::Status` carries a snapshot).
    #[serde(default)]
    pub running: Option<Box<RunningLine>>,
    /// Set on the status comment of an issue an EPIC's run has finished
    /// with and left for the next one: the comment then says so, with no
    /// commands (they act on the run's current issue).
    #[serde(default)]
    pub finished: Option<IssueFinished>,
}

/// How an EPIC's run finished with one of its issues before moving on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueFinished {
    pub epic: IssueNumber,
    /// The pull request that was merged for it; `None`: it was closed.
    pub merged_in: Option<PullNumber>,
    /// The issue the run went on to.
    pub next_issue: IssueNumber,
}

impl StatusSnapshot {
    pub fn of(state: &RunState) -> Self {
        Self {
            phase: state.phase,
            round: state.review.round,
            pr: state.pr,
            blocked_reason: state.blocked.as_ref().map(|b| b.reason.clone()),
            failure: state.failure.clone(),
            waiting_for: state.awaiting.name().to_owned(),
            last_validation: state.last_validation.clone(),
            merge_mode: state.settings.merge_mode,
            blocked_from: state.blocked.as_ref().map(|b| b.from),
            merge_wait: match state.phase {
                Phase::ReadyForMerge | Phase::Merge => state.merge_wait.clone(),
                _ => None,
            },
            tokens: state.counters.tokens,
            cost_micros: state.counters.cost_micros,
            epic: state.epic.as_ref().map(|epic| epic.epic),
            issue_tokens: state.counters.issue_tokens,
            issue_cost_micros: state.counters.issue_cost_micros,
            running: state
                .running_shown
                .clone()
                .filter(|line| {
                    matches!(&state.awaiting, Awaiting::Agent { launch } if launch.id == line.launch)
                })
                .map(Box::new),
            finished: None,
        }
    }
}

/// What the run's `autoforge` check run shows on one PR head. Compared
/// with what it last showed, it decides whether a check write is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "shows", rename_all = "snake_case")]
pub enum CheckShows {
    /// The run works on this head: the phase and the review round.
    InProgress { phase: Phase, round: u32 },
    /// The review at this head was clean and the head passed validation.
    Success,
    /// The run is BLOCKED (or reviewed clean without validating the head).
    Neutral { reason: String },
    /// The run FAILED.
    Failure { reason: String },
    /// The run was STOPPED.
    Cancelled,
    /// A later head of the same PR took over while this one was in progress.
    Superseded { by: CommitSha },
}

/// One check run: the PR, the head it is attached to, and what it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRunView {
    pub pr: PullNumber,
    pub head_sha: CommitSha,
    pub shows: CheckShows,
}

/// The controller's answer to an operator command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Accepted { command: String, detail: String },
    Refused { command: String, reason: String },
    Status { status: StatusSnapshot },
}

/// A one-time answer to something that happened on an issue and is not a
/// command: who did it is told what it did (or did not do) to the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    /// The trigger label was removed by someone whose removal does not
    /// stop the run.
    LabelRemovalRefused {
        actor: Option<String>,
        reason: String,
    },
    /// The run became BLOCKED: the operator who started it is mentioned
    /// (editing the status comment notifies nobody).
    Blocked { operator: String, reason: String },
}

/// One GitHub write the machine wants, with its identity and the data
/// `publish`/`effects` need to render the exact payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum EffectIntent {
    /// Compare-and-swap push of `sha` to the issue branch.
    Push {
        branch: String,
        sha: CommitSha,
        expected_old: Option<CommitSha>,
    },
    /// Open the PR (body + `Closes #issue` + `ai-implementation` marker).
    CreatePr {
        issue: IssueNumber,
        branch: String,
        base: String,
        title: String,
        body: String,
    },
    /// Append our marker to an open unmarked PR on the branch.
    AdoptPr {
        pr: PullNumber,
        issue: IssueNumber,
    },
    PostReviewComment {
        pr: PullNumber,
        round: u32,
        binding: RoundBinding,
        findings: Vec<Finding>,
        sections: ReviewSections,
    },
    /// The round's pull request review (event `COMMENT`) at the bound head:
    /// an inline comment at each finding whose location is a line of the
    /// diff there, every other finding listed in its body. The review
    /// comment above stays the round's record; this one shows the findings
    /// where the code is.
    PostReview {
        pr: PullNumber,
        round: u32,
        binding: RoundBinding,
        findings: Vec<Finding>,
    },
    /// The plan comment on the issue, one per plan version (marker
    /// `ai-plan`); `awaits_approval` adds how to approve or replan.
    PostPlanComment {
        issue: IssueNumber,
        version: u32,
        plan: PlanResult,
        awaits_approval: bool,
    },
    PostEpicProgress {
        epic: IssueNumber,
        issue: IssueNumber,
        pr: PullNumber,
        text: String,
    },
    PostCommandReply {
        thread: IssueNumber,
        comment_id: u64,
        reply: Reply,
    },
    /// Answers `event` (see [`Notice`]) on `issue`, once.
    PostNotice {
        issue: IssueNumber,
        /// Identifies what is answered, e.g. one label removal.
        event: String,
        notice: Notice,
    },
    EditStatusComment {
        issue: IssueNumber,
        run_id: String,
        status: StatusSnapshot,
    },
    CreateFollowUpIssue {
        pr: PullNumber,
        finding_id: String,
        title: String,
        body: String,
    },
    AppendFollowUpMarkers {
        issue: IssueNumber,
        pr: PullNumber,
        finding_ids: Vec<String>,
    },
    SpliceEpicRoadmap {
        epic: IssueNumber,
        section: String,
    },
    AddReaction {
        comment_id: u64,
    },
    /// The run's status labels on its issue (`status_labels = true`):
    /// `add` present and `remove` absent afterwards.
    SetLabels {
        issue: IssueNumber,
        add: Vec<String>,
        remove: Vec<String>,
    },
    /// Merge with GitHub's `sha` parameter set to the reviewed head.
    MergePr {
        pr: PullNumber,
        sha: CommitSha,
        base_ref: String,
        #[serde(default)]
        method: MergeMethod,
        /// The PR's title when the gate passed: a squash commit's title.
        #[serde(default)]
        pr_title: String,
        /// The run's issue, which a squash commit's body closes.
        issue: IssueNumber,
    },
    /// Create or update the run's `autoforge` check run on `view.head_sha`;
    /// `status` fills in its summary (reason, validation, commands).
    CheckRun {
        issue: IssueNumber,
        view: CheckRunView,
        status: StatusSnapshot,
    },
}

impl EffectIntent {
    pub fn kind(&self) -> EffectKind {
        match self {
            EffectIntent::Push { .. } => EffectKind::Push,
            EffectIntent::CreatePr { .. } => EffectKind::CreatePr,
            EffectIntent::AdoptPr { .. } => EffectKind::AdoptPr,
            EffectIntent::PostReviewComment { .. }
            | EffectIntent::PostPlanComment { .. }
            | EffectIntent::PostEpicProgress { .. }
            | EffectIntent::PostCommandReply { .. }
            | EffectIntent::PostNotice { .. } => EffectKind::PostComment,
            EffectIntent::EditStatusComment { .. } => EffectKind::EditStatusComment,
            EffectIntent::CreateFollowUpIssue { .. } => EffectKind::CreateIssue,
            EffectIntent::AppendFollowUpMarkers { .. } => EffectKind::AppendIssueMarkers,
            EffectIntent::SpliceEpicRoadmap { .. } => EffectKind::SpliceEpicRoadmap,
            EffectIntent::AddReaction { .. } => EffectKind::AddReaction,
            EffectIntent::SetLabels { .. } => EffectKind::SetLabels,
            EffectIntent::MergePr { .. } => EffectKind::MergePr,
            EffectIntent::CheckRun { .. } => EffectKind::CheckRun,
            EffectIntent::PostReview { .. } => EffectKind::PostReview,
        }
    }

    /// The key the effect is recognised by (marker name and its fields, or
    /// the ref). Stable across crashes so a re-decision finds the same row.
    pub fn identity(&self) -> String {
        match self {
            EffectIntent::Push { branch, sha, .. } => format!("refs/heads/{branch}@{sha}"),
            EffectIntent::CreatePr { issue, .. } | EffectIntent::AdoptPr { issue, .. } => {
                format!("ai-implementation:issue={issue}")
            }
            EffectIntent::PostReviewComment {
                pr, round, binding, ..
            } => format!(
                "ai-review-result:pr={pr}:round={round}:head={}:base={}:merge_base={}",
                binding.head_sha, binding.base_ref, binding.merge_base_sha
            ),
            EffectIntent::PostPlanComment { issue, version, .. } => {
                format!("ai-plan:issue={issue}:version={version}")
            }
            EffectIntent::PostEpicProgress {
                epic, issue, pr, ..
            } => {
                format!("ai-epic-progress:epic={epic}:issue={issue}:pr={pr}")
            }
            EffectIntent::PostCommandReply { comment_id, .. } => {
                format!("autoforge-reply:command_comment_id={comment_id}")
            }
            EffectIntent::PostNotice { event, .. } => format!("autoforge-notice:event={event}"),
            EffectIntent::EditStatusComment { run_id, .. } => {
                format!("autoforge-status:run={run_id}")
            }
            EffectIntent::CreateFollowUpIssue { pr, finding_id, .. } => {
                format!("ai-follow-up:pr={pr}:finding_id={finding_id}")
            }
            EffectIntent::AppendFollowUpMarkers {
                issue,
                pr,
                finding_ids,
            } => {
                format!(
                    "ai-follow-up:issue={issue}:pr={pr}:finding_ids={}",
                    finding_ids.join(",")
                )
            }
            EffectIntent::SpliceEpicRoadmap { epic, .. } => {
                format!("ai-controller-roadmap:epic={epic}")
            }
            EffectIntent::AddReaction { comment_id } => {
                format!("reaction:eyes:comment={comment_id}")
            }
            EffectIntent::SetLabels { issue, add, remove } => format!(
                "labels:issue={issue}:add={}:remove={}",
                add.join(","),
                remove.join(",")
            ),
            EffectIntent::MergePr { pr, sha, .. } => format!("merge:pr={pr}:sha={sha}"),
            EffectIntent::CheckRun { view, .. } => {
                format!("check_run:pr={}:head={}", view.pr, view.head_sha)
            }
            EffectIntent::PostReview {
                pr, round, binding, ..
            } => format!(
                "ai-inline-review:pr={pr}:round={round}:head={}:base={}:merge_base={}",
                binding.head_sha, binding.base_ref, binding.merge_base_sha
            ),
        }
    }
}

/// A correction relaunch: the launch it corrects and the controller's
/// diagnosis, handed to `prompts/correction.md` as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correction {
    pub of_launch: u32,
    pub diagnosis: String,
}

/// Phase-specific inputs of a launch (the prompt renderer adds the rest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "inputs", rename_all = "snake_case")]
pub enum LaunchInputs {
    Plan {
        issue: IssueNumber,
        base_sha: CommitSha,
        /// The version the plan will be (1 for the first).
        version: u32,
    },
    Implement {
        issue: IssueNumber,
        branch: String,
        base_sha: CommitSha,
        /// Where the agent starts: the base, or the last reviewed head of
        /// the issue branch when earlier work was published.
        start_sha: CommitSha,
        validation_failure: Option<String>,
        /// The plan to follow, with the operator's answers (SPEC §4 PLAN).
        #[serde(default)]
        plan: Option<Box<ApprovedPlan>>,
    },
    Review {
        binding: RoundBinding,
        previous_comment_url: Option<String>,
        prior_findings: Option<CarriedFindings>,
        last_resolutions: Vec<Resolution>,
        /// The human findings the last FIX resolved (their resolutions are
        /// in `last_resolutions`): the reviewer checks them too.
        #[serde(default)]
        human_findings: Vec<Finding>,
    },
    Fix {
        binding: RoundBinding,
        comment_url: Option<String>,
        findings: Vec<Finding>,
        validation_failure: Option<String>,
    },
    UpdateEpic {
        epic: IssueNumber,
        finished_issue: IssueNumber,
        finished_pr: Option<PullNumber>,
        merges_since_roadmap: u32,
        roadmap_due: bool,
        /// False on a re-request: a re-request must not carry `progress`.
        want_progress: bool,
        /// Why the agent is asked again: a rejected pick or a voided section.
        rerequest: Option<String>,
    },
}

/// One agent launch to start. `id` is the run-wide launch ordinal, so the
/// `AgentFinished` that answers it can be matched without randomness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub id: u32,
    /// The agent phase the launch works in, which picks the profile's role
    /// (SPEC §13). Stored run states know the field by this name.
    pub role: AgentPhase,
    pub round: u32,
    pub correction_of: Option<Correction>,
    pub inputs: LaunchInputs,
}

/// A candidate commit to validate (SPEC §12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationRequest {
    pub sha: CommitSha,
}

/// Why an unblock was refused; the run stays BLOCKED byte-identical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum UnblockRefusal {
    #[error("the run is in {phase}, not BLOCKED")]
    NotBlocked { phase: Phase },
    #[error(
        "the launch budget ({max_launches} launches) is exhausted; raise it in the configuration"
    )]
    LaunchBudgetExhausted { max_launches: u32 },
    #[error(
        "the budget is spent ({}); the limit is frozen for this run: stop it and label the issue again to start under a new {}",
        crate::machine::budget::BudgetSpent { unit: *unit, used: *used, max: *max }.describe(),
        unit.limit_key()
    )]
    BudgetSpent {
        unit: crate::machine::budget::BudgetUnit,
        used: u64,
        max: u64,
    },
    #[error("the issue is closed")]
    IssueClosed,
    #[error("{count} open pull requests could be adopted on the issue branch; close all but one")]
    SeveralAdoptablePrs { count: usize },
    #[error("pull request #{bound} is bound but GitHub answered with {}", .found.map_or_else(|| "no pull request".to_owned(), |n| format!("#{n}")))]
    PrMismatch {
        bound: PullNumber,
        found: Option<PullNumber>,
    },
    #[error("pull request #{pr} is closed")]
    PrClosed { pr: PullNumber },
    #[error("pull request #{pr} was merged without a clean review at the merged revision")]
    MergedWithoutCleanReview { pr: PullNumber },
    #[error("the review cap ({max_review_rounds} rounds) is reached")]
    ReviewCapReached { max_review_rounds: u32 },
    /// The reason is in the status comment; it is not repeated in a reply,
    /// which has no fallback when outside text breaks the policy.
    #[error(
        "the run was blocked before it started (see the status comment); remove and add the trigger label again to start a new run"
    )]
    NeverStarted,
}

/// A typed refusal: the event does not apply; the state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    #[error("the run is {phase}; nothing more happens to it")]
    Terminal { phase: Phase },
    #[error("{event} does not apply in {phase} while waiting for {awaiting}")]
    UnexpectedEvent {
        phase: Phase,
        awaiting: String,
        event: String,
    },
    #[error("result of launch {got} does not answer the running launch {expected:?}")]
    StaleLaunch { expected: Option<u32>, got: u32 },
    #[error("validation of {got} does not answer the awaited validation")]
    StaleValidation { got: CommitSha },
    #[error("unblock refused: {0}")]
    Unblock(UnblockRefusal),
    #[error("there is no failed step to retry")]
    NothingToRetry,
    #[error("merge is not available: merge.mode is {mode} in {phase}")]
    MergeNotAvailable { mode: MergeMode, phase: Phase },
    #[error("no human round can start: {reason}")]
    HumanRoundNotAvailable { reason: String },
    #[error("{origin} already started a human round")]
    HumanFeedbackSeen { origin: String },
    #[error("{reason}")]
    PlanNotAvailable { reason: String },
}

/// Errors of `decide`: only an edge the table forbids, which is a defect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error(transparent)]
    IllegalEdge(#[from] IllegalEdge),
}

/// Everything one event leads to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub next: RunState,
    /// Edges taken, in order (an entry action may chain a second one, e.g.
    /// UPDATE_EPIC without an EPIC goes on to DONE).
    pub transitions: Vec<(Phase, Phase)>,
    pub effects: Vec<EffectIntent>,
    pub launches: Vec<LaunchRequest>,
    pub validation: Option<ValidationRequest>,
    pub refusal: Option<Refusal>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_kinds_serialise_as_the_spec_names() {
        let kinds = [
            (EffectKind::Push, "push"),
            (EffectKind::CreatePr, "create_pr"),
            (EffectKind::AdoptPr, "adopt_pr"),
            (EffectKind::PostComment, "post_comment"),
            (EffectKind::EditStatusComment, "edit_status_comment"),
            (EffectKind::CreateIssue, "create_issue"),
            (EffectKind::AppendIssueMarkers, "append_issue_markers"),
            (EffectKind::SpliceEpicRoadmap, "splice_epic_roadmap"),
            (EffectKind::AddReaction, "add_reaction"),
            (EffectKind::SetLabels, "set_labels"),
            (EffectKind::MergePr, "merge_pr"),
            (EffectKind::CheckRun, "check_run"),
            (EffectKind::PostReview, "post_review"),
        ];
        for (kind, name) in kinds {
            assert_eq!(
                serde_json::to_string(&kind).expect("serialise"),
                format!("\"{name}\"")
            );
        }
    }

    #[test]
    fn review_comment_identity_names_the_whole_binding() {
        let binding = RoundBinding {
            pr: autoforge_journal::testing::pull(4),
            head_sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            base_ref: "main".into(),
            merge_base_sha: autoforge_journal::testing::sha(&"b".repeat(40)),
        };
        let effect = EffectIntent::PostReviewComment {
            pr: autoforge_journal::testing::pull(4),
            round: 2,
            binding,
            findings: Vec::new(),
            sections: ReviewSections::default(),
        };
        assert_eq!(effect.kind(), EffectKind::PostComment);
        assert_eq!(
            effect.identity(),
            format!(
                "ai-review-result:pr=4:round=2:head={}:base=main:merge_base={}",
                "a".repeat(40),
                "b".repeat(40)
            )
        );
    }
}
