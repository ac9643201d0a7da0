//! The catalogue of templates: file names, embedded texts and the
//! documented placeholder set of each, plus the bound placeholders filled
//! from the parser's own constants.

use crate::agents::result::limits;

/// Every template the controller renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TemplateId {
    TrustBoundary,
    Plan,
    Implement,
    ApprovedPlan,
    Review,
    Fix,
    UpdateEpic,
    UpdateEpicReRequest,
    Correction,
    ValidationEvidence,
    ValidationFailure,
    WorktreeState,
}

impl TemplateId {
    pub const ALL: [TemplateId; 12] = [
        Self::TrustBoundary,
        Self::Plan,
        Self::Implement,
        Self::ApprovedPlan,
        Self::Review,
        Self::Fix,
        Self::UpdateEpic,
        Self::UpdateEpicReRequest,
        Self::Correction,
        Self::ValidationEvidence,
        Self::ValidationFailure,
        Self::WorktreeState,
    ];

    /// File name under `prompts/` (and under an override directory).
    pub fn file_name(self) -> &'static str {
        match self {
            Self::TrustBoundary => "trust_boundary.md",
            Self::Plan => "plan.md",
            Self::Implement => "implement.md",
            Self::ApprovedPlan => "approved_plan.md",
            Self::Review => "review.md",
            Self::Fix => "fix.md",
            Self::UpdateEpic => "update_epic.md",
            Self::UpdateEpicReRequest => "update_epic_rerequest.md",
            Self::Correction => "correction.md",
            Self::ValidationEvidence => "validation_evidence.md",
            Self::ValidationFailure => "validation_failure.md",
            Self::WorktreeState => "worktree_state.md",
        }
    }

    pub(super) fn embedded(self) -> &'static str {
        match self {
            Self::TrustBoundary => include_str!("../../../../prompts/trust_boundary.md"),
            Self::Plan => include_str!("../../../../prompts/plan.md"),
            Self::Implement => include_str!("../../../../prompts/implement.md"),
            Self::ApprovedPlan => include_str!("../../../../prompts/approved_plan.md"),
            Self::Review => include_str!("../../../../prompts/review.md"),
            Self::Fix => include_str!("../../../../prompts/fix.md"),
            Self::UpdateEpic => include_str!("../../../../prompts/update_epic.md"),
            Self::UpdateEpicReRequest => {
                include_str!("../../../../prompts/update_epic_rerequest.md")
            }
            Self::Correction => include_str!("../../../../prompts/correction.md"),
            Self::ValidationEvidence => include_str!("../../../../prompts/validation_evidence.md"),
            Self::ValidationFailure => include_str!("../../../../prompts/validation_failure.md"),
            Self::WorktreeState => include_str!("../../../../prompts/worktree_state.md"),
        }
    }

    /// The documented placeholder set: exactly these names appear in the
    /// template and must be given to [`PromptSet::render`]. Names starting
    /// with `MAX_`/`MIN_` are filled from [`limit_value`] automatically.
    ///
    /// Long by design: it is the table of every template's placeholders.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            Self::TrustBoundary => &[
                "PHASE",
                "REPOSITORY",
                "ISSUE_URL",
                "CONTEXT_DIR",
                "MAX_CONTROL_RESULT_BYTES",
            ],
            Self::Plan => &[
                "PLAN_VERSION",
                "ISSUE_URL",
                "EPIC_URL",
                "REPOSITORY",
                "DEFAULT_BRANCH",
                "BASE_SHA",
                "ADDITIONAL_SECTIONS",
                "MAX_PLAN_TEXT_CHARS",
                "MAX_PLAN_LINE_CHARS",
            ],
            Self::ApprovedPlan => &["PLAN_VERSION", "PLAN_APPROVAL", "PLAN_TEXT", "PLAN_ANSWERS"],
            Self::Implement => &[
                "ISSUE_NUMBER",
                "ISSUE_URL",
                "EPIC_URL",
                "REPOSITORY",
                "DEFAULT_BRANCH",
                "BASE_SHA",
                "START_SHA",
                "START_DESCRIPTION",
                "BRANCH",
                "ADDITIONAL_SECTIONS",
                "MAX_PR_TITLE_CHARS",
                "MAX_PR_BODY_CHARS",
                "MAX_TESTS",
                "MAX_TEST_CHARS",
            ],
            Self::Review => &[
                "REVIEW_ROUND",
                "PR_URL",
                "ISSUE_URL",
                "REPOSITORY",
                "REVIEWED_HEAD_SHA",
                "REVIEWED_BASE_REF",
                "REVIEWED_MERGE_BASE_SHA",
                "PREVIOUS_REVIEW_COMMENT_URL",
                "EXISTING_FOLLOW_UP_ISSUES",
                "PRIOR_FINDINGS",
                "PREVIOUS_FIX_RESOLUTIONS",
                "HUMAN_FINDINGS",
                "VALIDATION_EVIDENCE",
                "ADDITIONAL_SECTIONS",
                "MAX_REVIEW_COMMENT_CHARS",
                "MAX_FINDINGS_PER_REVIEW",
                "MAX_FINDING_ID_CHARS",
                "MAX_FINDING_TITLE_CHARS",
                "MAX_FINDING_LOCATION_CHARS",
                "MAX_FINDING_RESOLUTION_CHARS",
                "MAX_REVIEW_SECTION_CHARS",
                "MAX_REVIEW_SUMMARY_CHARS",
            ],
            Self::Fix => &[
                "REVIEW_ROUND",
                "PR_URL",
                "ISSUE_URL",
                "REPOSITORY",
                "REVIEW_COMMENT_URL",
                "REVIEWED_HEAD_SHA",
                "FINDINGS",
                "FOLLOW_UP_ISSUES",
                "ADDITIONAL_SECTIONS",
                "MAX_RESOLUTIONS_PER_FIX",
                "MIN_RATIONALE_CHARS",
                "MAX_RATIONALE_CHARS",
                "MAX_PR_TITLE_CHARS",
                "MAX_PR_BODY_CHARS",
                "MAX_TESTS",
                "MAX_TEST_CHARS",
            ],
            Self::UpdateEpic => &[
                "EPIC_URL",
                "ISSUE_URL",
                "PR_URL",
                "REPOSITORY",
                "MERGED_SINCE_EPIC_UPDATE",
                "EPIC_UPDATE_EVERY",
                "MERGED_PRS_SINCE_EPIC_UPDATE",
                "ROADMAP_UPDATE_DUE",
                "ROADMAP_START_MARKER",
                "ROADMAP_END_MARKER",
                "CURRENT_ROADMAP_SECTION",
                "MAX_PROGRESS_CHARS",
                "MAX_ROADMAP_SECTION_CHARS",
            ],
            Self::UpdateEpicReRequest => &[
                "PROGRESS_COMMENT_URL",
                "RE_REQUEST_ASKS",
                "RE_REQUEST_REASON",
                "RE_REQUEST_FIELDS",
                "EPIC_URL",
                "ISSUE_URL",
                "PR_URL",
                "REPOSITORY",
                "ROADMAP_UPDATE_DUE",
                "ROADMAP_START_MARKER",
                "ROADMAP_END_MARKER",
                "CURRENT_ROADMAP_SECTION",
                "MAX_ROADMAP_SECTION_CHARS",
            ],
            Self::Correction => &[
                "PHASE",
                "PREVIOUS_ERROR_BLOCK",
                "CORRECTION_ATTEMPT",
                "MAX_CORRECTION_ATTEMPTS",
            ],
            Self::ValidationEvidence => &[
                "VALIDATION_CANDIDATE",
                "VALIDATION_RECORDS",
                "VALIDATION_OUTPUT",
            ],
            Self::ValidationFailure => &[
                "FAILED_CANDIDATE",
                "FAILED_RECORDS",
                "FAILURE_COUNT",
                "MAX_FAILURE_COUNT",
                "ATTEMPT",
                "FAILED_OUTPUT",
            ],
            Self::WorktreeState => &[
                "WORKTREE_BRANCH",
                "WORKTREE_HEAD_SHA",
                "WORKTREE_CHANGE_COUNT",
                "WORKTREE_MAX_ENTRIES",
                "WORKTREE_CHANGES",
            ],
        }
    }
}

