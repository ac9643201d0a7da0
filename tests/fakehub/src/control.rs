//! The control API: setup and fault injection, as methods on [`Handle`]
//! and (through `control_http`) as JSON under `/_fakehub/`. People then act
//! through the ordinary REST API and git with the tokens handed out here.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{generate_app_key, mint_token};
use crate::faults::FaultRule;
use crate::http::ApiError;
use crate::render::{Ctx, render_check_run, render_installation_hook, render_repo};
use crate::webhooks::{Event, emit};
use crate::world::{
    App, Grant, Installation, NewCheck, NewRepo, Permission, RepoSettings, UserKind,
};
use crate::{Handle, Shared, git};

/// `POST /_fakehub/users`.
#[derive(Debug, Clone, Deserialize)]
pub struct NewUser {
    pub login: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
}

/// A created user and its personal access token.
#[derive(Debug, Clone)]
pub struct CreatedUser {
    pub id: u64,
    pub login: String,
    pub token: SecretString,
}

/// `POST /_fakehub/repos`: a repository and the files of its first commit.
#[derive(Debug, Clone, Deserialize)]
pub struct RepoSpec {
    pub owner: String,
    pub name: String,
    #[serde(default = "main_branch")]
    pub default_branch: String,
    #[serde(default = "yes")]
    pub private: bool,
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Check names branch protection requires on the default branch.
    #[serde(default)]
    pub required_checks: Vec<String>,
}

fn main_branch() -> String {
    "main".into()
}

fn yes() -> bool {
    true
}

/// `POST /_fakehub/apps`.
#[derive(Debug, Clone, Deserialize)]
pub struct NewApp {
    pub slug: String,
    /// Login of the owning account; defaults to the app's bot.
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub webhook_url: Option<String>,
    #[serde(default)]
    pub webhook_secret: Option<String>,
    #[serde(default)]
    pub permissions: BTreeMap<String, String>,
    #[serde(default)]
    pub events: Vec<String>,
}

/// A created app: its id, slug, bot login and the private key octocrab signs with.
#[derive(Debug, Clone)]
pub struct CreatedApp {
    pub id: u64,
    pub slug: String,
    pub bot_login: String,
    pub private_key_pem: SecretString,
}

/// `POST /_fakehub/apps/{id}/installations`.
#[derive(Debug, Clone, Deserialize)]
pub struct NewInstallation {
    pub account: String,
    /// Repository names (`name` under the account, or `owner/name`).
    #[serde(default)]
    pub repositories: Vec<String>,
}

/// `POST /_fakehub/checks`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckSpec {
    pub owner: String,
    pub repo: String,
    pub sha: String,
    pub name: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub conclusion: Option<String>,
}

/// `PUT /_fakehub/repos/{owner}/{repo}/merge-rules`: what a merge of the
/// repository must satisfy. Each field left out keeps its value.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MergeRules {
    /// The repository's merge settings (`allow_squash_merge`, …).
    #[serde(default)]
    pub settings: Option<RepoSettings>,
    /// Approving reviews a ruleset on the default branch requires.
    #[serde(default)]
    pub required_approving_reviews: Option<u32>,
    /// Check names branch protection requires on the default branch.
    #[serde(default)]
    pub required_checks: Option<Vec<String>>,
    /// Whether a pull request must be up to date with its base to merge.
    #[serde(default)]
    pub require_up_to_date: Option<bool>,
}

pub fn set_merge_rules(
    shared: &Shared,
    owner: &str,
    repo: &str,
    rules: &MergeRules,
) -> Result<(), ApiError> {
    let mut w = shared.lock();
    let id = w
        .repo_id_by_name(owner, repo)
        .ok_or_else(ApiError::not_found)?;
    let r = w.repo_mut(id)?;
    if let Some(settings) = &rules.settings {
        r.settings = settings.clone();
    }
    if let Some(count) = rules.required_approving_reviews {
        r.required_approving_reviews = count;
    }
    if let Some(checks) = &rules.required_checks {
        r.required_checks = checks.clone();
    }
    if let Some(strict) = rules.require_up_to_date {
        r.require_up_to_date = strict;
    }
    shared.mark_dirty();
    Ok(())
}

pub fn create_user(shared: &Shared, new: &NewUser) -> Result<CreatedUser, ApiError> {
    let kind = match new.kind.as_deref() {
        None | Some("User") => UserKind::User,
        Some("Bot") => UserKind::Bot,
        Some("Organization") => UserKind::Organization,
        Some(_) => return Err(ApiError::validation("User", "type", "invalid")),
    };
    let mut w = shared.lock();
    let id = w.insert_user(&new.login, kind)?;
    let token = mint_token("ghp_");
    w.tokens
        .insert(token.clone(), Grant::Personal { user_id: id });
    shared.mark_dirty();
    Ok(CreatedUser {
        id,
        login: new.login.clone(),
        token: SecretString::from(token),
    })
}

