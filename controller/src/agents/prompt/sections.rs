//! Builders for the placeholder values that carry lists or earlier agent
//! output, so every caller renders them the same way and fences them.
//!
//! Anything an agent or GitHub produced is returned as
//! [`Value::Untrusted`]; an empty list is the trusted word `(none)`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Value;
use crate::agents::result::{ReRequest, ResultError};
use crate::machine::{AgentPhase, Finding, Resolution, ResolutionKind};

const NONE: &str = "(none)";

/// Findings as the fixer (or a reviewer re-checking them) sees them: one
/// block per finding, multi-line resolutions indented under it.
pub fn findings_value(findings: &[Finding]) -> Value {
    if findings.is_empty() {
        return Value::trusted(NONE);
    }
    let mut out = String::new();
    for f in findings {
        let _ = writeln!(out, "{} [{}] {}", f.id, f.classification.as_str(), f.title);
        let _ = writeln!(out, "  location: {}", f.location);
        out.push_str("  required resolution:\n");
        push_indented(&mut out, &f.required_resolution, "    ");
        out.push('\n');
    }
    Value::untrusted(out.trim_end())
}

/// Findings carried from a stale round, naming the round and HEAD they
/// were raised at.
pub fn prior_findings_value(round: u32, head_sha: &str, findings: &[Finding]) -> Value {
    match findings_value(findings) {
        Value::Untrusted(list) => Value::untrusted(format!(
            "Raised in round {round} at {head_sha}; these ids are not reused.\n\n{list}"
        )),
        none => none,
    }
}

/// `finding id: issue URL` lines (follow-up issues read from markers).
pub fn follow_up_issues_value(pairs: &[(String, String)]) -> Value {
    if pairs.is_empty() {
        return Value::trusted(NONE);
    }
    let lines: Vec<String> = pairs
        .iter()
        .map(|(id, url)| format!("{id}: {url}"))
        .collect();
    Value::untrusted(lines.join("\n"))
}

/// The last FIX round's resolutions. `follow_up_urls` gives the URL the
/// controller read back for each deferred finding, by finding id.
pub fn fix_resolutions_value(
    resolutions: &[Resolution],
    follow_up_urls: &BTreeMap<String, String>,
) -> Value {
    if resolutions.is_empty() {
        return Value::trusted(NONE);
    }
    let mut out = String::new();
    for r in resolutions {
        let id = &r.finding_id;
        match &r.kind {
            ResolutionKind::Fixed {
                commit_sha: Some(sha),
            } => {
                let _ = writeln!(out, "{id}: fixed in {sha}");
            }
            ResolutionKind::Fixed { commit_sha: None } => {
                let _ = writeln!(out, "{id}: fixed");
            }
            ResolutionKind::FollowUpExisting { .. } | ResolutionKind::FollowUpNew { .. } => {
                let url = follow_up_urls
                    .get(id)
                    .map_or("(not recorded)", String::as_str);
                let _ = writeln!(out, "{id}: deferred to {url}");
            }
            ResolutionKind::NoChangeWithRationale { rationale } => {
                let _ = writeln!(out, "{id}: no change; the fixer's rationale:");
                push_indented(&mut out, rationale, "    ");
            }
        }
    }
    Value::untrusted(out.trim_end())
}

/// Values of `correction.md` for a refused result. The diagnosis is the
/// controller's own text but is quoted as data, like everything between
/// the agent's attempts.
pub fn correction_values(
    phase: AgentPhase,
    error: &ResultError,
    attempt: u32,
    max_attempts: u32,
) -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("PHASE", Value::trusted(phase.spec_name())),
        ("PREVIOUS_ERROR_BLOCK", Value::untrusted(error.diagnosis())),
        ("CORRECTION_ATTEMPT", Value::trusted(attempt.to_string())),
        (
            "MAX_CORRECTION_ATTEMPTS",
            Value::trusted(max_attempts.to_string()),
        ),
    ])
}

/// `RE_REQUEST_ASKS` and `RE_REQUEST_FIELDS` of a re-request: the words
/// for what is asked and the JSON lines of exactly those fields.
pub fn rerequest_values(asked: ReRequest) -> [(&'static str, Value); 2] {
    let mut names = Vec::new();
    let mut fields = Vec::new();
    if asked.roadmap {
        names.push("the roadmap section");
        fields.push("  \"roadmap_section\": \"<new section content>\"");
    }
    if asked.next_issue {
        names.push("the next issue");
        fields.push("  \"next_issue_url\": \"<URL of the next issue, or null>\"");
    }
    [
        ("RE_REQUEST_ASKS", Value::trusted(names.join(" and "))),
        ("RE_REQUEST_FIELDS", Value::trusted(fields.join(",\n"))),
    ]
}

fn push_indented(out: &mut String, text: &str, indent: &str) {
    for line in text.lines() {
        out.push_str(indent);
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Classification;

    fn finding() -> Finding {
        Finding {
            id: "R2-F1".into(),
            classification: Classification::Blocked,
            title: "Overflow".into(),
            location: "src/a.rs:3".into(),
            required_resolution: "Use checked_add.\nAdd a test.".into(),
        }
    }

    #[test]
    fn findings_are_untrusted_with_resolutions_indented() {
        assert_eq!(
            findings_value(&[finding()]),
            Value::untrusted(
                "R2-F1 [blocked] Overflow\n  location: src/a.rs:3\n  required resolution:\n    Use checked_add.\n    Add a test."
            )
        );
        assert_eq!(findings_value(&[]), Value::trusted("(none)"));
    }

    #[test]
    fn resolutions_name_commit_url_or_rationale() {
        let resolutions = vec![
            Resolution {
                finding_id: "R2-F1".into(),
                kind: ResolutionKind::Fixed {
                    commit_sha: Some(autoforge_journal::testing::sha(&"ab".repeat(20))),
                },
            },
            Resolution {
                finding_id: "R2-F2".into(),
                kind: ResolutionKind::NoChangeWithRationale {
                    rationale: "Callers already check.".into(),
                },
            },
        ];
        let Value::Untrusted(text) = fix_resolutions_value(&resolutions, &BTreeMap::new()) else {
            panic!("must be untrusted");
        };
        assert_eq!(
            text,
            format!(
                "R2-F1: fixed in {}\nR2-F2: no change; the fixer's rationale:\n    Callers already check.",
                "ab".repeat(20)
            )
        );
    }

    #[test]
    fn rerequest_lists_exactly_the_asked_fields() {
        let [(_, asks), (_, fields)] = rerequest_values(ReRequest {
            next_issue: true,
            roadmap: false,
        });
        assert_eq!(asks, Value::trusted("the next issue"));
        assert_eq!(
            fields,
            Value::trusted("  \"next_issue_url\": \"<URL of the next issue, or null>\"")
        );
    }
}
