//! Answers: the comments the controller posts outside any run, each
//! answering one observed change (SPEC §2) — a trigger label added by
//! someone who may not start runs, commands on a thread no run watches.
//!
//! [`plan_answer`] renders the body once (published-text policy, then an
//! `autoforge-notice` marker keyed by the change and carrying a fresh
//! `write` nonce) into a [`NewAnswer`] the observer journals with the
//! change. [`send_answer`] then moves the row like any effect: claim it,
//! reconcile by marker, mark `attempted`, send once, read back. A crash in
//! any window leaves a row a later [`send_answer`] reconciles before it
//! sends again, so each change is answered once.

use std::time::Duration;

use autoforge_journal::{Answer, AnswerClaim, EffectKind, IssueNumber, Journal, NewAnswer};
use serde_json::{Map, Value, json};

use super::EffectError;
#[cfg(feature = "crash-points")]
use super::crashpoint::{Point, crash_point};
use super::markers::{self, MarkerName, Scan, scan};
use super::planning::PlanError;
use super::protocol::Sent;
use crate::github::{GitHubApi, IssueComment, RepoName, writes};
use crate::inline_code::code_span;
use crate::publish::{PolicyViolation, check_body};

/// How long a sender holds an answer: far longer than one reconcile, send
/// and read-back take, short enough that a crashed sender's answer goes out
/// soon after.
const CLAIM_HOLD: Duration = Duration::from_secs(60);

/// What an answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answering {
    /// `actor` added the trigger label but may not start runs.
    TriggerRefused {
        actor: String,
        reason: String,
        trigger_label: String,
    },
    /// An operator's commands on a thread no run watches.
    NoRun {
        commands: Vec<String>,
        trigger_label: String,
    },
    /// Someone who is not an operator sent commands where no run is.
    CommandsRefused {
        commands: Vec<String>,
        reason: String,
    },
}

/// The visible text of an answer: the controller's own wording with every
/// outside word (logins, labels, verbs) in a code span, checked with the
/// published-text policy.
pub fn answer_text(answering: &Answering) -> Result<String, PolicyViolation> {
    let text = match answering {
        Answering::TriggerRefused {
            actor,
            reason,
            trigger_label,
        } => format!(
            "{} added the {} label, but no run starts: {reason}. \
             Only an operator can start a run by adding it.",
            code_span(actor),
            code_span(trigger_label)
        ),
        Answering::NoRun {
            commands,
            trigger_label,
        } => format!(
            "There is no autoforge run on this thread, so {} changed nothing. \
             An operator starts a run by adding the {} label to the issue to implement; \
             commands act on that run's issue or pull request.",
            command_list(commands),
            code_span(trigger_label)
        ),
        Answering::CommandsRefused { commands, reason } => format!(
            "Refused {}: {reason}. There is no autoforge run on this thread either.",
            command_list(commands)
        ),
    };
    check_body("answer", &text)?;
    Ok(text)
}

/// `/autoforge <verb>` for each verb, in code spans, joined for a sentence.
fn command_list(commands: &[String]) -> String {
    let spans: Vec<String> = commands
        .iter()
        .map(|verb| code_span(&format!("/autoforge {verb}")))
        .collect();
    match spans.as_slice() {
        [] => "the command".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Where an answer goes and which change it answers.
#[derive(Debug, Clone, Copy)]
pub struct AnswerTo<'a> {
    /// The change's dedupe key: one answer per change.
    pub change: &'a str,
    pub repository: &'a str,
    pub installation_id: Option<i64>,
    pub thread: IssueNumber,
}

/// The journal row of the answer to `to`: exact body, marker and nonce.
pub fn plan_answer(to: AnswerTo<'_>, answering: &Answering) -> Result<NewAnswer, PlanError> {
    let text = answer_text(answering)?;
    let write_nonce = uuid::Uuid::new_v4().simple().to_string();
    let mut payload = identity(to.change);
    payload.insert("write".into(), Value::from(write_nonce.as_str()));
    let marker = markers::render(MarkerName::Notice, &payload).map_err(PlanError::Marker)?;
    Ok(NewAnswer {
        dedupe_key: to.change.to_owned(),
        repository: to.repository.to_owned(),
        installation_id: to.installation_id,
        thread: to.thread,
        body: format!("{text}\n\n{marker}"),
        write_nonce,
    })
}

/// The marker key an answer is recognised by.
fn identity(change: &str) -> Map<String, Value> {
    let mut key = Map::new();
    key.insert("event".into(), Value::from(change));
    key
}

/// How one [`send_answer`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerOutcome {
    /// Read back on the thread; recorded `observed` with this value.
    Posted(Value),
    /// Cannot be posted (refused, a foreign or altered comment holds its
    /// marker, the thread is gone, the attempts are spent); recorded
    /// `conflict` with the reason. Nothing depends on an answer, so this
    /// blocks nothing.
    Conflict(String),
    /// Sent with an unknown outcome and not visible yet; a later call
    /// reconciles first.
    StillAttempted,
    /// Another sender holds the answer.
    Busy,
}

