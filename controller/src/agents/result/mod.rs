//! CONTROL_RESULT parsing and validation (SPEC §5).
//!
//! The order is fixed and each step trusts only what the previous ones
//! proved: find the last complete block in the captured tail (`block`),
//! refuse it by size, parse strict JSON (duplicate keys refused), check
//! `phase` and `status`, then the phase schema (`schema`), then the
//! published-text policy on every field that may reach GitHub (`fields`).
//! What only the controller can know — HEAD, round, ancestry, open
//! findings — is compared afterwards by [`cross_check`] against
//! [`Observations`] the caller gathered, which yields the machine's
//! [`AgentResult`](crate::machine::AgentResult); the wire shapes (`wire`) never leave this module. It
//! stays pure and never touches git.

mod block;
mod check;
mod error;
mod fields;
pub mod limits;
mod schema;
#[cfg(test)]
mod schema_rules_tests;
mod strict_json;
mod wire;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use block::{BLOCK_END, BLOCK_START, CapturedOutput, extract_block};
pub use check::{
    FixObservations, HandedOverFollowUp, ImplementObservations, Observations, ReviewObservations,
    UpdateEpicObservations, cross_check,
};
pub use error::{CrossCheckError, ResultError, SchemaViolation, correction_allowed};
pub use schema::SchemaId;

use crate::machine::AgentPhase;
use wire::{Parsed, RawFix, WireEpic, WireFix};

/// A result that passed the schema and the published-text policy but not
/// yet the cross-checks; only [`cross_check`] makes it the machine's
/// [`AgentResult`](crate::machine::AgentResult).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedResult(Parsed);

/// Which fields an UPDATE_EPIC re-request asks for (SPEC §4). Any other key
/// is refused, `progress` above all: the progress comment is already posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReRequest {
    pub next_issue: bool,
    pub roadmap: bool,
}

/// Parses the captured output of a launch of `phase` into a result whose
/// every published field passed the policy.
pub fn parse_result(
    phase: AgentPhase,
    captured: &CapturedOutput,
) -> Result<ParsedResult, ResultError> {
    let object = parse_object(phase, captured)?;
    match status_of(&object)? {
        Status::Failure(message) => return Ok(ParsedResult(Parsed::Failure { message })),
        Status::Blocked(message) => return Ok(ParsedResult(Parsed::Blocked { message })),
        Status::Success => {}
    }
    check_schema(SchemaId::Phase(phase), &object)?;
    let result = match phase {
        AgentPhase::Plan => Parsed::Plan(typed(object)?),
        AgentPhase::Implement => Parsed::Implement(typed(object)?),
        AgentPhase::Review => Parsed::Review(typed(object)?),
        AgentPhase::Fix => {
            let raw: RawFix = typed(object)?;
            Parsed::Fix(fix_from_raw(raw)?)
        }
        AgentPhase::UpdateEpic => {
            let result = update_epic_from(&object);
            // The schema requires `progress`; blank text would otherwise
            // become "no report" below and the comment would be skipped.
            if result.progress.is_none() {
                return Err(ResultError::Policy(
                    crate::publish::PolicyViolation::Blank {
                        field: "progress".into(),
                    },
                ));
            }
            Parsed::UpdateEpic(result)
        }
    };
    fields::check_published_fields(&result)?;
    Ok(ParsedResult(result))
}

/// Parses the answer to an UPDATE_EPIC re-request: only the asked fields,
/// never `progress`.
pub fn parse_update_epic_rerequest(
    captured: &CapturedOutput,
    asked: ReRequest,
) -> Result<ParsedResult, ResultError> {
    let object = parse_object(AgentPhase::UpdateEpic, captured)?;
    match status_of(&object)? {
        Status::Failure(message) => return Ok(ParsedResult(Parsed::Failure { message })),
        Status::Blocked(message) => return Ok(ParsedResult(Parsed::Blocked { message })),
        Status::Success => {}
    }
    let unasked = object
        .keys()
        .filter(|k| match k.as_str() {
            "phase" | "status" | "message" => false,
            "next_issue_url" => !asked.next_issue,
            "roadmap_section" => !asked.roadmap,
            _ => true,
        })
        .count();
    if unasked > 0 {
        return Err(ResultError::UnaskedFields { count: unasked });
    }
    if asked.next_issue && !object.contains_key("next_issue_url") {
        return Err(ResultError::MissingField {
            field: "next_issue_url",
        });
    }
    let mut schema_view = object.clone();
    schema_view.remove("message");
    check_schema(SchemaId::UpdateEpicReRequest, &schema_view)?;
    let result = Parsed::UpdateEpic(update_epic_from(&object));
    fields::check_published_fields(&result)?;
    Ok(ParsedResult(result))
}

