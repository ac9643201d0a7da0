//! The schemas say what the code enforces: each rule's violation is refused
//! by the schema validator itself, at the field's path, and the text rules
//! the schemas spell as patterns (one line, prose, recorded lines) agree
//! character by character with the published-text policy the code applies
//! afterwards.

use serde_json::{Value, json};

use super::error::ResultError;
use super::fields::check_tests;
use super::limits::*;
use super::schema::{SchemaId, validate};
use crate::machine::AgentPhase;
use crate::publish::PolicyViolation;
use crate::publish::policy::{FieldKind, check_field};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const ISSUE: &str = "https://github.com/o/r/issues/1";

fn implement() -> Value {
    json!({"phase": "IMPLEMENT", "status": "success", "issue_url": ISSUE, "head_sha": SHA,
           "pr_title": "Add the widget", "pr_body": "Body\n\n- item\tx", "tests": ["cargo test"]})
}

fn review() -> Value {
    let section = "Fine.";
    json!({"phase": "REVIEW", "status": "success", "round": 1, "reviewed_head_sha": SHA,
           "needs_fix_round": true,
           "findings": [{"id": "R1-F1", "classification": "blocked", "title": "A bug",
                         "location": "src/lib.rs:1", "required_resolution": "Fix it.\nPlease."}],
           "spec": section, "standards": section, "assessment": section,
           "observations": section, "verification": section, "summary": "Short."})
}

fn fix() -> Value {
    json!({"phase": "FIX", "status": "success", "previous_head_sha": SHA, "head_sha": SHA,
           "resolutions": [
               {"finding_id": "R1-F1", "resolution": "follow_up_created",
                "follow_up_issue": {"title": "Later", "body": "Details\nhere"}},
               {"finding_id": "R1-F2", "resolution": "no_change_with_rationale",
                "rationale": "The finding describes behaviour the issue asks for."}],
           "tests": ["cargo test"]})
}

fn update_epic() -> Value {
    json!({"phase": "UPDATE_EPIC", "status": "success", "progress": "Done: #2.\n",
           "roadmap_section": "- [x] #2", "next_issue_url": ISSUE})
}

fn id_of(phase: &str) -> SchemaId {
    let phase = match phase {
        "IMPLEMENT" => AgentPhase::Implement,
        "REVIEW" => AgentPhase::Review,
        "FIX" => AgentPhase::Fix,
        _ => AgentPhase::UpdateEpic,
    };
    SchemaId::Phase(phase)
}

#[test]
fn the_base_results_are_valid() {
    for base in [implement(), review(), fix(), update_epic()] {
        let id = id_of(base["phase"].as_str().unwrap_or_default());
        assert!(validate(id, &base).is_empty(), "{:?}", validate(id, &base));
    }
}

/// Sets `pointer` of `base` to `bad` and expects the schema to refuse it
/// there with `keyword`, in a message that names the field.
fn refused(base: &Value, pointer: &str, bad: Value, keyword: &str) {
    let id = id_of(base["phase"].as_str().unwrap_or_default());
    let mut doc = base.clone();
    match doc.pointer_mut(pointer) {
        Some(slot) => *slot = bad.clone(),
        None => panic!("{pointer} is not in the base result"),
    }
    let violations = validate(id, &doc);
    assert!(
        violations.iter().any(|v| v.path == pointer
            && v.keyword == keyword
            && v.to_string().starts_with(&format!("{pointer}: "))),
        "{pointer} = {bad:?}: expected `{keyword}` at the field, got {violations:?}"
    );
}

#[test]
fn one_line_fields_refuse_newlines_and_every_other_line_breaker_in_the_schema() {
    let cases = [
        (implement(), "/pr_title"),
        (review(), "/findings/0/title"),
        (review(), "/findings/0/location"),
        (fix(), "/resolutions/0/follow_up_issue/title"),
    ];
    for (base, pointer) in cases {
        for bad in [
            "two\nlines",
            "carriage\rreturn",
            "tab\there",
            "line\u{2028}separator",
            "bidi \u{202E}override",
            "nul\u{0}",
            "   ",
        ] {
            refused(&base, pointer, json!(bad), "pattern");
        }
        refused(&base, pointer, json!(""), "minLength");
    }
    refused(
        &implement(),
        "/pr_title",
        json!("t".repeat(MAX_PR_TITLE_CHARS + 1)),
        "maxLength",
    );
    refused(
        &review(),
        "/findings/0/title",
        json!("t".repeat(MAX_FINDING_TITLE_CHARS + 1)),
        "maxLength",
    );
    refused(
        &review(),
        "/findings/0/location",
        json!("l".repeat(MAX_FINDING_LOCATION_CHARS + 1)),
        "maxLength",
    );
}

