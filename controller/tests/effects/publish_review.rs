//! The review comment renderer: SPEC §4 layout, the whole-body policy check
//! that catches what per-field checks cannot, and GitHub's size limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::machine::{Classification, Finding, ReviewSections};
use autoforge::publish::{PolicyViolation, ReviewRender, render_review_comment};

const HEAD: &str = "1111111111111111111111111111111111111111";
const MERGE_BASE: &str = "2222222222222222222222222222222222222222";

fn sections() -> ReviewSections {
    ReviewSections {
        spec: "Meets the issue.".into(),
        standards: "None.".into(),
        assessment: "Sound.".into(),
        observations: "None.".into(),
        verification: "Ran `cargo test`.".into(),
        summary: "One nit.".into(),
    }
}

fn finding(n: usize, resolution: &str) -> Finding {
    Finding {
        id: format!("R3-F{n}"),
        classification: Classification::Nit,
        title: "Rename the helper".into(),
        location: "src/a`b.rs:4".into(),
        required_resolution: resolution.into(),
    }
}

fn render(findings: &[Finding], sections: &ReviewSections) -> Result<String, PolicyViolation> {
    render_review_comment(&ReviewRender {
        round: 3,
        reviewed_head_sha: HEAD,
        base_ref: "main",
        merge_base_sha: MERGE_BASE,
        needs_fix_round: !findings.is_empty(),
        findings,
        sections,
    })
}

#[test]
fn renders_the_spec_layout_with_a_sorted_key_marker() {
    let comment = render(&[finding(1, "Call it `parse_all`.")], &sections()).unwrap();
    let expected = format!(
        "# AI Code Review — Round 3\n\n\
         Reviewed HEAD: `{HEAD}` against base `main` (merge base `{MERGE_BASE}`)\n\n\
         ## Findings\n\n\
         ### R3-F1 [nit] ``src/a`b.rs:4`` — Rename the helper\n\n\
         Required resolution:\n\n\
         Call it `parse_all`.\n\n\
         ## Spec\n\nMeets the issue.\n\n\
         ## Standards\n\nNone.\n\n\
         ## Assessment\n\nSound.\n\n\
         ## Observations\n\nNone.\n\n\
         ## Verification\n\nRan `cargo test`.\n\n\
         ## Summary\n\nOne nit.\n\n\
         Needs another fix round: YES\n\n\
         <!-- ai-review-result: {{\"finding_ids\":[\"R3-F1\"],\"needs_fix_round\":true,\
         \"reviewed_base_ref\":\"main\",\"reviewed_head_sha\":\"{HEAD}\",\
         \"reviewed_merge_base_sha\":\"{MERGE_BASE}\",\"round\":3}} -->"
    );
    assert_eq!(comment, expected);
}

#[test]
fn a_clean_round_says_none_and_no() {
    let comment = render(&[], &sections()).unwrap();
    assert!(comment.contains("## Findings\n\nNone.\n\n## Spec"));
    assert!(comment.contains("Needs another fix round: NO\n\n<!-- ai-review-result: "));
}

#[test]
fn an_unclosed_fence_in_one_field_exposing_a_mention_in_a_later_one_is_refused() {
    // Each field alone hides its mention in code; together the open fence of
    // the first closes on the second's opening line and exposes `@team`.
    let mut s = sections();
    s.assessment = "Trace:\n\n```\npanic at main".into();
    s.observations = "```\n@team\n```".into();
    let err = render(&[], &s).unwrap_err();
    assert!(
        matches!(&err, PolicyViolation::MentionOutsideCode { field, .. } if field == "review comment"),
        "{err}"
    );
}

#[test]
fn raw_html_in_one_field_voids_the_code_exemption_of_another() {
    let mut s = sections();
    s.spec = "<sub>tiny</sub>".into();
    s.summary = "Ask `@octocat`.".into();
    assert!(matches!(
        render(&[], &s).unwrap_err(),
        PolicyViolation::MentionWithRawHtml { .. }
    ));
}

#[test]
fn a_branch_name_cannot_close_the_marker_early() {
    let comment = render_review_comment(&ReviewRender {
        round: 1,
        reviewed_head_sha: HEAD,
        base_ref: "rel-->x",
        merge_base_sha: MERGE_BASE,
        needs_fix_round: false,
        findings: &[],
        sections: &sections(),
    })
    .unwrap();
    let marker = comment.rsplit("\n\n").next().unwrap();
    assert_eq!(marker.matches("-->").count(), 1, "{marker}");
    assert!(marker.contains(r#""reviewed_base_ref":"rel--\u003ex""#));
}

#[test]
fn a_rendered_review_over_65536_characters_is_refused_though_every_field_fits() {
    let findings: Vec<Finding> = (1..=20).map(|n| finding(n, &"x".repeat(2_000))).collect();
    let mut s = sections();
    for text in [
        &mut s.spec,
        &mut s.standards,
        &mut s.assessment,
        &mut s.observations,
        &mut s.verification,
    ] {
        *text = "y".repeat(6_000);
    }
    s.summary = "z".repeat(2_000);
    let err = render(&findings, &s).unwrap_err();
    let PolicyViolation::TooLong { field, chars, max } = err else {
        panic!("expected a size refusal, got {err}");
    };
    assert_eq!(field, "review comment");
    assert_eq!(max, 65_536);
    assert!(chars > 65_536);
}

#[test]
fn an_html_comment_opened_in_one_field_cannot_hide_the_verdict() {
    let mut s = sections();
    s.spec = "<!-- opened here".into();
    s.summary = "closed here -->".into();
    assert!(render(&[], &s).is_err());
}
