//! `merge_pr`: merge with GitHub's `sha` parameter set to the reviewed head
//! (SPEC §10). The merge counts only when GitHub shows the PR merged at
//! exactly that head into the base it was reviewed against; merged at
//! another head is a conflict, never counted.
//!
//! Row: target `pull/<n>`, payload [`MergePayload`], precondition the
//! reviewed head, completion the base it was reviewed against.

use autoforge_journal::{CommitSha, Effect, EffectKind, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{Row, completion, payload, target_number};
use crate::github::writes;

/// GitHub's merge request: refused unless the head is still `sha`.
#[derive(Serialize, Deserialize)]
struct MergePayload {
    sha: CommitSha,
    merge_method: String,
}

/// The head the review approved.
#[derive(Serialize, Deserialize)]
struct MergePrecondition {
    head_sha: CommitSha,
}

/// The merge counts only into the base the review was bound to.
#[derive(Serialize, Deserialize)]
struct MergeCompletion {
    base_ref: String,
    write: String,
}

/// Merge `pr` at the reviewed `sha` into `base_ref`, by the configured method.
pub(crate) fn plan(
    draft: Draft<'_>,
    pr: u64,
    sha: &CommitSha,
    base_ref: &str,
) -> Result<NewEffect, PlanError> {
    let row = Row {
        target: format!("pull/{pr}"),
        precondition: MergePrecondition {
            head_sha: sha.clone(),
        },
        payload: MergePayload {
            sha: sha.clone(),
            merge_method: draft.ctx.merge_method.to_owned(),
        },
        completion: MergeCompletion {
            base_ref: base_ref.to_owned(),
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::MergePr, row)
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: MergePayload = payload(effect)?;
    let MergeCompletion { base_ref, .. } = completion(effect)?;
    let number = target_number(effect)?;
    let pr = executor
        .api
        .pull_request(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let merged = pr.merged == Some(true) || pr.merged_at.is_some();
    Ok(if merged {
        match &pr.merge_commit_sha {
            Some(merge_commit) if pr.head.sha == wanted.sha && pr.base.ref_name == base_ref => {
                Observation::Present(json!({
                    "number": pr.number,
                    "merged_head_sha": pr.head.sha,
                    "merge_commit_sha": merge_commit,
                }))
            }
            _ => Observation::Conflict(format!(
                "{} was merged at {} into {}, not at the reviewed {} into {base_ref}; \
                 the merge is not counted",
                pr.html_url, pr.head.sha, pr.base.ref_name, wanted.sha
            )),
        }
    } else if pr.state != "open" {
        Observation::Conflict(format!("{} was closed without being merged", pr.html_url))
    } else if pr.head.sha != wanted.sha {
        Observation::Conflict(format!(
            "{} moved to {} after the review of {}; review it again",
            pr.html_url, pr.head.sha, wanted.sha
        ))
    } else {
        Observation::Absent
    })
}

pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let wanted: MergePayload = payload(effect)?;
    let number = target_number(effect)?;
    Ok(Sent::from_result(
        writes::merge_pull_request(
            &executor.api,
            &executor.repo,
            number,
            &wanted.sha,
            &wanted.merge_method,
        )
        .await,
    ))
}
