//! Issues, comments, labels, reactions and issue events.

use serde_json::{Value, json};

use super::{Ctx, node_id, render_app, render_user, ts};
use crate::world::{Comment, Issue, IssueEvent, Label, Reaction, Repo};

fn repo_api(ctx: Ctx<'_>, repo: &Repo) -> (String, String) {
    let owner = ctx
        .world
        .users
        .get(&repo.owner_id)
        .map(|u| u.login.as_str())
        .unwrap_or("ghost");
    let full = format!("{owner}/{}", repo.name);
    (
        format!("{}/repos/{full}", ctx.base),
        format!("{}/{full}", ctx.base),
    )
}

fn user_or_null(ctx: Ctx<'_>, id: u64) -> Value {
    ctx.world
        .users
        .get(&id)
        .map(|u| render_user(ctx, u))
        .unwrap_or(Value::Null)
}

fn app_or_null(ctx: Ctx<'_>, app_id: Option<u64>) -> Value {
    app_id
        .and_then(|id| ctx.world.apps.get(&id))
        .map(|a| render_app(ctx, a))
        .unwrap_or(Value::Null)
}

/// GitHub's `author_association` of a user towards a repository.
pub fn association(repo: &Repo, user_id: u64) -> &'static str {
    if repo.owner_id == user_id {
        "OWNER"
    } else if repo.collaborators.contains_key(&user_id) {
        "COLLABORATOR"
    } else {
        "NONE"
    }
}

pub fn render_label(ctx: Ctx<'_>, repo: &Repo, label: &Label) -> Value {
    let (api, _) = repo_api(ctx, repo);
    json!({
        "id": label.id,
        "node_id": node_id("LA", label.id),
        "url": format!("{api}/labels/{}", label.name.replace(' ', "%20")),
        "name": label.name,
        "color": label.color,
        "default": false,
        "description": label.description,
    })
}

pub fn render_reaction(ctx: Ctx<'_>, reaction: &Reaction) -> Value {
    json!({
        "id": reaction.id,
        "node_id": node_id("REA", reaction.id),
        "user": user_or_null(ctx, reaction.user_id),
        "content": reaction.content,
        "created_at": ts(reaction.created_at),
    })
}

/// The `reactions` roll-up GitHub embeds in issues and comments.
fn reaction_rollup(url: String, reactions: &[Reaction]) -> Value {
    let count = |c: &str| reactions.iter().filter(|r| r.content == c).count();
    json!({
        "url": url,
        "total_count": reactions.len(),
        "+1": count("+1"),
        "-1": count("-1"),
        "laugh": count("laugh"),
        "hooray": count("hooray"),
        "confused": count("confused"),
        "heart": count("heart"),
        "rocket": count("rocket"),
        "eyes": count("eyes"),
    })
}

