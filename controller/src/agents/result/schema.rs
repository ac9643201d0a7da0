//! The phase schemas, embedded at build time and compiled once.

use std::sync::LazyLock;

use jsonschema::{ValidationError, Validator, error::ValidationErrorKind};
use serde_json::Value;

use super::error::SchemaViolation;
use crate::machine::AgentPhase;

/// Which schema a result is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaId {
    Phase(AgentPhase),
    UpdateEpicReRequest,
}

pub const PLAN_SCHEMA: &str = include_str!("../../../../schemas/plan.schema.json");
pub const IMPLEMENT_SCHEMA: &str = include_str!("../../../../schemas/implement.schema.json");
pub const REVIEW_SCHEMA: &str = include_str!("../../../../schemas/review.schema.json");
pub const FIX_SCHEMA: &str = include_str!("../../../../schemas/fix.schema.json");
pub const UPDATE_EPIC_SCHEMA: &str = include_str!("../../../../schemas/update_epic.schema.json");
pub const UPDATE_EPIC_REREQUEST_SCHEMA: &str =
    include_str!("../../../../schemas/update_epic_rerequest.schema.json");

impl SchemaId {
    /// The schema's source text.
    pub fn source(self) -> &'static str {
        match self {
            Self::Phase(AgentPhase::Plan) => PLAN_SCHEMA,
            Self::Phase(AgentPhase::Implement) => IMPLEMENT_SCHEMA,
            Self::Phase(AgentPhase::Review) => REVIEW_SCHEMA,
            Self::Phase(AgentPhase::Fix) => FIX_SCHEMA,
            Self::Phase(AgentPhase::UpdateEpic) => UPDATE_EPIC_SCHEMA,
            Self::UpdateEpicReRequest => UPDATE_EPIC_REREQUEST_SCHEMA,
        }
    }

    fn validator(self) -> &'static Validator {
        match self {
            Self::Phase(AgentPhase::Plan) => &PLAN,
            Self::Phase(AgentPhase::Implement) => &IMPLEMENT,
            Self::Phase(AgentPhase::Review) => &REVIEW,
            Self::Phase(AgentPhase::Fix) => &FIX,
            Self::Phase(AgentPhase::UpdateEpic) => &UPDATE_EPIC,
            Self::UpdateEpicReRequest => &UPDATE_EPIC_REREQUEST,
        }
    }
}

fn compile(source: &str) -> Validator {
    // The schemas are part of the binary and compiled in a unit test, so a
    // failure here is a build defect, not bad input.
    #[allow(clippy::expect_used)]
    let schema: Value = serde_json::from_str(source).expect("embedded schema is JSON");
    #[allow(clippy::expect_used)]
    jsonschema::validator_for(&schema).expect("embedded schema compiles")
}

static PLAN: LazyLock<Validator> = LazyLock::new(|| compile(PLAN_SCHEMA));
static IMPLEMENT: LazyLock<Validator> = LazyLock::new(|| compile(IMPLEMENT_SCHEMA));
static REVIEW: LazyLock<Validator> = LazyLock::new(|| compile(REVIEW_SCHEMA));
static FIX: LazyLock<Validator> = LazyLock::new(|| compile(FIX_SCHEMA));
static UPDATE_EPIC: LazyLock<Validator> = LazyLock::new(|| compile(UPDATE_EPIC_SCHEMA));
static UPDATE_EPIC_REREQUEST: LazyLock<Validator> =
    LazyLock::new(|| compile(UPDATE_EPIC_REREQUEST_SCHEMA));

/// At most this many violations are reported; one is enough to act on and
/// a flood of them only hides the first.
const MAX_REPORTED: usize = 10;

/// Every violation of `schema` by `instance`, described without the values.
pub fn validate(schema: SchemaId, instance: &Value) -> Vec<SchemaViolation> {
    schema
        .validator()
        .iter_errors(instance)
        .take(MAX_REPORTED)
        .map(|e| describe(&e))
        .collect()
}

