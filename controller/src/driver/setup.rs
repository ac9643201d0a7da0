//! Building a [`Driver`] from the configuration, for `autoforge serve`.
//!
//! `serve` calls [`driver_from_config`] with the journal it opened and the
//! GitHub access it already connected (so the App or token identity is read
//! once per process), then runs the driver on its own task.
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

use super::repositories::{RepositoryMap, RepositorySource};
use super::{AgentRuntime, Driver, DriverConfig, GitCredential, GitRemote};
use crate::agents::prompt::PromptSet;
use crate::config::{Config, DatabaseSource, GithubAuth};
use crate::github::{GitHubApi, RepoName};
use crate::intake::GitHubAccess;
use crate::redact::Redactor;
use crate::validation::ValidationLimits;
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
pub(super) async fn git_remote(api: &GitHubApi, repo: &RepoName) -> anyhow::Result<GitRemote> {
    let path = format!("/repos/{}/{}", repo.owner(), repo.name());
    let read: CloneUrl = api
        .get_json(&path)
        .await
        .with_context(|| format!("cannot read the clone URL of {repo} (GET {path})"))?;
    Ok(GitRemote {
        url: read.clone_url,
        credential: GitCredential::FromApi {
            api: api.clone(),
            repo: repo.clone(),
        },
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
    let validation_commands = settings.validation.commands.clone();
    Ok(Some(AgentRuntime {
        workspaces,
        catalog,
        prompts,
        validation_commands,
        validation_limits: ValidationLimits {
            kill_grace: KILL_GRACE,
            sandbox: settings.validation.sandbox.policy(settings.agents.sandbox),
            ..ValidationLimits::new(settings.validation.timeout())
        },
        redactor: controller_redactor(config),
        kill_grace: KILL_GRACE,
        heartbeat_every: settings.agents.heartbeat(),
        status_refresh_every: settings.agents.status_refresh(),
        relaunch_backoff: {
            let (base, max) = settings.agents.relaunch_backoff();
            super::RelaunchBackoff { base, max }
        },
        operator_policy: (&settings.operators).into(),
    }))
}

/// A redactor that knows the controller's own secrets, so none of them can
/// reach a published body or a stored tail even if an agent finds one.
/// Installation tokens rotate and are caught by their `ghs_` shape instead.
pub(crate) fn controller_redactor(config: &Config) -> Redactor {
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

/// The driver for every repository `serve` watches through `access`.
pub async fn driver_from_config(
    config: &Config,
    access: &GitHubAccess,
    journal: Journal,
) -> anyhow::Result<Driver> {
    let source = RepositorySource {
        access: access.clone(),
        login: access.own_login.clone(),
        html_base: crate::publish::html_base(&config.settings.github.api_url),
    };
    let repositories = RepositoryMap::load(source).await?;
    let worker = format!("driver-{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let driver_config = DriverConfig {
        settings: crate::machine::RunSettings {
            // Only a GitHub App can write check runs.
            check_run: access.is_app(),
            ..config.settings.run_settings()
        },
        protected_paths: config.settings.merge.protected_paths.clone(),
        lease_ttl: config.settings.driver.lease_ttl(),
        concurrency: config.settings.driver.concurrency,
        epic_label: config.settings.labels.epic.clone(),
        // Webhooks wake a waiting run; this unprompted re-read is the
        // backstop, from one poll interval up to the configured cap.
        idle_recheck: config.settings.poll.interval(),
        idle_recheck_max: config.settings.poll.backstop_max(),
        ..DriverConfig::new(worker)
    };
    let driver = Driver::over(driver_config, journal, repositories);
    Ok(match agent_runtime_from_config(config)? {
        Some(runtime) => driver.with_agents(runtime),
        None => driver,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;

    use super::*;
    use crate::agents::prompt::TemplateId;
    use crate::config::{DATABASE_URL_VAR, Environment, load};
    use crate::validation::ValidationCommand;

    const TOKEN: &str = "ghp_setupTestToken0123456789abcdefABCD";
    const WEBHOOK: &str = "setup-test-webhook-secret";
    const DATABASE: &str = "postgres://driver:hunter2-setup@db.invalid/autoforge";

    fn config_from(dir: &Path, toml: &str) -> Config {
        let file = dir.join("autoforge.toml");
        std::fs::write(&file, toml).unwrap();
        let env = Environment::from_pairs([
            ("HOME", dir.to_str().unwrap()),
            ("AUTOFORGE_GITHUB_TOKEN", TOKEN),
            ("AUTOFORGE_WEBHOOK_SECRET", WEBHOOK),
            (DATABASE_URL_VAR, DATABASE),
        ]);
        load(Some(&file), Some(&dir.join("state")), &env).expect("the config loads")
    }

    const IMPLEMENTER: &str = r#"
[agents.profiles.coder]
command = ["/bin/true"]
idle_timeout_seconds = 30
max_runtime_seconds = 60

[agents.roles]
implement = "coder"

[validation]
commands = ["make check", ["cargo", "test", "--all"]]
timeout_seconds = 42
"#;

    #[test]
    fn without_an_implement_role_there_is_no_agent_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_from(dir.path(), "[validation]\ncommands = [\"true\"]\n");
        assert!(agent_runtime_from_config(&config).unwrap().is_none());
    }

    #[test]
    fn an_implement_role_builds_the_runtime_with_validation_in_configured_order() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_from(dir.path(), IMPLEMENTER);
        let runtime = agent_runtime_from_config(&config)
            .unwrap()
            .expect("a runtime");
        assert_eq!(
            runtime.validation_commands,
            vec![
                ValidationCommand::Shell("make check".into()),
                ValidationCommand::Argv(vec!["cargo".into(), "test".into(), "--all".into()]),
            ]
        );
        assert_eq!(runtime.validation_limits.timeout, Duration::from_secs(42));
        assert_eq!(runtime.validation_limits.kill_grace, KILL_GRACE);
        assert!(
            dir.path().join("state").is_dir(),
            "workspaces live under the state dir"
        );
    }

    #[test]
    fn the_runtime_redactor_hides_the_token_webhook_secret_and_database_url() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_from(dir.path(), IMPLEMENTER);
        let runtime = agent_runtime_from_config(&config).unwrap().unwrap();
        for secret in [TOKEN, WEBHOOK, DATABASE] {
            let text = format!("the agent printed {secret} here");
            let redacted = runtime.redactor.redact(&text);
            assert!(!redacted.contains(secret), "{secret} leaked: {redacted}");
        }
    }

    #[test]
    fn a_prompt_override_with_wrong_placeholders_refuses_to_build_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let prompts = dir.path().join("prompts");
        std::fs::create_dir(&prompts).unwrap();
        std::fs::write(
            prompts.join(TemplateId::ALL[0].file_name()),
            "only {{not_a_placeholder}}\n",
        )
        .unwrap();
        let config = config_from(
            dir.path(),
            &format!("[prompts]\ndir = \"prompts\"\n{IMPLEMENTER}"),
        );
        let error = agent_runtime_from_config(&config)
            .err()
            .expect("the override is refused");
        assert!(
            format!("{error:#}").contains("prompt templates"),
            "{error:#}"
        );
    }

    #[tokio::test]
    async fn a_fixed_credential_is_handed_out_and_an_anonymous_remote_has_none() {
        use secrecy::ExposeSecret;
        let fixed = GitCredential::Fixed(SecretString::from(TOKEN));
        let current = fixed.current().await.unwrap().expect("a credential");
        assert_eq!(current.expose_secret(), TOKEN);
        assert!(GitCredential::Anonymous.current().await.unwrap().is_none());
    }
}