pub async fn create_repo(shared: &Shared, spec: &RepoSpec) -> Result<Value, ApiError> {
    let new = NewRepo {
        owner: spec.owner.clone(),
        name: spec.name.clone(),
        default_branch: spec.default_branch.clone(),
        private: spec.private,
    };
    let id = {
        let mut w = shared.lock();
        let id = w.insert_repo(&new)?;
        w.repo_mut(id)?.required_checks = spec.required_checks.clone();
        id
    };
    let path = git::repo_path(&shared.repos_dir, &spec.owner, &spec.name);
    let author = (
        spec.owner.clone(),
        format!("{}@users.noreply.fakehub", spec.owner),
    );
    if let Err(e) = git::init_repo(
        &path,
        &spec.default_branch,
        &spec.files,
        (&author.0, &author.1),
    )
    .await
    {
        shared.lock().repos.remove(&id);
        let _ = tokio::fs::remove_dir_all(&path).await;
        return Err(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("creating the git repository failed: {e:#}"),
        ));
    }
    shared.mark_dirty();
    let w = shared.lock();
    Ok(render_repo(
        Ctx {
            base: &shared.base,
            world: &w,
        },
        w.repo(id)?,
    ))
}

pub fn set_collaborator(
    shared: &Shared,
    owner: &str,
    repo: &str,
    login: &str,
    permission: &str,
) -> Result<(), ApiError> {
    let perm = Permission::parse(permission)
        .ok_or_else(|| ApiError::validation("Collaborator", "permission", "invalid"))?;
    let mut w = shared.lock();
    let user_id = w.user_by_login(login).ok_or_else(ApiError::not_found)?.id;
    let repo_id = w
        .repo_id_by_name(owner, repo)
        .ok_or_else(ApiError::not_found)?;
    w.repo_mut(repo_id)?.collaborators.insert(user_id, perm);
    shared.mark_dirty();
    Ok(())
}

pub async fn create_app(shared: &Arc<Shared>, new: &NewApp) -> Result<CreatedApp, ApiError> {
    let (private, public) = tokio::task::spawn_blocking(generate_app_key)
        .await
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut w = shared.lock();
    if w.apps.values().any(|a| a.slug == new.slug) {
        return Err(ApiError::validation(
            "Integration",
            "slug",
            "already_exists",
        ));
    }
    let bot_login = format!("{}[bot]", new.slug);
    let bot_user_id = w.insert_user(&bot_login, UserKind::Bot)?;
    let owner_id = match &new.owner {
        Some(login) => {
            w.user_by_login(login)
                .ok_or_else(|| ApiError::validation("Integration", "owner", "missing"))?
                .id
        }
        None => bot_user_id,
    };
    let id = w.alloc_id();
    let hook_id = w.alloc_id();
    w.apps.insert(
        id,
        App {
            id,
            slug: new.slug.clone(),
            name: new.slug.clone(),
            owner_id,
            bot_user_id,
            hook_id,
            webhook_url: new.webhook_url.clone(),
            webhook_secret: new.webhook_secret.clone(),
            permissions: new.permissions.clone(),
            events: new.events.clone(),
            public_key_pem: public,
            created_at: Utc::now(),
        },
    );
    crate::webhooks::ping(shared, &mut w, id);
    shared.mark_dirty();
    Ok(CreatedApp {
        id,
        slug: new.slug.clone(),
        bot_login,
        private_key_pem: SecretString::from(private),
    })
}

pub fn install(shared: &Arc<Shared>, app_id: u64, new: &NewInstallation) -> Result<u64, ApiError> {
    let mut w = shared.lock();
    w.app(app_id)?;
    let account_id = w
        .user_by_login(&new.account)
        .ok_or_else(|| ApiError::validation("Installation", "account", "missing"))?
        .id;
    let mut repository_ids = Vec::new();
    for name in &new.repositories {
        let (owner, repo) = name.split_once('/').unwrap_or((&new.account, name));
        repository_ids.push(
            w.repo_id_by_name(owner, repo)
                .ok_or_else(|| ApiError::validation("Installation", "repositories", "missing"))?,
        );
    }
    let id = w.alloc_id();
    w.installations.insert(
        id,
        Installation {
            id,
            app_id,
            account_id,
            repository_ids: repository_ids.clone(),
            created_at: Utc::now(),
            suspended_at: None,
            suspended_by: None,
        },
    );
    let ctx = Ctx {
        base: &shared.base,
        world: &w,
    };
    let inst = render_installation_hook(ctx, w.installation(id)?);
    let repos: Vec<Value> = repository_ids
        .iter()
        .filter_map(|r| w.repos.get(r))
        .map(|r| {
            let full = render_repo(ctx, r);
            json!({"id": r.id, "node_id": full["node_id"], "name": r.name, "full_name": full["full_name"], "private": r.private})
        })
        .collect();
    emit(
        shared,
        &mut w,
        Event {
            name: "installation",
            action: Some("created"),
            repo_id: None,
            only_installation: Some(id),
            sender_id: account_id,
            body: json!({"installation": inst, "repositories": repos, "requester": null}),
        },
    );
    shared.mark_dirty();
    Ok(id)
}

