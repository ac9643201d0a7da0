//! The GitHub reads `serve` needs, bound to the configuration: which handle
//! to use for a repository, the App's own slug, the operator check and the
//! identity of a trigger labelling.

use crate::commands::{Actor, OperatorDecision, OperatorPolicy};
use crate::config::{Config, GithubAuth};
use crate::github::{Account, AppRef, GitHubApi, GitHubAuth, GitHubClient, IssueEvent, RepoName};
use anyhow::Context;
use autoforge_journal::IssueNumber;

/// Read access to GitHub plus what the operator decision needs.
#[derive(Clone)]
pub struct GitHubAccess {
    pub client: GitHubClient,
    /// The App's slug; empty with a token, which has no App identity.
    pub app_slug: String,
    /// The controller's own login: `<slug>[bot]` for an App, the token's
    /// user with a personal token. Its comments are never a person's: with
    /// a token it is a real account with, usually, admin permission, so a
    /// `/autoforge merge` line the controller posted must not read back as
    /// an operator's approval.
    pub own_login: String,
    pub policy: OperatorPolicy,
    pub trigger_label: String,
    /// `github.repositories`, used with a token (an App lists its installations).
    pub configured_repositories: Vec<String>,
    /// `github.allowed_owners`: with an App, the owners whose installations
    /// are served; empty serves them all.
    pub allowed_owners: Vec<String>,
    is_app: bool,
}

/// An installation GitHub reports as suspended: the App can neither read
/// nor write its repositories (GitHub answers 403), so their runs wait for
/// it to be unsuspended rather than stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    pub installation_id: u64,
    /// The account the installation belongs to: the owner of every one of
    /// its repositories.
    pub owner: String,
    /// `suspended_at` as GitHub wrote it.
    pub since: String,
    /// `suspended_by`'s login, when GitHub names one.
    pub by: Option<String>,
}

impl Suspension {
    /// Whether `repository` (`owner/name`) belongs to this installation.
    pub fn covers(&self, repository: &str) -> bool {
        repository
            .split_once('/')
            .is_some_and(|(owner, _)| owner.eq_ignore_ascii_case(&self.owner))
    }

    /// What a waiting run records and the logs say.
    pub fn reason(&self) -> String {
        let by = self
            .by
            .as_deref()
            .map(|login| format!(" by {login}"))
            .unwrap_or_default();
        format!(
            "the App's installation on {} was suspended{by} at {}; the run waits until it is unsuspended",
            self.owner, self.since
        )
    }
}

/// What GitHub says is served right now: the repositories to watch and the
/// installations that are suspended.
#[derive(Clone, Default)]
pub struct Served {
    pub repositories: Vec<WatchedRepository>,
    pub suspended: Vec<Suspension>,
}

/// One repository the poller watches and the handle that reads it.
#[derive(Clone)]
pub struct WatchedRepository {
    pub name: RepoName,
    pub full_name: String,
    pub api: GitHubApi,
}

impl GitHubAccess {
    /// Builds the client from the configuration and learns the App's slug.
    pub async fn connect(config: &Config) -> anyhow::Result<GitHubAccess> {
        let (auth, is_app) = match &config.github_auth {
            GithubAuth::App {
                app_id,
                private_key,
            } => (
                GitHubAuth::App {
                    app_id: *app_id,
                    private_key_pem: private_key.clone(),
                },
                true,
            ),
            GithubAuth::Token(token) => (GitHubAuth::Token(token.clone()), false),
            GithubAuth::None => anyhow::bail!(
                "GitHub credentials are required: set github.app_id and \
                 AUTOFORGE_GITHUB_PRIVATE_KEY_FILE, or AUTOFORGE_GITHUB_TOKEN"
            ),
        };
        let client = GitHubClient::new(&config.settings.github.api_url, auth)
            .context("cannot set up the GitHub client")?;
        let (app_slug, own_login) = if is_app {
            let app: AppRef = client
                .app()?
                .get_json("/app")
                .await
                .context("cannot read the GitHub App (GET /app)")?;
            let slug = app.slug.unwrap_or_default();
            let login = format!("{slug}[bot]");
            (slug, login)
        } else {
            let user: Account = client
                .installation(0)?
                .get_json("/user")
                .await
                .context("cannot read the token's user (GET /user)")?;
            (String::new(), user.login)
        };
        Ok(GitHubAccess {
            client,
            app_slug,
            own_login,
            policy: OperatorPolicy {
                min_permission: config.settings.operators.min_permission,
                allow: config.settings.operators.allow.clone(),
            },
            trigger_label: config.settings.labels.trigger.clone(),
            configured_repositories: config.settings.github.repositories.clone(),
            allowed_owners: config.settings.github.allowed_owners.clone(),
            is_app,
        })
    }

    /// Assembles access from parts, for callers that built the client
    /// themselves (tests, tools). `app_slug` must be the App's own slug; the
    /// own login is `<slug>[bot]` for an App and unknown with a token until
    /// [`Self::with_own_login`] names it.
    pub fn from_parts(
        client: GitHubClient,
        app_slug: String,
        policy: OperatorPolicy,
        trigger_label: String,
        configured_repositories: Vec<String>,
        is_app: bool,
    ) -> GitHubAccess {
        let own_login = if is_app {
            format!("{app_slug}[bot]")
        } else {
            String::new()
        };
        GitHubAccess {
            client,
            app_slug,
            own_login,
            policy,
            trigger_label,
            configured_repositories,
            allowed_owners: Vec::new(),
            is_app,
        }
    }

