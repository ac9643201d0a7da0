//! What a repository's own settings file chose for its runs (SPEC §16),
//! as plain data. The machine freezes it into the run when the run starts,
//! so a later edit of the file (or a PR changing it) never changes a run in
//! flight; `config` parses and checks the file into these types, and the
//! driver reads the frozen choice back for validation and agent routing.
//!
//! The serde shape is the file's shape, which is also how a frozen choice
//! is stored with the run.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::bounds::{MergeMethod, PlanMode};

/// The settings a repository chose; every `None` keeps the operator's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositorySettings {
    pub validation: RepositoryValidation,
    pub labels: RepositoryLabels,
    pub agents: RepositoryAgents,
    pub merge: RepositoryMerge,
    pub plan: RepositoryPlan,
}

/// Whether this repository's runs write a plan first (SPEC §4 PLAN).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositoryPlan {
    /// Overrides the operator's `plan.mode`.
    pub mode: Option<PlanMode>,
}

/// How this repository's pull requests are merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositoryMerge {
    /// Overrides the operator's `merge.method`.
    pub method: Option<MergeMethod>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositoryValidation {
    pub commands: Option<Vec<ValidationCommand>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositoryLabels {
    pub status: Option<bool>,
}

/// Profile names by role, each one the operator defined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepositoryAgents {
    pub plan: Option<String>,
    pub implement: Option<String>,
    pub review: Option<String>,
    pub fix: Option<String>,
    pub update_epic: Option<String>,
}

/// One validation command, as the operator's config or a repository's
/// settings spell it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ValidationCommand {
    /// Run through `sh -c`.
    Shell(String),
    /// Run directly, no shell.
    Argv(Vec<String>),
}

/// Shown as a person would type it: a shell line as it is, an argv with
/// the arguments a shell would split quoted.
impl fmt::Display for ValidationCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shell(line) => f.write_str(line),
            Self::Argv(argv) => {
                let shown: Vec<String> = argv
                    .iter()
                    .map(|arg| {
                        let plain = !arg.is_empty()
                            && arg
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
                        if plain {
                            arg.clone()
                        } else {
                            format!("'{}'", arg.replace('\'', r"'\''"))
                        }
                    })
                    .collect();
                f.write_str(&shown.join(" "))
            }
        }
    }
}
