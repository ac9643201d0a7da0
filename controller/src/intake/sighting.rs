//! From a [`Sighting`] — one change seen by a webhook or by the poller, in
//! one vocabulary — to the [`ChangeEntries`] of journal writes it causes. This is
//! where authorization happens (SPEC §2): the trigger label's actor and
//! every command's author or editor are checked against fresh permission
//! reads, and every decision is journalled.

use autoforge_journal::{IssueNumber, Journal, NewCommandDecision, PullNumber, RunId};
use serde_json::json;

use super::access::GitHubAccess;
use super::answering::{answer_to, plan_without_run, trigger_refused_answer};
use super::entries::{ChangeEntries, Entry};
use super::signal::RunSignal;
use crate::commands::{Actor, Command, CommandParseError, OperatorDecision, RefusalReason};
use crate::github::GitHubApi;
use crate::webhook::ReviewBy;

/// One change, whoever saw it. Each variant builds the same dedupe key from
/// a webhook payload and from a poll read.
#[derive(Debug, Clone, PartialEq)]
pub enum Sighting {
    /// The trigger label was added; `labeling` identifies this labelling
    /// (the `labeled` issue event id, or the delivery when none is found).
    TriggerLabeled {
        repository: String,
        issue: IssueNumber,
        actor: Actor,
        labeling: String,
    },
    /// The trigger label was removed by `actor` (`None` when no
    /// `unlabeled` event names who did); `removal` identifies this removal
    /// like `labeling` does a labelling.
    TriggerRemoved {
        repository: String,
        issue: IssueNumber,
        actor: Option<Actor>,
        removal: String,
    },
    IssueClosed {
        repository: String,
        issue: IssueNumber,
        closed_at: String,
    },
    IssueReopened {
        repository: String,
        issue: IssueNumber,
        updated_at: String,
    },
    IssueEdited {
        repository: String,
        issue: IssueNumber,
        updated_at: String,
        editor: Actor,
    },
    /// Commands of a new comment (all of them), or those an edit added
    /// (then `actor` is the editor).
    Commands {
        repository: String,
        issue: IssueNumber,
        comment_id: u64,
        updated_at: String,
        /// Digest of the body version the commands come from.
        body_digest: String,
        actor: Actor,
        commands: Vec<Result<Command, CommandParseError>>,
    },
    PrHead {
        repository: String,
        pr: PullNumber,
        head_sha: String,
    },
    PrClosed {
        repository: String,
        pr: PullNumber,
        merged: bool,
        merge_commit_sha: Option<String>,
        closed_at: String,
    },
    PrReopened {
        repository: String,
        pr: PullNumber,
        updated_at: String,
    },
    PrBase {
        repository: String,
        pr: PullNumber,
        new_base: String,
    },
    ChecksCompleted {
        repository: String,
        head_sha: String,
        pull_requests: Vec<PullNumber>,
        delivery: String,
    },
    /// A commit status reached a final state on `head_sha`; it names no
    /// pull request, so every run bound to one in the repository is told
    /// and the driver compares heads when it re-reads.
    StatusReported {
        repository: String,
        head_sha: String,
        delivery: String,
    },
    /// A review of `pr` was submitted or dismissed; a submitted review
    /// requesting changes names itself (a human round if its author is an
    /// operator) and is keyed by its id, not by the delivery.
    PrReviewed {
        repository: String,
        pr: PullNumber,
        head_sha: String,
        delivery: String,
        changes_requested: Option<ReviewBy>,
    },
}

