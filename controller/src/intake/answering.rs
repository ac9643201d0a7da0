//! Answering people where no run is (SPEC §2): what a refused trigger
//! labelling or a command on a thread without a run is answered with, and
//! sending the journalled answers.
//!
//! The answer is planned into the change's [`ChangeEntries`], so it is
//! journalled in the transaction that claims the change and a redelivered
//! or polled duplicate of the change answers nothing new. Sending happens
//! after the commit ([`send_pending_answers`]): right away by the observer
//! that recorded it, and on every poll pass for answers a crash or an
//! outage left behind.

use autoforge_journal::{IssueNumber, Journal, NewCommandDecision};

use super::access::GitHubAccess;
use super::entries::{ChangeEntries, Entry};
use crate::commands::{Actor, Command, CommandParseError, OperatorDecision};
use crate::effects::{AnswerOutcome, AnswerTo, Answering, plan_answer, send_answer};
use crate::github::{GitHubApi, RateScope};

/// Answers sent per call; more wait for the next call.
const BATCH: i64 = 32;

/// The installation whose token `api` reads with, which writes the answer
/// too; `None` with a personal token.
pub(super) fn installation_of(api: &GitHubApi) -> Option<i64> {
    match api.scope() {
        RateScope::Installation(id) => i64::try_from(id).ok(),
        RateScope::App | RateScope::Token => None,
    }
}

/// Where an answer to the change keyed `key` on `thread` goes.
pub(super) fn answer_to<'a>(
    key: &'a str,
    repository: &'a str,
    api: &GitHubApi,
    thread: IssueNumber,
) -> AnswerTo<'a> {
    AnswerTo {
        change: key,
        repository,
        installation_id: installation_of(api),
        thread,
    }
}

/// Commands on a thread no active run watches: one refused decision each,
/// and one answer for the comment — that there is no run (an operator), or
/// why the author's commands do not count (anyone else). The controller's
/// own comments are recorded only, so it never answers itself.
pub(super) fn plan_without_run(
    key: String,
    to: AnswerTo<'_>,
    comment_id: u64,
    actor: &Actor,
    decision: &OperatorDecision,
    trigger_label: &str,
    commands: &[Result<Command, CommandParseError>],
) -> anyhow::Result<ChangeEntries> {
    let comment = i64::try_from(comment_id)?;
    let mut change = ChangeEntries::new(key, "commands without a run");
    let mut verbs = Vec::new();
    for parsed in commands {
        let command = match parsed {
            Ok(command) => command.verb().to_owned(),
            Err(_) => "malformed".to_owned(),
        };
        verbs.push(command.clone());
        change = change.with(Entry::Decision(NewCommandDecision {
            run_id: None,
            comment_id: comment,
            actor: actor.login.clone(),
            command,
            accepted: false,
            reason: "no active run on this issue or pull request".to_owned(),
        }));
    }
    let answering = match decision {
        _ if decision.is_the_app_itself() => return Ok(change),
        OperatorDecision::Allowed { .. } => Answering::NoRun {
            commands: verbs,
            trigger_label: trigger_label.to_owned(),
        },
        OperatorDecision::Refused { reason } => Answering::CommandsRefused {
            commands: verbs,
            reason: reason.to_string(),
        },
    };
    Ok(change.with(Entry::Answer(plan_answer(to, &answering)?)))
}

/// The answer to a trigger labelling by someone who may not start runs.
pub(super) fn trigger_refused_answer(
    to: AnswerTo<'_>,
    actor: &Actor,
    reason: &str,
    trigger_label: &str,
) -> anyhow::Result<Entry> {
    let answering = Answering::TriggerRefused {
        actor: actor.login.clone(),
        reason: reason.to_owned(),
        trigger_label: trigger_label.to_owned(),
    };
    Ok(Entry::Answer(plan_answer(to, &answering)?))
}

/// Sends every journalled answer not yet settled, oldest first. Each is
/// claimed before it is touched, so observers running at once (and other
/// replicas) send each answer once; a failure is logged and the answer
/// waits for the next call.
pub async fn send_pending_answers(journal: &Journal, access: &GitHubAccess) -> usize {
    let pending = match journal.pending_answers(BATCH).await {
        Ok(pending) => pending,
        Err(error) => {
            tracing::warn!(%error, "cannot list the answers to send");
            return 0;
        }
    };
    let mut posted = 0;
    for answer in &pending {
        let api = match access.api_for(answer.installation_id) {
            Ok(api) => api,
            Err(error) => {
                tracing::warn!(answer = %answer.id, error = format!("{error:#}"), "no handle to send the answer with");
                continue;
            }
        };
        match send_answer(journal, &api, answer).await {
            Ok(AnswerOutcome::Posted(_)) => posted += 1,
            Ok(outcome) => tracing::debug!(answer = %answer.id, ?outcome, "answer not posted"),
            Err(error) => tracing::warn!(answer = %answer.id, %error, "sending the answer failed"),
        }
    }
    posted
}

/// Whether `change` journalled an answer to send.
pub(super) fn has_answer(change: &ChangeEntries) -> bool {
    change
        .entries
        .iter()
        .any(|entry| matches!(entry, Entry::Answer(_)))
}
