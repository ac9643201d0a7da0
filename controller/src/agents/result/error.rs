//! Why a result was refused.
//!
//! Every message names the field, the rule and sizes or offsets, and never
//! repeats what the agent wrote: diagnostics are logged, journalled and sent
//! back to the agent in the correction prompt, and must be safe in all three.

use crate::publish::PolicyViolation;

/// One rule the schema found broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// JSON pointer of the offending value (`/findings/0/title`, or `/` for
    /// the root). Pointers only hold keys the schema knows and indices.
    pub path: String,
    /// The schema keyword that failed (`maxLength`, `required`, …).
    pub keyword: String,
    /// What the rule and the value measure, e.g. `7 of at most 5 items`.
    pub detail: String,
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.keyword)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// Why the controller's own checks disagree with the result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrossCheckError {
    #[error("issue_url does not name the run's issue {expected}")]
    WrongIssue { expected: String },
    #[error("{field} is {found}, but the worktree HEAD is {expected}")]
    HeadMismatch {
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error("head_sha equals the base {base}: nothing was committed")]
    NothingCommitted { base: String },
    #[error("head_sha {head} does not descend from {ancestor}")]
    NotADescendant { head: String, ancestor: String },
    #[error("round is {found}, but this is round {expected}")]
    RoundMismatch { found: u32, expected: u32 },
    #[error("reviewed_head_sha is {found}, but the round is bound to {expected}")]
    ReviewedHeadMismatch { found: String, expected: String },
    #[error("previous_head_sha is {found}, but the reviewed HEAD is {expected}")]
    PreviousHeadMismatch { found: String, expected: String },
    #[error("{field} {index}: id {id} does not belong to round {round}")]
    FindingOfAnotherRound {
        field: &'static str,
        index: usize,
        id: String,
        round: u32,
    },
    #[error("{field}: id {id} appears more than once")]
    DuplicateId { field: &'static str, id: String },
    #[error("needs_fix_round is {found}, but there are {findings} findings")]
    VerdictMismatch { found: bool, findings: usize },
    #[error("needs_fix_round is false while validation command [{index}] did not pass")]
    CleanVerdictWithFailedValidation { index: usize },
    #[error("no resolution for open finding {id}")]
    MissingResolution { id: String },
    #[error("resolution {index} names {id}, which is not an open finding")]
    UnknownFinding { index: usize, id: String },
    #[error("resolution {index} ({id}) is fixed, but HEAD did not move")]
    FixedWithoutCommit { index: usize, id: String },
    #[error("resolution {index} ({id}): commit_sha {sha} is not among the new commits")]
    CommitNotNew {
        index: usize,
        id: String,
        sha: String,
    },
    #[error(
        "resolution {index} ({id}): follow_up_issue_url is not an open follow-up issue handed over for this PR"
    )]
    FollowUpNotListed { index: usize, id: String },
    #[error("resolution {index} ({id}): the run's own issue cannot be a follow-up")]
    FollowUpIsRunIssue { index: usize, id: String },
    #[error(
        "resolution {index} ({id}): an open follow-up issue already exists for this finding and must be used"
    )]
    FollowUpMustBeReused { index: usize, id: String },
    #[error("roadmap_section is required now but missing")]
    RoadmapRequired,
    #[error("next_issue_url is not an issue of {repository}")]
    NextIssueOtherRepository { repository: String },
    #[error("next_issue_url names the EPIC or the issue just finished")]
    NextIssueNotEligible,
    #[error("the observations given are for another phase than the result")]
    ObservationsOfAnotherPhase,
}

/// A refused result. Display is the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    #[error(
        "no complete CONTROL_RESULT block in the last {searched_bytes} bytes of output (of {total_bytes}){}",
        if *head_truncated { "; earlier output was not captured, so a block there is lost: emit the block at the very end" } else { "" }
    )]
    NoBlock {
        head_truncated: bool,
        searched_bytes: usize,
        total_bytes: u64,
    },
    #[error("a CONTROL_RESULT block was opened but never closed with <<<END_CONTROL_RESULT>>>")]
    IncompleteBlock,
    #[error("the CONTROL_RESULT block is over the limit of {max} bytes ({bytes} bytes seen)")]
    BlockTooLarge { bytes: usize, max: usize },
    #[error("the block is not valid JSON ({category} error at line {line}, column {column})")]
    InvalidJson {
        category: &'static str,
        line: usize,
        column: usize,
    },
    #[error("the block has an object with a duplicate key (line {line}, column {column})")]
    DuplicateKey { line: usize, column: usize },
    #[error("the block is JSON but not an object")]
    NotAnObject,
    #[error("required field {field} is missing")]
    MissingField { field: &'static str },
    #[error("field {field} must be {expected}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
    #[error("phase must be \"{expected}\"")]
    WrongPhase { expected: &'static str },
    #[error("status must be one of \"success\", \"failure\", \"blocked\"")]
    BadStatus,
    #[error("a {status} result needs a non-empty message")]
    MissingMessage { status: &'static str },
    #[error("the result breaks its schema: {}", list(.violations))]
    Schema { violations: Vec<SchemaViolation> },
    #[error("the result has {count} field(s) that were not asked for in this re-request")]
    UnaskedFields { count: usize },
    #[error("published-text policy: {0}")]
    Policy(PolicyViolation),
    #[error(
        "published-text policy: {field} held credential-shaped text, which was removed from the captured output"
    )]
    RedactedCredential { field: String },
    #[error("cross-check failed: {0}")]
    CrossCheck(#[from] CrossCheckError),
}

impl From<PolicyViolation> for ResultError {
    fn from(v: PolicyViolation) -> Self {
        Self::Policy(v)
    }
}

fn list(violations: &[SchemaViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ResultError {
    /// The controller's diagnosis for the correction prompt: what was wrong
    /// and what a valid answer must do instead. Never contains agent text.
    pub fn diagnosis(&self) -> String {
        let hint = match self {
            Self::NoBlock { .. } | Self::IncompleteBlock => {
                "End your final output with exactly one complete block: the start line, one JSON object, the end line."
            }
            Self::BlockTooLarge { .. } => {
                "Shorten the result; every field has a documented bound and nothing is clipped for you."
            }
            Self::InvalidJson { .. } | Self::DuplicateKey { .. } | Self::NotAnObject => {
                "The block must hold exactly one strict JSON object (no comments, no trailing commas, strings escaped)."
            }
            Self::MissingField { .. }
            | Self::WrongType { .. }
            | Self::WrongPhase { .. }
            | Self::BadStatus
            | Self::MissingMessage { .. }
            | Self::Schema { .. }
            | Self::UnaskedFields { .. } => {
                "Return exactly the fields of the schema in the prompt, with the documented types and bounds."
            }
            Self::Policy(_) | Self::RedactedCredential { .. } => {
                "Rewrite the named field so it follows the published-text rules in the prompt; the controller never edits it for you."
            }
            Self::CrossCheck(_) => {
                "Inspect the real state of the worktree and the values given in the prompt, then report them exactly."
            }
        };
        format!("{self}\n{hint}")
    }
}

/// Whether a refused result earns a correction relaunch: only an agent that
/// exited 0 is asked again, and only while the bound allows it.
pub fn correction_allowed(exit_success: bool, corrections_used: u32, max_corrections: u32) -> bool {
    exit_success && corrections_used < max_corrections
}
