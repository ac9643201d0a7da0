//! `post_review`: each review round's one pull request review (event
//! `COMMENT`) at the bound head, with an inline comment at every finding
//! whose location is a line of the reviewed diff and the other findings in
//! its body (texts in [`crate::publish::inline_review`], placement in
//! [`super::diff_lines`]).
//!
//! Row: target `pull/<n>`, payload [`ReviewPayload`] (GitHub's create
//! request, placed on the diff read just before planning), no
//! precondition, completion [`Marked`] with the round's binding as the
//! `ai-inline-review` key. Reconcile lists every review of the PR to the
//! end and scans each body for the marker: ours with the journalled body
//! and inline comments is the completion, none is a review still to send.

use autoforge_journal::{CommitSha, Effect, EffectKind, NewEffect, PullNumber};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::EffectError;
use super::diff_lines::DiffLines;
use super::executor::EffectExecutor;
use super::markers::{FoundMarker, MarkerName, Scan, scan};
use super::planning::{Draft, PlanError, identity_key};
use super::protocol::{Holder, Observation, Ownership, Sent, read_failed};
use super::row::{Marked, NoPrecondition, Row, completion, payload, target_number};
use crate::github::{PullRequestReview, ReviewComment, writes};
use crate::machine::{Finding, RoundBinding};
use crate::publish::{InlineReviewRender, render_inline_comment, render_inline_review_body};

/// The only side a finding is placed on: the code as reviewed.
const RIGHT: &str = "RIGHT";

/// A review is identified by its round and everything the round reviewed.
#[derive(Serialize)]
struct InlineReviewKey {
    round: u32,
    reviewed_head_sha: CommitSha,
    reviewed_base_ref: String,
    reviewed_merge_base_sha: CommitSha,
}

/// GitHub's create-review request, sent as journalled.
#[derive(Debug, Serialize, Deserialize)]
struct ReviewPayload {
    commit_id: CommitSha,
    body: String,
    /// Always `COMMENT`: the review neither approves nor blocks.
    event: String,
    comments: Vec<InlineComment>,
}

/// One inline comment of the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct InlineComment {
    path: String,
    body: String,
    line: u32,
    side: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_side: Option<String>,
}

/// The review of `round` on `pr`, placed on the diff of `binding` that was
/// read before planning.
pub(crate) fn plan(
    draft: Draft<'_>,
    pr: PullNumber,
    round: u32,
    binding: &RoundBinding,
    findings: &[Finding],
) -> Result<NewEffect, PlanError> {
    let files = draft
        .ctx
        .diff_of(&binding.merge_base_sha, &binding.head_sha)?;
    let lines = DiffLines::from_files(files);
    let mut comments = Vec::new();
    let mut unplaced = Vec::new();
    for finding in findings {
        let Some(placed) = lines.place(&finding.location) else {
            unplaced.push(finding);
            continue;
        };
        comments.push(InlineComment {
            path: placed.path,
            body: render_inline_comment(finding)?,
            line: placed.line,
            side: RIGHT.to_owned(),
            start_line: placed.start_line,
            start_side: placed.start_line.map(|_| RIGHT.to_owned()),
        });
    }
    let rendered = render_inline_review_body(&InlineReviewRender {
        round,
        reviewed_head_sha: binding.head_sha.as_str(),
        base_ref: &binding.base_ref,
        merge_base_sha: binding.merge_base_sha.as_str(),
        findings: findings.len(),
        unplaced: &unplaced,
    })?;
    let key = identity_key(&InlineReviewKey {
        round,
        reviewed_head_sha: binding.head_sha.clone(),
        reviewed_base_ref: binding.base_ref.clone(),
        reviewed_merge_base_sha: binding.merge_base_sha.clone(),
    })?;
    let body = draft.stamp(&rendered, MarkerName::InlineReview)?;
    let completion = draft.marked(MarkerName::InlineReview, key);
    draft.finish(
        EffectKind::PostReview,
        Row {
            target: format!("pull/{pr}"),
            precondition: NoPrecondition {},
            payload: ReviewPayload {
                commit_id: binding.head_sha.clone(),
                body,
                event: "COMMENT".to_owned(),
                comments,
            },
            completion,
        },
    )
}

