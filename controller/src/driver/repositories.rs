//! The repositories the driver can act on, kept current while `serve`
//! runs: an installation can gain or lose repositories (or be added,
//! suspended, removed) at any time. The map is read on every run task and
//! rebuilt from GitHub when intake saw an installation change, when a run
//! names a repository the map does not know, and as a periodic backstop.
//! A suspended installation's repositories are not served but not gone
//! either: the map keeps the suspension, so their runs wait instead of
//! stopping.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::Context as _;

use super::RepositoryAccess;
use super::setup::git_remote;
use crate::intake::{GitHubAccess, Suspension};

/// How the map learns which repositories are served now.
pub struct RepositorySource {
    pub access: GitHubAccess,
    /// The login the controller writes as.
    pub login: String,
    /// `https://github.com` or the GHES host.
    pub html_base: String,
}

impl RepositorySource {
    /// Every repository served now, with what the driver needs for it;
    /// `known` are reused as they are (their git remote was read already).
    async fn load(
        &self,
        known: &HashMap<String, Arc<RepositoryAccess>>,
    ) -> anyhow::Result<Entries> {
        let mut served = HashMap::new();
        let now = self.access.served().await?;
        for watched in now.repositories {
            if let Some(existing) = known.get(&watched.full_name) {
                served.insert(watched.full_name, Arc::clone(existing));
                continue;
            }
            let git = git_remote(&watched.api, &watched.name)
                .await
                .with_context(|| format!("cannot prepare {}", watched.full_name))?;
            let access = RepositoryAccess {
                api: watched.api,
                repo: watched.name,
                login: self.login.clone(),
                html_base: self.html_base.clone(),
                git: Some(git),
            };
            served.insert(watched.full_name, Arc::new(access));
        }
        Ok(Entries {
            served,
            suspended: now.suspended,
        })
    }
}

/// The map's content: served repositories by `owner/name`, and the
/// installations suspended now.
#[derive(Default, Clone)]
struct Entries {
    served: HashMap<String, Arc<RepositoryAccess>>,
    suspended: Vec<Suspension>,
}

impl Entries {
    fn suspension_of(&self, repository: &str) -> Option<&Suspension> {
        self.suspended.iter().find(|s| s.covers(repository))
    }
}

/// What one refresh changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refreshed {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Served before, now waiting for their installation's unsuspension.
    pub paused: Vec<String>,
    /// Installations suspended since the last refresh.
    pub suspended: Vec<Suspension>,
    /// Installations whose suspension was lifted since the last refresh.
    pub unsuspended: Vec<Suspension>,
}

/// What the map says about one repository.
#[derive(Clone)]
pub(crate) enum Lookup {
    Served(Arc<RepositoryAccess>),
    /// Its installation is suspended: nothing can be read or written there
    /// until it is unsuspended.
    Suspended(Suspension),
    /// Not served, as GitHub says right now.
    NotServed,
}

/// The served repositories by `owner/name`.
pub(crate) struct RepositoryMap {
    entries: RwLock<Entries>,
    source: Option<RepositorySource>,
    /// Held across a rebuild, so two tasks never list installations at once.
    rebuilding: tokio::sync::Mutex<()>,
}

impl RepositoryMap {
    /// A map that never changes (tests, one-shot tools).
    pub(crate) fn fixed(repositories: impl IntoIterator<Item = RepositoryAccess>) -> Self {
        let served = repositories
            .into_iter()
            .map(|access| (access.repo.to_string(), Arc::new(access)))
            .collect();
        Self {
            entries: RwLock::new(Entries {
                served,
                suspended: Vec::new(),
            }),
            source: None,
            rebuilding: tokio::sync::Mutex::new(()),
        }
    }

    /// A map filled from `source` now and refreshed from it later.
    pub(crate) async fn load(source: RepositorySource) -> anyhow::Result<Self> {
        let entries = source.load(&HashMap::new()).await?;
        Ok(Self {
            entries: RwLock::new(entries),
            source: Some(source),
            rebuilding: tokio::sync::Mutex::new(()),
        })
    }