/// What a reconcile read of the thread found.
enum Found {
    Absent,
    Ours(IssueComment),
    Wrong(String),
}

/// One step of the write-ahead protocol for `answer` (a pending row),
/// under a claim of its own. At most one comment is sent per call.
pub async fn send_answer(
    journal: &Journal,
    api: &GitHubApi,
    answer: &Answer,
) -> Result<AnswerOutcome, EffectError> {
    let Some(claim) = journal.claim_answer(answer.id, CLAIM_HOLD).await? else {
        return Ok(AnswerOutcome::Busy);
    };
    let repo = answer
        .repository
        .split_once('/')
        .ok_or_else(|| "no `/` in it".to_owned())
        .and_then(|(owner, name)| RepoName::new(owner, name).map_err(|e| e.to_string()))
        .map_err(|detail| EffectError::CorruptRow {
            id: answer.id.0,
            kind: EffectKind::PostComment,
            field: "repository",
            detail,
        })?;
    let thread = answer.thread;
    let target = Target {
        journal,
        api,
        repo: &repo,
        thread,
        answer,
        claim: &claim,
    };
    match target.reconcile().await? {
        Found::Absent => {}
        found => return target.settle(found).await,
    }
    if answer.sends_exhausted() {
        let reason = format!(
            "the answer was sent {} times without a visible comment ({} answered with an error)",
            answer.attempts, answer.unanswered
        );
        return target.settle(Found::Wrong(reason)).await;
    }
    journal.mark_answer_attempted(&claim).await?;
    #[cfg(feature = "crash-points")]
    crash_point(
        Point::AfterAttemptedBeforeSend,
        EffectKind::PostComment,
        &crash_identity(&answer.dedupe_key),
    );
    let sent = Sent::from_result(writes::create_comment(api, &repo, thread, &answer.body).await);
    #[cfg(feature = "crash-points")]
    crash_point(
        Point::AfterSendBeforeReadBack,
        EffectKind::PostComment,
        &crash_identity(&answer.dedupe_key),
    );
    match (target.reconcile().await?, sent) {
        (Found::Absent, Sent::Refused(reason)) => {
            target
                .settle(Found::Wrong(format!("GitHub refused the answer: {reason}")))
                .await
        }
        (Found::Absent, Sent::Unknown(error)) => {
            // As for effects: an error answer with nothing visible does not
            // spend one of the answer's attempts.
            tracing::warn!(answer = %answer.id, %error, "answer answered with an error and not visible; stays attempted");
            journal.mark_answer_unanswered(&claim).await?;
            Ok(AnswerOutcome::StillAttempted)
        }
        (Found::Absent, Sent::Answered) => {
            tracing::warn!(answer = %answer.id, "answer answered but not visible after sending; stays attempted");
            Ok(AnswerOutcome::StillAttempted)
        }
        (found, _) => target.settle(found).await,
    }
}

/// The crash matrix names answers by this identity (kind `post_comment`);
/// `after_intent` is the commit of the change that journalled the answer,
/// `after_observed` the moment after it is settled.
#[cfg(feature = "crash-points")]
pub(crate) fn crash_identity(dedupe_key: &str) -> String {
    format!("answer:{dedupe_key}")
}

struct Target<'a> {
    journal: &'a Journal,
    api: &'a GitHubApi,
    repo: &'a RepoName,
    thread: IssueNumber,
    answer: &'a Answer,
    claim: &'a AnswerClaim,
}

