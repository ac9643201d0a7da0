//! `autoforge demo --agents claude|codex|opencode`: the demo's EPIC worked
//! by a real coding-agent CLI with the user's own key, using the profiles
//! shipped in `autoforge.example.toml` (embedded in the binary, so what the
//! demo runs is what the documentation shows).
//!
//! Of the shipped `[agents]` table only the chosen CLI's profiles are kept:
//! its writer (named after the CLI) and, when shipped, its read-only
//! reviewer (`NAME-review`). Each role goes to the same kind of profile the
//! example routes it to. Everything is checked before the demo starts
//! anything: the key variables the profiles inherit must be set, and the
//! CLI must be on PATH.

use std::ffi::OsString;

use anyhow::Context;

/// The shipped example configuration.
const EXAMPLE: &str = include_str!("../../../autoforge.example.toml");
/// The suffix of a shipped read-only reviewer profile.
const REVIEW_SUFFIX: &str = "-review";

/// A coding-agent CLI the demo can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RealCli {
    Claude,
    Codex,
    Opencode,
}

impl RealCli {
    /// The writer profile's name in the example, and the program's name.
    pub fn name(self) -> &'static str {
        match self {
            RealCli::Claude => "claude",
            RealCli::Codex => "codex",
            RealCli::Opencode => "opencode",
        }
    }

    /// The key to ask for when the shipped profiles inherit none.
    fn default_key(self) -> &'static str {
        match self {
            RealCli::Claude => "ANTHROPIC_API_KEY",
            RealCli::Codex => "OPENAI_API_KEY",
            RealCli::Opencode => "OPENROUTER_API_KEY",
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            RealCli::Claude => "npm install -g @anthropic-ai/claude-code",
            RealCli::Codex => "npm install -g @openai/codex",
            RealCli::Opencode => "npm install -g opencode-ai",
        }
    }
}

/// Why the demo will not start with real agents.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RealAgentsError {
    #[error(
        "`demo --agents {cli}` needs your model API key: set {var} in the environment \
         (the shipped profiles {profiles} read it from there); nothing was started"
    )]
    MissingKey {
        cli: &'static str,
        var: String,
        profiles: String,
    },
    #[error(
        "`demo --agents {cli}` needs the `{program}` CLI on PATH: install it ({hint}); \
         nothing was started"
    )]
    MissingProgram {
        cli: &'static str,
        program: String,
        hint: &'static str,
    },
    #[error("the shipped autoforge.example.toml has no [agents.profiles.{0}]")]
    NoShippedProfile(&'static str),
}

/// The `[agents]` table for `cli`, after checking its key variables
/// (through `var`) and its program (on `path`).
pub fn agents_for(
    cli: RealCli,
    var: impl Fn(&str) -> Option<OsString>,
    path: Option<&std::ffi::OsStr>,
) -> anyhow::Result<toml::Table> {
    let table = shipped_agents(cli)?;
    check_ready(cli, &table, var, path)?;
    Ok(table)
}

/// The chosen CLI's profiles from the example, with every role routed to
/// them.
pub fn shipped_agents(cli: RealCli) -> anyhow::Result<toml::Table> {
    let document: toml::Table =
        toml::from_str(EXAMPLE).context("the embedded autoforge.example.toml does not parse")?;
    let agents = document
        .get("agents")
        .and_then(toml::Value::as_table)
        .context("the embedded autoforge.example.toml has no [agents] table")?;
    let shipped = agents
        .get("profiles")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    let writer = cli.name();
    let reviewer_name = format!("{writer}{REVIEW_SUFFIX}");
    let mut profiles = toml::Table::new();
    let writer_profile = shipped
        .get(writer)
        .ok_or(RealAgentsError::NoShippedProfile(writer))?;
    profiles.insert(writer.to_owned(), writer_profile.clone());
    let reviewer = match shipped.get(&reviewer_name) {
        Some(profile) => {
            profiles.insert(reviewer_name.clone(), profile.clone());
            reviewer_name
        }
        None => writer.to_owned(),
    };
    let example_roles = agents.get("roles").and_then(toml::Value::as_table);
    let mut roles = toml::Table::new();
    for role in ["implement", "fix", "update_epic"] {
        // A role the example gives to a reviewer (the EPIC update only
        // reads) goes to this CLI's reviewer, the others to its writer.
        let reads = example_roles
            .and_then(|r| r.get(role))
            .and_then(toml::Value::as_str)
            .is_some_and(|name| name.ends_with(REVIEW_SUFFIX));
        let profile = if reads { &reviewer } else { writer };
        roles.insert(role.to_owned(), toml::Value::String(profile.to_owned()));
    }
    roles.insert("review".to_owned(), toml::Value::String(reviewer));
    let mut table = toml::Table::new();
    if let Some(sandbox) = agents.get("sandbox") {
        table.insert("sandbox".to_owned(), sandbox.clone());
    }
    table.insert("profiles".to_owned(), toml::Value::Table(profiles));
    table.insert("roles".to_owned(), toml::Value::Table(roles));
    Ok(table)
}

