//! The `[agents]` section as the file spells it: profiles (how to launch one
//! coding-agent CLI) and roles (which profile runs which phase, the reviewer
//! possibly changing with the round).
//!
//! These types keep the file's shape; [`AgentSettings::catalog`] is the one
//! conversion into the runtime [`AgentCatalog`], and `config check` runs the
//! same conversion, so it reports exactly what a launch would refuse. The
//! round-range, usage-pattern and routing rules live with the runtime types
//! in `agents::profile`.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::{Deserialize, Serialize, Serializer};

use super::problem::Problem;
use super::sandbox::SandboxTable;
use crate::agents::profile::{
    AgentCatalog, OutputKind, OutputSpec, PriceTable, ProfileError, ProfileSpec, ReviewRole,
    RoleRouting, RoutingError, UsageFields,
};
use crate::machine::AgentPhase;
use crate::sandbox::SandboxMode;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    pub profiles: BTreeMap<String, AgentProfile>,
    pub roles: AgentRoles,
    /// Whether launches run in the bubblewrap sandbox; `off` only where the
    /// host cannot run it.
    pub sandbox: SandboxMode,
    /// Seconds between two heartbeats of a running launch (its journal
    /// row's progress).
    pub heartbeat_seconds: u64,
    /// Seconds before the first automatic relaunch after a failed launch;
    /// doubled per consecutive failure (0: relaunch at once).
    pub relaunch_backoff_seconds: u64,
    /// The longest pause before a relaunch.
    pub relaunch_backoff_max_seconds: u64,
    /// The shortest time between two status-comment edits showing a
    /// running launch.
    pub status_refresh_seconds: u64,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            profiles: BTreeMap::new(),
            roles: AgentRoles::default(),
            sandbox: SandboxMode::default(),
            heartbeat_seconds: 30,
            relaunch_backoff_seconds: 5,
            relaunch_backoff_max_seconds: 300,
            status_refresh_seconds: 60,
        }
    }
}

impl AgentSettings {
    /// Time between two heartbeats of a running launch (at least a second).
    pub fn heartbeat(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.heartbeat_seconds.max(1))
    }

    /// How often a running launch may refresh the status comment (at
    /// least a second).
    pub fn status_refresh(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.status_refresh_seconds.max(1))
    }

    /// The first and the longest pause before an automatic relaunch (the
    /// cap is never below the first pause).
    pub fn relaunch_backoff(&self) -> (std::time::Duration, std::time::Duration) {
        let base = std::time::Duration::from_secs(self.relaunch_backoff_seconds);
        let max = std::time::Duration::from_secs(self.relaunch_backoff_max_seconds);
        (base, max.max(base))
    }
}

/// How to launch one coding-agent CLI, as written in the file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// argv prefix; never empty (schema and check enforce it).
    pub command: Vec<String>,
    /// Values may be vendor keys, so they are secrets (redacted in `Debug`).
    #[serde(default)]
    pub env: BTreeMap<String, EnvChange>,
    /// Names copied from the controller's own environment, so a vendor key
    /// need not sit in this file.
    #[serde(default)]
    pub env_inherit: Vec<String>,
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_seconds: u64,
    #[serde(default = "default_max_runtime")]
    pub max_runtime_seconds: u64,
    /// Checked by `agents::profile::UsagePattern` before typing.
    #[serde(default)]
    pub usage_pattern: Option<String>,
    /// Where the final message and the token usage come out.
    #[serde(default)]
    pub output: OutputTable,
    #[serde(default)]
    pub sandbox: SandboxTable,
    /// `[agents.profiles.X.price]`: prices per million tokens.
    #[serde(default)]
    pub price: Option<PriceTable>,
}

/// `[agents.profiles.X.output]`: the CLI's output format and the JSON
/// pointers to its final message and usage fields.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputTable {
    pub format: OutputKind,
    pub message: Option<String>,
    pub message_when: BTreeMap<String, String>,
    pub input_tokens: Option<String>,
    pub output_tokens: Option<String>,
    pub cached_tokens: Option<String>,
}

