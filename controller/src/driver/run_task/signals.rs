//! Step 3 of a run task: a run event the observers stored becomes what the
//! machine decides on. Events that only say "something on GitHub changed"
//! carry nothing the machine can use until a fresh read; starting a run, an
//! unblock and an issue edit read first, the rest are fed as they are.

use autoforge_journal::{IssueNumber, PullNumber, RunEvent};
use serde_json::json;

use super::RunTask;
use super::reads::read_facts;
use crate::commands::{LocalCommand, LocalCommandEvent};
use crate::driver::error::DriverError;
use crate::intake::RunSignal;
use crate::machine::{
    Awaiting, Event, HumanFeedback, HumanNote, LocalOperatorCommand, OperatorCommand,
    OperatorRequest, RefusedCommand, RefusedLabelRemoval,
};

impl RunTask<'_> {
    /// Step 3: one run event from the observers.
    pub(super) async fn handle_run_event(&mut self, stored: RunEvent) -> Result<(), DriverError> {
        if let Ok(LocalCommandEvent { local_command }) =
            serde_json::from_value::<LocalCommandEvent>(stored.event.clone())
        {
            return self.handle_local_command(stored.id, local_command).await;
        }
        let signal: RunSignal = match serde_json::from_value(stored.event.clone()) {
            Ok(signal) => signal,
            Err(error) => {
                let detail = json!({ "run_event": stored.id, "error": error.to_string() });
                return self
                    .acknowledge(stored.id, "run_event_unreadable", detail)
                    .await;
            }
        };
        match signal_action(&signal) {
            SignalAction::Feed(event) => self.apply(*event, Some(stored.id)).await,
            SignalAction::Start { issue, labeled_by } if self.state.awaiting == Awaiting::Start => {
                let event = self.started_event(issue, labeled_by).await?;
                self.apply(event, Some(stored.id)).await
            }
            SignalAction::Unblock {
                thread,
                comment_id,
                actor,
                reason,
            } => {
                let facts = self.unblock_facts().await?;
                let event = Event::Operator(OperatorCommand {
                    thread,
                    comment_id,
                    actor,
                    command: OperatorRequest::Unblock {
                        reason,
                        facts: Box::new(facts),
                    },
                });
                self.apply(event, Some(stored.id)).await
            }
            SignalAction::ReadIssueText {
                issue,
                editor,
                by_operator,
            } => {
                let read = self.access.api.issue(&self.access.repo, issue).await?;
                let event = Event::IssueTextChanged {
                    issue,
                    digest: read.text_digest(),
                    editor,
                    by_operator,
                };
                self.apply(event, Some(stored.id)).await
            }
            SignalAction::ReadReview {
                pr,
                review_id,
                author,
            } => {
                let event = self.human_review_event(pr, review_id, author).await?;
                self.apply(event, Some(stored.id)).await
            }
            SignalAction::Start { .. } | SignalAction::Ignore => {
                let detail = json!({ "run_event": stored.id, "signal": stored.event });
                self.acknowledge(stored.id, "run_event_not_driven", detail)
                    .await
            }
        }
    }
}

impl RunTask<'_> {
    /// What an unblock is decided from: GitHub as it is now.
    async fn unblock_facts(&mut self) -> Result<crate::machine::GitHubFacts, DriverError> {
        let clean = self.clean_review().await?;
        Ok(read_facts(
            &self.access.api,
            &self.access.repo,
            &self.state,
            &self.shared.config.protected_paths,
            clean.as_ref(),
        )
        .await?)
    }

    /// A command from `autoforge unblock|stop`: decided by the same rules
    /// as the comment command (an unblock reads GitHub first).
    async fn handle_local_command(
        &mut self,
        run_event: i64,
        command: LocalCommand,
    ) -> Result<(), DriverError> {
        let actor = command.actor().to_owned();
        let request = match command {
            LocalCommand::Stop { .. } => OperatorRequest::Stop,
            LocalCommand::Unblock { reason, .. } => OperatorRequest::Unblock {
                reason,
                facts: Box::new(self.unblock_facts().await?),
            },
        };
        let event = Event::LocalOperator(LocalOperatorCommand {
            actor,
            command: request,
        });
        self.apply(event, Some(run_event)).await
    }

    /// The review and its inline comments as plain data for the machine:
    /// one note per inline comment (with `path:line`), then the body.
    async fn human_review_event(
        &self,
        pr: PullNumber,
        review_id: u64,
        author: String,
    ) -> Result<Event, DriverError> {
        let api = &self.access.api;
        let repo = &self.access.repo;
        let review = api.pull_request_review(repo, pr, review_id).await?;
        let comments = api.review_comments(repo, pr, review_id).await?;
        let mut notes: Vec<HumanNote> = comments
            .into_iter()
            .map(|comment| {
                let line = comment.line.or(comment.original_line);
                HumanNote {
                    location: Some(match line {
                        Some(line) => format!("{}:{line}", comment.path),
                        None => comment.path,
                    }),
                    text: comment.body,
                }
            })
            .collect();
        notes.extend(review.body.map(|text| HumanNote {
            location: None,
            text,
        }));
        Ok(Event::HumanReview(HumanFeedback {
            source: format!("review-{review_id}"),
            author,
            notes,
        }))
    }
}

