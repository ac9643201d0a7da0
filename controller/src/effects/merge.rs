//! `merge_pr`: merge with GitHub's `sha` parameter set to the reviewed head
//! (SPEC §10). The merge counts only when GitHub shows the PR merged at
//! exactly that head into the base it was reviewed against; merged at
//! another head is a conflict, never counted.

use autoforge_journal::Effect;
use serde::Deserialize;
use serde_json::json;

use super::EffectError;
use super::drive::{EffectExecutor, Observation, Sent, field, payload, read_failed, target_number};
use crate::github::writes;

#[derive(Deserialize)]
struct MergePayload {
    sha: String,
    merge_method: String,
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: MergePayload = payload(effect)?;
    let base_ref: String = field(effect, "completion", "base_ref")?;
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