#[test]
fn prose_fields_allow_newline_and_tab_only_and_refuse_blank_text_in_the_schema() {
    let cases = [
        (implement(), "/pr_body"),
        (review(), "/findings/0/required_resolution"),
        (review(), "/spec"),
        (review(), "/summary"),
        (fix(), "/resolutions/0/follow_up_issue/body"),
        (fix(), "/resolutions/1/rationale"),
        (update_epic(), "/progress"),
    ];
    for (base, pointer) in cases {
        for bad in ["a\rb", "a\u{0B}b", "a\u{2029}b", "a\u{2066}b", "\n\t \n"] {
            refused(&base, pointer, json!(bad), "pattern");
        }
    }
    refused(&update_epic(), "/roadmap_section", json!("a\rb"), "pattern");
    refused(&implement(), "/tests/0", json!("cargo\ntest"), "pattern");
    refused(&fix(), "/tests/0", json!("cargo\ttest"), "pattern");
    refused(
        &implement(),
        "/pr_body",
        json!("b".repeat(MAX_PR_BODY_CHARS + 1)),
        "maxLength",
    );
    refused(
        &review(),
        "/summary",
        json!("s".repeat(MAX_REVIEW_SUMMARY_CHARS + 1)),
        "maxLength",
    );
    refused(
        &fix(),
        "/resolutions/1/rationale",
        json!("too short"),
        "minLength",
    );
}

#[test]
fn ids_hashes_urls_and_enums_are_refused_in_the_schema() {
    refused(&implement(), "/head_sha", json!("abc"), "pattern");
    refused(
        &implement(),
        "/issue_url",
        json!("https://github.com/o/r/pull/1"),
        "pattern",
    );
    refused(&review(), "/findings/0/id", json!("R1-F0"), "pattern");
    refused(
        &review(),
        "/findings/0/classification",
        json!("major"),
        "enum",
    );
    refused(&review(), "/round", json!(0), "minimum");
    refused(&fix(), "/resolutions/0/finding_id", json!("F1"), "pattern");
    refused(
        &fix(),
        "/resolutions/0/resolution",
        json!("ignored"),
        "enum",
    );
    refused(
        &update_epic(),
        "/next_issue_url",
        json!("not a url"),
        "anyOf",
    );
    let mut many = review();
    let finding = many["findings"][0].clone();
    many["findings"] = Value::Array(vec![finding; MAX_FINDINGS_PER_REVIEW + 1]);
    let violations = validate(id_of("REVIEW"), &many);
    assert!(
        violations
            .iter()
            .any(|v| v.path == "/findings" && v.keyword == "maxItems"),
        "{violations:?}"
    );
}

/// Whether the policy refuses `text` for its characters (blank, or a
/// control character), the part of the policy the patterns express.
fn code_refuses_characters(text: &str, kind: FieldKind) -> bool {
    matches!(
        check_field("f", text, kind),
        Err(PolicyViolation::Blank { .. } | PolicyViolation::ControlCharacter { .. })
    )
}

fn schema_refuses(base: &Value, pointer: &str, text: &str) -> bool {
    let id = id_of(base["phase"].as_str().unwrap_or_default());
    let mut doc = base.clone();
    if let Some(slot) = doc.pointer_mut(pointer) {
        *slot = json!(text);
    }
    validate(id, &doc)
        .iter()
        .any(|v| v.path == pointer && v.keyword == "pattern")
}

/// Every code point up to U+3100 and a few beyond, inside a word and
/// alone: where the schema's pattern and the code's check could part.
fn probes() -> impl Iterator<Item = String> {
    (0u32..=0x3100)
        .chain([0xFEFF, 0xFFFD, 0x1_F600, 0xE_0001])
        .filter_map(char::from_u32)
        .flat_map(|c| [format!("a{c}b"), c.to_string()])
}

#[test]
fn one_line_and_prose_patterns_agree_with_the_policy_on_every_character() {
    let (implement, line, prose) = (
        implement(),
        FieldKind::OneLine { max_chars: 100 },
        FieldKind::Multiline { max_chars: 100 },
    );
    let mut disagreements = Vec::new();
    for text in probes() {
        if schema_refuses(&implement, "/pr_title", &text) != code_refuses_characters(&text, line) {
            disagreements.push(format!("one line {text:?}"));
        }
        if schema_refuses(&implement, "/pr_body", &text) != code_refuses_characters(&text, prose) {
            disagreements.push(format!("prose {text:?}"));
        }
        let recorded = matches!(
            check_tests(std::slice::from_ref(&text)),
            Err(ResultError::Policy(
                PolicyViolation::ControlCharacter { .. }
            ))
        );
        if schema_refuses(&implement, "/tests/0", &text) != recorded {
            disagreements.push(format!("recorded {text:?}"));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

#[test]
fn every_schema_spells_each_text_rule_the_same_way() {
    let mut seen: std::collections::BTreeMap<String, Value> = Default::default();
    for id in AgentPhase::ALL
        .into_iter()
        .map(SchemaId::Phase)
        .chain([SchemaId::UpdateEpicReRequest])
    {
        let schema: Value = serde_json::from_str(id.source()).unwrap_or_default();
        for name in ["one_line", "prose", "prose_or_blank", "recorded_line"] {
            let Some(pattern) = schema["$defs"][name].get("pattern") else {
                continue;
            };
            let first = seen
                .entry(name.to_owned())
                .or_insert_with(|| pattern.clone());
            assert_eq!(first, pattern, "{id:?} spells {name} differently");
        }
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
}