pub fn render_issue(ctx: Ctx<'_>, repo: &Repo, issue: &Issue) -> Value {
    let (api, html) = repo_api(ctx, repo);
    let n = issue.number;
    let url = format!("{api}/issues/{n}");
    let labels: Vec<Value> = issue
        .labels
        .iter()
        .filter_map(|name| repo.labels.iter().find(|l| &l.name == name))
        .map(|l| render_label(ctx, repo, l))
        .collect();
    let assignees: Vec<Value> = issue
        .assignees
        .iter()
        .map(|id| user_or_null(ctx, *id))
        .collect();
    let open_subs = issue
        .sub_issues
        .iter()
        .filter(|(r, num)| {
            ctx.world
                .repos
                .get(r)
                .and_then(|r| r.issues.get(num))
                .is_some_and(|i| i.state_open)
        })
        .count();
    let total_subs = issue.sub_issues.len();
    let mut v = json!({
        "id": issue.id,
        "node_id": node_id(if issue.pull.is_some() { "PR" } else { "I" }, issue.id),
        "url": url,
        "repository_url": api,
        "labels_url": format!("{url}/labels{{/name}}"),
        "comments_url": format!("{url}/comments"),
        "events_url": format!("{url}/events"),
        "html_url": format!("{html}/{}/{n}", if issue.pull.is_some() { "pull" } else { "issues" }),
        "number": n,
        "state": if issue.state_open { "open" } else { "closed" },
        "state_reason": issue.state_reason,
        "title": issue.title,
        "body": issue.body,
        "user": user_or_null(ctx, issue.user_id),
        "labels": labels,
        "assignee": assignees.first().cloned().unwrap_or(Value::Null),
        "assignees": assignees,
        "milestone": null,
        "locked": issue.locked,
        "active_lock_reason": null,
        "comments": issue.comment_ids.len(),
        "closed_at": issue.closed_at.map(ts),
        "created_at": ts(issue.created_at),
        "updated_at": ts(issue.updated_at),
        "closed_by": issue.closed_by.map(|id| user_or_null(ctx, id)),
        "author_association": association(repo, issue.user_id),
        "reactions": reaction_rollup(format!("{url}/reactions"), &issue.reactions),
        "timeline_url": format!("{url}/timeline"),
        "performed_via_github_app": null,
        "draft": false,
        "sub_issues_summary": {
            "total": total_subs,
            "completed": total_subs - open_subs,
            "percent_completed": ((total_subs - open_subs) * 100).checked_div(total_subs).unwrap_or(0),
        },
    });
    if let Some(pull) = &issue.pull {
        v["pull_request"] = json!({
            "url": format!("{api}/pulls/{n}"),
            "html_url": format!("{html}/pull/{n}"),
            "diff_url": format!("{html}/pull/{n}.diff"),
            "patch_url": format!("{html}/pull/{n}.patch"),
            "merged_at": pull.merged_at.map(ts),
        });
        v["draft"] = json!(pull.draft);
    }
    v
}

pub fn render_comment(ctx: Ctx<'_>, repo: &Repo, comment: &Comment) -> Value {
    let (api, html) = repo_api(ctx, repo);
    let url = format!("{api}/issues/comments/{}", comment.id);
    let is_pull = repo
        .issues
        .get(&comment.issue_number)
        .is_some_and(|i| i.pull.is_some());
    json!({
        "id": comment.id,
        "node_id": node_id("IC", comment.id),
        "url": url,
        "html_url": format!("{html}/{}/{}#issuecomment-{}", if is_pull { "pull" } else { "issues" }, comment.issue_number, comment.id),
        "body": comment.body,
        "user": user_or_null(ctx, comment.user_id),
        "created_at": ts(comment.created_at),
        "updated_at": ts(comment.updated_at),
        "issue_url": format!("{api}/issues/{}", comment.issue_number),
        "author_association": association(repo, comment.user_id),
        "performed_via_github_app": app_or_null(ctx, comment.app_id),
        "reactions": reaction_rollup(format!("{url}/reactions"), &comment.reactions),
    })
}

pub fn render_event(ctx: Ctx<'_>, repo: &Repo, issue: &Issue, event: &IssueEvent) -> Value {
    let (api, _) = repo_api(ctx, repo);
    let mut v = json!({
        "id": event.id,
        "node_id": node_id("E", event.id),
        "url": format!("{api}/issues/events/{}", event.id),
        "actor": user_or_null(ctx, event.actor_id),
        "event": event.event,
        "commit_id": event.commit_id,
        "commit_url": event.commit_id.as_ref().map(|c| format!("{api}/commits/{c}")),
        "created_at": ts(event.created_at),
        "performed_via_github_app": app_or_null(ctx, event.app_id),
    });
    if let Some(name) = &event.label {
        let color = repo
            .labels
            .iter()
            .find(|l| &l.name == name)
            .map(|l| l.color.clone())
            .unwrap_or_else(|| "ededed".into());
        v["label"] = json!({"name": name, "color": color});
    }
    if event.event == "closed" || event.event == "reopened" {
        v["state_reason"] = json!(issue.state_reason);
    }
    v
}
