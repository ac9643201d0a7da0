//! Repository settings (SPEC §16): the optional `.github/autoforge.toml` a
//! repository keeps on its default branch. It may choose validation
//! commands, the status-label switch and which of the operator's agent
//! profiles its runs use; it can never define a command line for an agent.
//!
//! Parsing is strict: TOML, then `schemas/repo-settings.schema.json`
//! (unknown keys are errors), then the profile names against the operator's
//! configuration. Every message is composed here from positions, key paths
//! and rule names, never by quoting the file: the reason ends up in the
//! run's status comment, and the file's text is the repository's, not ours.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// Where the file lives in the repository.
pub const REPOSITORY_SETTINGS_PATH: &str = ".github/autoforge.toml";

/// The schema text, exactly as shipped in `schemas/repo-settings.schema.json`.
pub const REPOSITORY_SCHEMA_TEXT: &str = include_str!("../../../schemas/repo-settings.schema.json");

/// Files larger than this are refused before parsing.
pub const MAX_REPOSITORY_SETTINGS_BYTES: usize = 64 * 1024;

static VALIDATOR: LazyLock<Result<jsonschema::Validator, String>> = LazyLock::new(|| {
    let schema: Value =
        serde_json::from_str(REPOSITORY_SCHEMA_TEXT).map_err(|e| format!("not JSON: {e}"))?;
    jsonschema::validator_for(&schema).map_err(|e| format!("does not compile: {e}"))
});

/// The settings a repository chose: the machine's own plain data, so the
/// parsed file is what a run freezes, with no conversion in between.
pub use crate::machine::{
    RepositoryAgents, RepositoryLabels, RepositorySettings, RepositoryValidation,
};

impl RepositoryAgents {
    fn chosen(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("plan", &self.plan),
            ("implement", &self.implement),
            ("review", &self.review),
            ("fix", &self.fix),
            ("update_epic", &self.update_epic),
        ]
        .into_iter()
        .filter_map(|(role, name)| name.as_deref().map(|name| (role, name)))
    }
}

/// Why a repository's settings file cannot be used. The text is safe to
/// publish: it names positions, keys and rules, never the file's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepositorySettingsError {
    #[error(
        "{REPOSITORY_SETTINGS_PATH} is {size} bytes; the limit is {MAX_REPOSITORY_SETTINGS_BYTES}"
    )]
    TooLarge { size: usize },
    #[error("{REPOSITORY_SETTINGS_PATH} is not UTF-8 text")]
    NotUtf8,
    #[error("{REPOSITORY_SETTINGS_PATH} is not valid TOML (line {line}, column {column})")]
    Syntax { line: usize, column: usize },
    #[error("{REPOSITORY_SETTINGS_PATH} breaks its schema: {}", .problems.join("; "))]
    Schema { problems: Vec<String> },
    #[error(
        "{REPOSITORY_SETTINGS_PATH} names agent profile `{name}` for `{role}`, which the operator's configuration does not define"
    )]
    UnknownProfile { role: &'static str, name: String },
    #[error("the repository settings schema shipped with autoforge is broken: {0}")]
    BrokenSchema(String),
}

/// Parses and checks the file's bytes. `operator_profiles` are the profile
/// names the operator's configuration defines.
pub fn parse_repository_settings(
    bytes: &[u8],
    operator_profiles: &BTreeSet<String>,
) -> Result<RepositorySettings, RepositorySettingsError> {
    if bytes.len() > MAX_REPOSITORY_SETTINGS_BYTES {
        return Err(RepositorySettingsError::TooLarge { size: bytes.len() });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| RepositorySettingsError::NotUtf8)?;
    let table: toml::Table = toml::from_str(text).map_err(|error| {
        let (line, column) = error
            .span()
            .map_or((1, 1), |span| line_and_column(text, span.start));
        RepositorySettingsError::Syntax { line, column }
    })?;
    let document = serde_json::to_value(&table).map_err(|_| RepositorySettingsError::Schema {
        problems: vec!["a value cannot be represented as JSON".to_owned()],
    })?;
    let validator = VALIDATOR
        .as_ref()
        .map_err(|e| RepositorySettingsError::BrokenSchema(e.clone()))?;
    let problems: Vec<String> = validator
        .iter_errors(&document)
        .map(|e| describe(&e))
        .collect();
    if !problems.is_empty() {
        return Err(RepositorySettingsError::Schema { problems });
    }
    let settings: RepositorySettings =
        serde_json::from_value(document).map_err(|_| RepositorySettingsError::Schema {
            problems: vec!["the document does not have the documented shape".to_owned()],
        })?;
    if let Some((role, name)) = settings
        .agents
        .chosen()
        .find(|(_, name)| !operator_profiles.contains(*name))
    {
        return Err(RepositorySettingsError::UnknownProfile {
            role,
            name: name.to_owned(),
        });
    }
    Ok(settings)
}

