//! `plan`: from what the machine wants ([`EffectIntent`]) to the journal row
//! ([`NewEffect`]) holding the exact bytes to send.
//!
//! The bytes are rendered once, when the intent is committed with its
//! transition, and never again: a retry after a crash sends the journalled
//! bytes, and read-back compares GitHub's object with them. Each row gets a
//! fresh random `write` nonce, stamped into the marker it writes and kept in
//! `completion`, which is how a later reconcile knows the object is ours
//! (see [`super::markers`]).
//!
//! Row layout per kind (all JSON): `payload` is the request's data
//! (`{"body"}`, `{"title","body","head","base"}`, `{"sha","expected_old"}`, …);
//! `target` is `issue/<n>`, `pull/<n>`, `comment/<id>`, `head/<branch>`,
//! `issues` or the full ref; `precondition` holds what must still be true
//! before sending (base body digests, the expected old SHA); `completion`
//! holds the marker name, the identity `key` it must carry and the nonce.

use std::collections::BTreeMap;

use autoforge_journal::{EffectKind, NewEffect, RunId};
use serde_json::{Map, Value, json};

use super::epic::{outside_digest, splice_roadmap};
use super::issues::digest;
use super::markers::{self, MarkerName, scan};
use super::push::refused_ref;
use super::texts::{reply_text, status_text};
use crate::github::RepoName;
use crate::machine::EffectIntent;
use crate::publish::bodies::{
    compose_follow_up_body, compose_pr_body, compose_progress_comment, implementation_block,
};
use crate::publish::{
    FieldKind, IssueRef, PolicyViolation, ReviewRender, check_body, check_field,
    render_review_comment,
};

/// What `plan` needs besides the intent.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    pub run_id: RunId,
    pub repo: &'a RepoName,
    /// `https://github.com` or the GHES host: URLs inside markers.
    pub html_base: &'a str,
    pub default_branch: &'a str,
    /// `merge`, `squash` or `rebase`.
    pub merge_method: &'a str,
    /// Bodies read when the phase began, by issue or PR number: the base
    /// that `adopt_pr`, `append_issue_markers` and `splice_epic_roadmap`
    /// append to, and whose digest guards the write.
    pub bodies: &'a BTreeMap<u64, String>,
}

/// Why an intent cannot become a journal row. Nothing is journalled.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Policy(#[from] PolicyViolation),
    #[error("marker: {0}")]
    Marker(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("the body of #{0} as read at phase start was not provided")]
    MissingBody(u64),
}

impl PlanContext<'_> {
    fn issue_url(&self, number: u64) -> String {
        format!(
            "{}/{}/issues/{number}",
            self.html_base.trim_end_matches('/'),
            self.repo
        )
    }

    fn pr_url(&self, number: u64) -> String {
        format!(
            "{}/{}/pull/{number}",
            self.html_base.trim_end_matches('/'),
            self.repo
        )
    }

    fn issue_ref(&self, number: u64) -> IssueRef {
        IssueRef {
            owner: self.repo.owner().to_owned(),
            repo: self.repo.name().to_owned(),
            number,
        }
    }

    fn body_of(&self, number: u64) -> Result<&str, PlanError> {
        self.bodies
            .get(&number)
            .map(String::as_str)
            .ok_or(PlanError::MissingBody(number))
    }
}

/// A fresh per-effect nonce: 32 lowercase hex digits.
fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What separates a body from a block appended to it: exactly one blank line.
pub(crate) fn blank_line_after(body: &str) -> &'static str {
    if body.is_empty() || body.ends_with("\n\n") {
        ""
    } else if body.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

struct Row {
    kind: EffectKind,
    target: String,
    precondition: Value,
    payload: Value,
    completion: Value,
}

