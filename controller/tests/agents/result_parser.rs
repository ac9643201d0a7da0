//! The CONTROL_RESULT parser refuses every malformed, oversized or
//! inconsistent result with a diagnosis that names field, rule and sizes and
//! never echoes the agent's text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::agents::result::{
    BLOCK_END, BLOCK_START, CapturedOutput, CrossCheckError, ImplementObservations, Observations,
    ParsedResult, ResultError, ReviewObservations, cross_check, parse_result,
};
use autoforge::machine::{AgentPhase, AgentResult, PhaseResult};
use autoforge::publish::{IssueRef, PolicyViolation};
use serde_json::{Value, json};

const HEAD: &str = "1111111111111111111111111111111111111111";
const BASE: &str = "2222222222222222222222222222222222222222";
const OTHER: &str = "3333333333333333333333333333333333333333";

fn block(value: &Value) -> String {
    format!("{BLOCK_START}\n{value}\n{BLOCK_END}\n")
}

fn implement() -> Value {
    json!({
        "phase": "IMPLEMENT",
        "status": "success",
        "issue_url": "https://github.com/acme/widgets/issues/12",
        "head_sha": HEAD,
        "pr_title": "Add the widget counter",
        "pr_body": "Counts widgets.\n\n```sh\ncargo test\n```\n",
        "tests": ["cargo test -p widgets"]
    })
}

fn review(round: u32) -> Value {
    json!({
        "phase": "REVIEW",
        "status": "success",
        "round": round,
        "reviewed_head_sha": HEAD,
        "needs_fix_round": true,
        "findings": [{
            "id": format!("R{round}-F1"),
            "classification": "blocked",
            "title": "Counter overflows",
            "location": "src/count.rs:10",
            "required_resolution": "Use checked_add and test the limit."
        }],
        "spec": "Meets the issue.",
        "standards": "None.",
        "assessment": "One defect.",
        "observations": "None.",
        "verification": "Ran `cargo test`.",
        "summary": "One blocking finding."
    })
}

fn parse(phase: AgentPhase, value: &Value) -> Result<ParsedResult, ResultError> {
    parse_result(phase, &CapturedOutput::complete(block(value)))
}

fn implement_observations() -> Observations {
    Observations::Implement(ImplementObservations {
        run_issue: IssueRef {
            owner: "acme".into(),
            repo: "widgets".into(),
            number: autoforge_journal::testing::issue(12),
        },
        worktree_head: autoforge_journal::testing::sha(HEAD),
        base_sha: autoforge_journal::testing::sha(BASE),
        head_descends_from_base: true,
    })
}

/// Simulates the supervisor's bounded capture: only the last `keep` bytes
/// survive when the output is longer.
fn captured_tail(output: &str, keep: usize) -> CapturedOutput {
    let cut = output.len().saturating_sub(keep);
    CapturedOutput {
        tail: output[cut..].to_owned(),
        head_truncated: cut > 0,
        total_bytes: output.len() as u64,
    }
}

#[test]
fn a_valid_implement_result_parses_and_cross_checks() {
    let parsed = parse(AgentPhase::Implement, &implement()).expect("valid");
    let result = cross_check(&parsed, &implement_observations()).expect("consistent");
    let AgentResult::Success {
        result: PhaseResult::Implement(r),
    } = &result
    else {
        panic!("wrong variant {result:?}");
    };
    assert_eq!(r.head_sha, HEAD);
    assert_eq!(r.tests.len(), 1);
}

#[test]
fn output_without_a_block_is_refused() {
    let err = parse_result(
        AgentPhase::Implement,
        &CapturedOutput::complete("done, LGTM, merged"),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ResultError::NoBlock {
                head_truncated: false,
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.to_string().contains("LGTM"));
}

#[test]
fn of_two_blocks_the_last_is_used() {
    let mut first = implement();
    first["pr_title"] = json!("First attempt");
    let mut last = implement();
    last["pr_title"] = json!("Second attempt");
    let output = format!("{}\nmore work\n{}", block(&first), block(&last));
    let parsed =
        parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).expect("valid");
    let AgentResult::Success {
        result: PhaseResult::Implement(r),
    } = cross_check(&parsed, &implement_observations()).expect("consistent")
    else {
        panic!("wrong variant");
    };
    assert_eq!(r.pr_title, "Second attempt");
}

