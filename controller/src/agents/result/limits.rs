//! Every bound a phase result is held to, in one place.
//!
//! The schemas in `schemas/` spell the same numbers (a test keeps them
//! equal), and the prompts are rendered from these constants, so the number
//! an agent is told is the number it is held to. Lengths are Unicode scalar
//! values, the unit of JSON Schema's `maxLength`.

/// Largest result block accepted, in bytes, measured before JSON parsing.
pub const MAX_CONTROL_RESULT_BYTES: usize = 1024 * 1024;
/// `message` of a failure or blocked result.
pub const MAX_MESSAGE_CHARS: usize = 4_000;
/// URLs anywhere in a result.
pub const MAX_URL_CHARS: usize = crate::publish::issue_ref::MAX_URL_CHARS;
/// PR and follow-up issue titles (GitHub's own title limit).
pub const MAX_PR_TITLE_CHARS: usize = crate::publish::policy::GITHUB_TITLE_MAX_CHARS;
/// PR and follow-up issue bodies from an agent; the rest of GitHub's 65,536
/// is left for the lines the controller adds.
pub const MAX_PR_BODY_CHARS: usize = 60_000;
/// `tests` entries and their length.
pub const MAX_TESTS: usize = 50;
pub const MAX_TEST_CHARS: usize = 500;
/// Review findings.
pub const MAX_FINDINGS_PER_REVIEW: usize = 20;
pub const MAX_FINDING_ID_CHARS: usize = 32;
pub const MAX_FINDING_TITLE_CHARS: usize = 200;
pub const MAX_FINDING_LOCATION_CHARS: usize = 300;
pub const MAX_FINDING_RESOLUTION_CHARS: usize = 2_000;
/// Review prose sections and the summary.
pub const MAX_REVIEW_SECTION_CHARS: usize = 6_000;
pub const MAX_REVIEW_SUMMARY_CHARS: usize = 2_000;
/// The whole rendered review comment (GitHub's body limit).
pub const MAX_REVIEW_COMMENT_CHARS: usize = crate::publish::policy::GITHUB_BODY_MAX_CHARS;
/// FIX resolutions: one per finding, so never more than a review may raise.
pub const MAX_RESOLUTIONS_PER_FIX: usize = MAX_FINDINGS_PER_REVIEW;
pub const MIN_RATIONALE_CHARS: usize = 40;
pub const MAX_RATIONALE_CHARS: usize = 2_000;
/// UPDATE_EPIC texts.
pub const MAX_PROGRESS_CHARS: usize = 16_384;
pub const MAX_ROADMAP_SECTION_CHARS: usize = 32_768;

/// A plan's summary, each step, risk and question (the schema's bound;
/// the summary is held to the same one).
pub const MAX_PLAN_TEXT_CHARS: usize = 2_000;
/// A plan's file paths and suggested answers: one line each.
pub const MAX_PLAN_LINE_CHARS: usize = 300;