impl Sighting {
    /// The dedupe key of the change. Trigger removals are keyed per run
    /// (see [`entries_for`]), so they have none here.
    ///
    /// Long by design: one arm per kind of sighting, each naming the fields
    /// that make two sightings the same change.
    fn key(&self) -> String {
        match self {
            Sighting::TriggerLabeled {
                repository,
                issue,
                labeling,
                ..
            } => format!("trigger:{repository}#{issue}:{labeling}"),
            Sighting::TriggerRemoved {
                repository, issue, ..
            } => {
                format!("trigger-removed:{repository}#{issue}")
            }
            Sighting::IssueClosed {
                repository,
                issue,
                closed_at,
            } => format!("closed:{repository}#{issue}@{closed_at}"),
            Sighting::IssueReopened {
                repository,
                issue,
                updated_at,
            } => format!("reopened:{repository}#{issue}@{updated_at}"),
            Sighting::IssueEdited {
                repository,
                issue,
                updated_at,
                ..
            } => format!("edited:{repository}#{issue}@{updated_at}"),
            Sighting::Commands {
                repository,
                comment_id,
                updated_at,
                body_digest,
                ..
            } => comment_key(repository, *comment_id, updated_at, body_digest),
            Sighting::PrHead {
                repository,
                pr,
                head_sha,
            } => format!("pr-head:{repository}#{pr}@{head_sha}"),
            Sighting::PrClosed {
                repository,
                pr,
                closed_at,
                ..
            } => format!("pr-closed:{repository}#{pr}@{closed_at}"),
            Sighting::PrReopened {
                repository,
                pr,
                updated_at,
            } => format!("pr-reopened:{repository}#{pr}@{updated_at}"),
            Sighting::PrBase {
                repository,
                pr,
                new_base,
            } => format!("pr-base:{repository}#{pr}@{new_base}"),
            Sighting::ChecksCompleted {
                repository,
                head_sha,
                delivery,
                ..
            } => format!("checks:{repository}@{head_sha}:{delivery}"),
            Sighting::StatusReported {
                repository,
                head_sha,
                delivery,
            } => format!("status:{repository}@{head_sha}:{delivery}"),
            Sighting::PrReviewed {
                repository,
                pr,
                changes_requested: Some(by),
                ..
            } => format!("review:{repository}#{pr}:review-{}", by.review_id),
            Sighting::PrReviewed {
                repository,
                pr,
                head_sha,
                delivery,
                ..
            } => format!("review:{repository}#{pr}@{head_sha}:{delivery}"),
        }
    }
}

/// The dedupe key of one version of a comment. `updated_at` has second
/// resolution, so the body digest tells apart two versions of one second.
pub fn comment_key(
    repository: &str,
    comment_id: u64,
    updated_at: &str,
    body_digest: &str,
) -> String {
    format!(
        "{}{updated_at}:{body_digest}",
        comment_key_prefix(repository, comment_id)
    )
}

/// The common start of the keys of every version of a comment.
pub fn comment_key_prefix(repository: &str, comment_id: u64) -> String {
    format!("comment:{repository}:{comment_id}@")
}

/// A short digest of a comment body for [`comment_key`].
pub fn body_digest(body: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body.as_bytes());
    hex::encode(&digest[..8])
}

/// How a trigger labelling or removal found as a `labeled`/`unlabeled`
/// issue event is named in [`Sighting::TriggerLabeled`] and
/// [`Sighting::TriggerRemoved`]; webhook and poller both use it.
pub fn labeling_of_event(label_event_id: u64) -> String {
    format!("event-{label_event_id}")
}

/// Whether the label removal `removal` happened before the labelling
/// whose change key is `start_key`. Both are named by their issue events
/// (`event-<id>`), whose ids GitHub hands out in increasing order; a
/// removal or labelling known only by its delivery cannot be ordered, so
/// it does not count as earlier.
fn predates(removal: &str, start_key: &str) -> bool {
    let id = |text: &str| text.strip_prefix("event-")?.parse::<u64>().ok();
    let labeling = start_key.rsplit_once(':').and_then(|(_, last)| id(last));
    match (id(removal), labeling) {
        (Some(removed), Some(labeled)) => removed < labeled,
        _ => false,
    }
}

