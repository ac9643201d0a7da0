//! The published-text policy applied to each field of a result that can
//! reach GitHub, with the field's own shape and bound. Fields that are
//! recorded but never published (`tests`) get only the control-character and
//! size rules.

use super::error::ResultError;
use super::limits::*;
use super::wire::{Parsed, WireFix, WireResolutionKind, WireReview};
use crate::machine::PlanResult;
use crate::publish::policy::{self, FieldKind};

/// How the supervisor's redactor marks a credential it removed from the
/// captured output (`[REDACTED:<kind>]`). Parsing sees only redacted text,
/// so a credential an agent put into a field arrives as this marker; the
/// field is refused rather than published with the marker in it.
const REDACTION_MARK: &str = "[REDACTED:";

/// The policy check of one published field, after the redaction check.
fn check_field(name: &str, text: &str, kind: FieldKind) -> Result<(), ResultError> {
    if text.contains(REDACTION_MARK) {
        return Err(ResultError::RedactedCredential {
            field: name.to_owned(),
        });
    }
    policy::check_field(name, text, kind)?;
    Ok(())
}

fn one_line(max_chars: usize) -> FieldKind {
    FieldKind::OneLine { max_chars }
}

fn multiline(max_chars: usize) -> FieldKind {
    FieldKind::Multiline { max_chars }
}

/// `message` of a failure/blocked result: shown in the status comment.
pub(super) fn check_message(message: &str) -> Result<(), ResultError> {
    check_field("message", message, multiline(MAX_MESSAGE_CHARS))?;
    Ok(())
}

pub(super) fn check_published_fields(result: &Parsed) -> Result<(), ResultError> {
    match result {
        Parsed::Plan(r) => check_plan_fields(r),
        Parsed::Implement(r) => {
            check_field("pr_title", &r.pr_title, one_line(MAX_PR_TITLE_CHARS))?;
            check_field("pr_body", &r.pr_body, multiline(MAX_PR_BODY_CHARS))?;
            check_tests(&r.tests)
        }
        Parsed::Review(r) => check_review_fields(r),
        Parsed::Fix(r) => check_fix_fields(r),
        Parsed::UpdateEpic(r) => {
            if let Some(progress) = &r.progress {
                check_field("progress", progress, multiline(MAX_PROGRESS_CHARS))?;
                policy::check_no_url("progress", progress)?;
            }
            if let Some(section) = &r.roadmap_section {
                check_field(
                    "roadmap_section",
                    section,
                    multiline(MAX_ROADMAP_SECTION_CHARS),
                )?;
            }
            Ok(())
        }
        Parsed::Failure { .. } | Parsed::Blocked { .. } => Ok(()),
    }
}

fn check_plan_fields(r: &PlanResult) -> Result<(), ResultError> {
    check_field("summary", &r.summary, multiline(MAX_PLAN_TEXT_CHARS))?;
    let lists = [("steps", &r.steps), ("risks", &r.risks)];
    for (field, items) in lists {
        for (i, text) in items.iter().enumerate() {
            check_field(
                &format!("{field}[{i}]"),
                text,
                multiline(MAX_PLAN_TEXT_CHARS),
            )?;
        }
    }
    for (i, file) in r.files.iter().enumerate() {
        check_field(&format!("files[{i}]"), file, one_line(MAX_PLAN_LINE_CHARS))?;
    }
    for (i, q) in r.questions.iter().enumerate() {
        let name = |field: &str| format!("questions[{i}].{field}");
        check_field(
            &name("question"),
            &q.question,
            multiline(MAX_PLAN_TEXT_CHARS),
        )?;
        check_field(&name("default"), &q.default, one_line(MAX_PLAN_LINE_CHARS))?;
    }
    Ok(())
}

fn check_review_fields(r: &WireReview) -> Result<(), ResultError> {
    for (i, f) in r.findings.iter().enumerate() {
        let name = |field: &str| format!("findings[{i}].{field}");
        check_field(&name("title"), &f.title, one_line(MAX_FINDING_TITLE_CHARS))?;
        check_field(
            &name("location"),
            &f.location,
            one_line(MAX_FINDING_LOCATION_CHARS),
        )?;
        check_field(
            &name("required_resolution"),
            &f.required_resolution,
            multiline(MAX_FINDING_RESOLUTION_CHARS),
        )?;
    }
    for (field, _, text) in r.sections.iter() {
        let max = if field == "summary" {
            MAX_REVIEW_SUMMARY_CHARS
        } else {
            MAX_REVIEW_SECTION_CHARS
        };
        check_field(field, text, multiline(max))?;
    }
    Ok(())
}

fn check_fix_fields(r: &WireFix) -> Result<(), ResultError> {
    for (i, res) in r.resolutions.iter().enumerate() {
        if let WireResolutionKind::FollowUpNew(issue) = &res.kind {
            check_field(
                &format!("resolutions[{i}].follow_up_issue.title"),
                &issue.title,
                one_line(MAX_PR_TITLE_CHARS),
            )?;
            check_field(
                &format!("resolutions[{i}].follow_up_issue.body"),
                &issue.body,
                multiline(MAX_PR_BODY_CHARS),
            )?;
        }
        // Rationales are shown to the next reviewer and kept in the
        // journal; they follow the policy so they can be published.
        if let Some(rationale) = &res.rationale {
            check_field(
                &format!("resolutions[{i}].rationale"),
                rationale,
                multiline(MAX_RATIONALE_CHARS),
            )?;
        }
    }
    check_tests(&r.tests)
}

/// `tests` is recorded, never published: shape and size only.
pub(super) fn check_tests(tests: &[String]) -> Result<(), ResultError> {
    for (i, t) in tests.iter().enumerate() {
        let field = format!("tests[{i}]");
        policy::check_size(&field, t, MAX_TEST_CHARS)?;
        if let Some((offset, c)) = t.char_indices().find(|(_, c)| c.is_control()) {
            return Err(policy::PolicyViolation::ControlCharacter {
                field,
                code: u32::from(c),
                offset,
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Redactor;

    #[test]
    fn a_credential_the_redactor_removed_refuses_its_field() {
        let token = format!("ghp_{}", "a1B2".repeat(9));
        let redacted = Redactor::new()
            .redact(&format!("see {token} here"))
            .into_owned();
        assert!(redacted.contains(REDACTION_MARK), "{redacted}");
        assert_eq!(
            check_field("pr_body", &redacted, multiline(100)),
            Err(ResultError::RedactedCredential {
                field: "pr_body".into()
            })
        );
        assert_eq!(check_field("pr_body", "plain text", multiline(100)), Ok(()));
    }
}
