//! What the dispatcher and the poller hand to the run driver: one
//! [`RunSignal`] per observed change, stored as JSON in `run_events`.
//!
//! These are driver-side observations, not the machine's `Event`s: the
//! driver still has to read fresh PR facts, check phases and so on before it
//! can build a machine event. Only facts that cannot be re-read later (who
//! typed a command, which comment it was in) travel here.

use autoforge_journal::{IssueNumber, PullNumber, RunId};
use serde::{Deserialize, Serialize};

/// Who is told that signals were stored: the run driver. Intake calls it
/// only after the transaction that stored them committed, and depends on
/// nothing else of the driver.
pub trait RunListener: Send + Sync {
    /// A stop (command or label removal) was stored for `run`: cancel its
    /// running launch, or make its next launch start cancelled. Returns
    /// whether a running launch was cancelled.
    fn stop_run(&self, run: RunId) -> bool;
    /// New signals were stored: look for due runs now instead of at the
    /// next idle poll.
    fn wake_driver(&self);
    /// An installation or its repositories changed: rebuild the map of
    /// served repositories now rather than at the periodic refresh.
    fn repositories_changed(&self);
}

/// A change that concerns one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunSignal {
    /// An operator added the trigger label; the run was created with this event.
    Started {
        issue: IssueNumber,
        labeled_by: String,
    },
    /// An operator removed the trigger label: stop the run.
    TriggerLabelRemoved {
        issue: IssueNumber,
        by: String,
    },
    /// Someone whose removal does not count (not an operator, or not
    /// known) removed the trigger label: the run goes on and answers them
    /// once. `removal` identifies the removal.
    TriggerRemovalRefused {
        issue: IssueNumber,
        by: Option<String>,
        reason: String,
        removal: String,
    },
    IssueClosed {
        issue: IssueNumber,
    },
    IssueReopened {
        issue: IssueNumber,
    },
    /// The issue's title or body was edited by `editor` (who was checked
    /// like an operator: `by_operator`).
    IssueEdited {
        issue: IssueNumber,
        #[serde(default)]
        editor: Option<String>,
        #[serde(default)]
        by_operator: bool,
    },
    /// An accepted operator command. `verb` is one of `commands::VERBS`.
    Command {
        verb: String,
        /// The unblock reason, for `unblock`.
        argument: Option<String>,
        comment_id: u64,
        actor: String,
        on_issue: IssueNumber,
    },
    /// A command refused before the run saw it (not an operator, or a
    /// malformed line; `verb` is then `malformed`): the run answers it with
    /// a reply saying why and changes nothing else.
    CommandRefused {
        verb: String,
        comment_id: u64,
        actor: String,
        on_issue: IssueNumber,
        reason: String,
    },
    PrHeadMoved {
        pr: PullNumber,
        head_sha: String,
    },
    PrClosed {
        pr: PullNumber,
        merged: bool,
        merge_commit_sha: Option<String>,
    },
    PrReopened {
        pr: PullNumber,
    },
    PrBaseChanged {
        pr: PullNumber,
        new_base: String,
    },
    /// Checks finished (a check run, a suite, or a commit status reached a
    /// final state) on the run's PR head: re-check merge readiness.
    ChecksCompleted {
        pr: PullNumber,
        head_sha: String,
    },
    /// A review of the run's PR was submitted or dismissed: a required
    /// approving review may be met (or no longer be).
    PrReviewed {
        pr: PullNumber,
        head_sha: String,
    },
    /// An operator's review requesting changes: the driver reads it and
    /// its inline comments and hands the machine a human round.
    HumanReview {
        pr: PullNumber,
        review_id: u64,
        author: String,
    },
}

impl RunSignal {
    /// Whether the machine stops the run on this signal (an operator's
    /// label removal or accepted `/autoforge stop`), so a running agent can be
    /// killed before the run's task gets to read it.
    pub fn stops_the_run(&self) -> bool {
        match self {
            RunSignal::TriggerLabelRemoved { .. } => true,
            RunSignal::Command { verb, .. } => verb == "stop",
            _ => false,
        }
    }

    /// The JSON stored in `run_events.event`.
    pub fn to_json(&self) -> serde_json::Value {
        // Serialising a plain enum of strings and integers cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn signals_round_trip_through_their_stored_json() {
        let signal = RunSignal::Command {
            verb: "unblock".into(),
            argument: Some("fixed the base".into()),
            comment_id: 12,
            actor: "alice".into(),
            on_issue: autoforge_journal::testing::issue(4),
        };
        let json = signal.to_json();
        assert_eq!(json["kind"], "command");
        assert_eq!(serde_json::from_value::<RunSignal>(json).unwrap(), signal);
    }

    #[test]
    fn only_label_removal_and_an_accepted_stop_stop_the_run() {
        let command = |verb: &str| RunSignal::Command {
            verb: verb.into(),
            argument: None,
            comment_id: 1,
            actor: "alice".into(),
            on_issue: autoforge_journal::testing::issue(4),
        };
        assert!(command("stop").stops_the_run());
        assert!(!command("status").stops_the_run());
        let removed = RunSignal::TriggerLabelRemoved {
            issue: autoforge_journal::testing::issue(4),
            by: "alice".into(),
        };
        assert!(removed.stops_the_run());
        let refused = RunSignal::CommandRefused {
            verb: "stop".into(),
            comment_id: 1,
            actor: "rory".into(),
            on_issue: autoforge_journal::testing::issue(4),
            reason: "not an operator".into(),
        };
        assert!(!refused.stops_the_run());
        let refused_removal = RunSignal::TriggerRemovalRefused {
            issue: autoforge_journal::testing::issue(4),
            by: Some("rory".into()),
            reason: "not an operator".into(),
            removal: "event-9".into(),
        };
        assert!(!refused_removal.stops_the_run());
    }

    #[test]
    fn an_edit_stored_before_editors_were_recorded_reads_as_unknown() {
        let stored = serde_json::json!({"kind": "issue_edited", "issue": 3});
        assert_eq!(
            serde_json::from_value::<RunSignal>(stored).unwrap(),
            RunSignal::IssueEdited {
                issue: autoforge_journal::testing::issue(3),
                editor: None,
                by_operator: false
            }
        );
    }
}
