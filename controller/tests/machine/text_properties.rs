//! Properties of the parsers and checks that read untrusted text: the
//! published-text policy, the CONTROL_RESULT block finder and parser, the
//! marker scanner, webhook signatures and payloads, and configuration
//! files (the operator's and a repository's). No input makes any of them
//! panic, and each refuses what it must refuse however it is dressed up.
//! `PROPTEST_CASES=10000 cargo test -p autoforge --test machine proptest_`
//! runs them long; CI runs the default number of cases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use autoforge::agents::result::{CapturedOutput, extract_block, parse_result};
use autoforge::config::{self, Environment};
use autoforge::effects::markers::{self, MarkerName, Scan};
use autoforge::machine::AgentPhase;
use autoforge::publish::policy::{FieldKind, PolicyViolation, check_body, check_field};
use autoforge::webhook::{ClassifyContext, classify, sign_body, verify_signature};
use proptest::prelude::*;
use secrecy::SecretString;
use serde_json::{Map, Value, json};

const PROSE: FieldKind = FieldKind::Multiline { max_chars: 4_000 };

/// Prose that trips no rule on its own.
fn safe_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,;!?'-]{0,40}( [a-zA-Z0-9 .,;!?'-]{0,40}){0,3}"
}

/// One character as the source may spell it so that it renders the same:
/// itself, a decimal or hexadecimal character reference, or itself with an
/// invisible character after it.
fn spelled(c: char) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(c.to_string()),
        1 => Just(format!("&#{};", u32::from(c))),
        1 => Just(format!("&#x{:x};", u32::from(c))),
        1 => prop::sample::select(vec!['\u{200B}', '\u{200D}', '\u{2060}', '\u{00AD}', '\u{FEFF}'])
            .prop_map(move |invisible| format!("{c}{invisible}")),
    ]
}

/// `text` with each character possibly spelled differently.
fn disguised(text: String) -> impl Strategy<Value = String> {
    let parts: Vec<_> = text.chars().map(spelled).collect();
    parts.prop_map(|parts| parts.concat())
}

