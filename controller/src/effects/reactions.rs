//! `add_reaction`: the 👀 on an accepted command comment. A reaction has no
//! marker; it is recognised by its content and the controller's own login
//! (GitHub keeps at most one reaction per user and content).
//!
//! Row: target `comment/<id>`, payload [`ReactionPayload`], no
//! precondition, completion the bare nonce.

use autoforge_journal::{Effect, EffectKind, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{NoPrecondition, Nonce, Row, payload, target_number};
use crate::github::{Account, writes};

/// The reaction's content as GitHub names it.
#[derive(Serialize, Deserialize)]
struct ReactionPayload {
    content: String,
}

/// The reaction that acknowledges an accepted command.
const ACKNOWLEDGED: &str = "eyes";

/// 👀 on command comment `comment_id`.
pub(crate) fn plan(draft: Draft<'_>, comment_id: u64) -> Result<NewEffect, PlanError> {
    let row = Row {
        target: format!("comment/{comment_id}"),
        precondition: NoPrecondition {},
        payload: ReactionPayload {
            content: ACKNOWLEDGED.to_owned(),
        },
        completion: Nonce {
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::AddReaction, row)
}

/// A reaction with its author, which `github::Reaction` does not read.
#[derive(Deserialize)]
struct ReactionBy {
    id: u64,
    content: String,
    user: Option<Account>,
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: ReactionPayload = payload(effect)?;
    let comment = target_number::<u64>(effect)?;
    let path = executor
        .repo
        .api_path(&format!("/issues/comments/{comment}/reactions"));
    let reactions: Vec<ReactionBy> = executor.api.get_all(&path).await.map_err(read_failed)?;
    let ours = reactions.iter().find(|r| {
        r.content == wanted.content
            && r.user
                .as_ref()
                .is_some_and(|u| u.login.eq_ignore_ascii_case(&executor.login))
    });
    Ok(match ours {
        Some(reaction) => Observation::Present(json!({ "reaction_id": reaction.id })),
        None => Observation::Absent,
    })
}

pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let wanted: ReactionPayload = payload(effect)?;
    let comment = target_number(effect)?;
    Ok(Sent::from_result(
        writes::add_comment_reaction(&executor.api, &executor.repo, comment, &wanted.content).await,
    ))
}