impl OutputTable {
    fn to_spec(&self) -> OutputSpec {
        OutputSpec {
            kind: self.format,
            message: self.message.clone(),
            message_when: self.message_when.clone(),
            usage: UsageFields {
                input: self.input_tokens.clone(),
                output: self.output_tokens.clone(),
                cached: self.cached_tokens.clone(),
            },
        }
    }
}

fn default_idle_timeout() -> u64 {
    600
}

fn default_max_runtime() -> u64 {
    3600
}

/// A change a profile makes to the agent's environment.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawEnvChange")]
pub enum EnvChange {
    Set(SecretString),
    /// TOML has no null, so `false` also means "remove".
    Remove,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEnvChange {
    Text(String),
    Flag(bool),
    Null,
}

impl TryFrom<RawEnvChange> for EnvChange {
    type Error = &'static str;

    fn try_from(raw: RawEnvChange) -> Result<Self, Self::Error> {
        match raw {
            RawEnvChange::Text(value) => Ok(EnvChange::Set(SecretString::from(value))),
            RawEnvChange::Flag(false) | RawEnvChange::Null => Ok(EnvChange::Remove),
            RawEnvChange::Flag(true) => Err("an env value is a string, or false/null to remove"),
        }
    }
}

impl Serialize for EnvChange {
    /// A set value is written as a placeholder: serialised settings end up
    /// in logs and reports, and the value may be an API key.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EnvChange::Set(_) => serializer.serialize_str("[REDACTED]"),
            EnvChange::Remove => serializer.serialize_none(),
        }
    }
}

/// Which profile plays which role. Unset roles mean runs cannot reach that
/// phase; `config check` warns about them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentRoles {
    /// The planner (SPEC §4 PLAN); needed when `plan.mode` is not off.
    pub plan: Option<String>,
    pub implement: Option<String>,
    pub fix: Option<String>,
    pub update_epic: Option<String>,
    pub review: Option<ReviewRole>,
}

