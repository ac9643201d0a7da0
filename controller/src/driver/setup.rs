//! Building a [`Driver`] from the configuration, for `autoforge serve`.
//!
//! `serve` calls [`run_from_config`] on its own task with the journal it
//! opened and its shutdown `watch`; the call returns once the driver loop
//! stopped.
//!
//! Each repository gets a [`GitRemote`] at the `clone_url` the API reports
//! (so GHES and fakehub work unchanged) with a credential read from the
//! GitHub handle right before each fetch or push. Agent launches and
//! validation are wired only when `agents.roles.implement` is configured;
//! without it runs park at their first launch, as before.

use std::time::Duration;

use anyhow::Context;
use autoforge_journal::Journal;
use secrecy::SecretString;
use tokio::sync::watch;

use super::convert::{html_base, run_settings};
use super::{AgentRuntime, Driver, DriverConfig, GitCredential, GitRemote, RepositoryAccess};
use crate::agents::prompt::PromptSet;
use crate::config::{Config, DatabaseSource, GithubAuth, ValidationCommand as ConfiguredCommand};
use crate::github::{Account, GitHubApi, RepoName};
use crate::redact::Redactor;
use crate::serve::GitHubAccess;
use crate::validation::{ValidationCommand, ValidationLimits};
use crate::workspace::Workspaces;

/// Time between SIGTERM and SIGKILL when an agent's or a validation
/// command's process group is ended.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The part of `GET /repos/{owner}/{repo}` the driver needs.
#[derive(serde::Deserialize)]
struct CloneUrl {
    clone_url: String,
}

/// The repository's git remote, with a credential fetched per use.
async fn git_remote(api: &GitHubApi, repo: &RepoName) -> anyhow::Result<GitRemote> {
    let path = format!("/repos/{}/{}", repo.owner(), repo.name());
    let read: CloneUrl = api
        .get_json(&path)
        .await
        .with_context(|| format!("cannot read the clone URL of {repo} (GET {path})"))?;
    Ok(GitRemote {
        url: read.clone_url,
        credential: GitCredential::FromApi(api.clone()),
    })
}

/// Launches and validation from `agents`, `prompts` and `validation`;
/// `None` when no implement role is configured.
pub fn agent_runtime_from_config(config: &Config) -> anyhow::Result<Option<AgentRuntime>> {
    let settings = &config.settings;
    if settings.agents.roles.implement.is_none() {
        return Ok(None);
    }
    let catalog = settings
        .agents
        .catalog(settings.limits.review_rounds)
        .map_err(|problems| {
            let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
            anyhow::anyhow!("the agent configuration is invalid: {}", listed.join("; "))
        })?;
    let prompts = PromptSet::load(settings.prompts.dir.as_deref())
        .context("cannot load the prompt templates")?;
    let workspaces = Workspaces::open(&config.state_dir).with_context(|| {
        format!(
            "cannot open the workspaces under {}",
            config.state_dir.display()
        )
    })?;
    let validation_commands = settings
        .validation
        .commands
        .iter()
        .map(|command| match command {
            ConfiguredCommand::Shell(line) => ValidationCommand::Shell(line.clone()),
            ConfiguredCommand::Argv(argv) => ValidationCommand::Argv(argv.clone()),
        })
        .collect();
    Ok(Some(AgentRuntime {
        workspaces,
        catalog,
        prompts,
        validation_commands,
        validation_limits: ValidationLimits {
            kill_grace: KILL_GRACE,
            ..ValidationLimits::new(settings.validation.timeout())
        },
        redactor: controller_redactor(config),
        kill_grace: KILL_GRACE,
    }))
}

/// A redactor that knows the controller's own secrets, so none of them can
/// reach a published body or a stored tail even if an agent finds one.
/// Installation tokens rotate and are caught by their `ghs_` shape instead.
fn controller_redactor(config: &Config) -> Redactor {
    let mut secrets: Vec<SecretString> = Vec::new();
    match &config.github_auth {
        GithubAuth::App { private_key, .. } => secrets.push(private_key.clone()),
        GithubAuth::Token(token) => secrets.push(token.clone()),
        GithubAuth::None => {}
    }
    secrets.extend(config.webhook_secret.clone());
    if let DatabaseSource::External(url) = &config.database {
        secrets.push(url.clone());
    }
    let mut redactor = Redactor::new();
    for secret in secrets {
        redactor.add_secret(secret);
    }
    redactor
}

/// The driver for every repository `serve` watches.
pub async fn driver_from_config(config: &Config, journal: Journal) -> anyhow::Result<Driver> {
    let access = GitHubAccess::connect(config).await?;
    let login = if access.is_app() {
        format!("{}[bot]", access.app_slug)
    } else {
        let user: Account = access
            .client
            .installation(0)?
            .get_json("/user")
            .await
            .context("cannot read the token's user (GET /user)")?;
        user.login
    };
    let html = html_base(&config.settings.github.api_url);
    let mut repositories = Vec::new();
    for watched in access.watched_repositories().await? {
        let git = git_remote(&watched.api, &watched.name).await?;
        repositories.push(RepositoryAccess {
            api: watched.api,
            repo: watched.name,
            login: login.clone(),
            html_base: html.clone(),
            merge_method: "merge".to_owned(),
            git: Some(git),
        });
    }
    let worker = format!("driver-{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let driver_config = DriverConfig {
        settings: run_settings(&config.settings),
        protected_paths: config.settings.merge.protected_paths.clone(),
        ..DriverConfig::new(worker)
    };
    let driver = Driver::new(driver_config, journal, repositories);
    Ok(match agent_runtime_from_config(config)? {
        Some(runtime) => driver.with_agents(runtime),
        None => driver,
    })
}

/// Runs the driver until `shutdown` turns true.
pub async fn run_from_config(
    config: &Config,
    journal: Journal,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let driver = driver_from_config(config, journal).await?;
    driver.run(shutdown).await;
    Ok(())
}
