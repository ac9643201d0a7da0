//! INITIALIZING and IMPLEMENT: start the run (in PLAN when it plans first,
//! see `plan`), launch the implementer with the approved plan,
//! validate its candidate, then push it and open or adopt the PR (a
//! candidate changing a protected path blocks instead of being pushed).

use super::common::protected_candidate;
use super::turn::{Turn, TurnResult};
use crate::machine::agent_result::{ImplementResult, PhaseResult};
use crate::machine::decision::{Decision, EffectIntent, LaunchInputs, MachineError};
use crate::machine::event::{EffectReadBack, Event, GitHubFacts, PrState, RepositorySettingsRead};
use crate::machine::phase::{AgentPhase, Cause, Phase};
use crate::machine::state::{Awaiting, EffectStep, EpicState, FactsPurpose, RunState};

pub(super) fn on_initializing(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let (
        Awaiting::Start,
        Event::Started {
            repository,
            issue,
            epic,
            base_branch,
            base_sha,
            branch_head,
            settings,
            repository_settings,
            issue_text,
            started_by,
        },
    ) = (&state.awaiting, event)
    else {
        return Ok(Turn::unexpected(state, event));
    };
    let mut turn = Turn::new(state);
    let s = &mut turn.state;
    s.repository.clone_from(repository);
    s.issue = *issue;
    s.branch = RunState::branch_for(*issue);
    s.base_branch.clone_from(base_branch);
    s.base_sha = Some(base_sha.clone());
    s.prior_branch_head.clone_from(branch_head);
    s.epic = epic.map(EpicState::new);
    s.settings = settings.clone();
    s.issue_text.clone_from(issue_text);
    s.started_by.clone_from(started_by);
    let unusable = match repository_settings {
        RepositorySettingsRead::Valid { settings: chosen } => {
            if let Some(status) = chosen.labels.status {
                s.settings.status_labels = status;
            }
            if let Some(mode) = chosen.plan.mode {
                s.settings.plan_mode = mode;
            }
            s.repository_settings = chosen.clone();
            None
        }
        RepositorySettingsRead::Invalid { reason } => Some(reason),
    };
    if let Some(reason) = unusable {
        turn.block(format!(
            "the repository settings cannot be used: {reason}; fix the file on the default branch, then remove and add the trigger label again"
        ))?;
    } else if *epic == Some(*issue) {
        turn.block(format!(
            "issue #{issue} is the EPIC itself; label one of its issues"
        ))?;
    } else {
        let first = super::plan::first_phase(&turn.state);
        turn.enter(first, Cause::Ordinary)?;
    }
    Ok(turn.finish())
}

/// Entry: launch the implementer on the issue.
pub(super) fn enter(turn: &mut Turn) -> TurnResult {
    turn.state.candidate = None;
    turn.state.pending = None;
    launch(turn)
}

fn launch(turn: &mut Turn) -> TurnResult {
    let s = &turn.state;
    // Set by `Started` (and by each EPIC pick) before any launch; a state
    // without it cannot say what the implementer builds on.
    let Some(base_sha) = s.base_sha.clone() else {
        return turn.block(
            "the run has no base commit recorded; remove and add the trigger label to start it again"
                .to_owned(),
        );
    };
    let inputs = LaunchInputs::Implement {
        issue: s.issue,
        branch: s.branch.clone(),
        base_sha: base_sha.clone(),
        // The reviewed head once there is a PR; before that earlier work on
        // the issue branch; else the default branch head.
        start_sha: s
            .review
            .binding
            .as_ref()
            .map(|b| b.head_sha.clone())
            .or_else(|| s.prior_branch_head.clone())
            .unwrap_or(base_sha),
        validation_failure: s.last_validation_failure.clone(),
        plan: s.plan.approved.clone().map(Box::new),
    };
    turn.launch(AgentPhase::Implement, 0, inputs)
}