fn describe(error: &ValidationError<'_>) -> SchemaViolation {
    let path = match error.instance_path().as_str() {
        "" => "/".to_owned(),
        p => p.to_owned(),
    };
    let instance = error.instance();
    let detail = match error.kind() {
        ValidationErrorKind::MaxLength { limit } | ValidationErrorKind::MinLength { limit } => {
            let chars = instance.as_str().map_or(0, |s| s.chars().count());
            format!("{chars} characters; limit {limit}")
        }
        ValidationErrorKind::MaxItems { limit } => {
            let items = instance.as_array().map_or(0, Vec::len);
            format!("{items} items; at most {limit}")
        }
        ValidationErrorKind::Required { property } => {
            // The name comes from the schema, not from the agent.
            format!("missing {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("{} unexpected field(s)", unexpected.len())
        }
        ValidationErrorKind::Type { .. } => format!("found {}", json_type(instance)),
        ValidationErrorKind::Pattern { .. } => {
            let chars = instance.as_str().map_or(0, |s| s.chars().count());
            format!("a {chars}-character string of the wrong shape")
        }
        _ => String::new(),
    };
    SchemaViolation {
        path,
        keyword: error.kind().keyword().to_owned(),
        detail,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::result::limits::*;

    fn schema(id: SchemaId) -> Value {
        serde_json::from_str(id.source()).expect("json")
    }

    #[test]
    fn every_schema_compiles_as_draft_2020_12() {
        for id in AgentPhase::ALL
            .into_iter()
            .map(SchemaId::Phase)
            .chain([SchemaId::UpdateEpicReRequest])
        {
            let s = schema(id);
            assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
            assert_eq!(s["additionalProperties"], false);
            let _ = id.validator();
        }
    }

    #[test]
    fn sha_and_id_patterns_are_anchored_at_both_ends() {
        let sha = "a".repeat(40);
        let base = serde_json::json!({
            "phase": "FIX", "status": "success",
            "previous_head_sha": sha, "head_sha": sha,
            "resolutions": [{"finding_id": "R1-F1", "resolution": "fixed"}]
        });
        assert!(validate(SchemaId::Phase(AgentPhase::Fix), &base).is_empty());
        for (pointer, bad) in [
            ("/head_sha", format!("{sha}\n")),
            ("/head_sha", "A".repeat(40)),
            ("/head_sha", format!("x{sha}")),
            ("/resolutions/0/finding_id", "R01-F1".to_owned()),
            ("/resolutions/0/finding_id", "R1-F1 ".to_owned()),
        ] {
            let mut value = base.clone();
            *value.pointer_mut(pointer).expect("present") = Value::String(bad.clone());
            let violations = validate(SchemaId::Phase(AgentPhase::Fix), &value);
            assert_eq!(violations.len(), 1, "{bad:?}");
            assert_eq!(violations[0].keyword, "pattern", "{bad:?}");
            assert!(!violations[0].to_string().contains(bad.trim()), "{bad:?}");
        }
    }

    #[test]
    fn schema_bounds_equal_the_code_constants() {
        let implement = schema(SchemaId::Phase(AgentPhase::Implement));
        let p = &implement["properties"];
        assert_eq!(p["pr_title"]["maxLength"], MAX_PR_TITLE_CHARS);
        assert_eq!(p["pr_body"]["maxLength"], MAX_PR_BODY_CHARS);
        assert_eq!(p["issue_url"]["maxLength"], MAX_URL_CHARS);
        assert_eq!(p["tests"]["maxItems"], MAX_TESTS);
        assert_eq!(p["tests"]["items"]["maxLength"], MAX_TEST_CHARS);

        let review = schema(SchemaId::Phase(AgentPhase::Review));
        let finding = &review["$defs"]["finding"]["properties"];
        assert_eq!(
            review["properties"]["findings"]["maxItems"],
            MAX_FINDINGS_PER_REVIEW
        );
        assert_eq!(finding["id"]["maxLength"], MAX_FINDING_ID_CHARS);
        assert_eq!(finding["title"]["maxLength"], MAX_FINDING_TITLE_CHARS);
        assert_eq!(finding["location"]["maxLength"], MAX_FINDING_LOCATION_CHARS);
        assert_eq!(
            finding["required_resolution"]["maxLength"],
            MAX_FINDING_RESOLUTION_CHARS
        );
        assert_eq!(
            review["$defs"]["section"]["maxLength"],
            MAX_REVIEW_SECTION_CHARS
        );
        assert_eq!(
            review["properties"]["summary"]["maxLength"],
            MAX_REVIEW_SUMMARY_CHARS
        );

        let fix = schema(SchemaId::Phase(AgentPhase::Fix));
        let r = &fix["$defs"]["resolution"]["properties"];
        assert_eq!(
            fix["properties"]["resolutions"]["maxItems"],
            MAX_RESOLUTIONS_PER_FIX
        );
        assert_eq!(r["rationale"]["maxLength"], MAX_RATIONALE_CHARS);
        assert_eq!(
            r["follow_up_issue"]["properties"]["title"]["maxLength"],
            MAX_PR_TITLE_CHARS
        );
        assert_eq!(
            r["follow_up_issue"]["properties"]["body"]["maxLength"],
            MAX_PR_BODY_CHARS
        );
        let no_change = &fix["$defs"]["resolution"]["allOf"][2]["then"];
        assert_eq!(
            no_change["properties"]["rationale"]["minLength"],
            MIN_RATIONALE_CHARS
        );

        for id in [
            SchemaId::Phase(AgentPhase::UpdateEpic),
            SchemaId::UpdateEpicReRequest,
        ] {
            let epic = schema(id);
            let p = &epic["properties"];
            assert_eq!(p["roadmap_section"]["maxLength"], MAX_ROADMAP_SECTION_CHARS);
            assert_eq!(p["next_issue_url"]["anyOf"][2]["maxLength"], MAX_URL_CHARS);
        }
        let epic = schema(SchemaId::Phase(AgentPhase::UpdateEpic));
        assert_eq!(
            epic["properties"]["progress"]["maxLength"],
            MAX_PROGRESS_CHARS
        );
    }
}