#[test]
fn a_block_only_in_the_truncated_head_is_not_found_and_the_diagnosis_says_so() {
    let output = format!("{}{}", block(&implement()), "log line\n".repeat(200_000));
    let captured = captured_tail(&output, 64 * 1024);
    let err = parse_result(AgentPhase::Implement, &captured).unwrap_err();
    assert!(
        matches!(
            err,
            ResultError::NoBlock {
                head_truncated: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("earlier output was not captured"),
        "{err}"
    );
}

#[test]
fn a_two_mebibyte_block_is_refused_by_size_before_parsing() {
    // Not even JSON: the size check must come first.
    let output = format!("{BLOCK_START}{}{BLOCK_END}", "x".repeat(2 * 1024 * 1024));
    let err = parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).unwrap_err();
    assert_eq!(
        err,
        ResultError::BlockTooLarge {
            bytes: 2 * 1024 * 1024,
            max: 1024 * 1024
        }
    );
}

#[test]
fn invalid_json_is_refused_with_its_position_only() {
    let output = format!("{BLOCK_START}\n{{\"phase\": \"IMPLEMENT\", secret-text }}\n{BLOCK_END}");
    let err = parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).unwrap_err();
    assert!(
        matches!(err, ResultError::InvalidJson { line: 1, .. }),
        "{err}"
    );
    assert!(!err.to_string().contains("secret-text"));
}

#[test]
fn a_json_array_is_not_a_result() {
    let err = parse(AgentPhase::Implement, &json!([1, 2])).unwrap_err();
    assert_eq!(err, ResultError::NotAnObject);
}

#[test]
fn wrong_phase_is_refused() {
    let err = parse(AgentPhase::Review, &implement()).unwrap_err();
    assert_eq!(err, ResultError::WrongPhase { expected: "REVIEW" });
}

#[test]
fn unknown_status_and_a_failure_without_message_are_refused() {
    let mut value = implement();
    value["status"] = json!("done");
    assert_eq!(
        parse(AgentPhase::Implement, &value).unwrap_err(),
        ResultError::BadStatus
    );
    let failure = json!({"phase": "IMPLEMENT", "status": "failure", "message": "  "});
    assert_eq!(
        parse(AgentPhase::Implement, &failure).unwrap_err(),
        ResultError::MissingMessage { status: "failure" }
    );
}

#[test]
fn blocked_result_needs_only_phase_status_and_message() {
    let blocked =
        json!({"phase": "FIX", "status": "blocked", "message": "The follow-up issue is wrong."});
    // A blocked result names nothing to cross-check, whatever was observed.
    let parsed = parse(AgentPhase::Fix, &blocked).expect("valid");
    assert_eq!(
        cross_check(&parsed, &implement_observations()).expect("nothing to compare"),
        AgentResult::Blocked {
            message: "The follow-up issue is wrong.".into()
        }
    );
}

fn schema_violations(err: ResultError) -> Vec<(String, String)> {
    match err {
        ResultError::Schema { violations } => violations
            .into_iter()
            .map(|v| (v.path, v.keyword))
            .collect(),
        other => panic!("expected a schema error, got {other}"),
    }
}

#[test]
fn missing_extra_and_mistyped_fields_are_named_by_path_and_rule() {
    let mut missing = implement();
    missing.as_object_mut().unwrap().remove("pr_title");
    assert_eq!(
        schema_violations(parse(AgentPhase::Implement, &missing).unwrap_err()),
        [("/".to_owned(), "required".to_owned())]
    );

    let mut extra = implement();
    extra["pr_url"] = json!("https://github.com/acme/widgets/pull/3");
    let err = parse(AgentPhase::Implement, &extra).unwrap_err();
    assert!(err.to_string().contains("1 unexpected field(s)"), "{err}");
    assert!(!err.to_string().contains("pr_url"), "{err}");

    let mut mistyped = review(1);
    mistyped["round"] = json!("1");
    assert_eq!(
        schema_violations(parse(AgentPhase::Review, &mistyped).unwrap_err()),
        [("/round".to_owned(), "type".to_owned())]
    );
}