fn parse_object(
    phase: AgentPhase,
    captured: &CapturedOutput,
) -> Result<Map<String, Value>, ResultError> {
    let text = extract_block(captured)?;
    let value: Value = strict_json::parse(text.trim()).map_err(|e| {
        if e.to_string().starts_with(strict_json::DUPLICATE_KEY) {
            return ResultError::DuplicateKey {
                line: e.line(),
                column: e.column(),
            };
        }
        ResultError::InvalidJson {
            category: match e.classify() {
                serde_json::error::Category::Io => "io",
                serde_json::error::Category::Syntax => "syntax",
                serde_json::error::Category::Data => "data",
                serde_json::error::Category::Eof => "unexpected end",
            },
            line: e.line(),
            column: e.column(),
        }
    })?;
    let Value::Object(object) = value else {
        return Err(ResultError::NotAnObject);
    };
    match object.get("phase") {
        None => Err(ResultError::MissingField { field: "phase" }),
        Some(Value::String(p)) if p == phase.spec_name() => Ok(object),
        Some(Value::String(_)) => Err(ResultError::WrongPhase {
            expected: phase.spec_name(),
        }),
        Some(_) => Err(ResultError::WrongType {
            field: "phase",
            expected: "a string",
        }),
    }
}

enum Status {
    Success,
    Failure(String),
    Blocked(String),
}

fn status_of(object: &Map<String, Value>) -> Result<Status, ResultError> {
    let status = match object.get("status") {
        None => return Err(ResultError::MissingField { field: "status" }),
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(ResultError::WrongType {
                field: "status",
                expected: "a string",
            });
        }
    };
    let (status, wrap): (&'static str, fn(String) -> Status) = match status {
        "success" => return Ok(Status::Success),
        "failure" => ("failure", Status::Failure),
        "blocked" => ("blocked", Status::Blocked),
        _ => return Err(ResultError::BadStatus),
    };
    match object.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => {
            fields::check_message(m)?;
            Ok(wrap(m.clone()))
        }
        Some(Value::String(_)) | None => Err(ResultError::MissingMessage { status }),
        Some(_) => Err(ResultError::WrongType {
            field: "message",
            expected: "a string",
        }),
    }
}

fn check_schema(schema: SchemaId, object: &Map<String, Value>) -> Result<(), ResultError> {
    // Validating needs a `Value`; the clone is bounded by the 1 MiB block.
    let violations = schema::validate(schema, &Value::Object(object.clone()));
    if violations.is_empty() {
        Ok(())
    } else {
        Err(ResultError::Schema { violations })
    }
}

/// Deserialises a schema-valid object, without `phase`/`status`. A failure
/// here means the schema and the struct disagree; it is reported as a
/// schema error at the root rather than echoing serde's text.
fn typed<T: DeserializeOwned>(mut object: Map<String, Value>) -> Result<T, ResultError> {
    object.remove("phase");
    object.remove("status");
    serde_json::from_value(Value::Object(object)).map_err(|_| ResultError::Schema {
        violations: vec![SchemaViolation {
            path: "/".into(),
            keyword: "type".into(),
            detail: "the result does not match the typed shape".into(),
        }],
    })
}

fn fix_from_raw(raw: RawFix) -> Result<WireFix, ResultError> {
    let mut resolutions = Vec::with_capacity(raw.resolutions.len());
    for (index, r) in raw.resolutions.into_iter().enumerate() {
        let Some(resolution) = r.into_resolution() else {
            return Err(ResultError::Schema {
                violations: vec![SchemaViolation {
                    path: format!("/resolutions/{index}"),
                    keyword: "oneOf".into(),
                    detail: "inconsistent resolution fields".into(),
                }],
            });
        };
        resolutions.push(resolution);
    }
    Ok(WireFix {
        previous_head_sha: raw.previous_head_sha,
        head_sha: raw.head_sha,
        resolutions,
        tests: raw.tests,
    })
}

fn update_epic_from(object: &Map<String, Value>) -> WireEpic {
    let text = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    WireEpic {
        progress: text("progress"),
        roadmap_section: text("roadmap_section"),
        next_issue_url: text("next_issue_url"),
    }
}
