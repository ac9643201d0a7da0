//! `merge_pr`: merge with GitHub's `sha` parameter set to the reviewed head
//! (SPEC §10), by the method the gate chose. The merge counts only when
//! GitHub shows the PR merged at exactly that head into the base it was
//! reviewed against; merged at another head is a conflict, never counted.
//! A squash commit is titled and described by the controller
//! ([`crate::publish::squash`]); GitHub's 405 for a method the repository
//! does not allow is refused with that reason, not a generic one.
//!
//! Row: target `pull/<n>`, payload [`MergePayload`], precondition the
//! reviewed head, completion the base it was reviewed against.

use autoforge_journal::{CommitSha, Effect, EffectKind, IssueNumber, NewEffect, PullNumber};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{Row, completion, payload, target_number};
use crate::github::{GitHubError, writes};
use crate::machine::MergeMethod;
use crate::publish::squash::compose_squash_commit;

/// GitHub's merge request: refused unless the head is still `sha`.
#[derive(Serialize, Deserialize)]
struct MergePayload {
    sha: CommitSha,
    merge_method: MergeMethod,
    /// Set for a squash: the commit the controller composed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit_message: Option<String>,
}

/// What the gate decided about the merge of one pull request.
pub(crate) struct MergeRequest<'a> {
    pub pr: PullNumber,
    pub sha: &'a CommitSha,
    pub base_ref: &'a str,
    pub method: MergeMethod,
    pub pr_title: &'a str,
    pub issue: IssueNumber,
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

/// Merge `pr` at the reviewed `sha` into `base_ref`, by the chosen method.
pub(crate) fn plan(draft: Draft<'_>, merge: &MergeRequest<'_>) -> Result<NewEffect, PlanError> {
    let MergeRequest {
        pr, sha, base_ref, ..
    } = *merge;
    let (commit_title, commit_message) = match merge.method {
        MergeMethod::Squash => {
            let run_issue = draft.ctx.issue_ref(merge.issue);
            let commit = compose_squash_commit(merge.pr_title, pr, &run_issue)?;
            (Some(commit.title), Some(commit.message))
        }
        MergeMethod::Merge | MergeMethod::Rebase => (None, None),
    };
    let row = Row {
        target: format!("pull/{pr}"),
        precondition: MergePrecondition {
            head_sha: sha.clone(),
        },
        payload: MergePayload {
            sha: sha.clone(),
            merge_method: merge.method,
            commit_title,
            commit_message,
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
    let commit = wanted
        .commit_title
        .as_deref()
        .zip(wanted.commit_message.as_deref());
    let result = writes::merge_pull_request(
        &executor.api,
        &executor.repo,
        number,
        &wanted.sha,
        wanted.merge_method,
        commit,
    )
    .await;
    Ok(match result {
        Err(error) if method_not_allowed(&error) => {
            Sent::Refused(not_allowed_reason(wanted.merge_method, &error))
        }
        // Another merge moved the base while GitHub merged ours; GitHub
        // asks to try again, and nothing landed. Sent again after the next
        // reconcile (an unanswered send: it spends no attempt).
        Err(error) if base_moved_during_merge(&error) => Sent::Unknown(error.to_string()),
        other => Sent::from_result(other),
    })
}

/// GitHub's 409 "Base branch was modified. Review and try the merge
/// again.", told apart from its other 409s (a head that moved).
fn base_moved_during_merge(error: &GitHubError) -> bool {
    matches!(error, GitHubError::Status { status: 409, message, .. }
        if message.to_ascii_lowercase().contains("base branch was modified"))
}

/// GitHub's 405 for a method the repository's settings turn off
/// ("Squash merges are not allowed on this repository."), told apart from
/// its 405 for a pull request that is not mergeable.
fn method_not_allowed(error: &GitHubError) -> bool {
    matches!(error, GitHubError::Status { status: 405, message, .. }
        if message.to_ascii_lowercase().contains("not allowed"))
}

fn not_allowed_reason(method: MergeMethod, error: &GitHubError) -> String {
    format!(
        "the {method} merge method is not allowed in this repository (its `{}` setting \
         is off; GitHub answered: {error}); allow it in the repository's settings or set \
         `merge.method` to an allowed method, then unblock",
        method.repository_setting()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, message: &str) -> GitHubError {
        GitHubError::Status {
            method: "PUT",
            path: "/repos/o/r/pulls/1/merge".into(),
            status,
            message: message.into(),
        }
    }

    #[test]
    fn a_merge_refused_because_the_base_moved_is_tried_again_and_a_moved_head_is_not() {
        let base_moved = answered(
            409,
            "Base branch was modified. Review and try the merge again.",
        );
        assert!(base_moved_during_merge(&base_moved));
        let head_moved = answered(
            409,
            "Head branch was modified. Review and try the merge again.",
        );
        assert!(!base_moved_during_merge(&head_moved));
        assert!(!base_moved_during_merge(&answered(
            405,
            "Pull Request is not mergeable"
        )));
    }
}