/// Works out what `sighting` does. `None`: it concerns no run and needs no
/// record (e.g. a comment on an issue without an active run).
///
/// Long by design: one short arm per kind of sighting, so every kind's
/// handling is read in one place.
pub async fn entries_for(
    sighting: &Sighting,
    journal: &Journal,
    access: &GitHubAccess,
    api: &GitHubApi,
) -> anyhow::Result<Option<ChangeEntries>> {
    let key = sighting.key();
    let run_of = |repository: &str, number: IssueNumber| {
        let repository = repository.to_owned();
        async move { anyhow::Ok(journal.active_run_for_object(&repository, number).await?) }
    };
    let change = match sighting {
        Sighting::TriggerLabeled {
            repository,
            issue,
            actor,
            ..
        } => {
            // A labelling seen before costs no permission read.
            if journal.observed_change(&key).await?.is_some() {
                return Ok(Some(ChangeEntries::new(key, "seen")));
            }
            plan_trigger(key, repository, *issue, actor, journal, access, api).await?
        }
        Sighting::TriggerRemoved {
            repository,
            issue,
            actor,
            removal,
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            // A removal acted on before costs no permission read.
            for seen in [format!("{key}:run-{run_id}"), format!("{key}:{removal}")] {
                if journal.observed_change(&seen).await?.is_some() {
                    return Ok(Some(ChangeEntries::new(seen, "seen")));
                }
            }
            // A removal that happened before the labelling that started
            // this run (delivered late, or seen again) ended an earlier
            // run; it must not stop this one.
            let start = journal.run_start_key(run_id).await?;
            if start
                .as_deref()
                .is_some_and(|start| predates(removal, start))
            {
                let detail = json!({"issue": issue, "removal": removal, "run_started_by": start});
                return Ok(Some(
                    ChangeEntries::new(
                        format!("{key}:{removal}"),
                        "removal before the run's labelling",
                    )
                    .with(Entry::Audit {
                        run_id: Some(run_id),
                        kind: "trigger_removal_predates_run".to_owned(),
                        detail,
                    }),
                ));
            }
            let decision = match actor {
                Some(actor) => Some(access.decide(api, repository, actor).await?),
                None => None,
            };
            plan_removal(key, run_id, *issue, actor.as_ref(), removal, decision)?
        }
        Sighting::IssueClosed {
            repository, issue, ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::IssueClosed { issue: *issue })
        }
        Sighting::IssueReopened {
            repository, issue, ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::IssueReopened { issue: *issue })
        }
        Sighting::IssueEdited {
            repository,
            issue,
            editor,
            ..
        } => {
            let Some(run_id) = run_of(repository, *issue).await? else {
                return Ok(None);
            };
            let decision = access.decide(api, repository, editor).await?;
            // The run's own writes (an EPIC's roadmap) are its text already.
            if decision.is_the_app_itself() {
                return Ok(Some(ChangeEntries::new(key, "own edit")));
            }
            let signal = RunSignal::IssueEdited {
                issue: *issue,
                editor: Some(editor.login.clone()),
                by_operator: decision.is_allowed(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::Commands {
            repository,
            issue,
            comment_id,
            actor,
            commands,
            ..
        } => {
            if commands.is_empty() {
                return Ok(None);
            }
            if journal.observed_change(&key).await?.is_some() {
                return Ok(Some(ChangeEntries::new(key, "seen")));
            }
            let run_id = run_of(repository, *issue).await?;
            let decision = access.decide(api, repository, actor).await?;
            let Some(run_id) = run_id else {
                // No run to act on: the comment is answered outside any run.
                let to = answer_to(&key, repository, api, *issue);
                let label = &access.trigger_label;
                let change = plan_without_run(
                    key.clone(),
                    to,
                    *comment_id,
                    actor,
                    &decision,
                    label,
                    commands,
                )?;
                return Ok(Some(change));
            };
            plan_commands(key, run_id, *issue, *comment_id, actor, &decision, commands)?
        }
        Sighting::PrHead {
            repository,
            pr,
            head_sha,
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrHeadMoved {
                pr: *pr,
                head_sha: head_sha.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::PrClosed {
            repository,
            pr,
            merged,
            merge_commit_sha,
            ..
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrClosed {
                pr: *pr,
                merged: *merged,
                merge_commit_sha: merge_commit_sha.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::PrReopened { repository, pr, .. } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            ChangeEntries::signal(key, run_id, RunSignal::PrReopened { pr: *pr })
        }
        Sighting::PrBase {
            repository,
            pr,
            new_base,
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrBaseChanged {
                pr: *pr,
                new_base: new_base.clone(),
            };
            ChangeEntries::signal(key, run_id, signal)
        }
        Sighting::ChecksCompleted {
            repository,
            head_sha,
            pull_requests,
            ..
        } => {
            let mut change = ChangeEntries::new(key, "signal");
            for pr in pull_requests {
                if let Some(run_id) = run_of(repository, pr.as_issue()).await? {
                    change = change.with(Entry::Signal {
                        run_id,
                        suffix: format!(":pr-{pr}"),
                        signal: RunSignal::ChecksCompleted {
                            pr: *pr,
                            head_sha: head_sha.clone(),
                        },
                    });
                }
            }
            if change.entries.is_empty() {
                return Ok(None);
            }
            change
        }
        Sighting::StatusReported {
            repository,
            head_sha,
            ..
        } => {
            let mut change = ChangeEntries::new(key, "signal");
            for (run_id, pr) in journal.active_runs_with_pull_requests(repository).await? {
                change = change.with(Entry::Signal {
                    run_id,
                    suffix: format!(":pr-{pr}"),
                    signal: RunSignal::ChecksCompleted {
                        pr,
                        head_sha: head_sha.clone(),
                    },
                });
            }
            if change.entries.is_empty() {
                return Ok(None);
            }
            change
        }
        Sighting::PrReviewed {
            repository,
            pr,
            head_sha,
            changes_requested,
            ..
        } => {
            let Some(run_id) = run_of(repository, pr.as_issue()).await? else {
                return Ok(None);
            };
            let signal = RunSignal::PrReviewed {
                pr: *pr,
                head_sha: head_sha.clone(),
            };
            let change = ChangeEntries::signal(key, run_id, signal);
            match changes_requested {
                // A review acted on before costs no permission read.
                Some(_) if journal.observed_change(&change.key).await?.is_some() => {
                    return Ok(Some(ChangeEntries::new(change.key, "seen")));
                }
                Some(by) => {
                    let decision = access.decide(api, repository, &by.author).await?;
                    plan_human_review(change, run_id, *pr, by, &decision)
                }
                None => change,
            }
        }
    };
    Ok(Some(change))
}

async fn plan_trigger(
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
fn plan_removal(
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
fn plan_human_review(
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

fn plan_commands(
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::commands::{ActorKind, AllowedBy, Permission, RefusalReason, parse_commands};

    fn alice() -> Actor {
        Actor {
            login: "alice".into(),
            kind: ActorKind::User,
        }
    }

    #[test]
    fn accepted_commands_become_signals_and_every_command_a_decision() {
        let commands = parse_commands("/autoforge retry\n/autoforge frobnicate\n");
        let decision = OperatorDecision::Allowed {
            by: AllowedBy::Permission(Permission::Admin),
        };
        let change = plan_commands(
            "k".into(),
            RunId(1),
            autoforge_journal::testing::issue(4),
            9,
            &alice(),
            &decision,
            &commands,
        )
        .unwrap();
        let decisions: Vec<_> = change
            .entries
            .iter()
            .filter_map(|s| match s {
                Entry::Decision(d) => Some((d.command.as_str(), d.accepted)),
                _ => None,
            })
            .collect();
        assert_eq!(decisions, [("retry", true), ("malformed", false)]);
        let signals: Vec<String> = change
            .entries
            .iter()
            .filter_map(|s| match s {
                Entry::Signal { signal, .. } => Some(signal.to_json()["kind"].to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(signals, ["\"command\"", "\"command_refused\""]);
    }

    #[test]
    fn a_refused_actor_gets_a_decision_and_a_refusal_to_answer_but_no_command() {
        let commands = parse_commands("/autoforge stop\n");
        let decision = OperatorDecision::Refused {
            reason: RefusalReason::BotAccount,
        };
        let change = plan_commands(
            "k".into(),
            RunId(1),
            autoforge_journal::testing::issue(4),
            9,
            &alice(),
            &decision,
            &commands,
        )
        .unwrap();
        assert_eq!(change.entries.len(), 2);
        assert!(matches!(&change.entries[0], Entry::Decision(d) if !d.accepted));
        let Entry::Signal { signal, .. } = &change.entries[1] else {
            panic!("the refusal is queued for the run to answer");
        };
        assert!(
            matches!(signal, RunSignal::CommandRefused { verb, comment_id: 9, on_issue, .. } if verb == "stop" && on_issue.get() == 4),
            "{signal:?}"
        );
    }

    fn signals_of(change: &ChangeEntries) -> Vec<&RunSignal> {
        change
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Signal { signal, .. } => Some(signal),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_operators_label_removal_stops_the_run_once_per_run() {
        let allowed = OperatorDecision::Allowed {
            by: AllowedBy::Permission(Permission::Maintain),
        };
        let change = plan_removal(
            "trigger-removed:a/b#4".into(),
            RunId(3),
            autoforge_journal::testing::issue(4),
            Some(&alice()),
            "event-9",
            Some(allowed),
        )
        .unwrap();
        assert_eq!(change.key, "trigger-removed:a/b#4:run-3");
        assert!(matches!(
            signals_of(&change)[..],
            [RunSignal::TriggerLabelRemoved { issue, by }] if by == "alice" && issue.get() == 4
        ));
    }

    #[test]
    fn a_label_removal_by_someone_else_is_answered_once_per_removal_and_stops_nothing() {
        let refused = OperatorDecision::Refused {
            reason: RefusalReason::InsufficientPermission {
                login: "alice".into(),
                actual: Permission::Triage,
                required: Permission::Write,
            },
        };
        let change = plan_removal(
            "trigger-removed:a/b#4".into(),
            RunId(3),
            autoforge_journal::testing::issue(4),
            Some(&alice()),
            "event-9",
            Some(refused),
        )
        .unwrap();
        assert_eq!(change.key, "trigger-removed:a/b#4:event-9");
        let signals = signals_of(&change);
        assert!(
            matches!(
                signals[..],
                [RunSignal::TriggerRemovalRefused { issue, by: Some(by), removal, reason }]
                    if issue.get() == 4 && by == "alice" && removal == "event-9" && reason.contains("`triage`")
            ),
            "{signals:?}"
        );
        assert!(!signals[0].stops_the_run());
    }

    #[test]
    fn a_removal_nobody_is_named_for_does_not_count() {
        let change = plan_removal(
            "k".into(),
            RunId(3),
            autoforge_journal::testing::issue(4),
            None,
            "unlabeled-run-3",
            None,
        )
        .unwrap();
        assert!(matches!(
            signals_of(&change)[..],
            [RunSignal::TriggerRemovalRefused { by: None, .. }]
        ));
    }

    #[test]
    fn the_controllers_own_label_removal_is_recorded_without_an_answer() {
        let own = OperatorDecision::Refused {
            reason: RefusalReason::TheAppItself,
        };
        let change = plan_removal(
            "k".into(),
            RunId(3),
            autoforge_journal::testing::issue(4),
            Some(&alice()),
            "event-9",
            Some(own),
        )
        .unwrap();
        assert!(change.entries.is_empty());
    }

    #[test]
    fn a_removal_is_ordered_against_the_runs_labelling_by_event_id() {
        let start = "trigger:a/b#4:event-120";
        assert!(predates("event-119", start));
        assert!(!predates("event-121", start));
        // Known only by a delivery: no order, so it counts as it always did.
        assert!(!predates("delivery-abc", start));
        assert!(!predates("event-119", "trigger:a/b#4:delivery-abc"));
    }

    #[test]
    fn a_review_requesting_changes_has_one_key_however_often_it_is_delivered() {
        let sighting = |delivery: &str| Sighting::PrReviewed {
            repository: "a/b".into(),
            pr: autoforge_journal::testing::pull(3),
            head_sha: "abc".into(),
            delivery: delivery.into(),
            changes_requested: Some(ReviewBy {
                review_id: 77,
                author: alice(),
            }),
        };
        assert_eq!(sighting("d-1").key(), sighting("d-2").key());
        assert_eq!(sighting("d-1").key(), "review:a/b#3:review-77");
    }

    #[test]
    fn only_an_operators_review_signals_a_human_round() {
        let by = ReviewBy {
            review_id: 77,
            author: alice(),
        };
        let pr = autoforge_journal::testing::pull(3);
        let base = || ChangeEntries::new("k", "review");
        let allowed = OperatorDecision::Allowed {
            by: AllowedBy::Permission(Permission::Write),
        };
        let refused = OperatorDecision::Refused {
            reason: RefusalReason::InsufficientPermission {
                login: "alice".into(),
                actual: Permission::Read,
                required: Permission::Write,
            },
        };
        let rounds = |change: &ChangeEntries| {
            signals_of(change)
                .iter()
                .filter(|s| matches!(s, RunSignal::HumanReview { review_id: 77, .. }))
                .count()
        };
        assert_eq!(
            rounds(&plan_human_review(base(), RunId(1), pr, &by, &allowed)),
            1
        );
        let change = plan_human_review(base(), RunId(1), pr, &by, &refused);
        assert_eq!(rounds(&change), 0);
        assert!(change.entries.iter().any(|e| matches!(
            e,
            Entry::Audit { kind, detail, .. }
                if kind == "human_review_decided" && detail["accepted"] == false
        )));
    }

    #[test]
    fn one_comment_version_has_one_key_whoever_sees_it() {
        let sighting = Sighting::Commands {
            repository: "a/b".into(),
            issue: autoforge_journal::testing::issue(1),
            comment_id: 5,
            updated_at: "2026-01-01T00:00:00Z".into(),
            body_digest: body_digest("/autoforge retry"),
            actor: alice(),
            commands: vec![],
        };
        assert_eq!(
            sighting.key(),
            comment_key(
                "a/b",
                5,
                "2026-01-01T00:00:00Z",
                &body_digest("/autoforge retry")
            )
        );
        assert_ne!(body_digest("a"), body_digest("b"));
    }
}
