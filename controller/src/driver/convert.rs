//! Conversions between the shapes two modules use for one thing: the
//! journal's effect rows and read-back values into the machine's
//! `Observed`, and the observers' `RunSignal`s into machine events.

use autoforge_journal::{Effect, EffectKind};
use serde_json::Value;

use crate::agents::pipeline::{CommitPolicy, PhaseOutcome, PhaseReport};
use crate::agents::supervisor::LaunchExit;
use crate::machine::{
    AgentOutcome, AgentResult, Command, Event, Observed, OperatorCommand, PhaseResult,
    RefusedCommand,
};
use crate::serve::RunSignal;

/// The web host markers link to, from the REST API URL:
/// `https://api.github.com` → `https://github.com`, a GHES
/// `https://ghe.example/api/v3` → `https://ghe.example`.
pub fn html_base(api_url: &str) -> String {
    let trimmed = api_url.trim_end_matches('/');
    if let Some(host) = trimmed.strip_suffix("/api/v3") {
        return host.to_owned();
    }
    trimmed.replacen("://api.", "://", 1)
}

/// The machine's view of how an agent phase ended.
pub fn agent_outcome(report: &PhaseReport) -> AgentOutcome {
    match &report.outcome {
        PhaseOutcome::Accepted(result) => {
            let pushes = matches!(result, PhaseResult::Implement(_) | PhaseResult::Fix(_));
            if let (true, Some(refused)) = (pushes, commit_policy_refusal(report)) {
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

/// What a stored run event asks of the driver.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalAction {
    /// Feed this event to the machine as it is.
    Feed(Box<Event>),
    /// The run was started: read the issue's base and feed `Started`.
    Start { issue: u64 },
    /// `/autoforge unblock`: read the facts, then feed the command.
    Unblock {
        thread: u64,
        comment_id: u64,
        actor: String,
        reason: String,
    },
    /// Nothing the machine decides on (yet): acknowledge it.
    Ignore,
}

/// What the machine needs to hear about a signal. Signals that only say
/// "something on GitHub changed" need a fresh read, which is done when the
/// run awaits facts; until then they carry nothing the machine can use.
pub fn signal_action(signal: &RunSignal) -> SignalAction {
    match signal {
        RunSignal::Started { issue, .. } => SignalAction::Start { issue: *issue },
        RunSignal::TriggerLabelRemoved { .. } => SignalAction::Feed(Box::new(Event::LabelRemoved)),
        RunSignal::IssueClosed { .. } => SignalAction::Feed(Box::new(Event::IssueClosed)),
        RunSignal::Command {
            verb,
            comment_id,
            actor,
            on_issue,
            argument,
        } if verb == "unblock" => SignalAction::Unblock {
            thread: *on_issue,
            comment_id: *comment_id,
            actor: actor.clone(),
            reason: argument.clone().unwrap_or_default(),
        },
        RunSignal::Command {
            verb,
            comment_id,
            actor,
            on_issue,
            ..
        } => match command_without_reads(verb) {
            Some(command) => SignalAction::Feed(Box::new(Event::Operator(OperatorCommand {
                thread: *on_issue,
                comment_id: *comment_id,
                actor: actor.clone(),
                command,
            }))),
            None => SignalAction::Ignore,
        },
        RunSignal::CommandRefused {
            verb,
            comment_id,
            actor,
            on_issue,
            reason,
        } => SignalAction::Feed(Box::new(Event::CommandRefused(RefusedCommand {
            thread: *on_issue,
            comment_id: *comment_id,
            actor: actor.clone(),
            command: verb.clone(),
            reason: reason.clone(),
        }))),
        RunSignal::IssueReopened { .. }
        | RunSignal::IssueEdited { .. }
        | RunSignal::PrHeadMoved { .. }
        | RunSignal::PrClosed { .. }
        | RunSignal::PrReopened { .. }
        | RunSignal::PrBaseChanged { .. }
        | RunSignal::ChecksCompleted { .. } => SignalAction::Ignore,
    }
}

/// The commands the machine decides from the command alone.
fn command_without_reads(verb: &str) -> Option<Command> {
    match verb {
        "retry" => Some(Command::Retry),
        "stop" => Some(Command::Stop),
        "merge" => Some(Command::Merge),
        "status" => Some(Command::Status),
        _ => None,
    }
}

/// Why an observed effect cannot be described to the machine.
#[derive(Debug, thiserror::Error)]
#[error("effect {id} ({kind}) was observed as {observed}, which lacks `{field}`")]
pub struct ObservedShapeError {
    pub id: i64,
    pub kind: EffectKind,
    pub field: &'static str,
    pub observed: Value,
}

/// The machine's view of one observed effect; `None` for kinds the machine
/// does not wait on (status comment, reactions, labels, check runs, merge —
/// the merge outcome is read back separately).
pub fn observed_for_machine(
    effect: &Effect,
    observed: &Value,
) -> Result<Option<Observed>, ObservedShapeError> {
    let missing = |field: &'static str| ObservedShapeError {
        id: effect.id.0,
        kind: effect.kind,
        field,
        observed: observed.clone(),
    };
    let text = |field: &'static str| {
        observed
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| missing(field))
    };
    let number = |field: &'static str| {
        observed
            .get(field)
            .and_then(Value::as_u64)
            .ok_or_else(|| missing(field))
    };
    Ok(Some(match effect.kind {
        EffectKind::Push => Observed::Pushed { sha: text("sha")? },
        EffectKind::CreatePr | EffectKind::AdoptPr => Observed::PullRequest {
            number: number("number")?,
        },
        EffectKind::PostComment => Observed::Comment { url: text("url")? },
        EffectKind::CreateIssue => Observed::FollowUpIssue {
            finding_id: identity_field(&effect.identity, "finding_id")
                .ok_or_else(|| missing("finding_id"))?,
            issue: number("number")?,
        },
        EffectKind::AppendIssueMarkers => Observed::MarkersAppended {
            issue: effect
                .target
                .strip_prefix("issue/")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| missing("target issue"))?,
        },
        EffectKind::SpliceEpicRoadmap => Observed::RoadmapSpliced,
        EffectKind::EditStatusComment
        | EffectKind::AddReaction
        | EffectKind::SetLabels
        | EffectKind::MergePr
        | EffectKind::CheckRun => return Ok(None),
    }))
}

