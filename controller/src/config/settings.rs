//! The typed settings: what `autoforge.toml` plus the `AUTOFORGE_*` overrides
//! describe, after schema validation. Defaults here mirror the schema's
//! `default` values (a test keeps the two equal). Secrets other than
//! `database.url` are not settings; see [`super::secrets`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::agents::AgentSettings;
use crate::commands::{OperatorPolicy, Permission};

/// Everything `autoforge.toml` can hold.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// As written; the resolved directory is [`super::Config::state_dir`].
    pub state_dir: Option<PathBuf>,
    pub database: DatabaseSettings,
    pub github: GithubSettings,
    pub webhook: WebhookSettings,
    pub server: ServerSettings,
    pub driver: DriverSettings,
    pub poll: PollSettings,
    pub logging: LoggingSettings,
    pub labels: LabelSettings,
    pub operators: OperatorSettings,
    pub merge: MergeSettings,
    pub plan: PlanSettings,
    pub epic: EpicSettings,
    pub limits: Limits,
    pub validation: ValidationSettings,
    pub prompts: PromptSettings,
    pub agents: AgentSettings,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// Kept secret because a connection URL may carry a password. Never
    /// serialised; the resolved choice is [`super::DatabaseSource`].
    #[serde(skip_serializing)]
    pub url: Option<SecretString>,
    pub max_connections: u32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: None,
            max_connections: autoforge_journal::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GithubSettings {
    /// Checked to be an absolute http(s) URL.
    pub api_url: String,
    pub app_id: Option<u64>,
    /// `owner/name` pairs.
    pub repositories: Vec<String>,
    /// With an App: the owners whose installations are served; empty
    /// serves every installation.
    pub allowed_owners: Vec<String>,
}