#[test]
fn oversized_fields_are_refused_with_sizes_not_clipped() {
    let mut value = review(1);
    value["summary"] = json!("é".repeat(2_001));
    let err = parse(AgentPhase::Review, &value).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the result breaks its schema: /summary: maxLength (2001 characters; limit 2000)"
    );
}

#[test]
fn a_head_sha_of_another_commit_fails_the_cross_check() {
    let mut value = implement();
    value["head_sha"] = json!(OTHER);
    let result = parse(AgentPhase::Implement, &value).expect("schema-valid");
    let err = cross_check(&result, &implement_observations()).unwrap_err();
    assert_eq!(
        err,
        ResultError::CrossCheck(CrossCheckError::HeadMismatch {
            field: "head_sha",
            found: OTHER.into(),
            expected: HEAD.into()
        })
    );
}

#[test]
fn an_issue_url_of_another_issue_fails_the_cross_check() {
    let mut value = implement();
    value["issue_url"] = json!("https://github.com/acme/widgets/issues/13");
    let result = parse(AgentPhase::Implement, &value).expect("schema-valid");
    assert!(matches!(
        cross_check(&result, &implement_observations()),
        Err(ResultError::CrossCheck(CrossCheckError::WrongIssue { .. }))
    ));
}

fn review_observations(round: u32) -> Observations {
    Observations::Review(ReviewObservations {
        round,
        reviewed_head_sha: autoforge_journal::testing::sha(HEAD),
        failed_validation_index: None,
    })
}

#[test]
fn a_round_mismatch_fails_the_cross_check() {
    let result = parse(AgentPhase::Review, &review(2)).expect("valid");
    assert_eq!(
        cross_check(&result, &review_observations(3)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::RoundMismatch {
            found: 2,
            expected: 3
        })
    );
}

#[test]
fn finding_ids_of_another_round_fail_the_cross_check() {
    let mut value = review(2);
    value["findings"][0]["id"] = json!("R1-F1");
    let result = parse(AgentPhase::Review, &value).expect("schema-valid");
    assert!(matches!(
        cross_check(&result, &review_observations(2)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FindingOfAnotherRound { index: 0, .. })
    ));
}

#[test]
fn verdict_must_match_findings_and_no_clean_verdict_after_a_failed_validation() {
    let mut value = review(1);
    value["needs_fix_round"] = json!(false);
    let result = parse(AgentPhase::Review, &value).expect("schema-valid");
    assert!(matches!(
        cross_check(&result, &review_observations(1)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::VerdictMismatch { findings: 1, .. })
    ));

    value["findings"] = json!([]);
    let clean = parse(AgentPhase::Review, &value).expect("schema-valid");
    cross_check(&clean, &review_observations(1)).expect("clean round is consistent");
    let failed = Observations::Review(ReviewObservations {
        round: 1,
        reviewed_head_sha: autoforge_journal::testing::sha(HEAD),
        failed_validation_index: Some(2),
    });
    assert_eq!(
        cross_check(&clean, &failed).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::CleanVerdictWithFailedValidation { index: 2 })
    );
}

#[test]
fn a_credential_in_pr_body_is_refused_without_quoting_it() {
    let token = format!("ghp_{}", "Zx9Yw8Vu7T".repeat(4));
    let mut value = implement();
    value["pr_body"] = json!(format!("Set GITHUB_TOKEN={token} to try it."));
    let err = parse(AgentPhase::Implement, &value).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::Credential { field, .. }) if field == "pr_body"),
        "{err}"
    );
    assert!(!err.to_string().contains(&token));
    assert!(!err.diagnosis().contains(&token));
}

