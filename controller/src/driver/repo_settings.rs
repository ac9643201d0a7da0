//! The repository's own settings (SPEC §16): `.github/autoforge.toml` is
//! read once, when the run starts, at the default-branch commit the run
//! starts from — never from a PR branch — checked (see
//! [`crate::config::parse_repository_settings`]) and handed to the machine,
//! which freezes it into the run state. Everything later reads the frozen
//! copy, so an edit of the file mid-run, or a PR that changes it, has no
//! effect on the run.

use std::collections::BTreeSet;

use super::agent_step::AgentRuntime;
use super::error::DriverError;
use crate::config::{
    REPOSITORY_SETTINGS_PATH, ValidationCommand as ConfiguredCommand, parse_repository_settings,
};
use crate::github::{GitHubApi, RepoName};
use crate::machine::{RepositorySettingsRead, RunState};
use crate::validation::ValidationCommand;

/// Reads and checks the file at `commit`. A missing file reads as the
/// default settings; a file that cannot be used is reported to the machine
/// (which blocks the run with the reason); a failed read is an error the
/// driver retries.
pub(super) async fn read_repository_settings(
    api: &GitHubApi,
    repo: &RepoName,
    commit: &str,
    runtime: Option<&AgentRuntime>,
) -> Result<RepositorySettingsRead, DriverError> {
    let Some(file) = api
        .file_contents(repo, REPOSITORY_SETTINGS_PATH, commit)
        .await?
    else {
        return Ok(RepositorySettingsRead::default());
    };
    let profiles: BTreeSet<String> = runtime
        .map(|runtime| runtime.catalog.profiles().keys().cloned().collect())
        .unwrap_or_default();
    Ok(match parse_repository_settings(&file.bytes, &profiles) {
        Ok(settings) => RepositorySettingsRead::Valid { settings },
        Err(error) => RepositorySettingsRead::Invalid {
            reason: error.to_string(),
        },
    })
}

/// The validation commands of this run: the repository's frozen choice,
/// else the operator's configuration.
pub(super) fn validation_commands(
    state: &RunState,
    runtime: &AgentRuntime,
) -> Vec<ValidationCommand> {
    match &state.repository_settings.validation.commands {
        Some(chosen) => chosen.iter().map(converted).collect(),
        None => runtime.validation_commands.clone(),
    }
}

fn converted(command: &ConfiguredCommand) -> ValidationCommand {
    match command {
        ConfiguredCommand::Shell(line) => ValidationCommand::Shell(line.clone()),
        ConfiguredCommand::Argv(argv) => ValidationCommand::Argv(argv.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_repository_commands_are_converted_one_to_one() {
        let chosen = [
            ConfiguredCommand::Argv(vec!["cargo".into(), "test".into()]),
            ConfiguredCommand::Shell("make lint".into()),
        ];
        assert_eq!(
            chosen.iter().map(converted).collect::<Vec<_>>(),
            vec![
                ValidationCommand::Argv(vec!["cargo".into(), "test".into()]),
                ValidationCommand::Shell("make lint".into()),
            ]
        );
    }
}