impl Default for GithubSettings {
    fn default() -> Self {
        Self {
            api_url: "https://api.github.com".to_owned(),
            app_id: None,
            repositories: Vec::new(),
            allowed_owners: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSettings {
    pub path: String,
    pub max_body_bytes: u64,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            path: crate::webhook::DEFAULT_WEBHOOK_PATH.to_owned(),
            max_body_bytes: crate::webhook::MAX_WEBHOOK_BODY_BYTES as u64,
        }
    }
}

impl WebhookSettings {
    /// The endpoint `serve` answers deliveries at, verified with `secret`.
    pub fn endpoint(&self, secret: SecretString) -> crate::webhook::WebhookEndpoint {
        // The schema caps the limit at 25 MiB, which fits any usize.
        let limit =
            usize::try_from(self.max_body_bytes).unwrap_or(crate::webhook::MAX_WEBHOOK_BODY_BYTES);
        crate::webhook::WebhookEndpoint::new(secret)
            .at(&self.path)
            .with_body_limit(limit)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// The webhook listener: `/webhook` and the probes, nothing else.
    pub listen: SocketAddr,
    /// The admin listener: the dashboard, `/metrics` and the probes. Kept
    /// apart so that whatever publishes `/webhook` does not publish these.
    pub admin_listen: SocketAddr,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriverSettings {
    pub lease_seconds: u64,
    pub concurrency: usize,
}

impl DriverSettings {
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_seconds)
    }
}

impl Default for DriverSettings {
    fn default() -> Self {
        Self {
            lease_seconds: 60,
            concurrency: 8,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PollSettings {
    pub interval_seconds: u64,
    /// The longest backstop pause of a waiting run (see `driver::backstop`).
    pub backstop_max_seconds: u64,
}

impl PollSettings {
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_seconds)
    }

    /// The longest pause before a waiting run re-reads GitHub unprompted;
    /// never shorter than the poll interval.
    pub fn backstop_max(&self) -> Duration {
        Duration::from_secs(self.backstop_max_seconds.max(self.interval_seconds))
    }
}

impl Default for PollSettings {
    fn default() -> Self {
        Self {
            interval_seconds: 60,
            backstop_max_seconds: 900,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable on a terminal, JSON lines otherwise.
    #[default]
    Auto,
    Human,
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingSettings {
    pub filter: String,
    pub format: LogFormat,
}

impl Default for LoggingSettings {
    fn default() -> Self {
        Self {
            filter: "info".to_owned(),
            format: LogFormat::Auto,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LabelSettings {
    pub trigger: String,
    pub epic: String,
    pub status: bool,
}

impl Default for LabelSettings {
    fn default() -> Self {
        Self {
            trigger: "autoforge".to_owned(),
            epic: "epic".to_owned(),
            status: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OperatorSettings {
    /// The schema admits `read` to `admin`; `none` exists only as an answer
    /// of GitHub's permission endpoint.
    pub min_permission: Permission,
    /// Logins that are operators whatever their permission.
    pub allow: Vec<String>,
}

impl Default for OperatorSettings {
    fn default() -> Self {
        Self {
            min_permission: Permission::Write,
            allow: Vec::new(),
        }
    }
}

impl From<&OperatorSettings> for OperatorPolicy {
    fn from(settings: &OperatorSettings) -> Self {
        Self {
            min_permission: settings.min_permission,
            allow: settings.allow.clone(),
        }
    }
}

/// `merge.mode`: the machine's own type, so the file's value is the value a
/// run freezes, with no conversion in between.
pub use crate::machine::MergeMode;

/// `merge.method`: the machine's own type, frozen into each run.
pub use crate::machine::MergeMethod;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MergeSettings {
    pub mode: MergeMode,
    /// `None`: the first method the repository allows, squash first.
    pub method: Option<MergeMethod>,
    pub protected_paths: Vec<String>,
    pub inconclusive_checks: u32,
}

impl Default for MergeSettings {
    fn default() -> Self {
        Self {
            mode: MergeMode::Never,
            method: None,
            protected_paths: vec![".github/workflows/".to_owned()],
            inconclusive_checks: 60,
        }
    }
}

/// `plan.mode`: the machine's own type, frozen into each run.
pub use crate::machine::PlanMode;

/// `[plan]`: whether runs write a plan before the code (SPEC §4 PLAN).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanSettings {
    pub mode: PlanMode,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EpicSettings {
    pub update_every: u32,
}

impl Default for EpicSettings {
    fn default() -> Self {
        Self { update_every: 1 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub review_rounds: u32,
    pub launches_per_run: u32,
    pub validation_failures_per_phase: u32,
    pub corrections_per_launch: u32,
    pub tokens_per_run: Option<u64>,
    /// Most estimated cost of one run's launches, in the profiles' price
    /// unit; the same budget as `tokens_per_run`, in another unit.
    pub cost_per_run: Option<f64>,
}

impl Limits {
    /// `cost_per_run` in millionths of the price unit, as the machine
    /// counts cost.
    pub fn cost_per_run_micros(&self) -> Option<u64> {
        // Saturating conversion; the schema refuses a limit of 0 or less.
        self.cost_per_run
            .map(|units| (units * 1_000_000.0).round() as u64)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            review_rounds: 8,
            launches_per_run: 60,
            validation_failures_per_phase: 3,
            corrections_per_launch: 1,
            tokens_per_run: None,
            cost_per_run: None,
        }
    }
}

/// One validation command: the machine's own type, which a repository's
/// frozen settings hold too.
pub use crate::machine::ValidationCommand;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationSettings {
    pub commands: Vec<ValidationCommand>,
    pub timeout_seconds: u64,
    /// What the commands may reach beyond their export (network, caches).
    pub sandbox: super::sandbox::SandboxTable,
}

impl ValidationSettings {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }
}

impl Default for ValidationSettings {
    fn default() -> Self {
        Self {
            commands: Vec::new(),
            timeout_seconds: 600,
            sandbox: super::sandbox::SandboxTable::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptSettings {
    /// Resolved against the config file's directory when loaded from a file.
    pub dir: Option<PathBuf>,
}

impl Settings {
    /// The bounds frozen into a new run; bounds the configuration does not
    /// expose keep the machine's defaults.
    pub fn run_settings(&self) -> crate::machine::RunSettings {
        crate::machine::RunSettings {
            merge_mode: self.merge.mode,
            merge_method: self.merge.method,
            max_review_rounds: self.limits.review_rounds,
            max_launches: self.limits.launches_per_run,
            max_validation_failures: self.limits.validation_failures_per_phase,
            max_corrections: self.limits.corrections_per_launch,
            epic_update_every: self.epic.update_every,
            status_labels: self.labels.status,
            max_tokens: self.limits.tokens_per_run,
            max_cost_micros: self.limits.cost_per_run_micros(),
            max_merge_checks: self.merge.inconclusive_checks,
            plan_mode: self.plan.mode,
            ..crate::machine::RunSettings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Walks the schema and compares every stated `default` with what the
    /// typed defaults serialise to, so documentation and behaviour agree.
    #[test]
    fn schema_defaults_equal_the_typed_defaults() {
        fn walk(schema: &Value, typed: &Value, path: &str, mismatches: &mut Vec<String>) {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, child) in properties {
                let actual = typed.get(name).unwrap_or(&Value::Null);
                if let Some(expected) = child.get("default") {
                    // A section's `{}` default means "every key at its own
                    // default"; those keys are compared one by one below.
                    let agrees = if expected == &json!({}) {
                        actual.is_object()
                    } else {
                        expected == actual
                    };
                    if !agrees {
                        mismatches
                            .push(format!("{path}.{name}: schema {expected}, typed {actual}"));
                    }
                }
                walk(child, actual, &format!("{path}.{name}"), mismatches);
            }
        }
        let typed = serde_json::to_value(Settings::default()).expect("serialisable");
        let mut mismatches = Vec::new();
        walk(super::super::schema::schema(), &typed, "", &mut mismatches);
        assert!(mismatches.is_empty(), "{mismatches:#?}");
    }

    /// Sets every integer key to the largest value the schema lets through,
    /// so a schema bound wider than its Rust type fails here, not in
    /// production with an error that has no key path.
    #[test]
    fn largest_integers_the_schema_accepts_fit_the_typed_settings() {
        fn largest(schema: &Value) -> Value {
            let mut doc = serde_json::Map::new();
            for (name, child) in schema["properties"].as_object().into_iter().flatten() {
                if child.get("properties").is_some() {
                    doc.insert(name.clone(), largest(child));
                } else if child.get("type") == Some(&json!("integer")) {
                    doc.insert(
                        name.clone(),
                        child.get("maximum").cloned().unwrap_or(json!(i64::MAX)),
                    );
                }
            }
            Value::Object(doc)
        }
        let schema = super::super::schema::schema();
        let mut doc = largest(schema);
        let mut profile = largest(&schema["$defs"]["profile"]);
        profile["command"] = json!(["agent"]);
        doc["agents"]["profiles"] = json!({ "p": profile });
        assert!(super::super::schema::check(&doc, &Default::default()).is_empty());
        let settings: Settings = serde_json::from_value(doc).expect("every maximum fits");
        assert_eq!(settings.limits.review_rounds, 100);
    }

    #[test]
    fn empty_document_deserialises_to_the_defaults() {
        let settings: Settings = serde_json::from_value(json!({})).expect("defaults");
        assert_eq!(settings.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(settings.server.admin_listen.to_string(), "127.0.0.1:8081");
        assert_eq!(settings.webhook.max_body_bytes, 26_214_400);
        assert_eq!(settings.merge.mode, MergeMode::Never);
        assert_eq!(settings.operators.min_permission, Permission::Write);
    }

    #[test]
    fn operator_settings_become_the_operator_policy_and_refuse_unknown_levels() {
        let settings: OperatorSettings =
            serde_json::from_value(json!({"min_permission": "maintain", "allow": ["alice"]}))
                .expect("valid");
        let policy = OperatorPolicy::from(&settings);
        assert_eq!(policy.min_permission, Permission::Maintain);
        assert_eq!(policy.allow, ["alice"]);
        assert!(
            serde_json::from_value::<OperatorSettings>(json!({"min_permission": "owner"})).is_err()
        );
    }

    #[test]
    fn validation_commands_accept_shell_strings_and_argv_arrays() {
        let settings: ValidationSettings =
            serde_json::from_value(json!({"commands": ["make check", ["cargo", "test"]]}))
                .expect("valid");
        assert_eq!(
            settings.commands,
            vec![
                ValidationCommand::Shell("make check".to_owned()),
                ValidationCommand::Argv(vec!["cargo".to_owned(), "test".to_owned()]),
            ]
        );
    }

    #[test]
    fn configured_bounds_are_frozen_into_run_settings() {
        let mut settings = Settings::default();
        settings.merge.mode = MergeMode::OnCommand;
        settings.limits.review_rounds = 3;
        settings.labels.status = true;
        let frozen = settings.run_settings();
        assert!(frozen.status_labels);
        assert_eq!(frozen.merge_mode, crate::machine::MergeMode::OnCommand);
        assert_eq!(frozen.max_review_rounds, 3);
    }
}
