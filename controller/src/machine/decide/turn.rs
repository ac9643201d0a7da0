//! One turn of the machine: the decision under construction for one event,
//! the next state plus what it asks the driver to do. Phase changes go through [`Turn::enter`], which checks the
//! edge and performs the new phase's entry action.

use super::{check_run, epic, fix, implement, merge, plan, review};
use crate::machine::bounds::launch_allowed;
use crate::machine::budget::budget_spent;
use crate::machine::decision::{
    Correction, Decision, EffectIntent, LaunchInputs, LaunchRequest, Notice, Refusal,
    StatusSnapshot, ValidationRequest,
};
use crate::machine::event::Event;
use crate::machine::phase::{AgentPhase, Cause, IllegalEdge, Phase, check_edge};
use crate::machine::state::{Awaiting, BlockedInfo, RunState};
use crate::machine::status_labels::{issue_switch, label_change};
use autoforge_journal::{CommitSha, IssueNumber};

/// The decision `decide` is building for the event at hand.
pub(crate) struct Turn {
    pub state: RunState,
    /// The issue the run was on before this event, once started (an EPIC
    /// run may move on to its next issue).
    origin_issue: Option<IssueNumber>,
    transitions: Vec<(Phase, Phase)>,
    effects: Vec<EffectIntent>,
    launches: Vec<LaunchRequest>,
    validation: Option<ValidationRequest>,
}

pub(crate) type TurnResult = Result<(), IllegalEdge>;

impl Turn {
    pub fn new(state: &RunState) -> Self {
        Self {
            state: state.clone(),
            origin_issue: (state.phase != Phase::Initializing).then_some(state.issue),
            transitions: Vec::new(),
            effects: Vec::new(),
            launches: Vec::new(),
            validation: None,
        }
    }

    /// A decision that changes nothing and says why.
    pub fn refuse(state: &RunState, refusal: Refusal) -> Decision {
        Decision {
            next: state.clone(),
            transitions: Vec::new(),
            effects: Vec::new(),
            launches: Vec::new(),
            validation: None,
            refusal: Some(refusal),
        }
    }

    /// The refusal for an event the current wait does not expect.
    pub fn unexpected(state: &RunState, event: &Event) -> Decision {
        Self::refuse(
            state,
            Refusal::UnexpectedEvent {
                phase: state.phase,
                awaiting: state.awaiting.name().to_owned(),
                event: event.name().to_owned(),
            },
        )
    }

    /// Closes the decision; any phase change edits the status comment, and
    /// a change of what the check run should show writes it.
    pub fn finish(mut self) -> Decision {
        if let Some((from, _)) = self.transitions.first() {
            self.effects.push(EffectIntent::EditStatusComment {
                issue: self.state.issue,
                run_id: self.state.run_id.clone(),
                status: StatusSnapshot::of(&self.state),
            });
            if self.state.settings.status_labels {
                if let Some(finished) = self.origin_issue.filter(|i| *i != self.state.issue) {
                    self.effects
                        .extend(issue_switch(finished, self.state.issue, self.state.phase));
                } else if let Some(labels) = label_change(self.state.issue, *from, self.state.phase)
                {
                    self.effects.push(labels);
                }
            }
        }
        let checks = check_run::update(&mut self.state);
        self.effects.extend(checks);
        Decision {
            next: self.state,
            transitions: self.transitions,
            effects: self.effects,
            launches: self.launches,
            validation: self.validation,
            refusal: None,
        }
    }

    /// Closes a decision that must write nothing to GitHub, not even the
    /// status comment: the repository can no longer be reached.
    pub fn finish_without_writes(self) -> Decision {
        let shown = self.state.check_run.clone();
        let mut decision = self.finish();
        decision.effects.clear();
        // Nothing was written, so the check still shows what it showed.
        decision.next.check_run = shown;
        decision
    }

    pub fn effect(&mut self, effect: EffectIntent) {
        self.effects.push(effect);
    }

    pub fn wait(&mut self, awaiting: Awaiting) {
        self.state.awaiting = awaiting;
    }

    pub fn validate(&mut self, sha: &CommitSha) {
        self.state.candidate = Some(sha.to_owned());
        self.validation = Some(ValidationRequest {
            sha: sha.to_owned(),
        });
        self.wait(Awaiting::Validation {
            sha: sha.to_owned(),
        });
    }

    /// A validation result for a commit the run is not validating.
    pub fn stale_validation(state: &RunState, got: &CommitSha) -> Decision {
        Self::refuse(
            state,
            Refusal::StaleValidation {
                got: got.to_owned(),
            },
        )
    }

    /// Records a failed candidate (final for that commit; nothing is pushed).
    /// `Ok(true)`: relaunch the phase's agent with the failure; `Ok(false)`:
    /// the per-phase bound is reached and the run is now BLOCKED.
    pub fn count_validation_failure(&mut self, summary: &str) -> Result<bool, IllegalEdge> {
        let s = &mut self.state;
        s.counters.validation_failures += 1;
        s.candidate = None;
        s.pending = None;
        let max = s.settings.max_validation_failures;
        if s.counters.validation_failures >= max {
            let phase = s.phase;
            self.block(format!(
                "validation failed {max} times in {phase}: {summary}"
            ))?;
            return Ok(false);
        }
        s.last_validation_failure = Some(summary.to_owned());
        s.counters.corrections = 0;
        Ok(true)
    }

