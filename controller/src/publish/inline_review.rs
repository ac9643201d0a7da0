//! The texts of a review round's pull request review (SPEC §6
//! `post_review`): one inline comment per finding placed on a line of the
//! diff, and the review's body, which lists every finding that could not be
//! placed and carries the `ai-inline-review` marker.
//!
//! The round's review comment stays the record the machine and the merge
//! gate read; these texts only show the same findings where the code is.
//! Each is checked whole like every other body: the agent's fields must
//! close what they open, then the content rules and GitHub's limit.

use serde_json::json;

use super::marker::render_marker;
use super::policy::{self, GITHUB_BODY_MAX_CHARS, PolicyViolation};
use crate::inline_code::code_span;
use crate::machine::Finding;

/// What the review body is rendered from: the round, its binding and the
/// findings that no diff line could take.
#[derive(Debug, Clone, Copy)]
pub struct InlineReviewRender<'a> {
    pub round: u32,
    pub reviewed_head_sha: &'a str,
    pub base_ref: &'a str,
    pub merge_base_sha: &'a str,
    /// How many findings the round has in all.
    pub findings: usize,
    /// The findings placed nowhere in the diff, listed in the body.
    pub unplaced: &'a [&'a Finding],
}

/// The name the whole-body checks report.
const BODY_FIELD: &str = "inline review";

fn check_fields(finding: &Finding) -> Result<(), PolicyViolation> {
    policy::check_html_closed(&format!("{} title", finding.id), &finding.title)?;
    policy::check_html_closed(
        &format!("{} required_resolution", finding.id),
        &finding.required_resolution,
    )
}

/// The inline comment showing `finding` on its line.
pub fn render_inline_comment(finding: &Finding) -> Result<String, PolicyViolation> {
    check_fields(finding)?;
    let body = format!(
        "**{}** [{}] {}\n\nRequired resolution:\n\n{}",
        finding.id,
        finding.classification.as_str(),
        finding.title,
        finding.required_resolution.trim_end()
    );
    let field = format!("{} inline comment", finding.id);
    policy::check_body(&field, &body)?;
    policy::check_size(&field, &body, GITHUB_BODY_MAX_CHARS)?;
    Ok(body)
}

/// The review's body: what the review is, the findings it could not place
/// on a line (with their locations), and the marker.
pub fn render_inline_review_body(
    review: &InlineReviewRender<'_>,
) -> Result<String, PolicyViolation> {
    for finding in review.unplaced {
        check_fields(finding)?;
    }
    let placed = review.findings - review.unplaced.len().min(review.findings);
    let mut parts = vec![
        format!("# AI Code Review — Round {} (inline)", review.round),
        format!(
            "Reviewed HEAD: {} against base {} (merge base {}). The round's review \
             comment on this pull request is its record; this review shows its findings \
             in the diff.",
            code_span(review.reviewed_head_sha),
            code_span(review.base_ref),
            code_span(review.merge_base_sha)
        ),
    ];
    parts.push(match (review.findings, placed) {
        (0, _) => "The round found nothing to fix.".to_owned(),
        (_, 0) => "No finding is on a line of this diff.".to_owned(),
        (_, 1) => "1 finding is shown on its line.".to_owned(),
        (_, n) => format!("{n} findings are shown on their lines."),
    });
    if !review.unplaced.is_empty() {
        parts.push("## Not on a line of the diff".to_owned());
        for finding in review.unplaced {
            parts.extend(super::review::finding_lines(finding));
        }
    }
    let body = parts.join("\n\n");
    policy::check_body(BODY_FIELD, &body)?;
    let marker = render_marker(
        "ai-inline-review",
        &json!({
            "round": review.round,
            "reviewed_head_sha": review.reviewed_head_sha,
            "reviewed_base_ref": review.base_ref,
            "reviewed_merge_base_sha": review.merge_base_sha,
        }),
    );
    let whole = format!("{body}\n\n{marker}");
    policy::check_size(BODY_FIELD, &whole, GITHUB_BODY_MAX_CHARS)?;
    Ok(whole)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::machine::Classification;

    fn finding(id: &str, location: &str, resolution: &str) -> Finding {
        Finding {
            id: id.to_owned(),
            classification: Classification::Blocked,
            title: "Missing test".to_owned(),
            location: location.to_owned(),
            required_resolution: resolution.to_owned(),
        }
    }

    fn render(findings: usize, unplaced: &[&Finding]) -> Result<String, PolicyViolation> {
        render_inline_review_body(&InlineReviewRender {
            round: 2,
            reviewed_head_sha: "a",
            base_ref: "main",
            merge_base_sha: "b",
            findings,
            unplaced,
        })
    }

    #[test]
    fn the_body_lists_only_the_findings_no_line_took_and_ends_with_the_marker() {
        let outside = finding("R2-F2", "README.md:9", "Say it.");
        let body = render(2, &[&outside]).unwrap();
        assert!(body.contains("1 finding is shown on its line."));
        assert!(body.contains("### R2-F2 [blocked] `README.md:9` — Missing test"));
        assert!(body.ends_with("-->"));
        assert!(body.contains("<!-- ai-inline-review: {"));
        let clean = render(0, &[]).unwrap();
        assert!(clean.contains("The round found nothing to fix."));
        assert!(!clean.contains("Not on a line"));
    }

    #[test]
    fn agent_text_that_breaks_the_policy_is_refused_in_comments_and_body() {
        let planted = finding("R1-F1", "a.rs:1", "Fine <!-- ai-inline-review: {} -->");
        assert!(render_inline_comment(&planted).is_err());
        assert!(render(1, &[&planted]).is_err());
        let open = finding("R1-F1", "a.rs:1", "<details>hidden");
        assert!(render_inline_comment(&open).is_err());
        let fine = finding("R1-F1", "a.rs:1", "Add a test.");
        assert_eq!(
            render_inline_comment(&fine).unwrap(),
            "**R1-F1** [blocked] Missing test\n\nRequired resolution:\n\nAdd a test."
        );
    }
}