/// The key variables the chosen profiles inherit (the CLI's usual key when
/// they inherit none), in order, each once.
pub fn key_variables(cli: RealCli, table: &toml::Table) -> Vec<String> {
    let mut vars: Vec<String> = Vec::new();
    for profile in profiles(table) {
        let inherited = profile
            .get("env_inherit")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
            .filter(|name| name.contains("KEY") || name.contains("TOKEN"));
        for name in inherited {
            if !vars.iter().any(|v| v == name) {
                vars.push(name.to_owned());
            }
        }
    }
    if vars.is_empty() {
        vars.push(cli.default_key().to_owned());
    }
    vars
}

fn profiles(table: &toml::Table) -> impl Iterator<Item = &toml::Table> {
    table
        .get("profiles")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|profiles| profiles.values())
        .filter_map(toml::Value::as_table)
}

fn check_ready(
    cli: RealCli,
    table: &toml::Table,
    var: impl Fn(&str) -> Option<OsString>,
    path: Option<&std::ffi::OsStr>,
) -> Result<(), RealAgentsError> {
    let names: Vec<&str> = table
        .get("profiles")
        .and_then(toml::Value::as_table)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for key in key_variables(cli, table) {
        if var(&key).is_none_or(|value| value.is_empty()) {
            return Err(RealAgentsError::MissingKey {
                cli: cli.name(),
                var: key,
                profiles: names.join(", "),
            });
        }
    }
    let program = cli.name();
    if crate::programs::on_path(program, path).is_none() {
        return Err(RealAgentsError::MissingProgram {
            cli: cli.name(),
            program: program.to_owned(),
            hint: cli.install_hint(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const ALL: [RealCli; 3] = [RealCli::Claude, RealCli::Codex, RealCli::Opencode];

    #[test]
    fn every_role_goes_to_the_chosen_clis_shipped_profiles_only() {
        for cli in ALL {
            let table = shipped_agents(cli).unwrap();
            let roles = table["roles"].as_table().unwrap();
            for role in ["implement", "fix", "update_epic", "review"] {
                let profile = roles[role].as_str().unwrap();
                assert!(
                    profile == cli.name() || profile == format!("{}-review", cli.name()),
                    "{cli:?} {role} -> {profile}"
                );
                assert!(table["profiles"].get(profile).is_some(), "{profile}");
            }
            assert_eq!(roles["implement"].as_str(), Some(cli.name()));
        }
    }

    #[test]
    fn a_missing_key_is_named_before_the_program_is_looked_for() {
        for cli in ALL {
            let table = shipped_agents(cli).unwrap();
            let error = check_ready(cli, &table, |_| None, None).unwrap_err();
            let RealAgentsError::MissingKey { var, .. } = &error else {
                panic!("{error:?}");
            };
            assert!(key_variables(cli, &table).contains(var));
            assert!(error.to_string().contains("nothing was started"));
            let missing = check_ready(cli, &table, |_| Some("k".into()), None).unwrap_err();
            assert!(
                matches!(missing, RealAgentsError::MissingProgram { .. }),
                "{missing:?}"
            );
        }
    }
}
