//! An agent's CONTROL_RESULT as plain data: the one set of result types.
//!
//! The `agents` parser produces these once the block passed the schema,
//! the published-text policy and the cross-checks; the machine decides from
//! them, `publish` renders them and the journal stores them. Fields that
//! only served a cross-check (the issue URL, the verdict flag) are gone by
//! then, and references are resolved (an issue URL becomes its number).

use autoforge_journal::{CommitSha, IssueNumber};
use serde::{Deserialize, Serialize};

/// How serious a reviewer judged a finding. Severity never changes the
/// workflow: any finding forces a fix round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Classification {
    Blocked,
    NonBlocked,
    Nit,
}

impl Classification {
    /// The CONTROL_RESULT and review-comment spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blocked => "blocked",
            Self::NonBlocked => "non-blocked",
            Self::Nit => "nit",
        }
    }
}

/// One review finding (`id` = `R<round>-F<n>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub classification: Classification,
    pub title: String,
    pub location: String,
    pub required_resolution: String,
}

/// The prose sections of a review comment, rendered by `publish`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewSections {
    pub spec: String,
    pub standards: String,
    pub assessment: String,
    pub observations: String,
    pub verification: String,
    pub summary: String,
}

impl ReviewSections {
    /// `(field name, heading, text)` in rendering order.
    pub fn iter(&self) -> [(&'static str, &'static str, &str); 6] {
        [
            ("spec", "Spec", &self.spec),
            ("standards", "Standards", &self.standards),
            ("assessment", "Assessment", &self.assessment),
            ("observations", "Observations", &self.observations),
            ("verification", "Verification", &self.verification),
            ("summary", "Summary", &self.summary),
        ]
    }
}

/// A follow-up issue the fixer asks the controller to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowUpDraft {
    pub title: String,
    pub body: String,
}

/// How the fixer resolved one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "resolution", rename_all = "snake_case")]
pub enum ResolutionKind {
    Fixed {
        commit_sha: Option<CommitSha>,
    },
    /// Deferred to an issue that already exists (one handed to the fixer).
    FollowUpExisting {
        issue: IssueNumber,
    },
    /// Deferred to a new issue the controller creates.
    FollowUpNew {
        draft: FollowUpDraft,
    },
    NoChangeWithRationale {
        rationale: String,
    },
}

/// The fixer's answer for one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    pub finding_id: String,
    #[serde(flatten)]
    pub kind: ResolutionKind,
}

/// One open question of a plan, with the answer the planner suggests; an
/// approval that does not answer it takes `default`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanQuestion {
    /// A small number (`1`, `2`, …): what `/autoforge approve 1=b` names.
    pub id: String,
    pub question: String,
    pub default: String,
}

/// A successful PLAN result: what the implementer is going to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanResult {
    pub summary: String,
    pub steps: Vec<String>,
    /// The files the planner expects the change to touch.
    pub files: Vec<String>,
    pub risks: Vec<String>,
    pub questions: Vec<PlanQuestion>,
}

/// An operator's answer to one plan question (`/autoforge approve 1=b`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanAnswer {
    pub id: String,
    pub text: String,
}

/// The plan IMPLEMENT works from: the version that was approved (or
/// posted, under `plan.mode = "post"`) and the answers given with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovedPlan {
    pub version: u32,
    pub plan: PlanResult,
    /// The operator's answers; a question without one takes its default.
    pub answers: Vec<PlanAnswer>,
    /// Who approved it; `None` when the plan was only posted.
    pub approved_by: Option<String>,
}

impl ApprovedPlan {
    /// Each question with the answer that stands: the operator's, or the
    /// planner's default (`false`).
    pub fn resolved(&self) -> Vec<(&PlanQuestion, &str, bool)> {
        self.plan
            .questions
            .iter()
            .map(|q| match self.answers.iter().find(|a| a.id == q.id) {
                Some(given) => (q, given.text.as_str(), true),
                None => (q, q.default.as_str(), false),
            })
            .collect()
    }
}

/// A successful IMPLEMENT result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplementResult {
    pub head_sha: CommitSha,
    pub pr_title: String,
    pub pr_body: String,
    pub tests: Vec<String>,
}

/// A successful REVIEW result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewResult {
    pub round: u32,
    pub reviewed_head_sha: CommitSha,
    pub findings: Vec<Finding>,
    pub sections: ReviewSections,
}

impl ReviewResult {
    /// The reviewer's verdict: the cross-checks made it agree with the
    /// findings, so any finding means another fix round.
    pub fn needs_fix_round(&self) -> bool {
        !self.findings.is_empty()
    }
}

/// A successful FIX result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixResult {
    pub previous_head_sha: CommitSha,
    pub head_sha: CommitSha,
    pub resolutions: Vec<Resolution>,
}

/// A successful UPDATE_EPIC result. `progress` is absent on a re-request,
/// which asks only for the missing pieces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpicResult {
    pub progress: Option<String>,
    pub roadmap_section: Option<String>,
    /// `None` means the agent reports the EPIC complete.
    pub next_issue: Option<IssueNumber>,
    /// `owner/name` of the picked issue, from its URL; a pick from another
    /// repository is rejected like any ineligible pick.
    #[serde(default)]
    pub next_issue_repository: Option<String>,
}

/// The phase-specific payload of a `status: "success"` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PhaseResult {
    Plan(PlanResult),
    Implement(ImplementResult),
    Review(ReviewResult),
    Fix(FixResult),
    UpdateEpic(EpicResult),
}

/// A parsed CONTROL_RESULT by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AgentResult {
    Success { result: PhaseResult },
    Failure { message: String },
    Blocked { message: String },
}

/// How one agent launch ended, as the supervisor and parser saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AgentOutcome {
    /// Exit 0 with a valid CONTROL_RESULT.
    Result {
        result: AgentResult,
    },
    /// Killed by a signal or failed to start.
    Crashed {
        detail: String,
    },
    /// Idle or max-runtime timeout; the process group was killed.
    TimedOut,
    NonZeroExit {
        code: i32,
    },
    /// Exit 0 but no usable CONTROL_RESULT; `diagnosis` is the controller's
    /// own wording (never agent text) and goes to the correction prompt.
    Malformed {
        diagnosis: String,
    },
}
