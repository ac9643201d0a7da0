//! Comment effects: `post_comment` (review result, plan, EPIC progress, command
//! replies, notices — created once, never edited) and `edit_status_comment` (the
//! run's one status comment, created on first use and edited in place).
//!
//! Row: target `issue/<n>` (the conversation), payload [`BodyPayload`], no
//! precondition, completion [`Marked`] with the marker's identity key.
//! Both reconcile by listing every comment of the target conversation to
//! the end and scanning each for the effect's marker.

use autoforge_journal::CommitSha;
use autoforge_journal::{Effect, EffectKind, IssueNumber, NewEffect, PullNumber};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::markers::{MarkerName, Scan, scan};
use super::planning::{Draft, PlanError, identity_key};
use super::protocol::{Holder, Observation, Ownership, Sent, Verdict, read_failed};
use super::row::{
    BodyPayload, Marked, NoPrecondition, Row, completion, observed_as, observed_key, payload,
    target_number,
};
use super::texts::{notice_text, reply_text, status_text};
use crate::github::{IssueComment, writes};
use crate::machine::{Notice, Reply, RoundBinding, StatusSnapshot};
use crate::publish::bodies::compose_progress_comment;

/// A review result is identified by its round and everything it reviewed.
#[derive(Serialize, Deserialize)]
struct ReviewKey {
    round: u32,
    reviewed_head_sha: CommitSha,
    reviewed_base_ref: String,
    reviewed_merge_base_sha: CommitSha,
}

/// An observed comment as read-back recorded it.
#[derive(Deserialize)]
struct ObservedComment {
    comment_id: u64,
    url: String,
}

/// A comment the run posted and saw land, with the body it sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedComment {
    pub comment_id: u64,
    pub url: String,
    pub body: String,
}

/// The review comment `effect` posted for `binding` (any round), if it is
/// one and was observed.
pub fn recorded_review_comment(effect: &Effect, binding: &RoundBinding) -> Option<RecordedComment> {
    if effect.target != format!("issue/{}", binding.pr) {
        return None;
    }
    let key: ReviewKey = observed_key(effect, EffectKind::PostComment, MarkerName::ReviewResult)?;
    let bound = key.reviewed_head_sha == binding.head_sha
        && key.reviewed_base_ref == binding.base_ref
        && key.reviewed_merge_base_sha == binding.merge_base_sha;
    bound.then(|| recorded_comment(effect)).flatten()
}

/// The progress comment `effect` posted on `epic`, if it is one and was
/// observed.
pub fn recorded_progress_comment(effect: &Effect, epic: IssueNumber) -> Option<RecordedComment> {
    if effect.target != format!("issue/{epic}") {
        return None;
    }
    observed_key::<serde_json::Value>(effect, EffectKind::PostComment, MarkerName::EpicProgress)?;
    recorded_comment(effect)
}

fn recorded_comment(effect: &Effect) -> Option<RecordedComment> {
    let observed: ObservedComment = observed_as(effect)?;
    let sent: BodyPayload = payload(effect).ok()?;
    Some(RecordedComment {
        comment_id: observed.comment_id,
        url: observed.url,
        body: sent.body,
    })
}

/// A plan comment is identified by its version (and the run that wrote it).
#[derive(Serialize)]
struct PlanKey {
    version: u32,
}

/// EPIC progress is identified by the child issue and its PR.
#[derive(Serialize)]
struct ProgressKey<'a> {
    issue: &'a str,
    pr: &'a str,
}

#[derive(Serialize)]
struct ReplyKey {
    command_comment_id: u64,
}

/// A notice answers one event (e.g. one label removal).
#[derive(Serialize)]
struct NoticeKey<'a> {
    event: &'a str,
}

/// A run has one status comment.
#[derive(Serialize)]
struct StatusKey {
    run: i64,
}

fn comment_row(
    draft: Draft<'_>,
    kind: EffectKind,
    number: IssueNumber,
    body: String,
    completion: Marked,
) -> Result<NewEffect, PlanError> {
    draft.finish(
        kind,
        Row {
            target: format!("issue/{number}"),
            precondition: NoPrecondition {},
            payload: BodyPayload { body },
            completion,
        },
    )
}