/// A refusal found while building the catalog: the JSON pointer of the key
/// it is about, the rule and the message.
pub(crate) type PointedProblem = (String, &'static str, String);

impl AgentProfile {
    /// The runtime spec of this profile: `env` split into values to set and
    /// names to remove, sandboxed (the global switch is applied by
    /// [`AgentSettings::catalog`]).
    pub fn to_spec(&self) -> ProfileSpec {
        let mut env = BTreeMap::new();
        let mut env_remove = Vec::new();
        for (name, change) in &self.env {
            match change {
                EnvChange::Set(value) => {
                    env.insert(name.clone(), value.clone());
                }
                EnvChange::Remove => env_remove.push(name.clone()),
            }
        }
        ProfileSpec {
            command: self.command.clone(),
            env,
            env_remove,
            env_inherit: self.env_inherit.clone(),
            idle_timeout_seconds: self.idle_timeout_seconds,
            max_runtime_seconds: self.max_runtime_seconds,
            usage_pattern: self.usage_pattern.clone(),
            output: self.output.to_spec(),
            sandbox: self.sandbox.policy(SandboxMode::Bubblewrap),
            price: self.price,
        }
    }
}

impl AgentSettings {
    /// The runtime catalog: every profile checked, the roles routed with
    /// review ranges covering rounds `1..=review_rounds`. On failure, every
    /// problem found, keyed like the other config problems.
    pub fn catalog(&self, review_rounds: u32) -> Result<AgentCatalog, Vec<Problem>> {
        self.catalog_pointed(review_rounds).map_err(|problems| {
            problems
                .into_iter()
                .map(|(pointer, rule, message)| {
                    Problem::new(pointer_to_key(&pointer), rule, message)
                })
                .collect()
        })
    }

    pub(crate) fn catalog_pointed(
        &self,
        review_rounds: u32,
    ) -> Result<AgentCatalog, Vec<PointedProblem>> {
        let mut problems = Vec::new();
        let mut profiles = BTreeMap::new();
        for (name, profile) in &self.profiles {
            // Legal at runtime (tests use it to exercise the wall clock), but
            // in a config file it means the idle timeout was mistyped.
            if profile.max_runtime_seconds < profile.idle_timeout_seconds {
                problems.push((
                    format!("/agents/profiles/{}/max_runtime_seconds", escape(name)),
                    "runtime-covers-idle-timeout",
                    "is shorter than idle_timeout_seconds, so the idle timeout could never fire"
                        .to_owned(),
                ));
            }
            for (field, path) in profile.sandbox.relative_paths() {
                problems.push((
                    format!("/agents/profiles/{}/sandbox/{field}", escape(name)),
                    "absolute-path",
                    format!("`{}` must be an absolute path", path.display()),
                ));
            }
            let mut spec = profile.to_spec();
            spec.sandbox.mode = self.sandbox;
            match crate::agents::profile::LaunchProfile::from_spec(name, spec) {
                Ok(built) => {
                    profiles.insert(name.clone(), built);
                }
                Err(error) => problems.push(profile_problem(name, profile, &error)),
            }
        }
        let roles = &self.roles;
        let routing = RoleRouting::new(
            roles.implement.clone(),
            roles.fix.clone(),
            roles.update_epic.clone(),
            roles.review.as_ref(),
            review_rounds,
        )
        .map(|routing| routing.with_plan(roles.plan.clone()));
        let routing = match routing {
            Ok(routing) => routing,
            Err(error) => {
                problems.push((
                    "/agents/roles/review".to_owned(),
                    "round-coverage",
                    error.to_string(),
                ));
                return Err(problems);
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        AgentCatalog::new(profiles, routing).map_err(|error| vec![self.routing_problem(&error)])
    }

    fn routing_problem(&self, error: &RoutingError) -> PointedProblem {
        let RoutingError::UnknownProfile { role, profile } = error else {
            return (
                "/agents/roles".to_owned(),
                "round-coverage",
                error.to_string(),
            );
        };
        let pointer = match (role, &self.roles.review) {
            (AgentPhase::Review, Some(ReviewRole::ByRound(routes))) => routes
                .iter()
                .position(|route| &route.profile == profile)
                .map_or("/agents/roles/review".to_owned(), |index| {
                    format!("/agents/roles/review/{index}/profile")
                }),
            _ => format!("/agents/roles/{}", role.role_name()),
        };
        let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        (
            pointer,
            "profile-defined",
            format!("{error} in agents.profiles (defined: {known})"),
        )
    }
}

fn profile_problem(name: &str, profile: &AgentProfile, error: &ProfileError) -> PointedProblem {
    // A variable name may come from `env` or from `env_inherit`.
    let env_key = |variable: &String| {
        if profile.env_inherit.contains(variable) {
            "env_inherit"
        } else {
            "env"
        }
    };
    let (field, rule) = match error {
        ProfileError::EmptyCommand { .. } | ProfileError::MissingPlaceholderPath { .. } => {
            ("command", "command")
        }
        ProfileError::ZeroTimeout { field, .. } => (*field, "minimum"),
        ProfileError::BadUsagePattern { .. } => ("usage_pattern", "regex"),
        ProfileError::BadOutput { .. } => ("output", "output-format"),
        ProfileError::BadPrice { .. } => ("price", "price"),
        ProfileError::InvalidEnvName { name: variable, .. }
        | ProfileError::EnvSetAndRemoved { name: variable, .. } => (env_key(variable), "env-name"),
        ProfileError::CredentialEnvName { name: variable, .. } => {
            (env_key(variable), "no-controller-credential")
        }
    };
    (
        format!("/agents/profiles/{}/{field}", escape(name)),
        rule,
        error.to_string(),
    )
}

/// `name` as one JSON-pointer segment.
pub(crate) fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Pointers built here hold array indices only under `review`, and profile
/// names cannot be all digits there, so a plain join is exact.
pub(crate) fn pointer_to_key(pointer: &str) -> String {
    let mut key = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment.chars().all(|c| c.is_ascii_digit()) {
            key.push_str(&format!("[{segment}]"));
        } else {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    key
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use secrecy::ExposeSecret;
    use serde_json::json;

    fn settings(value: serde_json::Value) -> AgentSettings {
        serde_json::from_value(value).expect("valid agent settings")
    }

    #[test]
    fn profile_env_sets_with_strings_and_removes_with_false_or_null() {
        let profile: AgentProfile = serde_json::from_value(json!({
            "command": ["claude", "-p"],
            "env": {"MODEL": "big", "NOISE": false, "OTHER": null},
            "env_inherit": ["ANTHROPIC_API_KEY"]
        }))
        .expect("valid");
        assert!(matches!(&profile.env["MODEL"], EnvChange::Set(v) if v.expose_secret() == "big"));
        assert!(matches!(profile.env["NOISE"], EnvChange::Remove));
        assert!(matches!(profile.env["OTHER"], EnvChange::Remove));
        assert_eq!(profile.idle_timeout_seconds, 600);
        assert_eq!(profile.max_runtime_seconds, 3600);
        let spec = profile.to_spec();
        assert_eq!(spec.env_remove, ["NOISE", "OTHER"]);
        assert_eq!(spec.env_inherit, ["ANTHROPIC_API_KEY"]);
        assert_eq!(spec.env["MODEL"].expose_secret(), "big");
        assert!(
            serde_json::from_value::<AgentProfile>(json!({"command": ["x"], "env": {"A": true}}))
                .is_err()
        );
    }

    #[test]
    fn env_values_never_show_in_debug_or_serialised_settings() {
        let agents = settings(json!({
            "profiles": {"p": {"command": ["x"], "env": {"VENDOR_KEY": "sk-canary-value-0001"}}}
        }));
        assert!(!format!("{agents:?}").contains("canary"));
        assert!(!serde_json::to_string(&agents).unwrap().contains("canary"));
    }

    #[test]
    fn the_catalog_routes_every_role_to_its_checked_profile() {
        let agents = settings(json!({
            "profiles": {"a": {"command": ["a"]}, "b": {"command": ["b"], "usage_pattern": "t=(\\d+)"}},
            "roles": {"implement": "a", "fix": "a", "update_epic": "b",
                      "review": [{"rounds": "1", "profile": "a"}, {"rounds": "2+", "profile": "b"}]}
        }));
        let catalog = agents.catalog(8).expect("valid catalog");
        assert_eq!(
            catalog.profile_for(AgentPhase::Review, 1).unwrap().name,
            "a"
        );
        assert_eq!(
            catalog.profile_for(AgentPhase::Review, 3).unwrap().name,
            "b"
        );
        assert_eq!(
            catalog
                .profile_for(AgentPhase::UpdateEpic, 0)
                .unwrap()
                .parse_tokens("t=5"),
            Some(5)
        );
    }

    #[test]
    fn profile_refusals_are_keyed_by_profile_and_field() {
        let agents = settings(json!({
            "profiles": {
                "slow": {"command": ["x"], "idle_timeout_seconds": 700, "max_runtime_seconds": 600},
                "leaky": {"command": ["x"], "env": {"GITHUB_TOKEN": "v"}}
            }
        }));
        let problems = agents.catalog(8).expect_err("refused");
        let keys: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.key.as_str(), p.rule.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("agents.profiles.leaky.env", "no-controller-credential"),
                (
                    "agents.profiles.slow.max_runtime_seconds",
                    "runtime-covers-idle-timeout"
                ),
            ]
        );
    }

    #[test]
    fn pointers_become_dotted_keys_with_indices() {
        assert_eq!(
            pointer_to_key("/agents/roles/review/1/profile"),
            "agents.roles.review[1].profile"
        );
        assert_eq!(
            pointer_to_key("/agents/profiles/a~1b/env"),
            "agents.profiles.a/b.env"
        );
    }
}