    /// What the map knows of `repository` now, without asking GitHub. A
    /// suspension wins over a stale entry: while it lasts nothing may be
    /// written there.
    pub(crate) fn get(&self, repository: &str) -> Lookup {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(suspension) = entries.suspension_of(repository) {
            return Lookup::Suspended(suspension.clone());
        }
        match entries.served.get(repository) {
            Some(access) => Lookup::Served(Arc::clone(access)),
            None => Lookup::NotServed,
        }
    }

    /// The suspension `repository` waits for, if its installation is
    /// suspended as far as the map knows.
    pub(crate) fn suspension_of(&self, repository: &str) -> Option<Suspension> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.suspension_of(repository).cloned()
    }

    /// Whether the map can change at all (it has a source to ask).
    pub(crate) fn refreshes(&self) -> bool {
        self.source.is_some()
    }

    /// The access of `repository`; when the map does not know it and can
    /// change, it is rebuilt first (an installation may have gained it a
    /// moment ago). A suspended repository is answered from the map: GitHub
    /// is told of the unsuspension by a webhook or the periodic refresh.
    pub(crate) async fn lookup(&self, repository: &str) -> anyhow::Result<Lookup> {
        let known = self.get(repository);
        if !matches!(known, Lookup::NotServed) {
            return Ok(known);
        }
        let Some(source) = &self.source else {
            return Ok(known);
        };
        let _rebuilding = self.rebuilding.lock().await;
        // Another task may have rebuilt the map while this one waited.
        let known = self.get(repository);
        if !matches!(known, Lookup::NotServed) {
            return Ok(known);
        }
        self.rebuild(source).await?;
        Ok(self.get(repository))
    }

    /// Rebuilds the map from GitHub; `None` for a map that never changes.
    pub(crate) async fn refresh(&self) -> Option<anyhow::Result<Refreshed>> {
        let source = self.source.as_ref()?;
        let _rebuilding = self.rebuilding.lock().await;
        Some(self.rebuild(source).await)
    }

    /// Callers hold `rebuilding`.
    async fn rebuild(&self, source: &RepositorySource) -> anyhow::Result<Refreshed> {
        let known = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let now = source.load(&known.served).await?;
        let changed = compare(&known, &now);
        *self.entries.write().unwrap_or_else(PoisonError::into_inner) = now;
        if changed != Refreshed::default() {
            tracing::info!(
                added = ?changed.added,
                removed = ?changed.removed,
                suspended = ?changed.suspended.iter().map(|s| &s.owner).collect::<Vec<_>>(),
                unsuspended = ?changed.unsuspended.iter().map(|s| &s.owner).collect::<Vec<_>>(),
                "served repositories changed"
            );
        }
        Ok(changed)
    }
}

/// What changed from `before` to `now`. A repository of an installation
/// that was just suspended is not "removed": its runs wait.
fn compare(before: &Entries, now: &Entries) -> Refreshed {
    let same = |a: &Suspension, b: &Suspension| a.installation_id == b.installation_id;
    let mut changed = Refreshed {
        added: now
            .served
            .keys()
            .filter(|k| !before.served.contains_key(*k))
            .cloned()
            .collect(),
        removed: before
            .served
            .keys()
            .filter(|k| !now.served.contains_key(*k) && now.suspension_of(k).is_none())
            .cloned()
            .collect(),
        paused: before
            .served
            .keys()
            .filter(|k| !now.served.contains_key(*k) && now.suspension_of(k).is_some())
            .cloned()
            .collect(),
        suspended: now
            .suspended
            .iter()
            .filter(|s| !before.suspended.iter().any(|b| same(s, b)))
            .cloned()
            .collect(),
        unsuspended: before
            .suspended
            .iter()
            .filter(|b| !now.suspended.iter().any(|s| same(s, b)))
            .cloned()
            .collect(),
    };
    changed.added.sort();
    changed.removed.sort();
    changed.paused.sort();
    changed
}
