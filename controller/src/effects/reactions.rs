//! `add_reaction`: the 👀 on an accepted command comment. A reaction has no
//! marker; it is recognised by its content and the controller's own login
//! (GitHub keeps at most one reaction per user and content).

use autoforge_journal::Effect;
use serde::Deserialize;
use serde_json::json;

use super::EffectError;
use super::drive::{EffectExecutor, Observation, Sent, payload, read_failed, target_number};
use crate::github::{Account, writes};

#[derive(Deserialize)]
struct ReactionPayload {
    content: String,
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
    let comment = target_number(effect)?;
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