/// The journal row for `intent`, with its exact payload bytes.
pub fn plan(intent: &EffectIntent, ctx: &PlanContext<'_>) -> Result<NewEffect, PlanError> {
    let write = nonce();
    let run = ctx.run_id.0;
    let stamp = |body: &str, name: MarkerName| {
        markers::stamp(body, name, run, &write).map_err(PlanError::Marker)
    };
    let marked = |name: MarkerName, key: Value| json!({ "marker": name.as_str(), "key": key, "write": write });
    let row = match intent {
        EffectIntent::Push {
            branch,
            sha,
            expected_old,
        } => {
            let ref_name = format!("refs/heads/{branch}");
            if let Some(refusal) = refused_ref(&ref_name, ctx.default_branch) {
                return Err(PlanError::Refused(refusal));
            }
            Row {
                kind: EffectKind::Push,
                target: ref_name,
                precondition: json!({ "expected_old": expected_old }),
                payload: json!({ "sha": sha, "expected_old": expected_old }),
                completion: json!({ "sha": sha, "write": write }),
            }
        }
        EffectIntent::CreatePr {
            issue,
            branch,
            base,
            title,
            body,
        } => {
            check_field("pr title", title, FieldKind::OneLine { max_chars: 256 })?;
            let issue_url = ctx.issue_url(*issue);
            let composed = compose_pr_body(body, &ctx.issue_ref(*issue), &issue_url)?;
            Row {
                kind: EffectKind::CreatePr,
                target: format!("head/{branch}"),
                precondition: json!({ "no_pr_on_branch": branch }),
                payload: json!({
                    "title": title, "body": stamp(&composed, MarkerName::Implementation)?,
                    "head": branch, "base": base,
                }),
                completion: marked(MarkerName::Implementation, json!({ "issue": issue_url })),
            }
        }
        EffectIntent::AdoptPr { pr, issue } => {
            let base = ctx.body_of(*pr)?;
            if scan(base, MarkerName::Implementation) != markers::Scan::Absent {
                return Err(PlanError::Refused(format!(
                    "#{pr} already carries an implementation marker"
                )));
            }
            let issue_url = ctx.issue_url(*issue);
            let block = stamp(
                &implementation_block(&ctx.issue_ref(*issue), &issue_url),
                MarkerName::Implementation,
            )?;
            Row {
                kind: EffectKind::AdoptPr,
                target: format!("pull/{pr}"),
                precondition: json!({ "base_sha256": digest(base) }),
                payload: json!({ "body": format!("{base}{}{block}", blank_line_after(base)) }),
                completion: marked(MarkerName::Implementation, json!({ "issue": issue_url })),
            }
        }
        EffectIntent::PostReviewComment {
            pr,
            round,
            binding,
            findings,
            sections,
        } => {
            let rendered = render_review_comment(&ReviewRender {
                round: *round,
                reviewed_head_sha: &binding.head_sha,
                base_ref: &binding.base_ref,
                merge_base_sha: &binding.merge_base_sha,
                needs_fix_round: !findings.is_empty(),
                findings,
                sections,
            })?;
            let key = json!({
                "round": round, "reviewed_head_sha": binding.head_sha,
                "reviewed_base_ref": binding.base_ref,
                "reviewed_merge_base_sha": binding.merge_base_sha,
            });
            comment_row(
                *pr,
                stamp(&rendered, MarkerName::ReviewResult)?,
                marked(MarkerName::ReviewResult, key),
            )
        }
        EffectIntent::PostEpicProgress {
            epic,
            issue,
            pr,
            text,
        } => {
            let (issue_url, pr_url) = (ctx.issue_url(*issue), ctx.pr_url(*pr));
            let body = compose_progress_comment(text, &issue_url, &pr_url)?;
            let key = json!({ "issue": issue_url, "pr": pr_url });
            comment_row(
                *epic,
                stamp(&body, MarkerName::EpicProgress)?,
                marked(MarkerName::EpicProgress, key),
            )
        }
        EffectIntent::PostCommandReply {
            thread,
            comment_id,
            reply,
        } => {
            let key = json!({ "command_comment_id": comment_id });
            let mut payload = object(key.clone());
            payload.insert("run".into(), json!(run));
            payload.insert("write".into(), json!(write));
            let marker = markers::render(MarkerName::Reply, &payload).map_err(PlanError::Marker)?;
            let body = format!("{}\n\n{marker}", reply_text(reply)?);
            comment_row(*thread, body, marked(MarkerName::Reply, key))
        }
        EffectIntent::EditStatusComment { issue, status, .. } => {
            let key = json!({ "run": run });
            let mut payload = object(key.clone());
            payload.insert("write".into(), json!(write));
            let marker =
                markers::render(MarkerName::Status, &payload).map_err(PlanError::Marker)?;
            let mut row = comment_row(
                *issue,
                format!("{}\n\n{marker}", status_text(status)?),
                marked(MarkerName::Status, key),
            );
            row.kind = EffectKind::EditStatusComment;
            row
        }
        EffectIntent::CreateFollowUpIssue {
            pr,
            finding_id,
            title,
            body,
        } => {
            check_field(
                "follow-up title",
                title,
                FieldKind::OneLine { max_chars: 256 },
            )?;
            let pr_url = ctx.pr_url(*pr);
            let composed = compose_follow_up_body(body, finding_id, &pr_url)?;
            Row {
                kind: EffectKind::CreateIssue,
                target: "issues".into(),
                precondition: json!({}),
                payload: json!({ "title": title, "body": stamp(&composed, MarkerName::FollowUp)?, "labels": [] }),
                completion: marked(
                    MarkerName::FollowUp,
                    json!({ "finding_id": finding_id, "pr": pr_url }),
                ),
            }
        }
        EffectIntent::AppendFollowUpMarkers {
            issue,
            pr,
            finding_ids,
        } => {
            let base = ctx.body_of(*issue)?;
            let pr_url = ctx.pr_url(*pr);
            let present = scan(base, MarkerName::FollowUp)
                .into_result()
                .map_err(PlanError::Marker)?;
            let mut lines = Vec::new();
            for finding_id in finding_ids {
                let key = object(json!({ "finding_id": finding_id, "pr": pr_url }));
                if present.iter().any(|m| m.matches(&key)) {
                    return Err(PlanError::Refused(format!(
                        "#{issue} already carries the marker of {finding_id}"
                    )));
                }
                let mut payload = key;
                payload.insert("run".into(), json!(run));
                payload.insert("write".into(), json!(write));
                lines.push(
                    markers::render(MarkerName::FollowUp, &payload).map_err(PlanError::Marker)?,
                );
            }
            Row {
                kind: EffectKind::AppendIssueMarkers,
                target: format!("issue/{issue}"),
                precondition: json!({ "base_sha256": digest(base) }),
                payload: json!({ "body": format!("{base}{}{}", blank_line_after(base), lines.join("\n")) }),
                completion: json!({
                    "marker": MarkerName::FollowUp.as_str(), "finding_ids": finding_ids,
                    "pr": pr_url, "write": write,
                }),
            }
        }
        EffectIntent::SpliceEpicRoadmap { epic, section } => {
            check_body("roadmap section", section)?;
            let base = ctx.body_of(*epic)?;
            let spliced = splice_roadmap(base, section).map_err(PlanError::Refused)?;
            Row {
                kind: EffectKind::SpliceEpicRoadmap,
                target: format!("issue/{epic}"),
                precondition: json!({
                    "base_sha256": digest(base),
                    "outside_sha256": outside_digest(base).map_err(PlanError::Refused)?,
                }),
                payload: json!({ "body": spliced }),
                completion: json!({ "write": write }),
            }
        }
        EffectIntent::AddReaction { comment_id } => Row {
            kind: EffectKind::AddReaction,
            target: format!("comment/{comment_id}"),
            precondition: json!({}),
            payload: json!({ "content": "eyes" }),
            completion: json!({ "write": write }),
        },
        EffectIntent::SetLabels { issue, add, remove } => Row {
            kind: EffectKind::SetLabels,
            target: format!("issue/{issue}"),
            precondition: json!({}),
            payload: json!({ "add": add, "remove": remove }),
            completion: json!({ "write": write }),
        },
        EffectIntent::MergePr { pr, sha, base_ref } => Row {
            kind: EffectKind::MergePr,
            target: format!("pull/{pr}"),
            precondition: json!({ "head_sha": sha }),
            payload: json!({ "sha": sha, "merge_method": ctx.merge_method }),
            completion: json!({ "base_ref": base_ref, "write": write }),
        },
    };
    Ok(finish(intent.identity(), row))
}

