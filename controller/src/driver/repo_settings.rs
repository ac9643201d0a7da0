//! The repository's own settings (SPEC §16): `.github/autoforge.toml` is
//! read once, when the run starts, at the default-branch commit the run
//! starts from — never from a PR branch — checked (see
//! [`crate::config::parse_repository_settings`]) and handed to the machine,
//! which freezes it into the run state. Everything later reads the frozen
//! copy, so an edit of the file mid-run, or a PR that changes it, has no
//! effect on the run: validation uses [`validation_commands`], launches
//! use [`catalog_for`].

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::agent_step::AgentRuntime;
use super::error::DriverError;
use crate::agents::profile::{AgentCatalog, ReviewRole, ReviewRoute, RoleRouting, RoundRange};
use crate::config::RepositoryAgents;
use crate::config::{REPOSITORY_SETTINGS_PATH, parse_repository_settings};
use crate::github::{GitHubApi, RepoName};
use crate::machine::{AgentPhase, RepositorySettingsRead, RunState};
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
        Some(chosen) => chosen.clone(),
        None => runtime.validation_commands.clone(),
    }
}

/// The agent catalog this run launches with: the operator's, with the
/// roles the repository chose (among the operator's profiles) swapped in.
pub(super) fn catalog_for<'a>(
    state: &RunState,
    runtime: &'a AgentRuntime,
) -> Result<Cow<'a, AgentCatalog>, DriverError> {
    let chosen = &state.repository_settings.agents;
    if *chosen == RepositoryAgents::default() {
        return Ok(Cow::Borrowed(&runtime.catalog));
    }
    let operator = runtime.catalog.routing();
    let pick = |choice: &Option<String>, role: AgentPhase| {
        choice
            .clone()
            .or_else(|| operator.profile_for(role, 1).map(str::to_owned))
    };
    let max_round = state.settings.max_review_rounds.max(1);
    let review = match &chosen.review {
        Some(profile) => Some(ReviewRole::Always(profile.clone())),
        None => operator_review_routes(operator, max_round).map(ReviewRole::ByRound),
    };
    let invalid = |e: crate::agents::profile::RoutingError| {
        DriverError::Agent(format!("the repository's agent roles cannot be used: {e}"))
    };
    let routing = RoleRouting::new(
        pick(&chosen.implement, AgentPhase::Implement),
        pick(&chosen.fix, AgentPhase::Fix),
        pick(&chosen.update_epic, AgentPhase::UpdateEpic),
        review.as_ref(),
        max_round,
    )
    .map_err(invalid)?
    .with_plan(pick(&chosen.plan, AgentPhase::Plan));
    let catalog =
        AgentCatalog::new(runtime.catalog.profiles().clone(), routing).map_err(invalid)?;
    Ok(Cow::Owned(catalog))
}

/// The operator's reviewer by round, as contiguous ranges covering rounds
/// 1..=`max_round` (the last one open-ended); `None` without a reviewer.
fn operator_review_routes(operator: &RoleRouting, max_round: u32) -> Option<Vec<ReviewRoute>> {
    let mut routes: Vec<ReviewRoute> = Vec::new();
    for round in 1..=max_round {
        let profile = operator.profile_for(AgentPhase::Review, round)?;
        match routes.last_mut() {
            Some(last) if last.profile == profile => last.rounds.end = Some(round),
            _ => routes.push(ReviewRoute {
                rounds: RoundRange {
                    start: round,
                    end: Some(round),
                },
                profile: profile.to_owned(),
            }),
        }
    }
    if let Some(last) = routes.last_mut() {
        last.rounds.end = None;
    }
    Some(routes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_operators_review_ranges_survive_a_repository_override_of_another_role() {
        let operator = RoleRouting::new(
            Some("a".into()),
            None,
            None,
            Some(&ReviewRole::ByRound(vec![
                ReviewRoute {
                    rounds: RoundRange {
                        start: 1,
                        end: Some(1),
                    },
                    profile: "a".into(),
                },
                ReviewRoute {
                    rounds: RoundRange {
                        start: 2,
                        end: None,
                    },
                    profile: "b".into(),
                },
            ])),
            5,
        )
        .unwrap();
        let routes = operator_review_routes(&operator, 5).unwrap();
        let rebuilt =
            RoleRouting::new(None, None, None, Some(&ReviewRole::ByRound(routes)), 5).unwrap();
        for round in 1..=7 {
            assert_eq!(
                rebuilt.profile_for(AgentPhase::Review, round),
                operator.profile_for(AgentPhase::Review, round),
                "round {round}"
            );
        }
    }
}
