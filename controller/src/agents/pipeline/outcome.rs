//! How an agent phase ended, as the machine hears it: the pipeline's
//! [`PhaseReport`] becomes the [`AgentOutcome`] of `AgentFinished`.

use super::{CommitPolicy, PhaseOutcome, PhaseReport};
use crate::agents::supervisor::LaunchExit;
use crate::machine::{AgentOutcome, AgentResult, PhaseResult};

impl PhaseReport {
    /// The machine's view of how the phase ended.
    pub fn agent_outcome(&self) -> AgentOutcome {
        match &self.outcome {
            PhaseOutcome::Accepted(result) => {
                let pushes = matches!(result, PhaseResult::Implement(_) | PhaseResult::Fix(_));
                if let (true, Some(refused)) = (pushes, commit_policy_refusal(self)) {
                    return refused;
                }
                AgentOutcome::Result {
                    result: AgentResult::Success {
                        result: result.clone(),
                    },
                }
            }
            PhaseOutcome::AgentFailure { message } => AgentOutcome::Result {
                result: AgentResult::Failure {
                    message: message.clone(),
                },
            },
            PhaseOutcome::AgentBlocked { message } => AgentOutcome::Result {
                result: AgentResult::Blocked {
                    message: message.clone(),
                },
            },
            PhaseOutcome::Rejected { diagnosis } => AgentOutcome::Malformed {
                diagnosis: diagnosis.clone(),
            },
            PhaseOutcome::ReviewerMovedWorktree => AgentOutcome::Malformed {
                diagnosis: "the reviewer changed the worktree, so its result is void".to_owned(),
            },
            PhaseOutcome::Crashed {
                exit: LaunchExit::Exited(code),
            } => AgentOutcome::NonZeroExit { code: *code },
            PhaseOutcome::Crashed { exit } => AgentOutcome::Crashed {
                detail: format!("{exit:?}"),
            },
            PhaseOutcome::TimedOut(_) => AgentOutcome::TimedOut,
            PhaseOutcome::Cancelled => AgentOutcome::Crashed {
                detail: "the launch was cancelled".to_owned(),
            },
        }
    }
}

/// A candidate whose commit messages may not be published is a malformed
/// answer: the agent gets a correction relaunch, nothing is pushed.
fn commit_policy_refusal(report: &PhaseReport) -> Option<AgentOutcome> {
    match &report.commit_policy {
        CommitPolicy::Refused(violation) => Some(AgentOutcome::Malformed {
            diagnosis: format!("a commit message may not be published: {violation}"),
        }),
        _ => None,
    }
}
