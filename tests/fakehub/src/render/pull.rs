//! Pull requests (`pull-request`). Git-derived fields come in a [`PullGit`]
//! computed outside the world lock.

use chrono::Utc;
use serde_json::{Value, json};

use super::issue::association;
use super::{Ctx, node_id, render_label, render_repo, render_user, ts};
use crate::world::{Issue, Repo};

/// `mergeable` and `mergeable_state` as GitHub computes them: unknown
/// (`null`) for a short while after a push, then from git and the checks.
pub fn mergeability(ctx: Ctx<'_>, repo: &Repo, issue: &Issue) -> (Option<bool>, &'static str) {
    let Some(pull) = &issue.pull else {
        return (None, "unknown");
    };
    if !issue.state_open || pull.merged_at.is_some() || Utc::now() < pull.mergeable_known_at {
        return (None, "unknown");
    }
    let stats = &pull.stats;
    if stats.conflict {
        return (Some(false), "dirty");
    }
    if pull.draft {
        return (Some(true), "draft");
    }
    let latest = |name: &str| {
        ctx.world
            .check_runs
            .values()
            .filter(|c| c.repo_id == repo.id && c.head_sha == pull.head_sha && c.name == name)
            .max_by_key(|c| c.id)
    };
    let passed = |c: &crate::world::CheckRun| {
        matches!(
            c.conclusion.as_deref(),
            Some("success" | "neutral" | "skipped")
        )
    };
    let status_state = |context: &str| {
        ctx.world
            .statuses
            .iter()
            .rev()
            .find(|st| st.repo_id == repo.id && st.sha == pull.head_sha && st.context == context)
            .map(|st| st.state.as_str())
    };
    for required in &repo.required_checks {
        let check_ok = latest(required).is_some_and(|c| c.status == "completed" && passed(c));
        if !check_ok && status_state(required) != Some("success") {
            return (Some(true), "blocked");
        }
    }
    if approvals(ctx, repo, pull) < repo.required_approving_reviews {
        return (Some(true), "blocked");
    }
    if stats.behind && repo.require_up_to_date {
        return (Some(true), "behind");
    }
    let unstable = ctx
        .world
        .check_runs
        .values()
        .filter(|c| c.repo_id == repo.id && c.head_sha == pull.head_sha)
        .any(|c| latest(&c.name).is_some_and(|l| l.status != "completed" || !passed(l)))
        || ctx
            .world
            .statuses
            .iter()
            .filter(|st| st.repo_id == repo.id && st.sha == pull.head_sha)
            .any(|st| status_state(&st.context) != Some("success"));
    (Some(true), if unstable { "unstable" } else { "clean" })
}

/// Approvals that count for the review rule: each reviewer's latest
/// approving or rejecting review, from people with write access, as
/// GitHub counts them (a later comment-only review changes nothing).
pub fn approvals(ctx: Ctx<'_>, repo: &Repo, pull: &crate::world::PullData) -> u32 {
    let mut latest: std::collections::BTreeMap<u64, &str> = std::collections::BTreeMap::new();
    for review in &pull.reviews {
        if matches!(
            review.state.as_str(),
            "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
        ) {
            latest.insert(review.user_id, review.state.as_str());
        }
    }
    let writes = |user: u64| {
        ctx.world
            .user_permission(repo, user)
            .is_some_and(|p| p >= crate::world::Permission::Write)
    };
    let counted = latest
        .iter()
        .filter(|(user, state)| **state == "APPROVED" && writes(**user))
        .count();
    u32::try_from(counted).unwrap_or(u32::MAX)
}

pub fn render_pull(ctx: Ctx<'_>, repo: &Repo, issue: &Issue) -> Value {
    let Some(pull) = &issue.pull else {
        return Value::Null;
    };
    let git = &pull.stats;
    let (mergeable, mergeable_state) = mergeability(ctx, repo, issue);
    let owner = ctx.world.users.get(&repo.owner_id);
    let owner_login = owner.map(|o| o.login.as_str()).unwrap_or("ghost");
    let full = format!("{owner_login}/{}", repo.name);
    let api = format!("{}/repos/{full}", ctx.base);
    let html = format!("{}/{full}", ctx.base);
    let n = issue.number;
    let url = format!("{api}/pulls/{n}");
    let user = |id: u64| {
        ctx.world
            .users
            .get(&id)
            .map(|u| render_user(ctx, u))
            .unwrap_or(Value::Null)
    };
    let repo_json = render_repo(ctx, repo);
    let owner_json = owner.map(|o| render_user(ctx, o)).unwrap_or(Value::Null);
    let side = |r: &str, sha: &str| {
        json!({
            "label": format!("{owner_login}:{r}"),
            "ref": r,
            "sha": sha,
            "user": owner_json,
            "repo": repo_json,
        })
    };
    let labels: Vec<Value> = issue
        .labels
        .iter()
        .filter_map(|name| repo.labels.iter().find(|l| &l.name == name))
        .map(|l| render_label(ctx, repo, l))
        .collect();
    let assignees: Vec<Value> = issue.assignees.iter().map(|id| user(*id)).collect();
    let link = |href: String| json!({ "href": href });
    let issue_url = format!("{api}/issues/{n}");
    let merged = pull.merged_at.is_some();
    json!({
        "url": url,
        "id": issue.id,
        "node_id": node_id("PR", issue.id),
        "html_url": format!("{html}/pull/{n}"),
        "diff_url": format!("{html}/pull/{n}.diff"),
        "patch_url": format!("{html}/pull/{n}.patch"),
        "issue_url": issue_url,
        "commits_url": format!("{url}/commits"),
        "review_comments_url": format!("{url}/comments"),
        "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
        "comments_url": format!("{issue_url}/comments"),
        "statuses_url": format!("{api}/statuses/{}", pull.head_sha),
        "number": n,
        "state": if issue.state_open { "open" } else { "closed" },
        "locked": issue.locked,
        "title": issue.title,
        "user": user(issue.user_id),
        "body": issue.body,
        "labels": labels,
        "milestone": null,
        "active_lock_reason": null,
        "created_at": ts(issue.created_at),
        "updated_at": ts(issue.updated_at),
        "closed_at": issue.closed_at.map(ts),
        "merged_at": pull.merged_at.map(ts),
        "merge_commit_sha": pull.merge_commit_sha,
        "assignee": assignees.first().cloned().unwrap_or(Value::Null),
        "assignees": assignees,
        "requested_reviewers": [],
        "requested_teams": [],
        "head": side(&pull.head_ref, &pull.head_sha),
        "base": side(&pull.base_ref, &git.base_sha),
        "_links": {
            "self": link(url.clone()),
            "html": link(format!("{html}/pull/{n}")),
            "issue": link(issue_url.clone()),
            "comments": link(format!("{issue_url}/comments")),
            "review_comments": link(format!("{url}/comments")),
            "review_comment": link(format!("{api}/pulls/comments{{/number}}")),
            "commits": link(format!("{url}/commits")),
            "statuses": link(format!("{api}/statuses/{}", pull.head_sha)),
        },
        "author_association": association(repo, issue.user_id),
        "auto_merge": null,
        "draft": pull.draft,
        "merged": merged,
        "mergeable": mergeable,
        "rebaseable": mergeable,
        "mergeable_state": mergeable_state,
        "merged_by": pull.merged_by.map(user),
        "comments": issue.comment_ids.len(),
        "review_comments": 0,
        "maintainer_can_modify": false,
        "commits": git.commits,
        "additions": git.additions,
        "deletions": git.deletions,
        "changed_files": git.changed_files,
    })
}
