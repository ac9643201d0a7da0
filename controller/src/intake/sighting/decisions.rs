//! The operator decisions behind a sighting, each journalled: a trigger
//! labelling (start a run or answer the refusal), a trigger label removal
//! (stop the run or refuse), a review requesting changes (a human round or
//! a record) and the commands of one comment (a decision and a signal
//! each).

use autoforge_journal::{IssueNumber, Journal, NewCommandDecision, PullNumber, RunId};
use serde_json::json;

use crate::commands::{Actor, Command, CommandParseError, OperatorDecision, RefusalReason};
use crate::github::GitHubApi;
use crate::intake::access::GitHubAccess;
use crate::intake::answering::{answer_to, trigger_refused_answer};
use crate::intake::entries::{ChangeEntries, Entry};
use crate::intake::signal::RunSignal;
use crate::webhook::ReviewBy;

pub(super) async fn plan_trigger(
    key: String,
    repository: &str,
    issue: IssueNumber,
    actor: &Actor,
    journal: &Journal,
    access: &GitHubAccess,
    api: &GitHubApi,
) -> anyhow::Result<ChangeEntries> {
    let decision = access.decide(api, repository, actor).await?;
    let detail = |reason: String| json!({"repository": repository, "issue": issue, "actor": actor.login, "reason": reason});
    let own = decision.is_the_app_itself();
    let change = match decision {
        OperatorDecision::Refused { reason } => {
            let reason = reason.to_string();
            let refused = ChangeEntries::new(key.clone(), format!("trigger refused: {reason}"))
                .with(Entry::Audit {
                    run_id: None,
                    kind: "trigger_refused".to_owned(),
                    detail: detail(reason.clone()),
                });
            if own {
                refused
            } else {
                // Answered once per labelling: the answer is keyed by it.
                let to = answer_to(&key, repository, api, issue);
                let label = &access.trigger_label;
                refused.with(trigger_refused_answer(to, actor, &reason, label)?)
            }
        }
        OperatorDecision::Allowed { .. } => {
            match journal.active_run_for_object(repository, issue).await? {
                Some(run_id) => ChangeEntries::new(key, "trigger ignored: run already active")
                    .with(Entry::Audit {
                        run_id: Some(run_id),
                        kind: "trigger_ignored".to_owned(),
                        detail: detail("the issue already has an active run".to_owned()),
                    }),
                None => ChangeEntries::new(key, "run started").with(Entry::StartRun {
                    repository: repository.to_owned(),
                    issue,
                    labeled_by: actor.login.clone(),
                }),
            }
        }
    };
    Ok(change)
}

/// A trigger label removal on a run's issue. An operator's stops the run
/// (once per run, however often the removal is seen); anyone else's is
/// answered once per removal and changes nothing. The controller's own
/// removals are recorded only.
pub(super) fn plan_removal(
    key: String,
    run_id: RunId,
    issue: IssueNumber,
    actor: Option<&Actor>,
    removal: &str,
    decision: Option<OperatorDecision>,
) -> anyhow::Result<ChangeEntries> {
    let by = actor.map(|a| a.login.clone());
    let reason = match decision {
        Some(OperatorDecision::Allowed { .. }) => {
            let signal = RunSignal::TriggerLabelRemoved {
                issue,
                by: by.unwrap_or_default(),
            };
            return Ok(ChangeEntries::signal(
                format!("{key}:run-{run_id}"),
                run_id,
                signal,
            ));
        }
        Some(decision) if decision.is_the_app_itself() => {
            return Ok(ChangeEntries::new(
                format!("{key}:{removal}"),
                "own label removal ignored",
            ));
        }
        Some(OperatorDecision::Refused { reason }) => reason.to_string(),
        None => "who removed it is not known, so it cannot count as an operator's".to_owned(),
    };
    let detail = json!({"issue": issue, "actor": by, "removal": removal, "reason": reason});
    let signal = RunSignal::TriggerRemovalRefused {
        issue,
        by,
        reason,
        removal: removal.to_owned(),
    };
    Ok(
        ChangeEntries::new(format!("{key}:{removal}"), "label removal refused")
            .with(Entry::Audit {
                run_id: Some(run_id),
                kind: "trigger_removal_refused".to_owned(),
                detail,
            })
            .with(Entry::Signal {
                run_id,
                suffix: String::new(),
                signal,
            }),
    )
}

