//! The repositories the driver can act on, kept current while `serve`
//! runs: an installation can gain or lose repositories (or be added,
//! suspended, removed) at any time. The map is read on every run task and
//! rebuilt from GitHub when intake saw an installation change, when a run
//! names a repository the map does not know, and as a periodic backstop.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::Context as _;

use super::RepositoryAccess;
use super::setup::git_remote;
use crate::intake::GitHubAccess;

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
    ) -> anyhow::Result<HashMap<String, Arc<RepositoryAccess>>> {
        let mut served = HashMap::new();
        for watched in self.access.watched_repositories().await? {
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
        Ok(served)
    }
}

/// What one refresh changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Refreshed {
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// The served repositories by `owner/name`.
pub(crate) struct RepositoryMap {
    entries: RwLock<HashMap<String, Arc<RepositoryAccess>>>,
    source: Option<RepositorySource>,
    /// Held across a rebuild, so two tasks never list installations at once.
    rebuilding: tokio::sync::Mutex<()>,
}

impl RepositoryMap {
    /// A map that never changes (tests, one-shot tools).
    pub(crate) fn fixed(repositories: impl IntoIterator<Item = RepositoryAccess>) -> Self {
        let entries = repositories
            .into_iter()
            .map(|access| (access.repo.to_string(), Arc::new(access)))
            .collect();
        Self {
            entries: RwLock::new(entries),
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

    pub(crate) fn get(&self, repository: &str) -> Option<Arc<RepositoryAccess>> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.get(repository).cloned()
    }

    /// Whether the map can change at all (it has a source to ask).
    pub(crate) fn refreshes(&self) -> bool {
        self.source.is_some()
    }

    /// The access of `repository`; when the map does not know it and can
    /// change, it is rebuilt first (an installation may have gained it a
    /// moment ago). `Ok(None)`: not served, as GitHub says right now.
    pub(crate) async fn lookup(
        &self,
        repository: &str,
    ) -> anyhow::Result<Option<Arc<RepositoryAccess>>> {
        if let Some(found) = self.get(repository) {
            return Ok(Some(found));
        }
        let Some(source) = &self.source else {
            return Ok(None);
        };
        let _rebuilding = self.rebuilding.lock().await;
        // Another task may have rebuilt the map while this one waited.
        if let Some(found) = self.get(repository) {
            return Ok(Some(found));
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
        let served = source.load(&known).await?;
        let mut changed = Refreshed {
            added: served
                .keys()
                .filter(|k| !known.contains_key(*k))
                .cloned()
                .collect(),
            removed: known
                .keys()
                .filter(|k| !served.contains_key(*k))
                .cloned()
                .collect(),
        };
        changed.added.sort();
        changed.removed.sort();
        *self.entries.write().unwrap_or_else(PoisonError::into_inner) = served;
        if changed != Refreshed::default() {
            tracing::info!(added = ?changed.added, removed = ?changed.removed, "served repositories changed");
        }
        Ok(changed)
    }
}
