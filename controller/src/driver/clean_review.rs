//! The pre-merge gate's first fact (SPEC §10): the clean review comment the
//! merge rests on must still be on the pull request, byte for byte as the
//! controller wrote and read it back, and the pull request must still be at
//! the (HEAD, base, merge base) that review judged.
//!
//! The journal is the record of what was written: the observed
//! `post_comment` row carrying the `ai-review-result` marker for the clean
//! binding holds the exact body sent and the id of the comment GitHub
//! created. Nothing on GitHub is trusted to say which comment is the clean
//! review; a comment that merely looks like one proves nothing.

use autoforge_journal::Effect;

use crate::effects::recorded_review_comment;
use crate::github::{GitHubApi, GitHubError, RepoName};
use crate::machine::RoundBinding;

/// The clean review comment as the journal recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanReviewRecord {
    pub binding: RoundBinding,
    pub comment_id: u64,
    /// The exact body that was sent and read back.
    pub body: String,
}

/// The observed review comment of `clean` among the run's effect rows (the
/// latest one, should a round have been bound to the same revision twice).
/// `None` when no such row was observed: the gate then sees it missing.
pub fn find_clean_review(effects: &[Effect], clean: &RoundBinding) -> Option<CleanReviewRecord> {
    find_review_comment(effects, clean)
}

/// The observed review comment posted for `binding`, clean or not (the
/// fixer reads the one it must resolve from here).
pub fn find_review_comment(
    effects: &[Effect],
    binding: &RoundBinding,
) -> Option<CleanReviewRecord> {
    let clean = binding;
    effects
        .iter()
        .rev()
        .find_map(|e| recorded_review_comment(e, clean))
        .map(|recorded| CleanReviewRecord {
            binding: clean.clone(),
            comment_id: recorded.comment_id,
            body: recorded.body,
        })
}

/// Whether the recorded comment is still there with the same bytes. A
/// deleted comment is a fact (`false`), not a failure.
pub async fn comment_intact(
    api: &GitHubApi,
    repo: &RepoName,
    record: &CleanReviewRecord,
) -> Result<bool, GitHubError> {
    match api.issue_comment(repo, record.comment_id).await {
        Ok(comment) => Ok(comment.body == record.body),
        Err(GitHubError::Status { status: 404, .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use autoforge_journal::{EffectId, EffectKind, RunId, Stage};
    use serde_json::json;

    fn binding(head: &str) -> RoundBinding {
        RoundBinding {
            pr: autoforge_journal::testing::pull(4),
            head_sha: autoforge_journal::testing::sha(head),
            base_ref: "main".into(),
            merge_base_sha: autoforge_journal::testing::sha(&"b".repeat(40)),
        }
    }

    fn review_row(id: i64, head: &str, stage: Stage, comment_id: u64) -> Effect {
        Effect {
            id: EffectId(id),
            run_id: RunId(1),
            phase_entry: id,
            position: 0,
            kind: EffectKind::PostComment,
            identity: format!("ai-review-result:{id}"),
            target: "issue/4".into(),
            precondition: json!({}),
            payload: serde_json::to_vec(&json!({"body": format!("review {id}")})).unwrap(),
            completion: json!({
                "marker": "ai-review-result",
                "key": {
                    "round": id, "reviewed_head_sha": head, "reviewed_base_ref": "main",
                    "reviewed_merge_base_sha": "b".repeat(40),
                },
                "write": "n",
            }),
            stage,
            attempts: 1,
            unanswered: 0,
            observed: Some(json!({"comment_id": comment_id, "url": "u"})),
            reason: None,
            fencing_token: 1,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn the_observed_review_comment_of_the_clean_binding_is_the_one_the_gate_checks() {
        let (old, new) = ("1".repeat(40), "2".repeat(40));
        let rows = vec![
            review_row(1, &old, Stage::Observed, 11),
            review_row(2, &new, Stage::Observed, 22),
        ];
        let found = find_clean_review(&rows, &binding(&new)).unwrap();
        assert_eq!(found.comment_id, 22);
        assert_eq!(found.body, "review 2");
    }

    #[test]
    fn a_review_comment_not_yet_observed_or_of_another_revision_is_no_clean_review() {
        let (old, new) = ("1".repeat(40), "2".repeat(40));
        let rows = vec![
            review_row(1, &old, Stage::Observed, 11),
            review_row(2, &new, Stage::Attempted, 22),
        ];
        assert_eq!(find_clean_review(&rows, &binding(&new)), None);
        let mut other_base = binding(&old);
        other_base.base_ref = "release".into();
        assert_eq!(find_clean_review(&rows, &other_base), None);
    }
}
