//! The embedded JSON Schema of `autoforge.toml` and the translation of its
//! validation errors into [`Problem`]s keyed by dotted paths (`github.bogus`).
//! The schema file is the single source of truth for keys, types, defaults and
//! documentation; the binary carries it, so nothing reads the repository at
//! run time.

use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::env::{
    DATABASE_URL_VAR, GITHUB_PRIVATE_KEY_FILE_VAR, GITHUB_TOKEN_VAR, Provenance,
    WEBHOOK_SECRET_FILE_VAR, WEBHOOK_SECRET_VAR,
};
use super::problem::Problem;

/// The schema text, exactly as shipped in `schemas/config.schema.json`.
pub const SCHEMA_TEXT: &str = include_str!("../../../schemas/config.schema.json");

/// JSON pointers of keys whose values are secrets: errors about them never
/// quote the value.
const SECRET_POINTERS: &[&str] = &["/database/url"];

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(SCHEMA_TEXT).expect("the embedded config schema is valid JSON (tested)")
});

static VALIDATOR: LazyLock<jsonschema::Validator> = LazyLock::new(|| {
    jsonschema::validator_for(&SCHEMA).expect("the embedded config schema compiles (tested)")
});

/// The parsed schema.
pub fn schema() -> &'static Value {
    &SCHEMA
}

/// Every way `doc` breaks the schema, in document order.
pub(crate) fn check(doc: &Value, provenance: &Provenance) -> Vec<Problem> {
    let mut problems = Vec::new();
    let secrets = secret_strings(doc);
    for error in VALIDATOR.iter_errors(doc) {
        let pointer = error.instance_path().as_str().to_owned();
        let schema_path = error.schema_path().as_str().to_owned();
        if let ValidationErrorKind::AdditionalProperties { unexpected } = error.kind() {
            for name in unexpected {
                let child = format!("{pointer}/{}", escape(name));
                let key = dotted_key(doc, &child);
                problems.push(
                    Problem::new(
                        key,
                        "additionalProperties",
                        unknown_key_message(&pointer, name, &schema_path),
                    )
                    .with_env_var(provenance.var_for(&child)),
                );
            }
            continue;
        }
        // jsonschema quotes the offending instance, which for an error on a
        // profile (or on a mistyped env value) holds the profile's secrets.
        let message = error.to_string();
        let message = if is_secret(&pointer) || secrets.iter().any(|s| message.contains(s)) {
            "value rejected (not shown: it is secret)".to_owned()
        } else {
            message
        };
        problems.push(
            Problem::new(dotted_key(doc, &pointer), error.kind().keyword(), message)
                .with_env_var(provenance.var_for(&pointer)),
        );
    }
    problems
}