/// A review requesting changes: an operator's starts a human round (the
/// driver reads the review and its comments); anyone else's is recorded
/// and changes nothing. Either way the decision is journalled under the
/// review's own key, so webhook and poller act on it once.
pub(super) fn plan_human_review(
    change: ChangeEntries,
    run_id: RunId,
    pr: PullNumber,
    by: &ReviewBy,
    decision: &OperatorDecision,
) -> ChangeEntries {
    let (accepted, reason) = match decision {
        OperatorDecision::Allowed { by } => (true, format!("operator ({by:?})")),
        OperatorDecision::Refused { reason } => (false, reason.to_string()),
    };
    let detail = json!({
        "pr": pr,
        "review_id": by.review_id,
        "actor": by.author.login,
        "accepted": accepted,
        "reason": reason,
    });
    let change = change.with(Entry::Audit {
        run_id: Some(run_id),
        kind: "human_review_decided".to_owned(),
        detail,
    });
    if !accepted {
        return change;
    }
    change.with(Entry::Signal {
        run_id,
        suffix: ":human-round".to_owned(),
        signal: RunSignal::HumanReview {
            pr,
            review_id: by.review_id,
            author: by.author.login.clone(),
        },
    })
}

pub(super) fn plan_commands(
    key: String,
    run_id: RunId,
    issue: IssueNumber,
    comment_id: u64,
    actor: &Actor,
    decision: &OperatorDecision,
    commands: &[Result<Command, CommandParseError>],
) -> anyhow::Result<ChangeEntries> {
    let comment = i64::try_from(comment_id)?;
    let mut change = ChangeEntries::new(key, "commands decided");
    for (index, parsed) in commands.iter().enumerate() {
        let (command, accepted, reason) = match (parsed, decision) {
            (Err(error), _) => ("malformed".to_owned(), false, error.to_string()),
            // Help changes nothing and tells what an operator may do: any
            // person asking gets it (bots and the controller do not).
            (
                Ok(command @ Command::Help),
                OperatorDecision::Refused {
                    reason: RefusalReason::InsufficientPermission { .. },
                },
            ) => (
                command.verb().to_owned(),
                true,
                "help is answered for anyone".to_owned(),
            ),
            (Ok(command), OperatorDecision::Refused { reason }) => {
                (command.verb().to_owned(), false, reason.to_string())
            }
            (Ok(command), OperatorDecision::Allowed { by }) => (
                command.verb().to_owned(),
                true,
                format!("operator ({by:?})"),
            ),
        };
        change = change.with(Entry::Decision(NewCommandDecision {
            run_id: Some(run_id),
            comment_id: comment,
            actor: actor.login.clone(),
            command: command.clone(),
            accepted,
            reason: reason.clone(),
        }));
        // Accepted or not, the run answers every command on its thread
        // (SPEC §2); only an accepted one can change its state.
        let signal = match (accepted, parsed) {
            (true, Ok(command)) => RunSignal::Command {
                verb: command.verb().to_owned(),
                argument: command.text().map(str::to_owned),
                comment_id,
                actor: actor.login.clone(),
                on_issue: issue,
            },
            _ => RunSignal::CommandRefused {
                verb: command,
                comment_id,
                actor: actor.login.clone(),
                on_issue: issue,
                reason,
            },
        };
        change = change.with(Entry::Signal {
            run_id,
            suffix: format!(":{index}"),
            signal,
        });
    }
    Ok(change)
}
