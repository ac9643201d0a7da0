//! The executor's handle: the journal, the GitHub installation and
//! repository it writes to, and what some kinds need besides (the git push
//! transport, the objects the phase's entry observation saw). The protocol
//! itself is in [`super::drive`]; the kinds read these fields.

use std::collections::HashSet;

use autoforge_journal::Journal;
use secrecy::SecretString;

use crate::github::{GitHubApi, RepoName};
use crate::workspace::Mirror;

/// How the executor pushes: the mirror holding the candidate commits, the
/// repository's git URL (no credentials in it) and the token, which only
/// ever travels in the git process's environment.
pub struct PushTransport {
    pub mirror: Mirror,
    pub url: String,
    pub credential: SecretString,
    pub default_branch: String,
}

/// Drives journalled effects of one repository.
pub struct EffectExecutor {
    pub(crate) journal: Journal,
    pub(crate) api: GitHubApi,
    pub(crate) repo: RepoName,
    /// The login the controller acts as (reactions are recognised by it).
    pub(crate) login: String,
    pub(crate) push: Option<PushTransport>,
    /// Objects (`comment/123`, `issue/4`, `pull/5`) the entry observation
    /// of the current phase saw: not written by this journal, not foreign.
    pub(crate) entry_seen: HashSet<String>,
}

impl EffectExecutor {
    pub fn new(journal: Journal, api: GitHubApi, repo: RepoName, login: String) -> Self {
        EffectExecutor {
            journal,
            api,
            repo,
            login,
            push: None,
            entry_seen: HashSet::new(),
        }
    }

    /// Enables `push` effects.
    pub fn with_push(mut self, transport: PushTransport) -> Self {
        self.push = Some(transport);
        self
    }

    /// Objects the current phase's entry observation saw (see the field).
    pub fn with_entry_seen(mut self, objects: impl IntoIterator<Item = String>) -> Self {
        self.entry_seen = objects.into_iter().collect();
        self
    }
}
