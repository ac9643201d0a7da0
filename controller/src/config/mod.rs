//! Configuration: `autoforge.toml`, environment overrides, schema validation, secrets.
//!
//! Loading is a pipeline, each step reporting every problem it finds:
//! parse TOML → convert to JSON → apply `AUTOFORGE_<SECTION>_<KEY>` overrides →
//! validate against the embedded schema → check values the schema cannot
//! (addresses, URLs, regexes, round ranges) → deserialise into typed
//! [`Settings`] → cross-check sections → resolve the state directory and the
//! secrets. No file at all is fine: the environment alone can configure
//! autoforge.
//!
//! To add a key: describe it (with its `default`) in
//! `schemas/config.schema.json` and add the field with the same default to
//! the typed struct in `settings.rs`. Its `AUTOFORGE_*` variable follows from
//! the schema, and tests fail if the two defaults or bounds disagree.

mod agents;
mod checks;
mod env;
mod problem;
mod repo;
mod sandbox;
mod schema;
mod secrets;
mod settings;

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde_json::Value;

pub use crate::agents::profile::{ReviewRole, ReviewRoute, RoundRange, UsagePattern};
pub use crate::commands::Permission;
pub use agents::{AgentProfile, AgentRoles, AgentSettings, EnvChange};
pub use env::{
    CONFIG_FILE_VAR, DATABASE_URL_VAR, ENV_PREFIX, Environment, GITHUB_PRIVATE_KEY_FILE_VAR,
    GITHUB_TOKEN_FILE_VAR, GITHUB_TOKEN_VAR, WEBHOOK_SECRET_FILE_VAR, WEBHOOK_SECRET_VAR,
};
pub use problem::{ConfigError, Origin, Problem};
pub use repo::{
    MAX_REPOSITORY_SETTINGS_BYTES, REPOSITORY_SCHEMA_TEXT, REPOSITORY_SETTINGS_PATH,
    RepositoryAgents, RepositoryLabels, RepositorySettings, RepositorySettingsError,
    RepositoryValidation, parse_repository_settings,
};
pub use sandbox::SandboxTable;
pub use schema::{SCHEMA_TEXT, schema};
pub use secrets::{DatabaseSource, GithubAuth};
pub use settings::{
    DatabaseSettings, DriverSettings, EpicSettings, GithubSettings, LabelSettings, Limits,
    LogFormat, LoggingSettings, MergeMode, MergeSettings, OperatorSettings, PollSettings,
    PromptSettings, ServerSettings, Settings, ValidationCommand, ValidationSettings,
    WebhookSettings,
};

/// Name of the config file looked for in the working directory.
pub const DEFAULT_FILE_NAME: &str = "autoforge.toml";

/// The loaded configuration. Its `Debug` output shows `[REDACTED]` in place of
/// every secret.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file read, or none.
    pub origin: Origin,
    /// Everything the file and the `AUTOFORGE_*` variables set, defaults filled
    /// in. `prompts.dir` is already resolved against the file's directory.
    pub settings: Settings,
    /// Resolved: `--state-dir`, else `state_dir` (env or file), else the XDG default.
    pub state_dir: PathBuf,
    pub database: DatabaseSource,
    pub github_auth: GithubAuth,
    /// From `AUTOFORGE_WEBHOOK_SECRET` or `AUTOFORGE_WEBHOOK_SECRET_FILE`.
    pub webhook_secret: Option<SecretString>,
    /// From `AUTOFORGE_DASHBOARD_TOKEN` or `AUTOFORGE_DASHBOARD_TOKEN_FILE`.
    pub dashboard_token: Option<SecretString>,
    /// Valid but suspicious things worth logging once logging is set up.
    pub warnings: Vec<String>,
}