impl Target<'_> {
    /// Lists the thread's comments to the end and looks for the answer's
    /// marker. Ours carries the row's nonce and exactly its body; a
    /// marker with another nonce, or ours with other bytes, is never
    /// overwritten or repeated.
    async fn reconcile(&self) -> Result<Found, EffectError> {
        let comments = match self.api.issue_comments(self.repo, self.thread).await {
            Ok(comments) => comments,
            Err(error) if error.is_not_found() => {
                return Ok(Found::Wrong(format!(
                    "GitHub answers 404 for the thread #{} (deleted, transferred or not \
                     visible to the controller)",
                    self.thread
                )));
            }
            Err(error) => return Err(EffectError::Read(error)),
        };
        let key = identity(&self.answer.dedupe_key);
        for comment in comments {
            let found = match scan(&comment.body, MarkerName::Notice) {
                Scan::Absent => continue,
                Scan::Malformed(defect) => {
                    return Ok(Found::Wrong(format!(
                        "{} carries an unreadable notice marker: {defect}",
                        comment.html_url
                    )));
                }
                Scan::Found(found) => found,
            };
            let Some(marker) = found.iter().find(|m| m.matches(&key)) else {
                continue;
            };
            if marker.write_nonce() != Some(self.answer.write_nonce.as_str()) {
                return Ok(Found::Wrong(format!(
                    "{} carries this answer's marker but was not written from this journal",
                    comment.html_url
                )));
            }
            if comment.body != self.answer.body {
                return Ok(Found::Wrong(format!(
                    "{} carries this answer's marker but its body differs from what was journalled",
                    comment.html_url
                )));
            }
            return Ok(Found::Ours(comment));
        }
        Ok(Found::Absent)
    }

    async fn settle(&self, found: Found) -> Result<AnswerOutcome, EffectError> {
        match found {
            Found::Ours(comment) => {
                #[cfg(feature = "crash-points")]
                crash_point(
                    Point::AfterReadBackBeforeObserved,
                    EffectKind::PostComment,
                    &crash_identity(&self.answer.dedupe_key),
                );
                let observed = json!({ "comment_id": comment.id, "url": comment.html_url });
                self.journal
                    .mark_answer_observed(self.claim, &observed)
                    .await?;
                #[cfg(feature = "crash-points")]
                crash_point(
                    Point::AfterObservedBeforeTransition,
                    EffectKind::PostComment,
                    &crash_identity(&self.answer.dedupe_key),
                );
                Ok(AnswerOutcome::Posted(observed))
            }
            Found::Wrong(reason) => {
                tracing::warn!(answer = %self.answer.id, %reason, "answer cannot be posted");
                self.journal
                    .mark_answer_conflict(self.claim, &reason)
                    .await?;
                Ok(AnswerOutcome::Conflict(reason))
            }
            Found::Absent => Ok(AnswerOutcome::StillAttempted),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_answer_carries_one_notice_marker_keyed_by_its_change() {
        let answer = plan_answer(
            AnswerTo {
                change: "trigger:a/b#4:event-9",
                repository: "a/b",
                installation_id: Some(3),
                thread: autoforge_journal::testing::issue(4),
            },
            &Answering::TriggerRefused {
                actor: "tia".into(),
                reason: "`tia` has `triage` permission".into(),
                trigger_label: "autoforge".into(),
            },
        )
        .unwrap();
        let found = scan(&answer.body, MarkerName::Notice)
            .into_result()
            .unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].matches(&identity("trigger:a/b#4:event-9")));
        assert_eq!(found[0].write_nonce(), Some(answer.write_nonce.as_str()));
        assert!(!found[0].payload.contains_key("run"));
    }

    #[test]
    fn several_commands_are_named_in_one_sentence() {
        let text = answer_text(&Answering::NoRun {
            commands: vec!["status".into(), "retry".into(), "stop".into()],
            trigger_label: "autoforge".into(),
        })
        .unwrap();
        assert!(
            text.contains("`/autoforge status`, `/autoforge retry` and `/autoforge stop`"),
            "{text}"
        );
    }

    #[test]
    fn an_unpublishable_reason_keeps_the_answer_out_of_the_journal() {
        let refused = plan_answer(
            AnswerTo {
                change: "k",
                repository: "a/b",
                installation_id: None,
                thread: autoforge_journal::testing::issue(4),
            },
            &Answering::CommandsRefused {
                commands: vec!["stop".into()],
                reason: "<!-- autoforge-status {} -->".into(),
            },
        );
        assert!(refused.is_err());
    }
}
