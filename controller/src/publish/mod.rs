//! Published-text policy and the controller's own renderers (SPEC §7, §4).
//!
//! Nothing an agent wrote reaches GitHub unless it passed [`policy`] field by
//! field and again inside the whole body the controller rendered around it.

pub mod bodies;
pub mod commit;
pub mod inline_review;
pub mod issue_ref;
pub mod markdown;
pub mod marker;
pub mod plan_comment;
pub mod policy;
pub mod rendered;
pub mod review;
pub mod squash;

pub use commit::{CommitMessageViolation, check_commit_message};
pub use inline_review::{InlineReviewRender, render_inline_comment, render_inline_review_body};
pub use issue_ref::{IssueRef, html_base};
pub use marker::render_marker;
pub use plan_comment::{PlanRender, render_plan_comment};
pub use policy::{FieldKind, PolicyViolation, check_body, check_field};
pub use review::{ReviewRender, render_review_comment};
