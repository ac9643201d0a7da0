//! INITIALIZING and IMPLEMENT: start the run, launch the implementer,
//! validate its candidate, then push it and open or adopt the PR.

use super::step::{Step, StepResult};
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
        },
    ) = (&state.awaiting, event)
    else {
        return Ok(Step::unexpected(state, event));
    };
    let mut step = Step::new(state);
    let s = &mut step.state;
    s.repository.clone_from(repository);
    s.issue = *issue;
    s.branch = RunState::branch_for(*issue);
    s.base_branch.clone_from(base_branch);
    s.base_sha.clone_from(base_sha);
    s.prior_branch_head.clone_from(branch_head);
    s.epic = epic.map(EpicState::new);
    s.settings = settings.clone();
    let unusable = match repository_settings {
        RepositorySettingsRead::Valid { settings: chosen } => {
            if let Some(status) = chosen.labels.status {
                s.settings.status_labels = status;
            }
            s.repository_settings = chosen.clone();
            None
        }
        RepositorySettingsRead::Invalid { reason } => Some(reason),
    };
    if let Some(reason) = unusable {
        step.block(format!(
            "the repository settings cannot be used: {reason}; fix the file on the default branch, then remove and add the trigger label again"
        ))?;
    } else if *epic == Some(*issue) {
        step.block(format!(
            "issue #{issue} is the EPIC itself; label one of its issues"
        ))?;
    } else {
        step.enter(Phase::Implement, Cause::Ordinary)?;
    }
    Ok(step.finish())
}

/// Entry: launch the implementer on the issue.
pub(super) fn enter(step: &mut Step) -> StepResult {
    step.state.candidate = None;
    step.state.pending = None;
    launch(step)
}

fn launch(step: &mut Step) -> StepResult {
    let s = &step.state;
    let inputs = LaunchInputs::Implement {
        issue: s.issue,
        branch: s.branch.clone(),
        base_sha: s.base_sha.clone(),
        // The reviewed head once there is a PR; before that earlier work on
        // the issue branch; else the default branch head.
        start_sha: s
            .review
            .binding
            .as_ref()
            .map(|b| b.head_sha.clone())
            .or_else(|| s.prior_branch_head.clone())
            .unwrap_or_else(|| s.base_sha.clone()),
        validation_failure: s.last_validation_failure.clone(),
    };
    step.launch(AgentPhase::Implement, 0, inputs)
}

pub(super) fn on_result(step: &mut Step, result: &ImplementResult) -> StepResult {
    if result.head_sha == step.state.base_sha {
        return step.correct("head_sha equals the base: nothing was committed");
    }
    step.state.pending = Some(PhaseResult::Implement(result.clone()));
    step.validate(&result.head_sha);
    Ok(())
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut step = Step::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Validation { sha },
            Event::ValidationFinished {
                sha: got,
                passed,
                summary,
                ..
            },
        ) => {
            if sha != got {
                return Ok(Step::stale_validation(state, got));
            }
            if *passed {
                step.wait(Awaiting::Facts {
                    purpose: FactsPurpose::Publish,
                });
            } else {
                validation_failed(&mut step, summary)?;
            }
        }
        (
            Awaiting::Facts {
                purpose: FactsPurpose::Publish,
            },
            Event::GitHubObserved { facts },
        ) => {
            publish(&mut step, facts)?;
        }
        (
            Awaiting::Effects {
                step: EffectStep::PublishCandidate,
            },
            Event::EffectsObserved { observed },
        ) => {
            published(&mut step, observed)?;
        }
        _ => return Ok(Step::unexpected(state, event)),
    }
    Ok(step.finish())
}

/// A failed candidate is final for that commit: nothing is pushed and the
/// implementer runs again with the failure, up to the per-phase bound.
fn validation_failed(step: &mut Step, summary: &str) -> StepResult {
    if step.count_validation_failure(summary)? {
        launch(step)?;
    }
    Ok(())
}

fn publish(step: &mut Step, facts: &GitHubFacts) -> StepResult {
    if !facts.issue_open {
        return step.block("the issue was closed before the candidate was published");
    }
    let Some(PhaseResult::Implement(result)) = step.state.pending.clone() else {
        return step.block("no validated implementation is pending publication");
    };
    let s = &step.state;
    let push = EffectIntent::Push {
        branch: s.branch.clone(),
        sha: result.head_sha.clone(),
        expected_old: facts.branch_head.clone(),
    };
    // Our own PR on the branch (bound, or found by its marker after a crash)
    // is reused; otherwise one unmarked PR is adopted; two is ambiguous.
    let ours = match (&facts.pr, s.pr) {
        (Some(pr), Some(bound)) if pr.number != bound => {
            return step.block(format!(
                "pull request #{bound} is bound but GitHub answered with #{}",
                pr.number
            ));
        }
        (None, Some(bound)) => {
            return step.block(format!("the bound pull request #{bound} could not be read"));
        }
        (pr, _) => pr.clone(),
    };
    let pr_effect = match ours {
        Some(pr) if pr.state != PrState::Open => {
            return step.block(format!("pull request #{} is no longer open", pr.number));
        }
        Some(pr) => {
            step.state.pr = Some(pr.number);
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
                return step.block(format!(
                    "{} open pull requests on {} could be adopted; close all but one",
                    several.len(),
                    s.branch
                ));
            }
        },
    };
    step.effect(push);
    if let Some(effect) = pr_effect {
        step.effect(effect);
    }
    step.wait(Awaiting::Effects {
        step: EffectStep::PublishCandidate,
    });
    Ok(())
}

fn published(step: &mut Step, observed: &[EffectReadBack]) -> StepResult {
    let observed_pr = observed.iter().find_map(|o| match o {
        EffectReadBack::PullRequest { number } => Some(*number),
        _ => None,
    });
    let Some(pr) = observed_pr.or(step.state.pr) else {
        return step.block("the pull request was not observed after publishing");
    };
    step.state.pr = Some(pr);
    step.state.candidate = None;
    step.state.pending = None;
    step.state.last_validation_failure = None;
    step.enter(Phase::Review, Cause::Ordinary)
}
