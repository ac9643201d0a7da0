//! The review comment the controller renders from a REVIEW result (SPEC §4).
//!
//! Layout, heading, binding line, verdict and marker are the controller's;
//! only the finding fields and the sections are the agent's, each standing in
//! a block of its own. The whole body is checked again after rendering,
//! because a fence or raw HTML in one field changes how the others render.

use serde_json::json;

use super::marker::render_marker;
use super::policy::{self, GITHUB_BODY_MAX_CHARS, PolicyViolation};
use crate::inline_code::code_span;
use crate::machine::{Finding, ReviewSections};

/// Everything a review comment is rendered from: the controller's binding
/// and the validated result's findings and sections.
#[derive(Debug, Clone, Copy)]
pub struct ReviewRender<'a> {
    pub round: u32,
    pub reviewed_head_sha: &'a str,
    pub base_ref: &'a str,
    pub merge_base_sha: &'a str,
    pub needs_fix_round: bool,
    pub findings: &'a [Finding],
    pub sections: &'a ReviewSections,
}

/// The name the whole-body checks report.
const BODY_FIELD: &str = "review comment";

/// Renders the comment and checks it as a whole: the content rules before
/// the marker, then GitHub's limit on everything.
pub fn render_review_comment(review: &ReviewRender<'_>) -> Result<String, PolicyViolation> {
    // Each agent block must close what it opens: a comment or `<details>`
    // left open in one would hide the blocks and the verdict after it, and
    // the whole-body check cannot see field boundaries.
    for finding in review.findings {
        policy::check_html_closed(&format!("{} title", finding.id), &finding.title)?;
        policy::check_html_closed(
            &format!("{} required_resolution", finding.id),
            &finding.required_resolution,
        )?;
    }
    for (name, _, text) in review.sections.iter() {
        policy::check_html_closed(name, text)?;
    }
    let mut parts: Vec<String> = vec![
        format!("# AI Code Review — Round {}", review.round),
        format!(
            "Reviewed HEAD: {} against base {} (merge base {})",
            code_span(review.reviewed_head_sha),
            code_span(review.base_ref),
            code_span(review.merge_base_sha)
        ),
        "## Findings".to_owned(),
    ];
    if review.findings.is_empty() {
        parts.push("None.".to_owned());
    }
    for finding in review.findings {
        parts.extend(finding_lines(finding));
    }
    for (_, heading, text) in review.sections.iter() {
        parts.push(format!("## {heading}"));
        parts.push(text.trim_end().to_owned());
    }
    parts.push(format!(
        "Needs another fix round: {}",
        if review.needs_fix_round { "YES" } else { "NO" }
    ));
    let body = parts.join("\n\n");
    policy::check_body(BODY_FIELD, &body)?;

    let finding_ids: Vec<&str> = review.findings.iter().map(|f| f.id.as_str()).collect();
    let marker = render_marker(
        "ai-review-result",
        &json!({
            "round": review.round,
            "reviewed_head_sha": review.reviewed_head_sha,
            "reviewed_base_ref": review.base_ref,
            "reviewed_merge_base_sha": review.merge_base_sha,
            "needs_fix_round": review.needs_fix_round,
            "finding_ids": finding_ids,
        }),
    );
    let comment = format!("{body}\n\n{marker}");
    policy::check_size(BODY_FIELD, &comment, GITHUB_BODY_MAX_CHARS)?;
    Ok(comment)
}

/// A finding as the review comment and the inline review's body show it:
/// its heading, then what must be done about it.
pub(crate) fn finding_lines(finding: &Finding) -> [String; 3] {
    [
        format!(
            "### {} [{}] {} — {}",
            finding.id,
            finding.classification.as_str(),
            code_span(&finding.location),
            finding.title
        ),
        "Required resolution:".to_owned(),
        finding.required_resolution.trim_end().to_owned(),
    ]
}