pub(super) fn on_result(turn: &mut Turn, result: &ImplementResult) -> TurnResult {
    if turn.state.base_sha.as_ref() == Some(&result.head_sha) {
        return turn.correct("head_sha equals the base: nothing was committed");
    }
    turn.state.pending = Some(PhaseResult::Implement(result.clone()));
    turn.validate(&result.head_sha);
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Validation { sha },
            Event::ValidationFinished {
                sha: got,
                passed,
                summary,
                protected_paths,
                ..
            },
        ) => {
            if sha != got {
                return Ok(Turn::stale_validation(state, got));
            }
            if *passed && !protected_paths.is_empty() {
                protected_candidate(&mut turn, got, protected_paths)?;
            } else if *passed {
                turn.wait(Awaiting::Facts {
                    purpose: FactsPurpose::Publish,
                });
            } else {
                validation_failed(&mut turn, summary)?;
            }
        }
        (
            Awaiting::Facts {
                purpose: FactsPurpose::Publish,
            },
            Event::GitHubObserved { facts },
        ) => {
            publish(&mut turn, facts)?;
        }
        (
            Awaiting::Effects {
                step: EffectStep::PublishCandidate,
            },
            Event::EffectsObserved { observed },
        ) => {
            published(&mut turn, observed)?;
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

/// A failed candidate is final for that commit: nothing is pushed and the
/// implementer runs again with the failure, up to the per-phase bound.
fn validation_failed(turn: &mut Turn, summary: &str) -> TurnResult {
    if turn.count_validation_failure(summary)? {
        launch(turn)?;
    }
    Ok(())
}

fn publish(turn: &mut Turn, facts: &GitHubFacts) -> TurnResult {
    if !facts.issue_open {
        return turn.block("the issue was closed before the candidate was published");
    }
    let Some(PhaseResult::Implement(result)) = turn.state.pending.clone() else {
        return turn.block("no validated implementation is pending publication");
    };
    let s = &turn.state;
    let push = EffectIntent::Push {
        branch: s.branch.clone(),
        sha: result.head_sha.clone(),
        expected_old: facts.branch_head.clone(),
    };
    // Our own PR on the branch (bound, or found by its marker after a crash)
    // is reused; otherwise one unmarked PR is adopted; two is ambiguous.
    let ours = match (&facts.pr, s.pr) {
        (Some(pr), Some(bound)) if pr.number != bound => {
            return turn.block(format!(
                "pull request #{bound} is bound but GitHub answered with #{}",
                pr.number
            ));
        }
        (None, Some(bound)) => {
            return turn.block(format!("the bound pull request #{bound} could not be read"));
        }
        (pr, _) => pr.clone(),
    };
    let pr_effect = match ours {
        Some(pr) if pr.state != PrState::Open => {
            return turn.block(format!("pull request #{} is no longer open", pr.number));
        }
        Some(pr) => {
            turn.state.pr = Some(pr.number);
            None
        }
        None => match facts.adoptable_prs.as_slice() {
            [] => Some(EffectIntent::CreatePr {
                issue: s.issue,
                branch: s.branch.clone(),
                base: s.base_branch.clone(),
                title: result.pr_title.clone(),
                body: result.pr_body.clone(),
            }),
            [one] => Some(EffectIntent::AdoptPr {
                pr: *one,
                issue: s.issue,
            }),
            several => {
                return turn.block(format!(
                    "{} open pull requests on {} could be adopted; close all but one",
                    several.len(),
                    s.branch
                ));
            }
        },
    };
    turn.effect(push);
    if let Some(effect) = pr_effect {
        turn.effect(effect);
    }
    turn.wait(Awaiting::Effects {
        step: EffectStep::PublishCandidate,
    });
    Ok(())
}

fn published(turn: &mut Turn, observed: &[EffectReadBack]) -> TurnResult {
    let observed_pr = observed.iter().find_map(|o| match o {
        EffectReadBack::PullRequest { number } => Some(*number),
        _ => None,
    });
    let Some(pr) = observed_pr.or(turn.state.pr) else {
        return turn.block("the pull request was not observed after publishing");
    };
    turn.state.pr = Some(pr);
    turn.state.candidate = None;
    turn.state.pending = None;
    turn.state.last_validation_failure = None;
    turn.enter(Phase::Review, Cause::Ordinary)
}
