//! The sandbox keys: the global switch `agents.sandbox`, and the sandbox
//! table (extra binds for toolchains and caches, and the network) that each
//! profile (`[agents.profiles.X.sandbox]`) and the validation commands
//! (`[validation.sandbox]`) have.
//!
//! The file's shape only; the runtime form is [`crate::sandbox::SandboxPolicy`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sandbox::{Network, SandboxMode, SandboxPolicy};

/// `[agents.profiles.X.sandbox]` and `[validation.sandbox]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxTable {
    pub network: Network,
    /// Absolute host paths shown read-only at the same place.
    pub read_only: Vec<PathBuf>,
    /// Absolute host paths shown read-write at the same place.
    pub read_write: Vec<PathBuf>,
}

impl SandboxTable {
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

/// What a bind must never show an agent or a validation command: the state
/// directory (keys, tokens, the managed database, every mirror) and the
/// files secrets are read from.
#[derive(Debug, Clone)]
pub struct Protected {
    /// How the problem names it, e.g. `the state directory`.
    pub what: String,
    pub path: PathBuf,
}

/// Problems `(pointer, rule, message)` for every bind of `table` (found at
/// `pointer`) that shows a protected path: the path itself, something inside
/// it, or a directory that holds it.
pub fn exposure_problems(
    pointer: &str,
    table: &SandboxTable,
    protected: &[Protected],
) -> Vec<super::agents::PointedProblem> {
    let binds = table
        .read_only
        .iter()
        .map(|p| ("read_only", p))
        .chain(table.read_write.iter().map(|p| ("read_write", p)));
    let mut problems = Vec::new();
    for (field, bind) in binds {
        let bind_seen = comparable(bind);
        for guarded in protected {
            let guarded_seen = comparable(&guarded.path);
            if bind_seen.starts_with(&guarded_seen) || guarded_seen.starts_with(&bind_seen) {
                problems.push((
                    format!("{pointer}/{field}"),
                    "exposes-protected-path",
                    format!(
                        "`{}` would show {} (`{}`) inside the sandbox",
                        bind.display(),
                        guarded.what,
                        guarded.path.display()
                    ),
                ));
            }
        }
    }
    problems
}

/// The path as the kernel resolves it when it exists (symlinks followed),
/// else with `.` and `..` folded, so `a/../b` and a link cannot slip by.
fn comparable(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut folded = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                folded.pop();
            }
            std::path::Component::CurDir => {}
            other => folded.push(other),
        }
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(read_only: &[&str], read_write: &[&str]) -> SandboxTable {
        SandboxTable {
            network: Network::Shared,
            read_only: read_only.iter().map(PathBuf::from).collect(),
            read_write: read_write.iter().map(PathBuf::from).collect(),
        }
    }

    fn state_dir() -> Vec<Protected> {
        vec![Protected {
            what: "the state directory".into(),
            path: "/nonexistent-af/state".into(),
        }]
    }

    #[test]
    fn binds_of_the_state_directory_inside_it_or_above_it_are_refused() {
        let bad = table(
            &["/", "/nonexistent-af/state/keys"],
            &["/nonexistent-af", "/nonexistent-af/x/../state"],
        );
        let problems = exposure_problems("/validation/sandbox", &bad, &state_dir());
        let fields: Vec<&str> = problems.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(
            fields,
            [
                "/validation/sandbox/read_only",
                "/validation/sandbox/read_only",
                "/validation/sandbox/read_write",
                "/validation/sandbox/read_write",
            ]
        );
        assert!(
            problems[0].2.contains("the state directory"),
            "{problems:?}"
        );
    }

    #[test]
    fn binds_beside_the_state_directory_are_fine() {
        let good = table(&["/opt/tool"], &["/nonexistent-af/statecache"]);
        assert!(exposure_problems("/p", &good, &state_dir()).is_empty());
    }
}
