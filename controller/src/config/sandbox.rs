//! The sandbox keys of the `[agents]` section: the global switch
//! `agents.sandbox` and each profile's `[agents.profiles.X.sandbox]` table
//! (extra binds for toolchains and caches, and the network).
//!
//! The file's shape only; the runtime form is [`crate::sandbox::SandboxPolicy`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::sandbox::{Network, SandboxMode, SandboxPolicy};

/// `[agents.profiles.X.sandbox]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileSandbox {
    pub network: Network,
    /// Absolute host paths shown read-only at the same place.
    pub read_only: Vec<PathBuf>,
    /// Absolute host paths shown read-write at the same place.
    pub read_write: Vec<PathBuf>,
}

impl ProfileSandbox {
    /// The runtime policy under the global `mode`.
    pub fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy {
            mode,
            network: self.network,
            read_only: self.read_only.clone(),
            read_write: self.read_write.clone(),
        }
    }

    /// `(field, path)` of every bind that is not an absolute path: inside
    /// the sandbox a relative path would mean something else than here.
    pub fn relative_paths(&self) -> impl Iterator<Item = (&'static str, &PathBuf)> {
        let ro = self.read_only.iter().map(|p| ("read_only", p));
        let rw = self.read_write.iter().map(|p| ("read_write", p));
        ro.chain(rw).filter(|(_, path)| !path.is_absolute())
    }
}