fn random_case(text: &str) -> impl Strategy<Value = String> + use<> {
    let chars: Vec<char> = text.chars().collect();
    prop::collection::vec(any::<bool>(), chars.len()).prop_map(move |upper| {
        chars
            .iter()
            .zip(upper)
            .map(|(c, up)| {
                if up {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    })
}

/// A closing keyword with an issue reference GitHub would link.
fn closing_reference() -> impl Strategy<Value = String> {
    let keyword = prop::sample::select(vec![
        "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
    ])
    .prop_flat_map(random_case);
    let separator = prop::sample::select(vec![" ", ": ", "  ", " **", " _"]);
    let reference = prop_oneof![
        (1u32..100_000).prop_map(|n| format!("#{n}")),
        ("[a-z]{1,8}", "[a-z]{1,8}", 1u32..1000).prop_map(|(o, r, n)| format!("{o}/{r}#{n}")),
        (1u32..1000).prop_map(|n| format!("GH-{n}")),
    ];
    (keyword, separator, reference).prop_map(|(k, s, r)| format!("{k}{s}{r}"))
}

fn refused(text: &str) -> Option<PolicyViolation> {
    check_field("field", text, PROSE).err()
}

proptest! {
    #[test]
    fn proptest_policy_never_panics_on_any_text(text in any::<String>()) {
        let _ = check_field("field", &text, PROSE);
        let _ = check_field("field", &text, FieldKind::OneLine { max_chars: 100 });
        let _ = check_body("body", &text);
    }

    #[test]
    fn proptest_policy_accepts_plain_prose(text in safe_text()) {
        prop_assume!(!text.trim().is_empty());
        prop_assert_eq!(check_field("field", &text, PROSE), Ok(()));
    }

    #[test]
    fn proptest_policy_refuses_a_marker_opener_in_any_case_spacing_or_invisible_split(
        before in safe_text(),
        after in safe_text(),
        name in prop::sample::select(vec!["ai-review-result", "autoforge-status", "ai-x"]),
        space in "[ \t\n]{0,3}",
        invisible in prop::sample::select(vec!["", "\u{200B}", "\u{00AD}", "\u{2060}"]),
    ) {
        let name = name.replacen('-', &format!("{invisible}-"), 1);
        let text = format!("{before} <!--{space}{name} {after}");
        let violation = refused(&text);
        prop_assert!(matches!(violation, Some(PolicyViolation::MarkerOpener { .. })), "{:?}: {:?}", text, violation);
    }

    #[test]
    fn proptest_policy_refuses_a_closing_keyword_in_code_or_disguised(
        before in safe_text(),
        after in safe_text(),
        reference in closing_reference().prop_flat_map(disguised),
        wrap in prop::sample::select(vec![("", ""), ("`", "`"), ("\n```\n", "\n```\n")]),
    ) {
        let text = format!("{before} {}{reference}{} {after}", wrap.0, wrap.1);
        let violation = refused(&text);
        prop_assert!(matches!(violation, Some(PolicyViolation::ClosingKeyword { .. })), "{:?}: {:?}", text, violation);
    }

    #[test]
    fn proptest_policy_refuses_a_mention_outside_code_however_spelled(
        before in safe_text(),
        after in safe_text(),
        login in "[a-zA-Z][a-zA-Z0-9-]{0,12}",
        at in spelled('@'),
    ) {
        let text = format!("{before} {at}{login} {after}");
        let violation = refused(&text);
        prop_assert!(
            matches!(violation, Some(PolicyViolation::MentionOutsideCode { .. } | PolicyViolation::MentionWithRawHtml { .. })),
            "{:?}: {:?}", text, violation
        );
        // The same mention inside a code span is code, not a mention.
        let coded = format!("{before} `@{login}` {after}");
        prop_assert_eq!(check_field("field", &coded, PROSE), Ok(()));
    }

    #[test]
    fn proptest_policy_refuses_credentials_even_as_character_references(
        before in safe_text(),
        after in safe_text(),
        token in "[A-Za-z0-9]{36}",
        prefix in prop::sample::select(vec!["ghp_", "ghs_", "gho_"]),
        encode in any::<bool>(),
    ) {
        let credential = format!("{prefix}{token}");
        let shown = if encode {
            credential.chars().map(|c| format!("&#{};", u32::from(c))).collect()
        } else {
            credential
        };
        let text = format!("{before} {shown} {after}");
        let violation = refused(&text);
        prop_assert!(matches!(violation, Some(PolicyViolation::Credential { .. })), "{:?}: {:?}", text, violation);
    }
}

/// A complete block around `json`.
fn block(json: &str) -> String {
    format!("<<<CONTROL_RESULT>>>\n{json}\n<<<END_CONTROL_RESULT>>>")
}

fn prose() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,{}\\[\\]\":\n]{0,80}"
}

proptest! {
    #[test]
    fn proptest_control_result_finder_never_panics(text in any::<String>(), truncated in any::<bool>()) {
        let captured = CapturedOutput { tail: text.clone(), head_truncated: truncated, total_bytes: text.len() as u64 };
        let _ = extract_block(&captured);
        for phase in [AgentPhase::Implement, AgentPhase::Review, AgentPhase::Fix, AgentPhase::UpdateEpic] {
            let _ = parse_result(phase, &captured);
        }
    }

    #[test]
    fn proptest_control_result_is_the_last_complete_block(
        chunks in prop::collection::vec((prose(), 0u32..1000), 1..5),
        trailing_opener in any::<bool>(),
        trailer in prose(),
    ) {
        let mut text = String::new();
        for (words, n) in &chunks {
            text.push_str(words);
            text.push('\n');
            text.push_str(&block(&json!({"status": "success", "n": n}).to_string()));
            text.push('\n');
        }
        text.push_str(&trailer);
        if trailing_opener {
            // An opener that never closes (the agent echoing the protocol).
            text.push_str("\n<<<CONTROL_RESULT>>>\n{\"status\": \"failure\"");
        }
        let captured = CapturedOutput::complete(text);
        let found = extract_block(&captured).expect("a complete block");
        let value: Value = serde_json::from_str(found.trim()).expect("the block's JSON");
        prop_assert_eq!(&value["n"], &json!(chunks.last().unwrap().1));
    }

    #[test]
    fn proptest_control_result_without_a_complete_block_is_refused(
        words in prose(),
        opener in any::<bool>(),
    ) {
        let text = if opener { format!("{words}\n<<<CONTROL_RESULT>>>\n{{}}") } else { words };
        prop_assert!(extract_block(&CapturedOutput::complete(text)).is_err());
    }
}

fn marker_payload() -> impl Strategy<Value = Map<String, Value>> {
    (1i64..1_000_000, "[a-f0-9]{8,32}").prop_map(|(run, write)| {
        let mut payload = Map::new();
        payload.insert("run".into(), json!(run));
        payload.insert("write".into(), json!(write));
        payload
    })
}

proptest! {
    #[test]
    fn proptest_marker_scan_never_panics(text in any::<String>()) {
        for name in MarkerName::ALL {
            let _ = markers::scan(&text, name);
        }
    }

    #[test]
    fn proptest_marker_rendered_is_found_again_among_any_prose(
        before in "\\PC{0,80}",
        after in "\\PC{0,80}",
        payload in marker_payload(),
    ) {
        prop_assume!(!before.contains("<!--") && !after.contains("<!--"));
        let marker = markers::render(MarkerName::Status, &payload).expect("renders");
        let text = format!("{before}\n{marker}\n{after}");
        match markers::scan(&text, MarkerName::Status) {
            Scan::Found(found) => {
                prop_assert_eq!(found.len(), 1);
                prop_assert_eq!(&found[0].payload, &payload);
                prop_assert_eq!(&text[found[0].span.clone()], marker.as_str());
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}

fn context() -> ClassifyContext<'static> {
    ClassifyContext {
        trigger_label: "autoforge",
        app_slug: "autoforge",
        own_login: "autoforge[bot]",
        is_app: true,
    }
}

proptest! {
    #[test]
    fn proptest_webhook_signature_checks_never_panic_and_only_the_right_one_passes(
        body in prop::collection::vec(any::<u8>(), 0..512),
        header in any::<String>(),
        flip in 0usize..64,
    ) {
        let secret = SecretString::from("webhook-secret");
        let _ = verify_signature(&secret, &body, Some(&header));
        let good = sign_body(&secret, &body);
        prop_assert!(verify_signature(&secret, &body, Some(&good)).is_ok());
        // Any one hex digit changed is refused.
        let mut bad: Vec<char> = good.chars().collect();
        let at = "sha256=".len() + flip;
        bad[at] = if bad[at] == '0' { '1' } else { '0' };
        let bad: String = bad.into_iter().collect();
        prop_assert!(verify_signature(&secret, &body, Some(&bad)).is_err());
    }

    #[test]
    fn proptest_webhook_payloads_of_any_shape_classify_without_panicking(
        event in prop::sample::select(vec![
            "issues", "issue_comment", "pull_request", "pull_request_review", "check_run",
            "check_suite", "status", "installation", "installation_repositories", "ping", "push",
        ]),
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            arbitrary_json().prop_map(|v| v.to_string().into_bytes()),
        ],
    ) {
        let _ = classify(event, &body, &context());
    }
}

/// JSON documents with the keys webhook payloads use, nested a little.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        let key = prop::sample::select(vec![
            "action",
            "issue",
            "number",
            "pull_request",
            "comment",
            "body",
            "user",
            "login",
            "repository",
            "full_name",
            "installation",
            "id",
            "label",
            "name",
            "sender",
            "review",
            "state",
            "head",
            "sha",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(key.prop_map(str::to_owned), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn proptest_config_files_of_any_text_load_or_name_the_problem(text in "\\PC{0,200}") {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("autoforge.toml");
        std::fs::write(&file, &text).unwrap();
        let env = Environment::from_pairs(Vec::<(String, String)>::new());
        if let Err(error) = config::load(Some(&file), Some(dir.path()), &env) {
            prop_assert!(!error.to_string().trim().is_empty());
        }
    }
}

proptest! {
    #[test]
    fn proptest_repository_settings_of_any_bytes_parse_or_are_refused_with_a_reason(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            "\\PC{0,200}".prop_map(String::into_bytes),
            ("[a-z_]{1,12}", "[a-z_]{1,12}", "\\PC{0,20}")
                .prop_map(|(table, key, value)| format!("[{table}]\n{key} = {value:?}\n").into_bytes()),
        ],
    ) {
        let profiles: BTreeSet<String> = ["claude".to_owned()].into();
        if let Err(error) = config::parse_repository_settings(&bytes, &profiles) {
            prop_assert!(!error.to_string().trim().is_empty());
        }
    }
}