/// Replace an installation's repositories, emitting
/// `installation_repositories.added` / `.removed` as GitHub does.
pub fn set_installation_repos(
    shared: &Arc<Shared>,
    installation_id: u64,
    names: &[String],
) -> Result<(), ApiError> {
    let mut w = shared.lock();
    let inst = w.installation(installation_id)?.clone();
    let account = w.user(inst.account_id)?.login.clone();
    let mut wanted = Vec::new();
    for name in names {
        let (owner, repo) = name.split_once('/').unwrap_or((&account, name));
        wanted.push(
            w.repo_id_by_name(owner, repo)
                .ok_or_else(|| ApiError::validation("Installation", "repositories", "missing"))?,
        );
    }
    let added: Vec<u64> = wanted
        .iter()
        .copied()
        .filter(|r| !inst.repository_ids.contains(r))
        .collect();
    let removed: Vec<u64> = inst
        .repository_ids
        .iter()
        .copied()
        .filter(|r| !wanted.contains(r))
        .collect();
    if let Some(i) = w.installations.get_mut(&installation_id) {
        i.repository_ids = wanted;
    }
    let ctx = Ctx {
        base: &shared.base,
        world: &w,
    };
    let inst_json = render_installation_hook(ctx, w.installation(installation_id)?);
    let brief = |ids: &[u64]| -> Vec<Value> {
        ids.iter()
            .filter_map(|r| w.repos.get(r))
            .map(|r| {
                let full = render_repo(ctx, r);
                json!({"id": r.id, "node_id": full["node_id"], "name": r.name, "full_name": full["full_name"], "private": r.private})
            })
            .collect()
    };
    let (added_json, removed_json) = (brief(&added), brief(&removed));
    for (action, list) in [("added", &added), ("removed", &removed)] {
        if list.is_empty() {
            continue;
        }
        let body = json!({"installation": inst_json, "repository_selection": "selected", "repositories_added": if action == "added" { json!(added_json) } else { json!([]) }, "repositories_removed": if action == "removed" { json!(removed_json) } else { json!([]) }, "requester": null});
        emit(
            shared,
            &mut w,
            Event {
                name: "installation_repositories",
                action: Some(action),
                repo_id: None,
                only_installation: Some(installation_id),
                sender_id: inst.account_id,
                body,
            },
        );
    }
    shared.mark_dirty();
    Ok(())
}

pub fn add_check(shared: &Arc<Shared>, spec: &CheckSpec) -> Result<Value, ApiError> {
    let mut w = shared.lock();
    let repo_id = w
        .repo_id_by_name(&spec.owner, &spec.repo)
        .ok_or_else(ApiError::not_found)?;
    let new = NewCheck {
        head_sha: spec.sha.clone(),
        name: spec.name.clone(),
        status: spec.status.clone(),
        conclusion: spec.conclusion.clone(),
        external_id: None,
        details_url: None,
    };
    let id = w.insert_check(repo_id, None, new)?;
    let owner = w.repo(repo_id)?.owner_id;
    crate::routes::checks::emit_check_events(shared, &mut w, id, owner, true);
    let api = format!("{}/repos/{}/{}", shared.base, spec.owner, spec.repo);
    let check = w.check_runs.get(&id).ok_or_else(ApiError::not_found)?;
    Ok(render_check_run(
        Ctx {
            base: &shared.base,
            world: &w,
        },
        &api,
        check,
    ))
}

/// `POST /_fakehub/statuses`: a commit status as an external CI reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct StatusSpec {
    pub owner: String,
    pub repo: String,
    pub sha: String,
    pub context: String,
    pub state: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
}

