//! The other bodies the controller composes around agent text: the PR body,
//! a follow-up issue's body and the EPIC progress comment.
//!
//! Each is checked as a whole before it is handed to the effect layer:
//! the agent's part must close every fence and swallowing HTML construct it
//! opens (or the controller's lines after it would render as code or
//! hidden), the content rules on everything the agent influenced, a credential check
//! on the final bytes (a field ending in `TOKEN=` could otherwise borrow the
//! next rendered word as its value), and GitHub's body limit.

use serde_json::json;

use super::issue_ref::IssueRef;
use super::marker::render_marker;
use super::policy::{self, GITHUB_BODY_MAX_CHARS, PolicyViolation};
use crate::inline_code::code_span;
use crate::redact::find_credential;

/// The block the controller appends to a PR body it opens or adopts:
/// the closing line for the run's own issue and the implementation marker.
pub fn implementation_block(run_issue: &IssueRef, issue_url: &str) -> String {
    let marker = render_marker("ai-implementation", &json!({ "issue": issue_url }));
    format!("Closes #{}\n\n{marker}", run_issue.number)
}

/// A new PR's body: the agent's text, a blank line, then
/// [`implementation_block`].
pub fn compose_pr_body(
    agent_body: &str,
    run_issue: &IssueRef,
    issue_url: &str,
) -> Result<String, PolicyViolation> {
    // The closing line is ours and would trip the closing-keyword rule, so
    // the content rules run on the agent's part, the rest on the whole.
    policy::check_body("pr body", agent_body)?;
    policy::check_closed("pr body", agent_body)?;
    let body = format!(
        "{}\n\n{}",
        agent_body.trim_end(),
        implementation_block(run_issue, issue_url)
    );
    finish("pr body", body)
}

/// A follow-up issue's body: the agent's text, where it was deferred from,
/// and the `ai-follow-up` marker.
pub fn compose_follow_up_body(
    agent_body: &str,
    finding_id: &str,
    pr_url: &str,
) -> Result<String, PolicyViolation> {
    policy::check_closed("follow-up issue body", agent_body)?;
    let visible = format!(
        "{}\n\nDeferred from finding {} of {pr_url}.",
        agent_body.trim_end(),
        code_span(finding_id)
    );
    policy::check_body("follow-up issue body", &visible)?;
    let marker = render_marker(
        "ai-follow-up",
        &json!({ "finding_id": finding_id, "pr": pr_url }),
    );
    finish("follow-up issue body", format!("{visible}\n\n{marker}"))
}

/// The EPIC progress comment: the report and the `ai-epic-progress` marker.
pub fn compose_progress_comment(
    progress: &str,
    issue_url: &str,
    pr_url: &str,
) -> Result<String, PolicyViolation> {
    policy::check_body("progress comment", progress)?;
    policy::check_closed("progress comment", progress)?;
    let marker = render_marker(
        "ai-epic-progress",
        &json!({ "issue": issue_url, "pr": pr_url }),
    );
    finish(
        "progress comment",
        format!("{}\n\n{marker}", progress.trim_end()),
    )
}

fn finish(field: &str, body: String) -> Result<String, PolicyViolation> {
    if let Some(kind) = find_credential(&body) {
        return Err(PolicyViolation::Credential {
            field: field.into(),
            kind,
        });
    }
    policy::check_size(field, &body, GITHUB_BODY_MAX_CHARS)?;
    Ok(body)
}