    /// Takes the edge to `to` and runs its entry action.
    pub fn enter(&mut self, to: Phase, cause: Cause) -> TurnResult {
        check_edge(self.state.phase, to, cause)?;
        self.transitions.push((self.state.phase, to));
        self.state.phase = to;
        self.state.counters.reset_for_phase_entry();
        match to {
            Phase::Plan => plan::enter(self),
            Phase::Implement => implement::enter(self),
            Phase::Review => review::enter(self),
            Phase::Fix => fix::enter(self),
            Phase::ReadyForMerge => merge::enter_ready(self),
            Phase::Merge => merge::enter_merge(self),
            Phase::UpdateEpic => epic::enter(self),
            Phase::Initializing | Phase::Blocked | Phase::Done | Phase::Failed | Phase::Stopped => {
                self.wait(Awaiting::Nothing);
                Ok(())
            }
        }
    }

    /// Parks the run with a reason an operator can act on.
    pub fn block(&mut self, reason: impl Into<String>) -> TurnResult {
        let from = self.state.phase;
        if from == Phase::Blocked {
            return Ok(());
        }
        let reason = reason.into();
        self.state.blocked = Some(BlockedInfo {
            from,
            reason: reason.clone(),
        });
        self.enter(Phase::Blocked, Cause::Ordinary)?;
        self.state.blocks += 1;
        if let Some(operator) = self.state.started_by.clone() {
            self.effects.push(EffectIntent::PostNotice {
                issue: self.state.issue,
                event: format!("run-{}-block-{}", self.state.run_id, self.state.blocks),
                notice: Notice::Blocked { operator, reason },
            });
        }
        Ok(())
    }

    pub fn fail(&mut self, message: &str) -> TurnResult {
        self.state.failure = Some(message.to_owned());
        self.enter(Phase::Failed, Cause::Ordinary)
    }

    /// STOPPED writes nothing but the status update.
    pub fn stop(&mut self) -> TurnResult {
        self.enter(Phase::Stopped, Cause::Ordinary)
    }

    /// Starts an agent, or blocks when the run's launch budget is spent.
    pub fn launch(&mut self, role: AgentPhase, round: u32, inputs: LaunchInputs) -> TurnResult {
        self.launch_with(role, round, inputs, None)
    }

    fn launch_with(
        &mut self,
        role: AgentPhase,
        round: u32,
        inputs: LaunchInputs,
        correction_of: Option<Correction>,
    ) -> TurnResult {
        if !launch_allowed(&self.state.settings, &self.state.counters) {
            let max = self.state.settings.max_launches;
            return self.block(format!(
                "the run's launch budget of {max} agent launches is exhausted"
            ));
        }
        if let Some(spent) = budget_spent(&self.state.settings, &self.state.counters) {
            return self.block(format!(
                "the run's budget is spent: its agents used {} when it started; stop the run \
                 and label the issue again to continue under a new limit",
                spent.describe()
            ));
        }
        self.state.counters.launches += 1;
        let request = LaunchRequest {
            id: self.state.counters.launches,
            role,
            round,
            correction_of,
            inputs,
        };
        self.launches.push(request.clone());
        self.wait(Awaiting::Agent {
            launch: Box::new(request),
        });
        Ok(())
    }

    /// The launch currently awaited, if any.
    fn running(&self) -> Option<LaunchRequest> {
        match &self.state.awaiting {
            Awaiting::Agent { launch } => Some(launch.as_ref().clone()),
            _ => None,
        }
    }

    /// Launches the same request again under a new id (a retry); a retried
    /// correction stays that correction, with its diagnosis.
    pub fn relaunch(&mut self, request: LaunchRequest) -> TurnResult {
        self.launch_with(
            request.role,
            request.round,
            request.inputs,
            request.correction_of,
        )
    }

    /// A malformed result from an agent that exited 0: one bounded
    /// correction relaunch, then BLOCKED.
    pub fn correct(&mut self, diagnosis: &str) -> TurnResult {
        let Some(running) = self.running() else {
            return self.block(format!("malformed agent result: {diagnosis}"));
        };
        let max = self.state.settings.max_corrections;
        if self.state.counters.corrections >= max {
            return self.block(format!(
                "the agent's result was still malformed after {max} correction(s): {diagnosis}"
            ));
        }
        self.state.counters.corrections += 1;
        let correction = Correction {
            of_launch: running.id,
            diagnosis: diagnosis.to_owned(),
        };
        self.launch_with(
            running.role,
            running.round,
            running.inputs,
            Some(correction),
        )
    }

    /// A crash, timeout, non-zero exit or transient GitHub failure: the
    /// phase stays; retry up to the bound, then wait for `/autoforge retry`.
    pub fn retry_or_park(&mut self) -> TurnResult {
        if self.state.counters.retries >= self.state.settings.max_retries {
            let resume = Box::new(self.state.awaiting.clone());
            self.wait(Awaiting::OperatorRetry { resume });
            return Ok(());
        }
        self.state.counters.retries += 1;
        match self.running() {
            Some(request) => self.relaunch(request),
            // The driver redoes the awaited read, write or validation.
            None => Ok(()),
        }
    }
}