impl Config {
    /// The webhook secret, for commands that serve webhooks.
    pub fn require_webhook_secret(&self) -> Result<&SecretString, ConfigError> {
        self.webhook_secret.as_ref().ok_or_else(|| ConfigError::Invalid {
            origin: self.origin.clone(),
            problems: vec![Problem::new(
                WEBHOOK_SECRET_VAR,
                "required",
                format!("the webhook secret is required: set {WEBHOOK_SECRET_VAR} or {WEBHOOK_SECRET_FILE_VAR}"),
            )],
        })
    }
}

/// The config file to read: `flag` (from `--config`), else `$AUTOFORGE_CONFIG`,
/// else `autoforge.toml` in `cwd` if it exists, else none.
pub fn locate_file(flag: Option<&Path>, env: &Environment, cwd: &Path) -> Option<PathBuf> {
    if let Some(path) = flag {
        return Some(path.to_path_buf());
    }
    if let Some(path) = env.non_empty(CONFIG_FILE_VAR) {
        return Some(PathBuf::from(path));
    }
    let default = cwd.join(DEFAULT_FILE_NAME);
    default.is_file().then_some(default)
}

/// Loads the configuration from `file` (if any) and `env`. `state_dir`
/// (from `--state-dir`) wins over every other source of the state directory.
pub fn load(
    file: Option<&Path>,
    state_dir: Option<&Path>,
    env: &Environment,
) -> Result<Config, ConfigError> {
    let (origin, mut doc) = match file {
        Some(path) => (Origin::File(path.to_path_buf()), read_document(path)?),
        None => (
            Origin::EnvironmentOnly,
            Value::Object(serde_json::Map::new()),
        ),
    };
    let invalid = |problems: Vec<Problem>| ConfigError::Invalid {
        origin: origin.clone(),
        problems,
    };

    let provenance = env::apply_overrides(&mut doc, env);
    let mut settings = typed_settings(doc, &provenance, env).map_err(invalid)?;
    let mut problems = checks::check_cross_references(&settings, &provenance);

    let base_dir = file.and_then(Path::parent);
    let from_file = |pointer: &str| file.is_some() && !provenance.contains(pointer);
    if from_file("/prompts/dir") {
        settings.prompts.dir = settings
            .prompts
            .dir
            .take()
            .map(|dir| relative_to(base_dir, dir));
    }
    let state_dir = match resolve_state_dir(
        state_dir,
        &settings,
        from_file("/state_dir").then_some(base_dir).flatten(),
        env,
    ) {
        Ok(dir) => dir,
        Err(problem) => {
            problems.push(problem);
            PathBuf::new()
        }
    };
    problems.extend(exposure_problems(&settings, &state_dir, file, env));
    let url_var = provenance.var_for("/database/url");
    let resolved = secrets::resolve(&settings, &state_dir, env, url_var, &mut problems);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }

    let warnings = load_warnings(&settings, &resolved.github_auth, env);
    Ok(Config {
        origin,
        settings,
        state_dir,
        database: resolved.database,
        github_auth: resolved.github_auth,
        webhook_secret: resolved.webhook_secret,
        dashboard_token: resolved.dashboard_token,
        warnings,
    })
}

/// The document, with the environment's overrides applied, checked against
/// the schema and the value rules (every problem at once) and then typed.
fn typed_settings(
    doc: Value,
    provenance: &env::Provenance,
    env: &Environment,
) -> Result<Settings, Vec<Problem>> {
    // Value checks look only at values of the right JSON type, so they can
    // run beside the schema and every problem is reported in one go.
    let mut problems = env::unknown_variable_problems(env);
    problems.extend(schema::check(&doc, provenance));
    problems.extend(checks::check_values(&doc, provenance));
    if !problems.is_empty() {
        return Err(problems);
    }
    // The schema and the value checks accept only what the types can hold, so
    // a failure here is a disagreement between schema and code, not bad input.
    serde_json::from_value(doc).map_err(|error| {
        vec![Problem::new(
            "",
            "typed-settings",
            format!("schema and settings types disagree (please report): {error}"),
        )]
    })
}