    /// Serves only installations of these owners (see `allowed_owners`).
    pub fn with_allowed_owners(mut self, owners: Vec<String>) -> GitHubAccess {
        self.allowed_owners = owners;
        self
    }

    /// Whether runs are served for repositories of `owner`: always with a
    /// token (its repositories are listed one by one), and with an App when
    /// the allow-list is empty or names the owner.
    pub fn serves_owner(&self, owner: &str) -> bool {
        !self.is_app
            || self.allowed_owners.is_empty()
            || self
                .allowed_owners
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(owner))
    }

    /// Names the controller's own login (the token's user with a token).
    pub fn with_own_login(mut self, login: impl Into<String>) -> GitHubAccess {
        self.own_login = login.into();
        self
    }

    pub fn is_app(&self) -> bool {
        self.is_app
    }

    /// The handle for a delivery's installation (ignored with a token).
    pub fn api_for(&self, installation_id: Option<i64>) -> anyhow::Result<GitHubApi> {
        if !self.is_app {
            return Ok(self.client.installation(0)?);
        }
        let id = installation_id
            .context("the delivery names no installation, so there is no token to read with")?;
        let id = u64::try_from(id).context("negative installation id")?;
        Ok(self.client.installation(id)?)
    }

    /// Fresh operator decision for `actor` on `repository` (`owner/name`).
    pub async fn decide(
        &self,
        api: &GitHubApi,
        repository: &str,
        actor: &Actor,
    ) -> anyhow::Result<OperatorDecision> {
        let repo = repo_name(repository)?;
        api.operator_decision(&repo, actor, &self.policy, &self.own_login)
            .await
            .with_context(|| format!("cannot read the permission of `{}`", actor.login))
    }

    /// The newest `labeled` event of the trigger label on an issue: its id
    /// identifies this labelling for webhook and poller alike.
    pub async fn latest_trigger_labeling(
        &self,
        api: &GitHubApi,
        repository: &str,
        issue: IssueNumber,
    ) -> anyhow::Result<Option<IssueEvent>> {
        self.latest_trigger_event(api, repository, issue, "labeled")
            .await
    }

    /// The newest `unlabeled` event of the trigger label on an issue: who
    /// removed it, and an id that identifies the removal.
    pub async fn latest_trigger_removal(
        &self,
        api: &GitHubApi,
        repository: &str,
        issue: IssueNumber,
    ) -> anyhow::Result<Option<IssueEvent>> {
        self.latest_trigger_event(api, repository, issue, "unlabeled")
            .await
    }

    async fn latest_trigger_event(
        &self,
        api: &GitHubApi,
        repository: &str,
        issue: IssueNumber,
        action: &str,
    ) -> anyhow::Result<Option<IssueEvent>> {
        let repo = repo_name(repository)?;
        let events = api
            .issue_events(&repo, issue)
            .await
            .with_context(|| format!("cannot read the events of {repository}#{issue}"))?;
        Ok(events.into_iter().rev().find(|event| {
            event.event == action
                && event
                    .label
                    .as_ref()
                    .is_some_and(|label| label.name.eq_ignore_ascii_case(&self.trigger_label))
        }))
    }

    /// Every repository to poll: the App's installations' repositories, or
    /// `github.repositories` with a token.
    pub async fn watched_repositories(&self) -> anyhow::Result<Vec<WatchedRepository>> {
        Ok(self.served().await?.repositories)
    }

    /// The repositories of every installation that is served and not
    /// suspended, plus the suspended installations (whose repositories
    /// cannot even be listed: GitHub refuses their tokens).
    pub async fn served(&self) -> anyhow::Result<Served> {
        let mut watched = Vec::new();
        let mut suspended = Vec::new();
        if !self.is_app {
            let api = self.client.installation(0)?;
            for full_name in &self.configured_repositories {
                watched.push(WatchedRepository {
                    name: repo_name(full_name)?,
                    full_name: full_name.clone(),
                    api: api.clone(),
                });
            }
            return Ok(Served {
                repositories: watched,
                suspended,
            });
        }
        let installations = self
            .client
            .app()?
            .installations()
            .await
            .context("cannot list the App's installations")?;
        for installation in installations {
            let owner = installation.account.as_ref().map(|a| a.login.as_str());
            let Some(owner) = owner.filter(|owner| self.serves_owner(owner)) else {
                tracing::debug!(
                    installation = installation.id,
                    owner = owner.unwrap_or("?"),
                    "installation not served: its owner is not in github.allowed_owners"
                );
                continue;
            };
            if let Some(since) = &installation.suspended_at {
                suspended.push(Suspension {
                    installation_id: installation.id,
                    owner: owner.to_owned(),
                    since: since.clone(),
                    by: installation.suspended_by.as_ref().map(|a| a.login.clone()),
                });
                continue;
            }
            let api = self.client.installation(installation.id)?;
            let repositories = api.installation_repositories().await.with_context(|| {
                format!(
                    "cannot list the repositories of installation {}",
                    installation.id
                )
            })?;
            for repository in repositories {
                watched.push(WatchedRepository {
                    name: repo_name(&repository.full_name)?,
                    full_name: repository.full_name,
                    api: api.clone(),
                });
            }
        }
        Ok(Served {
            repositories: watched,
            suspended,
        })
    }
}

/// Parses `owner/name`.
pub fn repo_name(full_name: &str) -> anyhow::Result<RepoName> {
    let (owner, name) = full_name
        .split_once('/')
        .with_context(|| format!("`{full_name}` is not an owner/name repository"))?;
    Ok(RepoName::new(owner, name)?)
}
