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
//! This is only the dispatch: each kind's planner, and the types of its
//! row's columns, live with the kind (`comments`, `pulls`, `push`, …; the
//! shared shapes are in [`super::row`]).

use autoforge_journal::NewEffect;

use super::planning::{Draft, PlanContext, PlanError};
use super::{check_run, comments, epic, issues, labels, merge, pulls, push, reactions, reviews};
use crate::machine::EffectIntent;
use crate::publish::{PlanRender, ReviewRender, render_plan_comment, render_review_comment};

/// The journal row for `intent`, with its exact payload bytes.
///
/// Long by design: one arm per intent, each handing its fields to the
/// kind's own planner.
pub fn plan(intent: &EffectIntent, ctx: &PlanContext<'_>) -> Result<NewEffect, PlanError> {
    let draft = Draft::new(ctx, intent.identity());
    match intent {
        EffectIntent::Push {
            branch,
            sha,
            expected_old,
        } => push::plan(draft, branch, sha, expected_old.as_ref()),
        EffectIntent::CreatePr {
            issue,
            branch,
            base,
            title,
            body,
        } => pulls::plan_create(draft, *issue, branch, base, title, body),
        EffectIntent::AdoptPr { pr, issue } => pulls::plan_adopt(draft, *pr, *issue),
        EffectIntent::PostReviewComment {
            pr,
            round,
            binding,
            findings,
            sections,
        } => {
            let rendered = render_review_comment(&ReviewRender {
                round: *round,
                reviewed_head_sha: binding.head_sha.as_str(),
                base_ref: &binding.base_ref,
                merge_base_sha: binding.merge_base_sha.as_str(),
                needs_fix_round: !findings.is_empty(),
                findings,
                sections,
            })?;
            comments::plan_review(draft, *pr, *round, binding, &rendered)
        }
        EffectIntent::PostPlanComment {
            issue,
            version,
            plan,
            awaits_approval,
        } => {
            let rendered = render_plan_comment(&PlanRender {
                version: *version,
                plan,
                awaits_approval: *awaits_approval,
            })?;
            comments::plan_plan_comment(draft, *issue, *version, &rendered)
        }
        EffectIntent::PostEpicProgress {
            epic,
            issue,
            pr,
            text,
        } => comments::plan_progress(draft, *epic, *issue, *pr, text),
        EffectIntent::PostCommandReply {
            thread,
            comment_id,
            reply,
        } => comments::plan_reply(draft, *thread, *comment_id, reply),
        EffectIntent::PostNotice {
            issue,
            event,
            notice,
        } => comments::plan_notice(draft, *issue, event, notice),
        EffectIntent::EditStatusComment { issue, status, .. } => {
            comments::plan_status(draft, *issue, status)
        }
        EffectIntent::CreateFollowUpIssue {
            pr,
            finding_id,
            title,
            body,
        } => issues::plan_follow_up(draft, *pr, finding_id, title, body),
        EffectIntent::AppendFollowUpMarkers {
            issue,
            pr,
            finding_ids,
        } => issues::plan_append(draft, *issue, *pr, finding_ids),
        EffectIntent::SpliceEpicRoadmap { epic, section } => epic::plan(draft, *epic, section),
        EffectIntent::AddReaction { comment_id } => reactions::plan(draft, *comment_id),
        EffectIntent::SetLabels { issue, add, remove } => labels::plan(draft, *issue, add, remove),
        EffectIntent::MergePr {
            pr,
            sha,
            base_ref,
            method,
            pr_title,
            issue,
        } => merge::plan(
            draft,
            &merge::MergeRequest {
                pr: *pr,
                sha,
                base_ref,
                method: *method,
                pr_title,
                issue: *issue,
            },
        ),
        EffectIntent::CheckRun {
            issue,
            view,
            status,
        } => check_run::plan(draft, *issue, view, status),
        EffectIntent::PostReview {
            pr,
            round,
            binding,
            findings,
        } => reviews::plan(draft, *pr, *round, binding, findings),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::effects::markers::{MarkerName, Scan, scan};
    use crate::effects::row::digest;
    use crate::github::RepoName;
    use crate::machine::{Reply, StatusSnapshot};
    use autoforge_journal::{EffectKind, IssueNumber, RunId};
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    fn context<'a>(
        repo: &'a RepoName,
        bodies: &'a BTreeMap<IssueNumber, String>,
    ) -> PlanContext<'a> {
        PlanContext {
            run_id: RunId(9),
            repo,
            html_base: "https://github.com/",
            default_branch: "main",
            bodies,
            diffs: &crate::effects::NO_DIFFS,
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
            issue: autoforge_journal::testing::issue(3),
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
            issue: autoforge_journal::testing::issue(3),
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
            issue: autoforge_journal::testing::issue(5),
            pr: autoforge_journal::testing::pull(2),
            finding_ids: vec!["R1-F1".into()],
        };
        let empty = BTreeMap::new();
        assert!(matches!(
            plan(&intent, &context(&repo, &empty)),
            Err(PlanError::MissingBody(n)) if n.get() == 5
        ));
        let bodies =
            BTreeMap::from([(autoforge_journal::testing::issue(5), "Tracked.".to_owned())]);
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        let appended = body(&effect);
        assert!(appended.starts_with("Tracked.\n\n<!-- ai-follow-up: "));
        assert_eq!(
            effect.precondition["base_sha256"],
            json!(digest("Tracked."))
        );
        let again = BTreeMap::from([(autoforge_journal::testing::issue(5), appended)]);
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
            issue: autoforge_journal::testing::issue(1),
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
                merge_wait: None,
                tokens: 0,
                cost_micros: 0,
                epic: None,
                issue_tokens: 0,
                issue_cost_micros: 0,
                running: None,
                finished: None,
            },
        };
        let effect = plan(&status, &context(&repo, &bodies)).unwrap();
        assert_eq!(effect.kind, EffectKind::EditStatusComment);
        assert_eq!(effect.completion["key"], json!({"run": 9}));
        assert!(body(&effect).contains("<!-- autoforge-status: {\"run\":9,\"write\":"));
        let reply = EffectIntent::PostCommandReply {
            thread: autoforge_journal::testing::issue(1),
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
    fn merges_carry_the_reviewed_sha_and_the_chosen_method() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let intent = EffectIntent::MergePr {
            pr: autoforge_journal::testing::pull(4),
            sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            base_ref: "main".into(),
            method: crate::machine::MergeMethod::Rebase,
            pr_title: "Add it".into(),
            issue: autoforge_journal::testing::issue(2),
        };
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        let payload: Value = serde_json::from_slice(&effect.payload).unwrap();
        assert_eq!(
            payload,
            json!({"sha": "a".repeat(40), "merge_method": "rebase"})
        );
        assert_eq!(effect.completion["base_ref"], json!("main"));
    }

    #[test]
    fn a_squash_is_titled_after_the_pull_request_and_closes_the_runs_issue() {
        let repo: RepoName = "o/r".parse().unwrap();
        let bodies = BTreeMap::new();
        let intent = EffectIntent::MergePr {
            pr: autoforge_journal::testing::pull(4),
            sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            base_ref: "main".into(),
            method: crate::machine::MergeMethod::Squash,
            pr_title: "Add it".into(),
            issue: autoforge_journal::testing::issue(2),
        };
        let effect = plan(&intent, &context(&repo, &bodies)).unwrap();
        let payload: Value = serde_json::from_slice(&effect.payload).unwrap();
        assert_eq!(
            payload,
            json!({"sha": "a".repeat(40), "merge_method": "squash",
                "commit_title": "Add it (#4)", "commit_message": "Closes #2"})
        );
    }

    /// The row of `intent` as JSON, with the nonce replaced by `W` and
    /// every body by `BODY`; and a check that the payload bytes are the
    /// sorted-key encoding every earlier build wrote.
    fn shape(intent: &EffectIntent, bodies: &BTreeMap<IssueNumber, String>) -> Value {
        let repo: RepoName = "o/r".parse().unwrap();
        let effect = plan(intent, &context(&repo, bodies)).unwrap();
        assert_eq!(effect.kind, intent.kind());
        assert_eq!(effect.identity, intent.identity());
        let mut payload: Value = serde_json::from_slice(&effect.payload).unwrap();
        assert_eq!(serde_json::to_vec(&payload).unwrap(), effect.payload);
        if payload.get("body").is_some() {
            payload["body"] = json!("BODY");
        }
        assert_eq!(effect.completion["write"].as_str().map(str::len), Some(32));
        let mut row = json!({
            "kind": effect.kind.as_str(), "target": effect.target,
            "precondition": effect.precondition, "payload": payload,
            "completion": effect.completion,
        });
        row["completion"]["write"] = json!("W");
        row
    }

    #[test]
    fn every_kind_keeps_the_journal_row_layout_of_earlier_builds() {
        let issue = "https://github.com/o/r/issues/3";
        let pull = "https://github.com/o/r/pull/2";
        let sha = "a".repeat(40);
        let none = BTreeMap::new();
        let cases = [
            (
                EffectIntent::Push {
                    branch: "autoforge/3".into(),
                    sha: autoforge_journal::testing::sha(&sha.clone()),
                    expected_old: None,
                },
                json!({"kind": "push", "target": "refs/heads/autoforge/3",
                    "precondition": {"expected_old": null},
                    "payload": {"expected_old": null, "sha": sha},
                    "completion": {"sha": sha, "write": "W"}}),
            ),
            (
                EffectIntent::CreatePr {
                    issue: autoforge_journal::testing::issue(3),
                    branch: "autoforge/3".into(),
                    base: "main".into(),
                    title: "Add it".into(),
                    body: "Adds it.".into(),
                },
                json!({"kind": "create_pr", "target": "head/autoforge/3",
                    "precondition": {"no_pr_on_branch": "autoforge/3"},
                    "payload": {"base": "main", "body": "BODY", "head": "autoforge/3", "title": "Add it"},
                    "completion": {"marker": "ai-implementation", "key": {"issue": issue}, "write": "W"}}),
            ),
            (
                EffectIntent::PostCommandReply {
                    thread: autoforge_journal::testing::issue(1),
                    comment_id: 77,
                    reply: Reply::Accepted {
                        command: "stop".into(),
                        detail: "stopping".into(),
                    },
                },
                json!({"kind": "post_comment", "target": "issue/1", "precondition": {},
                    "payload": {"body": "BODY"},
                    "completion": {"marker": "autoforge-reply", "key": {"command_comment_id": 77}, "write": "W"}}),
            ),
            (
                EffectIntent::PostEpicProgress {
                    epic: autoforge_journal::testing::issue(1),
                    issue: autoforge_journal::testing::issue(3),
                    pr: autoforge_journal::testing::pull(2),
                    text: "Done.".into(),
                },
                json!({"kind": "post_comment", "target": "issue/1", "precondition": {},
                    "payload": {"body": "BODY"},
                    "completion": {"marker": "ai-epic-progress", "key": {"issue": issue, "pr": pull}, "write": "W"}}),
            ),
            (
                EffectIntent::CreateFollowUpIssue {
                    pr: autoforge_journal::testing::pull(2),
                    finding_id: "R1-F1".into(),
                    title: "Fix it".into(),
                    body: "Details.".into(),
                },
                json!({"kind": "create_issue", "target": "issues", "precondition": {},
                    "payload": {"body": "BODY", "labels": [], "title": "Fix it"},
                    "completion": {"marker": "ai-follow-up", "key": {"finding_id": "R1-F1", "pr": pull}, "write": "W"}}),
            ),
            (
                EffectIntent::AddReaction { comment_id: 77 },
                json!({"kind": "add_reaction", "target": "comment/77", "precondition": {},
                    "payload": {"content": "eyes"}, "completion": {"write": "W"}}),
            ),
            (
                EffectIntent::SetLabels {
                    issue: autoforge_journal::testing::issue(3),
                    add: vec!["a".into()],
                    remove: vec!["b".into()],
                },
                json!({"kind": "set_labels", "target": "issue/3", "precondition": {},
                    "payload": {"add": ["a"], "remove": ["b"]}, "completion": {"write": "W"}}),
            ),
            (
                EffectIntent::MergePr {
                    pr: autoforge_journal::testing::pull(4),
                    sha: autoforge_journal::testing::sha(&sha.clone()),
                    base_ref: "main".into(),
                    method: crate::machine::MergeMethod::Merge,
                    pr_title: "Add it".into(),
                    issue: autoforge_journal::testing::issue(2),
                },
                json!({"kind": "merge_pr", "target": "pull/4", "precondition": {"head_sha": sha},
                    "payload": {"merge_method": "merge", "sha": sha},
                    "completion": {"base_ref": "main", "write": "W"}}),
            ),
            (
                EffectIntent::CheckRun {
                    issue: autoforge_journal::testing::issue(3),
                    view: crate::machine::CheckRunView {
                        pr: autoforge_journal::testing::pull(2),
                        head_sha: autoforge_journal::testing::sha(&sha),
                        shows: crate::machine::CheckShows::Cancelled,
                    },
                    status: StatusSnapshot {
                        phase: crate::machine::Phase::Stopped,
                        round: 1,
                        pr: Some(autoforge_journal::testing::pull(2)),
                        blocked_reason: None,
                        failure: None,
                        waiting_for: "nothing".into(),
                        last_validation: None,
                        merge_mode: crate::machine::MergeMode::Never,
                        blocked_from: None,
                        merge_wait: None,
                        tokens: 0,
                        cost_micros: 0,
                        epic: None,
                        issue_tokens: 0,
                        issue_cost_micros: 0,
                        running: None,
                        finished: None,
                    },
                },
                json!({"kind": "check_run", "target": format!("commit/{sha}"), "precondition": {},
                    "payload": {"conclusion": "cancelled", "details_url": issue,
                        "external_id": format!("autoforge:run=9:head={sha}"), "head_sha": sha,
                        "name": "autoforge", "output": {"title": "Stopped",
                            "summary": "The run was stopped before it finished.\n\nCommands: none: the run is finished."},
                        "status": "completed"},
                    "completion": {"external_id": format!("autoforge:run=9:head={sha}"), "write": "W"}}),
            ),
        ];
        for (intent, expected) in cases {
            assert_eq!(shape(&intent, &none), expected, "{intent:?}");
        }
        let bodies = BTreeMap::from([
            (
                autoforge_journal::testing::issue(5),
                "Human text.".to_owned(),
            ),
            (autoforge_journal::testing::issue(6), "Tracked.".to_owned()),
            (autoforge_journal::testing::issue(7), "intro".to_owned()),
        ]);
        let appends = [
            (
                EffectIntent::AdoptPr {
                    pr: autoforge_journal::testing::pull(5),
                    issue: autoforge_journal::testing::issue(3),
                },
                json!({"kind": "adopt_pr", "target": "pull/5",
                    "precondition": {"base_sha256": digest("Human text.")},
                    "payload": {"body": "BODY"},
                    "completion": {"marker": "ai-implementation", "key": {"issue": issue}, "write": "W"}}),
            ),
            (
                EffectIntent::AppendFollowUpMarkers {
                    issue: autoforge_journal::testing::issue(6),
                    pr: autoforge_journal::testing::pull(2),
                    finding_ids: vec!["R1-F1".into()],
                },
                json!({"kind": "append_issue_markers", "target": "issue/6",
                    "precondition": {"base_sha256": digest("Tracked.")},
                    "payload": {"body": "BODY"},
                    "completion": {"marker": "ai-follow-up", "finding_ids": ["R1-F1"], "pr": pull, "write": "W"}}),
            ),
            (
                EffectIntent::SpliceEpicRoadmap {
                    epic: autoforge_journal::testing::issue(7),
                    section: "plan".into(),
                },
                json!({"kind": "splice_epic_roadmap", "target": "issue/7",
                    "precondition": {"base_sha256": digest("intro"),
                        "outside_sha256": crate::effects::outside_digest("intro").unwrap()},
                    "payload": {"body": "BODY"}, "completion": {"write": "W"}}),
            ),
        ];
        for (intent, expected) in appends {
            assert_eq!(shape(&intent, &bodies), expected, "{intent:?}");
        }
    }
}