/// What a stored run event asks of the driver.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalAction {
    /// Feed this event to the machine as it is.
    Feed(Box<Event>),
    /// The run was started: read the issue's base and feed `Started`.
    Start {
        issue: IssueNumber,
        labeled_by: String,
    },
    /// `/autoforge unblock`: read the facts, then feed the command.
    Unblock {
        thread: IssueNumber,
        comment_id: u64,
        actor: String,
        reason: String,
    },
    /// The issue was edited: read its text now, then feed
    /// `IssueTextChanged` (the machine ignores a text it already has).
    ReadIssueText {
        issue: IssueNumber,
        editor: Option<String>,
        by_operator: bool,
    },
    /// An operator's review requesting changes: read it and its inline
    /// comments, then feed `HumanReview`.
    ReadReview {
        pr: PullNumber,
        review_id: u64,
        author: String,
    },
    /// Nothing the machine decides on (yet): acknowledge it.
    Ignore,
}

/// What the machine needs to hear about a signal. Signals that only say
/// "something on GitHub changed" need a fresh read, which is done when the
/// run awaits facts; until then they carry nothing the machine can use.
///
/// Long by design: one arm per kind of run signal, so the whole contract
/// between intake and the machine is read in one place.
pub fn signal_action(signal: &RunSignal) -> SignalAction {
    match signal {
        RunSignal::Started { issue, labeled_by } => SignalAction::Start {
            issue: *issue,
            labeled_by: labeled_by.clone(),
        },
        RunSignal::TriggerLabelRemoved { .. } => SignalAction::Feed(Box::new(Event::LabelRemoved)),
        RunSignal::TriggerRemovalRefused {
            issue,
            by,
            reason,
            removal,
        } => SignalAction::Feed(Box::new(Event::LabelRemovalRefused(RefusedLabelRemoval {
            issue: *issue,
            actor: by.clone(),
            reason: reason.clone(),
            removal: removal.clone(),
        }))),
        RunSignal::IssueEdited {
            issue,
            editor,
            by_operator,
        } => SignalAction::ReadIssueText {
            issue: *issue,
            editor: editor.clone(),
            by_operator: *by_operator,
        },
        RunSignal::IssueClosed { issue } => {
            SignalAction::Feed(Box::new(Event::IssueClosed { issue: *issue }))
        }
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
            argument,
        } => match command_without_reads(verb, argument.as_deref()) {
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
        RunSignal::HumanReview {
            pr,
            review_id,
            author,
        } => SignalAction::ReadReview {
            pr: *pr,
            review_id: *review_id,
            author: author.clone(),
        },
        RunSignal::IssueReopened { .. }
        | RunSignal::PrHeadMoved { .. }
        | RunSignal::PrClosed { .. }
        | RunSignal::PrReopened { .. }
        | RunSignal::PrBaseChanged { .. }
        | RunSignal::ChecksCompleted { .. }
        | RunSignal::PrReviewed { .. } => SignalAction::Ignore,
    }
}

/// The commands the machine decides from the command (and its text) alone.
fn command_without_reads(verb: &str, argument: Option<&str>) -> Option<OperatorRequest> {
    match verb {
        "retry" => Some(OperatorRequest::Retry {
            notes: argument.map(str::to_owned),
        }),
        "fix" => Some(OperatorRequest::Fix {
            notes: argument.unwrap_or_default().to_owned(),
        }),
        // The intake parsed the answers before the signal was stored; a
        // text that no longer parses is not acted on.
        "approve" => crate::commands::parse_answers(argument.unwrap_or_default())
            .ok()
            .map(|answers| OperatorRequest::Approve {
                answers: answers
                    .into_iter()
                    .map(|(id, text)| crate::machine::PlanAnswer { id, text })
                    .collect(),
            }),
        "replan" => Some(OperatorRequest::Replan {
            notes: argument.unwrap_or_default().to_owned(),
        }),
        "stop" => Some(OperatorRequest::Stop),
        "merge" => Some(OperatorRequest::Merge),
        "status" => Some(OperatorRequest::Status),
        "help" => Some(OperatorRequest::Help),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_removal_and_closing_are_fed_directly_but_start_needs_a_read() {
        assert_eq!(
            signal_action(&RunSignal::TriggerLabelRemoved {
                issue: autoforge_journal::testing::issue(1),
                by: "a".into()
            }),
            SignalAction::Feed(Box::new(Event::LabelRemoved))
        );
        assert_eq!(
            signal_action(&RunSignal::Started {
                issue: autoforge_journal::testing::issue(4),
                labeled_by: "a".into()
            }),
            SignalAction::Start {
                issue: autoforge_journal::testing::issue(4),
                labeled_by: "a".into()
            }
        );
    }

    #[test]
    fn commands_that_need_no_read_become_operator_events_and_unblock_asks_for_facts() {
        let command = |verb: &str| RunSignal::Command {
            verb: verb.into(),
            argument: Some("why".into()),
            comment_id: 5,
            actor: "alice".into(),
            on_issue: autoforge_journal::testing::issue(3),
        };
        assert_eq!(
            signal_action(&command("status")),
            SignalAction::Feed(Box::new(Event::Operator(OperatorCommand {
                thread: autoforge_journal::testing::issue(3),
                comment_id: 5,
                actor: "alice".into(),
                command: OperatorRequest::Status,
            })))
        );
        assert_eq!(
            signal_action(&command("unblock")),
            SignalAction::Unblock {
                thread: autoforge_journal::testing::issue(3),
                comment_id: 5,
                actor: "alice".into(),
                reason: "why".into(),
            }
        );
        assert_eq!(signal_action(&command("dance")), SignalAction::Ignore);
    }
}