/// Every string under a secret location of `doc` (the database URL, each
/// agent profile's `env`), as it may appear in a message: raw and
/// JSON-escaped. Empty strings are left out; they reveal nothing.
fn secret_strings(doc: &Value) -> Vec<String> {
    let mut roots: Vec<&Value> = SECRET_POINTERS
        .iter()
        .filter_map(|p| doc.pointer(p))
        .collect();
    if let Some(Value::Object(profiles)) = doc.pointer("/agents/profiles") {
        roots.extend(profiles.values().filter_map(|profile| profile.get("env")));
    }
    let mut found = Vec::new();
    let mut stack = roots;
    while let Some(node) = stack.pop() {
        match node {
            Value::String(text) if !text.is_empty() => {
                let escaped = Value::String(text.clone()).to_string();
                found.push(escaped[1..escaped.len() - 1].to_owned());
                found.push(text.clone());
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    found
}

fn is_secret(pointer: &str) -> bool {
    SECRET_POINTERS.iter().any(|secret| {
        pointer == *secret
            || pointer
                .strip_prefix(secret)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

fn unknown_key_message(pointer: &str, name: &str, schema_path: &str) -> String {
    if let Some(var) = secret_hint(pointer, name) {
        return format!(
            "unknown key; secrets are never read from the config file, set {var} in the environment instead"
        );
    }
    // The schema object that rejected the key lists the keys it does accept.
    let known: Vec<&str> = schema_path
        .strip_suffix("/additionalProperties")
        .and_then(|parent| SCHEMA.pointer(parent))
        .and_then(|parent| parent.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if known.is_empty() {
        "unknown key".to_owned()
    } else {
        format!("unknown key; known keys here: {}", known.join(", "))
    }
}

/// The environment variable to use instead of a secret-looking key.
fn secret_hint(pointer: &str, name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    match (pointer, name.as_str()) {
        ("" | "/webhook", "webhook_secret" | "secret") => Some(WEBHOOK_SECRET_VAR),
        ("" | "/webhook", "webhook_secret_file" | "secret_file") => Some(WEBHOOK_SECRET_FILE_VAR),
        ("" | "/github", "token" | "github_token" | "pat" | "access_token") => {
            Some(GITHUB_TOKEN_VAR)
        }
        ("" | "/github", "private_key" | "private_key_file" | "private_key_path" | "key_file") => {
            Some(GITHUB_PRIVATE_KEY_FILE_VAR)
        }
        ("" | "/database", "password" | "database_url") => Some(DATABASE_URL_VAR),
        _ => None,
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// `/validation/commands/0` → `validation.commands[0]`; the root is `""`.
pub(crate) fn dotted_key(doc: &Value, pointer: &str) -> String {
    let mut key = String::new();
    let mut node = Some(doc);
    for raw in pointer.split('/').skip(1) {
        let segment = unescape(raw);
        match node {
            Some(Value::Array(items)) => {
                key.push_str(&format!("[{segment}]"));
                node = segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|index| items.get(index));
            }
            _ => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(&segment);
                node = node.and_then(|value| value.get(&segment));
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(doc: Value) -> Vec<Problem> {
        check(&doc, &Provenance::default())
    }

    #[test]
    fn embedded_schema_is_a_valid_draft_2020_12_schema() {
        assert_eq!(
            SCHEMA["$schema"],
            json!("https://json-schema.org/draft/2020-12/schema")
        );
        jsonschema::draft202012::meta::validate(&SCHEMA).expect("schema is valid 2020-12");
        assert!(VALIDATOR.is_valid(&json!({})));
    }

    #[test]
    fn every_object_forbids_unknown_keys_and_every_property_is_described() {
        fn walk(node: &Value, path: &str, missing: &mut Vec<String>) {
            if let Some(properties) = node.get("properties").and_then(Value::as_object) {
                if node.get("additionalProperties") != Some(&json!(false)) {
                    missing.push(format!("{path}: additionalProperties is not false"));
                }
                for (name, child) in properties {
                    if child.get("description").is_none() {
                        missing.push(format!("{path}.{name}: no description"));
                    }
                    walk(child, &format!("{path}.{name}"), missing);
                }
            }
            for nested in ["additionalProperties", "items"] {
                if let Some(child) = node.get(nested).filter(|child| child.is_object()) {
                    walk(child, &format!("{path}.{nested}"), missing);
                }
            }
            if let Some(defs) = node.get("$defs").and_then(Value::as_object) {
                for (name, child) in defs {
                    walk(child, &format!("$defs.{name}"), missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&SCHEMA, "", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");
    }

    #[test]
    fn unknown_key_is_named_by_its_dotted_path() {
        let found = problems(json!({"github": {"bogus": 1}}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "github.bogus");
        assert_eq!(found[0].rule, "additionalProperties");
        assert!(
            found[0]
                .message
                .contains("known keys here: allowed_owners, api_url"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn unknown_key_inside_a_named_profile_keeps_the_profile_name() {
        let found = problems(
            json!({"agents": {"profiles": {"claude": {"command": ["claude"], "modle": "x"}}}}),
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "agents.profiles.claude.modle");
    }

    #[test]
    fn wrong_type_names_the_key_and_the_type_rule() {
        let found = problems(json!({"poll": {"interval_seconds": "often"}}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "poll.interval_seconds");
        assert_eq!(found[0].rule, "type");
    }

    #[test]
    fn every_error_is_reported_not_only_the_first() {
        let found = problems(
            json!({"poll": {"interval_seconds": 1}, "bogus": true, "merge": {"mode": "yolo"}}),
        );
        let keys: Vec<&str> = found.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(found.len(), 3, "{found:#?}");
        for key in ["poll.interval_seconds", "bogus", "merge.mode"] {
            assert!(keys.contains(&key), "{key} in {keys:?}");
        }
    }

    #[test]
    fn array_items_are_shown_with_brackets() {
        let found = problems(json!({"validation": {"commands": ["cargo test", 7]}}));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].key, "validation.commands[1]");
    }

    #[test]
    fn secret_keys_in_the_file_are_refused_with_a_hint() {
        let found = problems(json!({"webhook_secret": "hunter2", "github": {"token": "ghp_x"}}));
        assert_eq!(found.len(), 2);
        let secret = found
            .iter()
            .find(|p| p.key == "webhook_secret")
            .expect("reported");
        assert!(secret.message.contains("AUTOFORGE_WEBHOOK_SECRET"));
        let token = found
            .iter()
            .find(|p| p.key == "github.token")
            .expect("reported");
        assert!(token.message.contains("AUTOFORGE_GITHUB_TOKEN"));
        assert!(
            found
                .iter()
                .all(|p| !p.message.contains("hunter2") && !p.message.contains("ghp_x"))
        );
    }

    #[test]
    fn errors_about_the_database_url_never_quote_it() {
        let found = problems(json!({"database": {"url": ""}}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "database.url");
        assert!(found[0].message.contains("secret"));
    }

    #[test]
    fn dotted_key_unescapes_pointer_segments() {
        let doc = json!({"agents": {"profiles": {"a/b": {}}}});
        assert_eq!(
            dotted_key(&doc, "/agents/profiles/a~1b"),
            "agents.profiles.a/b"
        );
        assert_eq!(dotted_key(&doc, ""), "");
    }
}
