//! Lookups, access decisions and the mutations shared by the REST and
//! control surfaces.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{
    App, CheckRun, Grant, Installation, Issue, IssueEvent, Label, Repo, User, UserKind, World,
};
use crate::auth::Caller;
use crate::http::ApiError;

/// Repository role, ordered from weakest to strongest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    Read,
    Triage,
    Write,
    Maintain,
    Admin,
}

impl Permission {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "read" | "pull" => Permission::Read,
            "triage" => Permission::Triage,
            "write" | "push" => Permission::Write,
            "maintain" => Permission::Maintain,
            "admin" => Permission::Admin,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Triage => "triage",
            Permission::Write => "write",
            Permission::Maintain => "maintain",
            Permission::Admin => "admin",
        }
    }

    /// The legacy value of the `permission` field (`admin|write|read|none`).
    pub fn legacy(self) -> &'static str {
        match self {
            Permission::Admin => "admin",
            Permission::Maintain | Permission::Write => "write",
            Permission::Triage | Permission::Read => "read",
        }
    }
}

/// What an operation needs on a repository.
#[derive(Debug, Clone, Copy)]
pub enum Access {
    /// Read through the named installation permission (`issues`, `pull_requests`, …).
    Read(&'static str),
    /// Write through the named installation permission; users need `write`
    /// (or `triage` for issue metadata, which GitHub also grants).
    Write(&'static str),
    /// Take part (open an issue, comment, react): users need read access,
    /// installations the named write permission.
    Participate(&'static str),
}

/// Input of [`World::insert_repo`].
#[derive(Debug, Clone, Deserialize)]
pub struct NewRepo {
    pub owner: String,
    pub name: String,
    #[serde(default = "default_branch")]
    pub default_branch: String,
    #[serde(default = "default_private")]
    pub private: bool,
}

fn default_branch() -> String {
    "main".to_string()
}

fn default_private() -> bool {
    true
}

/// Input of a check run created through the control API or REST.
#[derive(Debug, Clone, Deserialize)]
pub struct NewCheck {
    pub head_sha: String,
    pub name: String,
    pub status: Option<String>,
    pub conclusion: Option<String>,
    pub external_id: Option<String>,
    pub details_url: Option<String>,
}

impl World {
    pub fn alloc_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn insert_user(&mut self, login: &str, kind: UserKind) -> Result<u64, ApiError> {
        if login.is_empty() || login.contains('/') || login.chars().any(char::is_whitespace) {
            return Err(ApiError::validation("User", "login", "invalid"));
        }
        if self.user_by_login(login).is_some() {
            return Err(ApiError::validation("User", "login", "already_exists"));
        }
        let id = self.alloc_id();
        self.users.insert(
            id,
            User {
                id,
                login: login.to_string(),
                kind,
                created_at: Utc::now(),
            },
        );
        Ok(id)
    }

    pub fn user_by_login(&self, login: &str) -> Option<&User> {
        self.users
            .values()
            .find(|u| u.login.eq_ignore_ascii_case(login))
    }

    pub fn user(&self, id: u64) -> Result<&User, ApiError> {
        self.users.get(&id).ok_or_else(ApiError::not_found)
    }

    pub fn repo_id_by_name(&self, owner: &str, name: &str) -> Option<u64> {
        let owner_id = self.user_by_login(owner)?.id;
        self.repos
            .values()
            .find(|r| r.owner_id == owner_id && r.name.eq_ignore_ascii_case(name))
            .map(|r| r.id)
    }

    pub fn repo(&self, id: u64) -> Result<&Repo, ApiError> {
        self.repos.get(&id).ok_or_else(ApiError::not_found)
    }

    pub fn repo_mut(&mut self, id: u64) -> Result<&mut Repo, ApiError> {
        self.repos.get_mut(&id).ok_or_else(ApiError::not_found)
    }

    pub fn insert_repo(&mut self, new: &NewRepo) -> Result<u64, ApiError> {
        let owner_id = self
            .user_by_login(&new.owner)
            .ok_or_else(|| ApiError::validation("Repository", "owner", "missing"))?
            .id;
        if new.name.is_empty()
            || !new
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ApiError::validation("Repository", "name", "invalid"));
        }
        if self.repo_id_by_name(&new.owner, &new.name).is_some() {
            return Err(ApiError::validation("Repository", "name", "already_exists"));
        }
        let id = self.alloc_id();
        let now = Utc::now();
        self.repos.insert(
            id,
            Repo {
                id,
                owner_id,
                name: new.name.clone(),
                default_branch: new.default_branch.clone(),
                private: new.private,
                collaborators: Default::default(),
                labels: Vec::new(),
                issues: Default::default(),
                next_number: 1,
                required_checks: Vec::new(),
                created_at: now,
                pushed_at: now,
                settings: Default::default(),
                required_approving_reviews: 0,
                require_up_to_date: false,
            },
        );
        Ok(id)
    }

    pub fn installation(&self, id: u64) -> Result<&Installation, ApiError> {
        self.installations.get(&id).ok_or_else(ApiError::not_found)
    }

    pub fn app(&self, id: u64) -> Result<&App, ApiError> {
        self.apps.get(&id).ok_or_else(ApiError::not_found)
    }

    /// The user a caller's writes are attributed to (the app's bot for
    /// installation tokens), and the app acting, if any.
    pub fn actor(&self, caller: &Caller) -> Result<(u64, Option<u64>), ApiError> {
        match caller {
            Caller::User { user_id } => Ok((*user_id, None)),
            Caller::Installation {
                installation_id, ..
            } => {
                let inst = self.installation(*installation_id)?;
                let app = self.app(inst.app_id)?;
                Ok((app.bot_user_id, Some(app.id)))
            }
            Caller::App { .. } | Caller::Anonymous => Err(ApiError::forbidden(
                "Resource not accessible by integration",
            )),
        }
    }

    /// A user's role on a repository: owner is admin, then collaborators.
    pub fn user_permission(&self, repo: &Repo, user_id: u64) -> Option<Permission> {
        if repo.owner_id == user_id {
            return Some(Permission::Admin);
        }
        if let Some(p) = repo.collaborators.get(&user_id) {
            return Some(*p);
        }
        (!repo.private).then_some(Permission::Read)
    }

    /// Resolve `owner/name` for a caller, answering 404 for what the caller
    /// cannot see and 403 for what it can see but not change — as GitHub does.
    pub fn resolve_repo(
        &self,
        caller: &Caller,
        owner: &str,
        name: &str,
        need: Access,
    ) -> Result<u64, ApiError> {
        let id = self
            .repo_id_by_name(owner, name)
            .ok_or_else(ApiError::not_found)?;
        let repo = self.repo(id)?;
        match caller {
            Caller::Anonymous => {
                if repo.private {
                    return Err(ApiError::not_found());
                }
                if !matches!(need, Access::Read(_)) {
                    return Err(ApiError::requires_auth());
                }
            }
            Caller::App { .. } => {
                return Err(ApiError::forbidden(
                    "Integration must generate an installation access token to make this request.",
                ));
            }
            Caller::User { user_id } => {
                let perm = self
                    .user_permission(repo, *user_id)
                    .ok_or_else(ApiError::not_found)?;
                if let Access::Write(scope) = need {
                    let needed = if scope == "issues" {
                        Permission::Triage
                    } else {
                        Permission::Write
                    };
                    if perm < needed {
                        return Err(ApiError::forbidden(
                            "Must have push access to this repository.",
                        ));
                    }
                }
            }
            Caller::Installation {
                installation_id,
                scope: narrowed,
            } => {
                let inst = self.installation(*installation_id)?;
                // A token narrowed to other repositories cannot see this one.
                if !inst.repository_ids.contains(&id) || !narrowed.covers(id) {
                    return Err(ApiError::not_found());
                }
                let app = self.app(inst.app_id)?;
                let (scope, write) = match need {
                    Access::Read(s) => (s, false),
                    Access::Write(s) | Access::Participate(s) => (s, true),
                };
                let permissions = narrowed.permissions.as_ref().unwrap_or(&app.permissions);
                let granted = permissions.get(scope).map(String::as_str);
                let ok = match granted {
                    Some("write" | "admin") => true,
                    Some("read") => !write,
                    _ => scope == "metadata" && !write,
                };
                if !ok {
                    return Err(ApiError::forbidden(
                        "Resource not accessible by integration",
                    ));
                }
            }
        }
        Ok(id)
    }

    pub fn issue(&self, repo_id: u64, number: u64) -> Result<&Issue, ApiError> {
        self.repo(repo_id)?
            .issues
            .get(&number)
            .ok_or_else(ApiError::not_found)
    }

    pub fn issue_mut(&mut self, repo_id: u64, number: u64) -> Result<&mut Issue, ApiError> {
        self.repo_mut(repo_id)?
            .issues
            .get_mut(&number)
            .ok_or_else(ApiError::not_found)
    }

    /// Open a new issue (or the issue half of a PR) with the next number.
    pub fn insert_issue(
        &mut self,
        repo_id: u64,
        user_id: u64,
        title: &str,
        body: Option<String>,
    ) -> Result<u64, ApiError> {
        if title.trim().is_empty() {
            return Err(ApiError::validation("Issue", "title", "missing_field"));
        }
        let id = self.alloc_id();
        let now = Utc::now();
        let repo = self.repo_mut(repo_id)?;
        let number = repo.next_number;
        repo.next_number += 1;
        repo.issues.insert(
            number,
            Issue {
                id,
                number,
                title: title.to_string(),
                body,
                user_id,
                state_open: true,
                state_reason: None,
                labels: Vec::new(),
                assignees: Vec::new(),
                locked: false,
                created_at: now,
                updated_at: now,
                closed_at: None,
                closed_by: None,
                reactions: Vec::new(),
                events: Vec::new(),
                comment_ids: Vec::new(),
                parent: None,
                sub_issues: Vec::new(),
                pull: None,
            },
        );
        Ok(number)
    }

    /// Make sure a repository label exists (GitHub creates unknown labels on
    /// add with a default colour) and return it.
    pub fn ensure_label(&mut self, repo_id: u64, name: &str) -> Result<Label, ApiError> {
        if let Some(l) = self
            .repo(repo_id)?
            .labels
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))
        {
            return Ok(l.clone());
        }
        if name.trim().is_empty() {
            return Err(ApiError::validation("Label", "name", "missing_field"));
        }
        let id = self.alloc_id();
        let label = Label {
            id,
            name: name.to_string(),
            color: "ededed".to_string(),
            description: None,
        };
        self.repo_mut(repo_id)?.labels.push(label.clone());
        Ok(label)
    }

    pub fn record_event(
        &mut self,
        repo_id: u64,
        number: u64,
        actor: (u64, Option<u64>),
        event: &str,
        label: Option<String>,
        commit_id: Option<String>,
    ) -> Result<(), ApiError> {
        let id = self.alloc_id();
        let issue = self.issue_mut(repo_id, number)?;
        issue.events.push(IssueEvent {
            id,
            actor_id: actor.0,
            event: event.to_string(),
            label,
            commit_id,
            created_at: Utc::now(),
            app_id: actor.1,
        });
        Ok(())
    }

    pub fn insert_check(
        &mut self,
        repo_id: u64,
        app_id: Option<u64>,
        new: NewCheck,
    ) -> Result<u64, ApiError> {
        let status = new.status.clone().unwrap_or_else(|| {
            if new.conclusion.is_some() {
                "completed".into()
            } else {
                "queued".into()
            }
        });
        if !["queued", "in_progress", "completed"].contains(&status.as_str()) {
            return Err(ApiError::validation("CheckRun", "status", "invalid"));
        }
        if status == "completed" && new.conclusion.is_none() {
            return Err(ApiError::validation(
                "CheckRun",
                "conclusion",
                "missing_field",
            ));
        }
        if new.head_sha.len() != 40 || !new.head_sha.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ApiError::validation("CheckRun", "head_sha", "invalid"));
        }
        let id = self.alloc_id();
        let suite = self
            .check_runs
            .values()
            .find(|c| c.repo_id == repo_id && c.head_sha == new.head_sha && c.app_id == app_id)
            .map(|c| c.check_suite_id);
        let check_suite_id = match suite {
            Some(s) => s,
            None => self.alloc_id(),
        };
        let now = Utc::now();
        let completed = status == "completed";
        self.check_runs.insert(
            id,
            CheckRun {
                id,
                repo_id,
                head_sha: new.head_sha,
                name: new.name,
                status,
                conclusion: new.conclusion,
                started_at: Some(now),
                completed_at: completed.then_some(now),
                external_id: new.external_id,
                details_url: new.details_url,
                output_title: None,
                output_summary: None,
                output_text: None,
                app_id,
                check_suite_id,
            },
        );
        Ok(id)
    }

    /// Live installation token lookup; expired tokens are bad credentials.
    pub fn grant(&self, token: &str, now: DateTime<Utc>) -> Option<&Grant> {
        let grant = self.tokens.get(token)?;
        match grant {
            Grant::Installation { expires_at, .. } if *expires_at <= now => None,
            _ => Some(grant),
        }
    }
}
