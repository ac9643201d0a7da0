//! The checks of this host and of the configuration: the configuration
//! loads, git runs, bubblewrap can create its namespaces, every profile's
//! program is found, the prompt templates resolve, and the database answers
//! with its migrations current. The database is read through `journal/`
//! only, and never migrated here: `autoforge migrate` does that.

use std::process::Stdio;
use std::time::Duration;

use super::Check;
use crate::agents::prompt::PromptSet;
use crate::agents::supervisor::view::resolve_program;
use crate::config::{Config, ConfigError, DatabaseSource, Origin};
use crate::database::OpenDatabase;
use crate::sandbox::SandboxMode;

/// How long `git --version` may take before it counts as broken.
const GIT_DEADLINE: Duration = Duration::from_secs(20);

pub fn config_check(config: &Result<Config, ConfigError>) -> Check {
    match config {
        Ok(config) => {
            let source = match &config.origin {
                Origin::File(path) => path.display().to_string(),
                Origin::EnvironmentOnly => "no config file, environment only".to_owned(),
            };
            let warnings = match config.warnings.len() {
                0 => String::new(),
                n => format!(" ({n} warning(s): `autoforge config check` lists them)"),
            };
            Check::ok("config", format!("valid: {source}{warnings}"))
        }
        Err(error) => Check::fail(
            "config",
            // One line per check: the problems follow each other.
            error
                .to_string()
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" "),
            "fix each problem listed; `autoforge config check` shows them again",
        ),
    }
}

pub async fn git_check() -> Check {
    let run = tokio::process::Command::new("git")
        .arg("--version")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(GIT_DEADLINE, run).await {
        Ok(Ok(output)) if output.status.success() => Check::ok(
            "git",
            String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        ),
        Ok(Ok(output)) => Check::fail(
            "git",
            format!("`git --version` exited with {}", output.status),
            "reinstall git",
        ),
        Ok(Err(error)) => Check::fail(
            "git",
            format!("cannot run git: {error}"),
            "install git (Debian/Ubuntu: `apt-get install git`) and put it on PATH",
        ),
        Err(_) => Check::fail(
            "git",
            "`git --version` did not finish",
            "check the git installation",
        ),
    }
}

pub async fn sandbox_check(mode: SandboxMode) -> Check {
    match mode {
        SandboxMode::Off => Check::ok(
            "sandbox",
            "agents.sandbox = \"off\": agents run WITHOUT isolation, as this user",
        ),
        SandboxMode::Bubblewrap => match crate::sandbox::probe().await {
            Ok(()) => Check::ok("sandbox", "bubblewrap creates its namespaces"),
            // The probe's message already carries the fix.
            Err(error) => Check::fail("sandbox", error.to_string(), "see above; docs/security.md"),
        },
    }
}

/// One line per profile: its program is found where a launch would look.
pub fn agent_checks(config: &Config) -> Vec<Check> {
    let profiles = &config.settings.agents.profiles;
    if profiles.is_empty() {
        return vec![Check::fail(
            "agents",
            "no agent profile is configured",
            "add [agents.profiles.NAME] and [agents.roles] (see autoforge.example.toml)",
        )];
    }
    let path = std::env::var_os("PATH");
    profiles
        .iter()
        .map(|(name, profile)| {
            let name = format!("agent:{name}");
            let Some(program) = profile.command.first() else {
                return Check::fail(name, "the command is empty", "name a program");
            };
            // The worktree only matters for a relative path with a
            // directory, which a real run resolves inside its worktree.
            let here = std::path::Path::new(".");
            match resolve_program(program.as_ref(), here, path.as_deref()) {
                Ok(found) => Check::ok(name, format!("`{}` found", found.display())),
                Err(_) => Check::fail(
                    name,
                    format!("`{program}` is not on PATH or does not exist"),
                    "install the CLI, or give its absolute path as the command's first word",
                ),
            }
        })
        .collect()
}

pub fn prompts_check(config: &Config) -> Check {
    let dir = config.settings.prompts.dir.as_deref();
    match PromptSet::load(dir) {
        Ok(_) => Check::ok(
            "prompts",
            match dir {
                Some(dir) => format!("templates resolve, overrides from {}", dir.display()),
                None => "the built-in templates".to_owned(),
            },
        ),
        Err(error) => Check::fail(
            "prompts",
            error.to_string(),
            "fix the override template in prompts.dir, or remove it to use the built-in one",
        ),
    }
}

/// Connects, reads whether every migration is applied, disconnects. A
/// managed cluster that was never created is reported, not created.
pub async fn database_check(config: &Config) -> Check {
    if let DatabaseSource::Managed { dir } = &config.database
        && !dir.exists()
    {
        return Check::fail(
            "database",
            format!(
                "the managed PostgreSQL in {} does not exist yet",
                dir.display()
            ),
            "run `autoforge migrate` (or set DATABASE_URL to use an existing server)",
        );
    }
    let database = match OpenDatabase::open(&config.database, 1).await {
        Ok(database) => database,
        Err(error) => {
            return Check::fail(
                "database",
                format!("{error:#}"),
                "check DATABASE_URL / database.url and that the server accepts connections",
            );
        }
    };
    let current = database.journal.migrations_current().await;
    database.release().await;
    match current {
        Ok(true) => Check::ok("database", "reachable; migrations are current"),
        Ok(false) => Check::fail(
            "database",
            "reachable, but migrations are pending",
            "run `autoforge migrate`",
        ),
        Err(error) => Check::fail(
            "database",
            format!("reachable, but the migrations cannot be read: {error}"),
            "check the database user's rights on the schema",
        ),
    }
}