/// The review comment of `round` on PR `pr`; `rendered` is publish's text.
pub(crate) fn plan_review(
    draft: Draft<'_>,
    pr: PullNumber,
    round: u32,
    binding: &RoundBinding,
    rendered: &str,
) -> Result<NewEffect, PlanError> {
    let key = identity_key(&ReviewKey {
        round,
        reviewed_head_sha: binding.head_sha.clone(),
        reviewed_base_ref: binding.base_ref.clone(),
        reviewed_merge_base_sha: binding.merge_base_sha.clone(),
    })?;
    let body = draft.stamp(rendered, MarkerName::ReviewResult)?;
    let completion = draft.marked(MarkerName::ReviewResult, key);
    comment_row(
        draft,
        EffectKind::PostComment,
        pr.as_issue(),
        body,
        completion,
    )
}

/// The plan comment of `version` on `issue`; `rendered` is publish's text.
pub(crate) fn plan_plan_comment(
    draft: Draft<'_>,
    issue: IssueNumber,
    version: u32,
    rendered: &str,
) -> Result<NewEffect, PlanError> {
    let key = identity_key(&PlanKey { version })?;
    let body = draft.stamp(rendered, MarkerName::Plan)?;
    let completion = draft.marked(MarkerName::Plan, key);
    comment_row(draft, EffectKind::PostComment, issue, body, completion)
}

/// The progress comment on `epic` for child `issue`, merged by PR `pr`.
pub(crate) fn plan_progress(
    draft: Draft<'_>,
    epic: IssueNumber,
    issue: IssueNumber,
    pr: PullNumber,
    text: &str,
) -> Result<NewEffect, PlanError> {
    let (issue_url, pr_url) = (draft.ctx.issue_url(issue), draft.ctx.pr_url(pr));
    let composed = compose_progress_comment(text, &issue_url, &pr_url)?;
    let key = identity_key(&ProgressKey {
        issue: &issue_url,
        pr: &pr_url,
    })?;
    let body = draft.stamp(&composed, MarkerName::EpicProgress)?;
    let completion = draft.marked(MarkerName::EpicProgress, key);
    comment_row(draft, EffectKind::PostComment, epic, body, completion)
}

/// The answer to command comment `comment_id`, in conversation `thread`.
pub(crate) fn plan_reply(
    draft: Draft<'_>,
    thread: IssueNumber,
    comment_id: u64,
    reply: &Reply,
) -> Result<NewEffect, PlanError> {
    let key = identity_key(&ReplyKey {
        command_comment_id: comment_id,
    })?;
    let marker = draft.marker(MarkerName::Reply, &key, true)?;
    let body = format!("{}\n\n{marker}", reply_text(reply)?);
    let completion = draft.marked(MarkerName::Reply, key);
    comment_row(draft, EffectKind::PostComment, thread, body, completion)
}

/// The one answer to `event` on `issue`.
pub(crate) fn plan_notice(
    draft: Draft<'_>,
    issue: IssueNumber,
    event: &str,
    notice: &Notice,
) -> Result<NewEffect, PlanError> {
    let key = identity_key(&NoticeKey { event })?;
    let marker = draft.marker(MarkerName::Notice, &key, true)?;
    let body = format!("{}\n\n{marker}", notice_text(notice)?);
    let completion = draft.marked(MarkerName::Notice, key);
    comment_row(draft, EffectKind::PostComment, issue, body, completion)
}

/// The run's status comment on `issue`, showing `status`.
pub(crate) fn plan_status(
    draft: Draft<'_>,
    issue: IssueNumber,
    status: &StatusSnapshot,
) -> Result<NewEffect, PlanError> {
    let key = identity_key(&StatusKey { run: draft.run() })?;
    // The key already names the run.
    let marker = draft.marker(MarkerName::Status, &key, false)?;
    let body = format!("{}\n\n{marker}", status_text(status)?);
    let completion = draft.marked(MarkerName::Status, key);
    comment_row(
        draft,
        EffectKind::EditStatusComment,
        issue,
        body,
        completion,
    )
}