#[test]
fn a_closing_keyword_inside_a_code_block_is_refused() {
    let mut value = implement();
    value["pr_body"] = json!("Example commit:\n\n```\nCloses #12\n```\n");
    let err = parse(AgentPhase::Implement, &value).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::ClosingKeyword { field, offset: 21 }) if field == "pr_body"),
        "{err}"
    );
}

#[test]
fn a_mention_outside_code_is_refused_in_a_finding_title() {
    let mut value = review(1);
    value["findings"][0]["title"] = json!("Ask @someone about it");
    let err = parse(AgentPhase::Review, &value).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::MentionOutsideCode { field, offset: 4 }) if field == "findings[0].title"),
        "{err}"
    );
    assert!(!err.to_string().contains("someone"));
}

#[test]
fn an_unclosed_fence_in_one_review_field_is_refused_in_that_field() {
    let mut value = review(1);
    value["assessment"] = json!("Trace:\n\n```\npanic at main");
    value["observations"] = json!("```\n@team\n```\n");
    let err = parse(AgentPhase::Review, &value).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::UnclosedFence { field, .. }) if field == "assessment"),
        "{err}"
    );
}

#[test]
fn raw_html_with_a_mention_in_code_is_refused() {
    let mut value = review(1);
    value["spec"] = json!("<img src=x> see `@octocat`");
    let err = parse(AgentPhase::Review, &value).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::MentionWithRawHtml { field, .. }) if field == "spec"),
        "{err}"
    );
}

#[test]
fn marker_openers_in_any_spacing_or_case_are_refused() {
    for text in ["<!--AI-x: {}", "note <!--\n ai-review-result: {} -->"] {
        let mut value = review(1);
        value["summary"] = json!(text);
        let err = parse(AgentPhase::Review, &value).unwrap_err();
        assert!(
            matches!(&err, ResultError::Policy(PolicyViolation::MarkerOpener { field, .. }) if field == "summary"),
            "{text:?}: {err}"
        );
    }
}

#[test]
fn the_diagnosis_adds_guidance_to_the_error() {
    let err = parse(AgentPhase::Review, &implement()).unwrap_err();
    let diagnosis = err.diagnosis();
    assert!(
        diagnosis.starts_with("phase must be \"REVIEW\"\n"),
        "{diagnosis}"
    );
}

#[test]
fn a_duplicate_key_is_refused_rather_than_silently_resolved() {
    let json = format!(
        r#"{{"phase": "IMPLEMENT", "status": "success", "pr_title": "a", "pr_title": "b",
  "issue_url": "https://github.com/acme/widgets/issues/12", "head_sha": "{HEAD}", "pr_body": "x"}}"#
    );
    let output = format!("{BLOCK_START}\n{json}\n{BLOCK_END}");
    let err = parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).unwrap_err();
    assert!(
        matches!(err, ResultError::DuplicateKey { line: 1, .. }),
        "{err}"
    );
}

#[test]
fn protocol_markers_quoted_inside_a_json_string_do_not_break_the_block() {
    let mut value = implement();
    value["pr_body"] = json!(format!(
        "Documents the agent protocol: a result starts with `{BLOCK_START}` and ends with `{BLOCK_END}`."
    ));
    let output = format!("thinking\n{}", block(&value));
    let parsed = parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).unwrap();
    let AgentResult::Success {
        result: PhaseResult::Implement(result),
    } = cross_check(&parsed, &implement_observations()).unwrap()
    else {
        panic!("not an implement result");
    };
    assert!(result.pr_body.contains(BLOCK_START));
}

#[test]
fn an_announcing_opener_before_the_real_one_is_skipped() {
    let output = format!("Here is my {BLOCK_START} answer:\n{}", block(&implement()));
    assert!(parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).is_ok());
}

#[test]
fn crlf_line_endings_around_the_block_are_accepted() {
    let output = block(&implement()).replace('\n', "\r\n");
    assert!(parse_result(AgentPhase::Implement, &CapturedOutput::complete(output)).is_ok());
}