/// What a valid configuration still does that its author may not mean.
fn load_warnings(settings: &Settings, auth: &GithubAuth, env: &Environment) -> Vec<String> {
    let mut warnings = env::unknown_variable_warnings(env);
    warnings.extend(checks::warnings(settings));
    if matches!(auth, GithubAuth::Token(_)) && settings.github.repositories.is_empty() {
        warnings
            .push("github.repositories is empty: with a token, no repository is served".to_owned());
    }
    warnings
}

/// Extra sandbox binds that would show the state directory, the config file
/// or a secret file (see [`sandbox::exposure_problems`]).
fn exposure_problems(
    settings: &Settings,
    state_dir: &Path,
    file: Option<&Path>,
    env: &Environment,
) -> Vec<Problem> {
    let mut protected = vec![sandbox::Protected {
        what: "the state directory".to_owned(),
        path: state_dir.to_owned(),
    }];
    if let Some(file) = file {
        protected.push(sandbox::Protected {
            what: "the config file".to_owned(),
            path: file.to_owned(),
        });
    }
    for var in [
        env::WEBHOOK_SECRET_FILE_VAR,
        env::GITHUB_TOKEN_FILE_VAR,
        env::GITHUB_PRIVATE_KEY_FILE_VAR,
        env::DASHBOARD_TOKEN_FILE_VAR,
    ] {
        if let Some(path) = env.non_empty(var) {
            protected.push(sandbox::Protected {
                what: format!("the file of {var}"),
                path: PathBuf::from(path),
            });
        }
    }
    // An empty state directory means it could not be resolved (reported).
    protected.retain(|p| !p.path.as_os_str().is_empty());
    let mut tables = vec![(
        "/validation/sandbox".to_owned(),
        &settings.validation.sandbox,
    )];
    for (name, profile) in &settings.agents.profiles {
        let pointer = format!("/agents/profiles/{}/sandbox", agents::escape(name));
        tables.push((pointer, &profile.sandbox));
    }
    tables
        .into_iter()
        .flat_map(|(pointer, table)| sandbox::exposure_problems(&pointer, table, &protected))
        .map(|(pointer, rule, message)| {
            Problem::new(agents::pointer_to_key(&pointer), rule, message)
        })
        .collect()
}

fn read_document(path: &Path) -> Result<Value, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start).min(text.len());
        let before = text.get(..offset).unwrap_or_default();
        ConfigError::Syntax {
            path: path.to_path_buf(),
            line: before.matches('\n').count() + 1,
            column: before
                .rsplit('\n')
                .next()
                .map_or(0, |line| line.chars().count())
                + 1,
            message: error.message().trim().to_owned(),
        }
    })?;
    serde_json::to_value(table).map_err(|error| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: 1,
        column: 1,
        message: format!("cannot represent the document as JSON: {error}"),
    })
}

fn relative_to(base: Option<&Path>, path: PathBuf) -> PathBuf {
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

fn resolve_state_dir(
    flag: Option<&Path>,
    settings: &Settings,
    file_dir: Option<&Path>,
    env: &Environment,
) -> Result<PathBuf, Problem> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = &settings.state_dir {
        return Ok(relative_to(file_dir, dir.clone()));
    }
    // The XDG spec says relative values are to be ignored.
    if let Some(xdg) = env
        .non_empty("XDG_STATE_HOME")
        .map(Path::new)
        .filter(|p| p.is_absolute())
    {
        return Ok(xdg.join("autoforge"));
    }
    if let Some(home) = env.non_empty("HOME") {
        return Ok(Path::new(home).join(".local/state/autoforge"));
    }
    Err(Problem::new(
        "state_dir",
        "required",
        "cannot pick a state directory: neither XDG_STATE_HOME nor HOME is set; set state_dir, AUTOFORGE_STATE_DIR or --state-dir",
    ))
}

#[cfg(test)]
mod tests;