/// `value` of `name=value` in an identity such as
/// `ai-follow-up:pr=4:finding_id=F-1`.
fn identity_field(identity: &str, name: &str) -> Option<String> {
    identity
        .split(':')
        .filter_map(|part| part.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use autoforge_journal::{EffectId, RunId, Stage};
    use serde_json::json;

    fn effect(kind: EffectKind, identity: &str, target: &str) -> Effect {
        Effect {
            id: EffectId(1),
            run_id: RunId(1),
            phase_entry: 1,
            position: 0,
            kind,
            identity: identity.into(),
            target: target.into(),
            precondition: json!({}),
            payload: Vec::new(),
            completion: json!({}),
            stage: Stage::Observed,
            attempts: 1,
            observed: None,
            reason: None,
            fencing_token: 1,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn read_back_values_become_the_observations_the_machine_waits_for() {
        let pr = effect(EffectKind::CreatePr, "ai-implementation:issue=3", "head/x");
        assert_eq!(
            observed_for_machine(&pr, &json!({"number": 9, "url": "u"})).unwrap(),
            Some(Observed::PullRequest { number: 9 })
        );
        let follow = effect(
            EffectKind::CreateIssue,
            "ai-follow-up:pr=4:finding_id=F-2",
            "issues",
        );
        assert_eq!(
            observed_for_machine(&follow, &json!({"number": 12})).unwrap(),
            Some(Observed::FollowUpIssue {
                finding_id: "F-2".into(),
                issue: 12
            })
        );
        let status = effect(
            EffectKind::EditStatusComment,
            "autoforge-status:run=1",
            "issue/1",
        );
        assert_eq!(observed_for_machine(&status, &json!({})).unwrap(), None);
    }

    #[test]
    fn a_read_back_value_without_its_field_is_an_error_not_a_guess() {
        let push = effect(EffectKind::Push, "refs/heads/b@abc", "refs/heads/b");
        let error = observed_for_machine(&push, &json!({"ref": "refs/heads/b"})).unwrap_err();
        assert_eq!(error.field, "sha");
    }

    #[test]
    fn label_removal_and_closing_are_fed_directly_but_start_needs_a_read() {
        assert_eq!(
            signal_action(&RunSignal::TriggerLabelRemoved {
                issue: 1,
                by: "a".into()
            }),
            SignalAction::Feed(Box::new(Event::LabelRemoved))
        );
        assert_eq!(
            signal_action(&RunSignal::Started {
                issue: 4,
                labeled_by: "a".into()
            }),
            SignalAction::Start { issue: 4 }
        );
    }

    #[test]
    fn marker_links_point_at_the_web_host_of_the_api() {
        assert_eq!(html_base("https://api.github.com"), "https://github.com");
        assert_eq!(
            html_base("https://ghe.example/api/v3/"),
            "https://ghe.example"
        );
    }

    #[test]
    fn commands_that_need_no_read_become_operator_events_and_unblock_asks_for_facts() {
        let command = |verb: &str| RunSignal::Command {
            verb: verb.into(),
            argument: Some("why".into()),
            comment_id: 5,
            actor: "alice".into(),
            on_issue: 3,
        };
        assert_eq!(
            signal_action(&command("status")),
            SignalAction::Feed(Box::new(Event::Operator(OperatorCommand {
                thread: 3,
                comment_id: 5,
                actor: "alice".into(),
                command: Command::Status,
            })))
        );
        assert_eq!(
            signal_action(&command("unblock")),
            SignalAction::Unblock {
                thread: 3,
                comment_id: 5,
                actor: "alice".into(),
                reason: "why".into(),
            }
        );
        assert_eq!(signal_action(&command("dance")), SignalAction::Ignore);
    }
}