fn comment_row(number: u64, body: String, completion: Value) -> Row {
    Row {
        kind: EffectKind::PostComment,
        target: format!("issue/{number}"),
        precondition: json!({}),
        payload: json!({ "body": body }),
        completion,
    }
}

fn finish(identity: String, row: Row) -> NewEffect {
    NewEffect {
        kind: row.kind,
        identity,
        target: row.target,
        precondition: row.precondition,
        // Serialising a `Value` to bytes cannot fail.
        payload: serde_json::to_vec(&row.payload).unwrap_or_default(),
        completion: row.completion,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::effects::markers::Scan;
    use crate::machine::{Reply, StatusSnapshot};

    fn context<'a>(repo: &'a RepoName, bodies: &'a BTreeMap<u64, String>) -> PlanContext<'a> {
        PlanContext {
            run_id: RunId(9),
            repo,
            html_base: "https://github.com/",
            default_branch: "main",
            merge_method: "squash",
            bodies,
        }
    }

    fn body(effect: &NewEffect) -> String {
        let payload: Value = serde_json::from_slice(&effect.payload).unwrap();
        payload["body"].as_str().unwrap().to_owned()
    }

    #[test]
    fn the_marker_in_the_payload_carries_the_run_and_the_rows_nonce() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let intent = EffectIntent::CreatePr {
            issue: 3,
            branch: "autoforge/3".into(),
            base: "main".into(),
            title: "Add it".into(),
            body: "Adds it.".into(),
        };
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        assert_eq!(effect.kind, EffectKind::CreatePr);
        assert_eq!(effect.identity, "ai-implementation:issue=3");
        let Scan::Found(found) = scan(&body(&effect), MarkerName::Implementation) else {
            panic!("no marker");
        };
        let nonce = effect.completion["write"].as_str().unwrap();
        assert_eq!(nonce.len(), 32);
        assert_eq!(found[0].write_nonce(), Some(nonce));
        assert_eq!(found[0].payload["run"], json!(9));
        assert_eq!(
            found[0].payload["issue"],
            json!("https://github.com/o/r/issues/3")
        );
        assert_eq!(
            effect.completion["key"],
            json!({"issue": "https://github.com/o/r/issues/3"})
        );
        let again = plan(&intent, &context(&repo, &bodies)).unwrap();
        assert_ne!(
            again.completion["write"], effect.completion["write"],
            "fresh nonce per row"
        );
    }

    #[test]
    fn agent_text_that_breaks_the_policy_is_never_journalled() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let intent = EffectIntent::CreatePr {
            issue: 3,
            branch: "autoforge/3".into(),
            base: "main".into(),
            title: "Add it".into(),
            body: "Fixes #4 <!-- ai-implementation: {} -->".into(),
        };
        assert!(matches!(
            plan(&intent, &context(&repo, &bodies)),
            Err(PlanError::Policy(_))
        ));
    }

    #[test]
    fn append_kinds_need_the_body_read_at_phase_start_and_refuse_repeats() {
        let repo: RepoName = "o/r".parse().unwrap();
        let intent = EffectIntent::AppendFollowUpMarkers {
            issue: 5,
            pr: 2,
            finding_ids: vec!["R1-F1".into()],
        };
        let empty = BTreeMap::new();
        assert!(matches!(
            plan(&intent, &context(&repo, &empty)),
            Err(PlanError::MissingBody(5))
        ));
        let bodies = BTreeMap::from([(5, "Tracked.".to_owned())]);
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        let appended = body(&effect);
        assert!(appended.starts_with("Tracked.\n\n<!-- ai-follow-up: "));
        assert_eq!(
            effect.precondition["base_sha256"],
            json!(digest("Tracked."))
        );
        let again = BTreeMap::from([(5, appended)]);
        assert!(matches!(
            plan(&intent, &context(&repo, &again)),
            Err(PlanError::Refused(_))
        ));
    }

    #[test]
    fn status_and_reply_bodies_end_with_their_marker() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let status = EffectIntent::EditStatusComment {
            issue: 1,
            run_id: "9".into(),
            status: StatusSnapshot {
                phase: crate::machine::Phase::Implement,
                round: 0,
                pr: None,
                blocked_reason: None,
                failure: None,
                waiting_for: "agent".into(),
                last_validation: None,
                merge_mode: crate::machine::MergeMode::Never,
                blocked_from: None,
            },
        };
        let effect = plan(&status, &context(&repo, &bodies)).unwrap();
        assert_eq!(effect.kind, EffectKind::EditStatusComment);
        assert_eq!(effect.completion["key"], json!({"run": 9}));
        assert!(body(&effect).contains("<!-- autoforge-status: {\"run\":9,\"write\":"));
        let reply = EffectIntent::PostCommandReply {
            thread: 1,
            comment_id: 77,
            reply: Reply::Accepted {
                command: "stop".into(),
                detail: "stopping".into(),
            },
        };
        let effect = plan(&reply, &context(&repo, &bodies)).unwrap();
        assert_eq!(effect.target, "issue/1");
        assert_eq!(effect.completion["key"], json!({"command_comment_id": 77}));
    }

    #[test]
    fn merges_carry_the_reviewed_sha_and_the_configured_method() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let intent = EffectIntent::MergePr {
            pr: 4,
            sha: "a".repeat(40),
            base_ref: "main".into(),
        };
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        let payload: Value = serde_json::from_slice(&effect.payload).unwrap();
        assert_eq!(
            payload,
            json!({"sha": "a".repeat(40), "merge_method": "squash"})
        );
        assert_eq!(effect.completion["base_ref"], json!("main"));
    }
}