/// Stores the status and sends GitHub's `status` webhook for it (the
/// owner as sender, as an external CI acting with the owner's token would).
pub fn add_status(shared: &Arc<Shared>, spec: &StatusSpec) -> Result<u64, ApiError> {
    if !["error", "failure", "pending", "success"].contains(&spec.state.as_str()) {
        return Err(ApiError::validation("Status", "state", "invalid"));
    }
    let mut w = shared.lock();
    let repo_id = w
        .repo_id_by_name(&spec.owner, &spec.repo)
        .ok_or_else(ApiError::not_found)?;
    let id = w.alloc_id();
    w.statuses.push(crate::world::CommitStatus {
        id,
        repo_id,
        sha: spec.sha.clone(),
        context: spec.context.clone(),
        state: spec.state.clone(),
        description: spec.description.clone(),
        target_url: spec.target_url.clone(),
        creator_id: None,
        created_at: Utc::now(),
    });
    let owner = w.repo(repo_id)?.owner_id;
    let now = crate::render::ts(Utc::now());
    let body = json!({
        "id": id,
        "sha": spec.sha,
        "name": format!("{}/{}", spec.owner, spec.repo),
        "target_url": spec.target_url,
        "context": spec.context,
        "description": spec.description,
        "state": spec.state,
        "commit": {"sha": spec.sha},
        "branches": [],
        "created_at": now,
        "updated_at": now,
    });
    crate::webhooks::emit(
        shared,
        &mut w,
        crate::webhooks::Event {
            name: "status",
            action: None,
            repo_id: Some(repo_id),
            only_installation: None,
            sender_id: owner,
            body,
        },
    );
    shared.mark_dirty();
    Ok(id)
}

impl Handle {
    /// Create a user (or bot) with a personal access token.
    pub fn create_user(&self, login: &str, kind: UserKind) -> Result<CreatedUser, ApiError> {
        create_user(
            &self.shared,
            &NewUser {
                login: login.to_string(),
                kind: Some(kind.as_str().to_string()),
            },
        )
    }

    /// Create a repository with a real bare git repository behind it.
    pub async fn create_repo(&self, spec: &RepoSpec) -> Result<Value, ApiError> {
        create_repo(&self.shared, spec).await
    }

    pub fn set_collaborator(
        &self,
        owner: &str,
        repo: &str,
        login: &str,
        permission: &str,
    ) -> Result<(), ApiError> {
        set_collaborator(&self.shared, owner, repo, login, permission)
    }

    /// Register a GitHub App with a fresh RSA key pair and a `<slug>[bot]` user.
    pub async fn create_app(&self, new: &NewApp) -> Result<CreatedApp, ApiError> {
        create_app(&self.shared, new).await
    }

    /// Install an app on an account's repositories (emits `installation.created`).
    pub fn install(&self, app_id: u64, new: &NewInstallation) -> Result<u64, ApiError> {
        install(&self.shared, app_id, new)
    }

    /// Replace the repositories of an installation (emits `installation_repositories`).
    pub fn set_installation_repos(
        &self,
        installation_id: u64,
        repositories: &[String],
    ) -> Result<(), ApiError> {
        set_installation_repos(&self.shared, installation_id, repositories)
    }

    /// Record a check run from a CI app (emits `check_run` / `check_suite`).
    /// Sets what a merge of `owner/repo` must satisfy.
    pub fn set_merge_rules(
        &self,
        owner: &str,
        repo: &str,
        rules: &MergeRules,
    ) -> Result<(), ApiError> {
        set_merge_rules(&self.shared, owner, repo, rules)
    }

    pub fn add_check(&self, spec: &CheckSpec) -> Result<Value, ApiError> {
        add_check(&self.shared, spec)
    }

    /// Record a commit status (feeds the combined status and required checks).
    pub fn add_status(&self, spec: &StatusSpec) -> Result<u64, ApiError> {
        add_status(&self.shared, spec)
    }

    /// Replace the active fault rules.
    pub fn set_faults(&self, rules: Vec<FaultRule>) {
        self.shared.faults().set(rules);
    }

    /// How many requests wait at the hold gate `gate` now.
    pub fn held(&self, gate: &str) -> usize {
        self.shared.gates.waiting(gate)
    }

    /// Lets every request waiting at `gate` go on; returns how many did.
    /// Requests the hold rule matches later wait for the next release.
    pub fn release(&self, gate: &str) -> usize {
        self.shared.gates.release(gate)
    }

    /// Hold every git (smart HTTP) request this long before serving it.
    pub fn set_git_latency(&self, latency: std::time::Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.shared
            .git_latency_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The request log.
    pub fn requests(&self) -> Vec<crate::world::RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// Rate-limit points spent so far per scope (`installation:<id>`,
    /// `app:<id>`, `user:<id>`, `anonymous`); a `304` costs none.
    pub fn points_spent(&self) -> std::collections::BTreeMap<String, u64> {
        self.shared.lock().points.clone()
    }

    /// Refs moved by git pushes so far, oldest first.
    pub fn ref_updates(&self) -> Vec<crate::world::RefUpdate> {
        self.shared.lock().ref_updates.clone()
    }

    /// Webhook deliveries recorded so far.
    pub fn deliveries(&self) -> Vec<crate::world::Delivery> {
        self.shared.lock().deliveries.clone()
    }

    /// The whole world as JSON.
    pub fn state(&self) -> Value {
        json!(&*self.shared.lock())
    }
}