/// One schema problem in our own words: where, and which rule.
fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    let at = dotted(error.instance_path().as_str());
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let keys: Vec<String> = unexpected
                .iter()
                .map(|key| format!("`{}`", printable(key)))
                .collect();
            format!("unknown key {} in `{at}`", keys.join(", "))
        }
        kind => format!("`{at}` breaks the `{}` rule", kind.keyword()),
    }
}

/// `/validation/commands/0` → `validation.commands.0`; the root is `(file)`.
fn dotted(pointer: &str) -> String {
    if pointer.is_empty() {
        return "(file)".to_owned();
    }
    let parts: Vec<String> = pointer
        .trim_start_matches('/')
        .split('/')
        .map(|part| printable(&part.replace("~1", "/").replace("~0", "~")))
        .collect();
    parts.join(".")
}

/// A key as it may appear in a message: bounded, one line, no backticks.
fn printable(key: &str) -> String {
    key.chars()
        .filter(|c| !c.is_control() && *c != '`')
        .take(64)
        .collect()
}

fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::machine::ValidationCommand;

    fn profiles() -> BTreeSet<String> {
        ["claude".to_owned(), "codex".to_owned()].into()
    }

    #[test]
    fn a_full_file_is_read_into_typed_settings() {
        let text = r#"
[validation]
commands = [["cargo", "test"], "make lint"]

[labels]
status = true

[agents]
review = "codex"
"#;
        let settings = parse_repository_settings(text.as_bytes(), &profiles()).unwrap();
        assert_eq!(
            settings.validation.commands,
            Some(vec![
                ValidationCommand::Argv(vec!["cargo".into(), "test".into()]),
                ValidationCommand::Shell("make lint".into()),
            ])
        );
        assert_eq!(settings.labels.status, Some(true));
        assert_eq!(settings.agents.review.as_deref(), Some("codex"));
        assert_eq!(settings.agents.implement, None);
    }

    #[test]
    fn an_empty_file_changes_nothing() {
        assert_eq!(
            parse_repository_settings(b"", &profiles()).unwrap(),
            RepositorySettings::default()
        );
    }

    #[test]
    fn unknown_keys_are_named_without_quoting_values() {
        let error =
            parse_repository_settings(b"[validation]\ncommand = \"fixes #1\"\n", &profiles())
                .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("unknown key `command` in `validation`"),
            "{text}"
        );
        assert!(!text.contains("fixes"), "{text}");
    }

    #[test]
    fn a_wrong_type_names_the_key_and_the_rule() {
        let error =
            parse_repository_settings(b"[labels]\nstatus = \"yes\"\n", &profiles()).unwrap_err();
        assert_eq!(
            error.to_string(),
            ".github/autoforge.toml breaks its schema: `labels.status` breaks the `type` rule"
        );
    }

    #[test]
    fn a_syntax_error_gives_its_position_only() {
        let error = parse_repository_settings(
            b"[validation]\ncommands = [\"ok\",\n  @secret-ish\n",
            &profiles(),
        )
        .unwrap_err();
        let RepositorySettingsError::Syntax { line, .. } = error else {
            panic!("{error:?}");
        };
        assert_eq!(line, 3);
        assert!(!error.to_string().contains("secret"));
    }

    #[test]
    fn a_profile_the_operator_did_not_define_is_refused() {
        let error = parse_repository_settings(b"[agents]\nimplement = \"mine\"\n", &profiles())
            .unwrap_err();
        assert_eq!(
            error,
            RepositorySettingsError::UnknownProfile {
                role: "implement",
                name: "mine".into()
            }
        );
    }

    #[test]
    fn an_agent_command_line_cannot_be_defined_by_the_repository() {
        let error =
            parse_repository_settings(b"[agents.profiles.evil]\ncommand = [\"sh\"]\n", &profiles())
                .unwrap_err();
        assert!(
            matches!(error, RepositorySettingsError::Schema { .. }),
            "{error}"
        );
    }

    #[test]
    fn oversized_and_binary_files_are_refused_before_parsing() {
        let big = vec![b'#'; MAX_REPOSITORY_SETTINGS_BYTES + 1];
        assert!(matches!(
            parse_repository_settings(&big, &profiles()),
            Err(RepositorySettingsError::TooLarge { .. })
        ));
        assert_eq!(
            parse_repository_settings(&[0xff, 0xfe], &profiles()),
            Err(RepositorySettingsError::NotUtf8)
        );
    }

    #[test]
    fn the_shipped_schema_compiles() {
        assert!(VALIDATOR.is_ok(), "{:?}", VALIDATOR.as_ref().err());
    }
}