/// The reviews holding the effect's identity, or the verdict when one of
/// them carries an `ai-inline-review` marker that cannot be read. As with
/// review comments, a marker naming another run is that run's review (an
/// earlier run on the same PR reviewing the same head), not in this one's
/// way.
fn holders<'a>(
    wanted: &Marked,
    run: i64,
    reviews: &'a [PullRequestReview],
) -> Result<Vec<(Holder, &'a PullRequestReview)>, Observation> {
    let another_run = |m: &FoundMarker| {
        m.payload
            .get("run")
            .and_then(Value::as_i64)
            .is_some_and(|named| named != run)
    };
    let mut found = Vec::new();
    for review in reviews {
        let url = review
            .html_url
            .clone()
            .unwrap_or_else(|| format!("review {}", review.id));
        match scan(review.body.as_deref().unwrap_or_default(), wanted.marker) {
            Scan::Absent => {}
            Scan::Malformed(defect) => {
                return Err(Observation::Blocked(format!(
                    "{url} carries an unreadable marker: {defect}"
                )));
            }
            Scan::Found(markers) => {
                for marker in markers
                    .iter()
                    .filter(|m| m.matches(&wanted.key) && !another_run(m))
                {
                    let key = format!("review/{}", review.id);
                    found.push((Holder::new(key, &url, marker), review));
                }
            }
        }
    }
    Ok(found)
}

