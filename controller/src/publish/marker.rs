//! Rendering of the controller's hidden markers (SPEC §6).
//!
//! A marker is `<!-- NAME: {json} -->` with the JSON keys sorted at every
//! level, so the same payload always renders to the same bytes (read-back
//! compares bytes), and with `<` and `>` escaped as `\u003c`/`\u003e`, so a
//! value such as a branch named `x-->y` cannot end the comment early.

use std::collections::BTreeMap;

use serde_json::Value;

/// Renders `<!-- {name}: {payload} -->`.
pub fn render_marker(name: &str, payload: &Value) -> String {
    let json = sorted(payload).to_string();
    let escaped = json.replace('<', "\\u003c").replace('>', "\\u003e");
    format!("<!-- {name}: {escaped} -->")
}

/// A copy of `value` whose objects are built from sorted maps. `serde_json`
/// may be compiled with `preserve_order` by another crate in the build, so
/// the order is made explicit instead of relying on the default map.
fn sorted(value: &Value) -> SortedValue<'_> {
    match value {
        Value::Object(map) => {
            SortedValue::Object(map.iter().map(|(k, v)| (k.as_str(), sorted(v))).collect())
        }
        Value::Array(items) => SortedValue::Array(items.iter().map(sorted).collect()),
        other => SortedValue::Leaf(other),
    }
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum SortedValue<'a> {
    Object(BTreeMap<&'a str, SortedValue<'a>>),
    Array(Vec<SortedValue<'a>>),
    Leaf(&'a Value),
}

impl std::fmt::Display for SortedValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Serialising plain JSON values into a string cannot fail.
        let text = serde_json::to_string(self).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_angle_brackets_escaped() {
        let marker = render_marker(
            "ai-review-result",
            &json!({"round": 2, "reviewed_base_ref": "x-->y", "a": {"z": 1, "b": "<"}}),
        );
        assert_eq!(
            marker,
            r#"<!-- ai-review-result: {"a":{"b":"\u003c","z":1},"reviewed_base_ref":"x--\u003ey","round":2} -->"#
        );
    }

    #[test]
    fn escaped_marker_json_still_parses_to_the_payload() {
        let payload = json!({"issue": "https://github.com/o/r/issues/1", "x": "<!-- -->"});
        let marker = render_marker("ai-implementation", &payload);
        let inner = marker
            .strip_prefix("<!-- ai-implementation: ")
            .and_then(|m| m.strip_suffix(" -->"))
            .expect("shape");
        assert_eq!(serde_json::from_str::<Value>(inner).expect("json"), payload);
        assert!(!inner.contains("-->"));
    }
}