/// The value of a bound placeholder, from the same constants the parser
/// enforces. Bounds that depend on configuration (`MAX_CORRECTION_ATTEMPTS`,
/// `MAX_FAILURE_COUNT`) are not here; the caller supplies them.
pub fn limit_value(name: &str) -> Option<usize> {
    use limits::*;
    Some(match name {
        "MAX_CONTROL_RESULT_BYTES" => MAX_CONTROL_RESULT_BYTES,
        "MAX_PR_TITLE_CHARS" => MAX_PR_TITLE_CHARS,
        "MAX_PR_BODY_CHARS" => MAX_PR_BODY_CHARS,
        "MAX_TESTS" => MAX_TESTS,
        "MAX_TEST_CHARS" => MAX_TEST_CHARS,
        "MAX_REVIEW_COMMENT_CHARS" => MAX_REVIEW_COMMENT_CHARS,
        "MAX_FINDINGS_PER_REVIEW" => MAX_FINDINGS_PER_REVIEW,
        "MAX_FINDING_ID_CHARS" => MAX_FINDING_ID_CHARS,
        "MAX_FINDING_TITLE_CHARS" => MAX_FINDING_TITLE_CHARS,
        "MAX_FINDING_LOCATION_CHARS" => MAX_FINDING_LOCATION_CHARS,
        "MAX_FINDING_RESOLUTION_CHARS" => MAX_FINDING_RESOLUTION_CHARS,
        "MAX_REVIEW_SECTION_CHARS" => MAX_REVIEW_SECTION_CHARS,
        "MAX_REVIEW_SUMMARY_CHARS" => MAX_REVIEW_SUMMARY_CHARS,
        "MAX_RESOLUTIONS_PER_FIX" => MAX_RESOLUTIONS_PER_FIX,
        "MIN_RATIONALE_CHARS" => MIN_RATIONALE_CHARS,
        "MAX_RATIONALE_CHARS" => MAX_RATIONALE_CHARS,
        "MAX_PROGRESS_CHARS" => MAX_PROGRESS_CHARS,
        "MAX_ROADMAP_SECTION_CHARS" => MAX_ROADMAP_SECTION_CHARS,
        "MAX_PLAN_TEXT_CHARS" => MAX_PLAN_TEXT_CHARS,
        "MAX_PLAN_LINE_CHARS" => MAX_PLAN_LINE_CHARS,
        _ => return None,
    })
}