/// True when GitHub shows exactly the inline comments the row sent.
fn same_comments(shown: &[ReviewComment], sent: &[InlineComment]) -> bool {
    let key = |path: &str, start: Option<u32>, line: Option<u32>, body: &str| {
        (path.to_owned(), start, line, body.to_owned())
    };
    let mut shown: Vec<_> = shown
        .iter()
        .map(|c| key(&c.path, c.start_line, c.line, &c.body))
        .collect();
    let mut sent: Vec<_> = sent
        .iter()
        .map(|c| key(&c.path, c.start_line, Some(c.line), &c.body))
        .collect();
    shown.sort();
    sent.sort();
    shown == sent
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: ReviewPayload = payload(effect)?;
    let identity: Marked = completion(effect)?;
    let number: PullNumber = target_number(effect)?;
    let reviews = executor
        .api
        .pull_request_reviews(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let found = match holders(&identity, effect.run_id.0, &reviews) {
        Ok(found) => found,
        Err(verdict) => return Ok(verdict),
    };
    let just_holders: Vec<Holder> = found.iter().map(|(h, _)| h.clone()).collect();
    let ours = match ownership.ours(&just_holders) {
        Ok(None) => return Ok(Observation::Absent),
        Ok(Some(ours)) => ours,
        Err(verdict) => return Ok(verdict),
    };
    let Some((holder, review)) = found.iter().find(|(h, _)| h.key == ours.key) else {
        return Ok(Observation::Absent);
    };
    if review.body.as_deref() != Some(wanted.body.as_str()) {
        // Our review with other bytes: edited by someone, or a payload that
        // changed; never repaired in place.
        return Ok(Observation::Conflict(format!(
            "{} carries this effect's marker but its body differs from what was journalled",
            holder.url
        )));
    }
    let shown = executor
        .api
        .review_comments(&executor.repo, number, review.id)
        .await
        .map_err(read_failed)?;
    if !same_comments(&shown, &wanted.comments) {
        return Ok(Observation::Conflict(format!(
            "{} shows {} inline comments, not the {} journalled ones",
            holder.url,
            shown.len(),
            wanted.comments.len()
        )));
    }
    Ok(Observation::Present(json!({
        "review_id": review.id,
        "url": holder.url,
        "inline_comments": shown.len(),
    })))
}

pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let request: Value = payload(effect)?;
    let number: PullNumber = target_number(effect)?;
    Ok(Sent::from_result(
        writes::create_review(&executor.api, &executor.repo, number, &request).await,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::effects::PlanContext;
    use crate::effects::planning::ReviewDiffs;
    use crate::github::{PullRequestFile, RepoName};
    use crate::machine::{Classification, EffectIntent};
    use autoforge_journal::RunId;
    use std::collections::BTreeMap;

    fn finding(id: &str, location: &str) -> Finding {
        Finding {
            id: id.to_owned(),
            classification: Classification::Blocked,
            title: "Missing test".to_owned(),
            location: location.to_owned(),
            required_resolution: "Add a test.".to_owned(),
        }
    }

    fn binding() -> RoundBinding {
        RoundBinding {
            pr: autoforge_journal::testing::pull(2),
            head_sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            base_ref: "main".into(),
            merge_base_sha: autoforge_journal::testing::sha(&"b".repeat(40)),
        }
    }

    fn planned(findings: Vec<Finding>, diffs: &ReviewDiffs) -> Result<NewEffect, PlanError> {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let ctx = PlanContext {
            run_id: RunId(9),
            repo: &repo,
            html_base: "https://github.com/",
            default_branch: "main",
            bodies: &bodies,
            diffs,
        };
        crate::effects::plan(
            &EffectIntent::PostReview {
                pr: autoforge_journal::testing::pull(2),
                round: 1,
                binding: binding(),
                findings,
            },
            &ctx,
        )
    }

    fn diffs() -> ReviewDiffs {
        let b = binding();
        BTreeMap::from([(
            (b.merge_base_sha, b.head_sha),
            vec![PullRequestFile {
                filename: "feature.txt".into(),
                status: "added".into(),
                previous_filename: None,
                patch: Some(
                    "@@ -0,0 +1,12 @@\n+1\n+2\n+3\n+4\n+5\n+6\n+7\n+8\n+9\n+10\n+11\n+12".into(),
                ),
            }],
        )])
    }

    #[test]
    fn placed_findings_become_inline_comments_and_the_rest_stay_in_the_body() {
        let effect = planned(
            vec![
                finding("R1-F1", "feature.txt:1"),
                finding("R1-F2", "README.md:3"),
                finding("R1-F3", "feature.txt:10-12"),
            ],
            &diffs(),
        )
        .unwrap();
        assert_eq!(effect.kind, EffectKind::PostReview);
        assert_eq!(effect.target, "pull/2");
        let request: Value = serde_json::from_slice(&effect.payload).unwrap();
        assert_eq!(request["event"], "COMMENT");
        assert_eq!(request["commit_id"], "a".repeat(40));
        let comments = request["comments"].as_array().unwrap();
        assert_eq!(comments.len(), 2);
        assert_eq!(
            (
                &comments[0]["path"],
                &comments[0]["line"],
                &comments[0]["side"]
            ),
            (&json!("feature.txt"), &json!(1), &json!("RIGHT"))
        );
        assert!(comments[0].get("start_line").is_none());
        assert_eq!(
            (&comments[1]["start_line"], &comments[1]["line"]),
            (&json!(10), &json!(12))
        );
        let body = request["body"].as_str().unwrap();
        assert!(body.contains("R1-F2") && !body.contains("R1-F1") && !body.contains("R1-F3"));
        let Scan::Found(found) = scan(body, MarkerName::InlineReview) else {
            panic!("no marker");
        };
        assert_eq!(found[0].write_nonce(), effect.completion["write"].as_str());
        assert_eq!(found[0].payload["run"], json!(9));
    }

    #[test]
    fn a_review_without_its_diff_is_never_journalled() {
        assert!(matches!(
            planned(vec![finding("R1-F1", "feature.txt:1")], &BTreeMap::new()),
            Err(PlanError::MissingDiff { .. })
        ));
    }
}