/// The comments holding the effect's identity, or the verdict when one of
/// them carries a marker of that name we cannot read.
///
/// A review result or a plan names the run that posted it: one naming
/// another run (an earlier run on the same PR or issue, stopped and started
/// again, reviewing the same head or writing the same version) is that
/// run's and not in this one's way. A marker naming no
/// run, or this one, is a holder like any other, so a planted copy still
/// counts as foreign.
fn holders<'a>(
    wanted: &Marked,
    run: i64,
    comments: &'a [IssueComment],
) -> Verdict<Vec<(Holder, &'a IssueComment)>> {
    let mut found = Vec::new();
    for comment in comments {
        match scan(&comment.body, wanted.marker) {
            Scan::Absent => {}
            Scan::Malformed(defect) => {
                return Err(Observation::Blocked(format!(
                    "{} carries an unreadable marker: {defect}",
                    comment.html_url
                )));
            }
            Scan::Found(markers) => {
                let another_run = |m: &&super::markers::FoundMarker| {
                    matches!(wanted.marker, MarkerName::ReviewResult | MarkerName::Plan)
                        && m.payload
                            .get("run")
                            .and_then(serde_json::Value::as_i64)
                            .is_some_and(|named| named != run)
                };
                let mine = markers
                    .iter()
                    .filter(|m| m.matches(&wanted.key))
                    .filter(|m| !another_run(m));
                for marker in mine {
                    let key = format!("comment/{}", comment.id);
                    found.push((Holder::new(key, &comment.html_url, marker), comment));
                }
            }
        }
    }
    Ok(found)
}

async fn list(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Vec<IssueComment>, EffectError> {
    let number = target_number(effect)?;
    executor
        .api
        .issue_comments(&executor.repo, number)
        .await
        .map_err(read_failed)
}

/// Which of our comments holds the identity, or the verdict.
async fn find_ours(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Verdict<Option<IssueComment>>, EffectError> {
    let wanted: Marked = completion(effect)?;
    let comments = list(executor, effect).await?;
    let found = match holders(&wanted, effect.run_id.0, &comments) {
        Ok(found) => found,
        Err(verdict) => return Ok(Err(verdict)),
    };
    let just_holders: Vec<Holder> = found.iter().map(|(h, _)| h.clone()).collect();
    Ok(match ownership.ours(&just_holders) {
        Ok(Some(ours)) => Ok(found
            .iter()
            .find(|(h, _)| h.key == ours.key)
            .map(|(_, c)| (*c).clone())),
        Ok(None) => Ok(None),
        Err(verdict) => Err(verdict),
    })
}

fn observed(comment: &IssueComment) -> serde_json::Value {
    json!({ "comment_id": comment.id, "url": comment.html_url })
}

pub(crate) async fn reconcile_post(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    Ok(match find_ours(executor, effect, ownership).await? {
        Err(verdict) => verdict,
        Ok(None) => Observation::Absent,
        Ok(Some(comment)) if comment.body == wanted.body => {
            Observation::Present(observed(&comment))
        }
        // Our comment with other bytes: edited by someone, or a payload
        // that changed; never repaired in place.
        Ok(Some(comment)) => Observation::Conflict(format!(
            "{} carries this effect's marker but its body differs from what was journalled",
            comment.html_url
        )),
    })
}

pub(crate) async fn send_post(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let number = target_number(effect)?;
    Ok(Sent::from_result(
        writes::create_comment(&executor.api, &executor.repo, number, &wanted.body).await,
    ))
}

pub(crate) async fn reconcile_status(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    Ok(match find_ours(executor, effect, ownership).await? {
        Err(verdict) => verdict,
        Ok(Some(comment)) if comment.body == wanted.body => {
            Observation::Present(observed(&comment))
        }
        // Missing (first status) or showing an older status: write it.
        Ok(_) => Observation::Absent,
    })
}

pub(crate) async fn send_status(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let identity: Marked = completion(effect)?;
    // `drive` just reconciled; this read only finds which comment to edit.
    // The ownership check already passed, so any holder is ours.
    let comments = list(executor, effect).await?;
    let existing = match holders(&identity, effect.run_id.0, &comments) {
        Ok(found) => found.first().map(|(_, c)| c.id),
        Err(_) => {
            return Ok(Sent::Unknown(
                "a status marker became unreadable before the send; nothing was sent".into(),
            ));
        }
    };
    let result = match existing {
        Some(id) => writes::update_comment(&executor.api, &executor.repo, id, &wanted.body).await,
        None => {
            let number = target_number(effect)?;
            writes::create_comment(&executor.api, &executor.repo, number, &wanted.body).await
        }
    };
    Ok(Sent::from_result(result))
}
