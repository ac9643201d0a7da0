//! Comment effects: `post_comment` (review result, EPIC progress, command
//! replies — created once, never edited) and `edit_status_comment` (the
//! run's one status comment, created on first use and edited in place).
//!
//! Both reconcile by listing every comment of the target conversation to
//! the end and scanning each for the effect's marker.

use autoforge_journal::Effect;
use serde::Deserialize;
use serde_json::json;

use super::EffectError;
use super::drive::{
    EffectExecutor, Holder, Observation, Ownership, Sent, field, identity_key, payload,
    read_failed, target_number,
};
use super::markers::{MarkerName, Scan, scan};
use crate::github::{IssueComment, writes};

/// The payload of both comment kinds.
#[derive(Deserialize)]
pub(crate) struct CommentPayload {
    pub body: String,
}

/// The marker named in the completion.
pub(crate) fn marker_name(effect: &Effect) -> Result<MarkerName, EffectError> {
    let name: String = field(effect, "completion", "marker")?;
    MarkerName::ALL
        .into_iter()
        .find(|m| m.as_str() == name)
        .ok_or_else(|| {
            super::drive::corrupt(effect, "completion", format!("unknown marker `{name}`"))
        })
}

/// A finding, or the verdict that ends the reconcile early.
type Verdict<T> = Result<T, Observation>;

/// The comments holding the effect's identity, or the verdict when one of
/// them carries a marker of that name we cannot read.
fn holders<'a>(
    effect: &Effect,
    comments: &'a [IssueComment],
) -> Result<Verdict<Vec<(Holder, &'a IssueComment)>>, EffectError> {
    let name = marker_name(effect)?;
    let key = identity_key(effect)?;
    let mut found = Vec::new();
    for comment in comments {
        match scan(&comment.body, name) {
            Scan::Absent => {}
            Scan::Malformed(defect) => {
                return Ok(Err(Observation::Blocked(format!(
                    "{} carries an unreadable marker: {defect}",
                    comment.html_url
                ))));
            }
            Scan::Found(markers) => {
                for marker in markers.iter().filter(|m| m.matches(&key)) {
                    let key = format!("comment/{}", comment.id);
                    found.push((Holder::new(key, &comment.html_url, marker), comment));
                }
            }
        }
    }
    Ok(Ok(found))
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
) -> Result<Result<Option<IssueComment>, Observation>, EffectError> {
    let comments = list(executor, effect).await?;
    let found = match holders(effect, &comments)? {
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
    let wanted: CommentPayload = payload(effect)?;
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
    let wanted: CommentPayload = payload(effect)?;
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
    let wanted: CommentPayload = payload(effect)?;
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
    let wanted: CommentPayload = payload(effect)?;
    // `drive` just reconciled; this read only finds which comment to edit.
    // The ownership check already passed, so any holder is ours.
    let comments = list(executor, effect).await?;
    let existing = match holders(effect, &comments)? {
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
