//! Issue events, the timeline, reactions, sub-issues and the parent issue.

use axum::extract::Path;
use axum::http::Uri;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{S, Who, ctx};
use crate::http::{ApiError, ApiResult, JsonBody, created, ok, opt_str, paginated, query_value};
use crate::render::{render_comment, render_event, render_issue, render_reaction};
use crate::world::{Access, Reaction, World};

type IssuePath = Path<(String, String, u64)>;

pub async fn events(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    let issue = w.issue(rid, number)?;
    let items = issue
        .events
        .iter()
        .map(|e| render_event(ctx(&s, &w), r, issue, e))
        .collect();
    paginated(items, &uri, &s.base)
}

pub async fn timeline(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    let issue = w.issue(rid, number)?;
    let mut items: Vec<(DateTime<Utc>, u64, Value)> = issue
        .events
        .iter()
        .map(|e| (e.created_at, e.id, render_event(ctx(&s, &w), r, issue, e)))
        .collect();
    for id in &issue.comment_ids {
        if let Some(cm) = w.comments.get(id) {
            let mut v = render_comment(ctx(&s, &w), r, cm);
            v["event"] = json!("commented");
            v["actor"] = v["user"].clone();
            items.push((cm.created_at, cm.id, v));
        }
    }
    items.sort_by_key(|(t, id, _)| (*t, *id));
    paginated(
        items.into_iter().map(|(_, _, v)| v).collect(),
        &uri,
        &s.base,
    )
}

const REACTIONS: &[&str] = &[
    "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes",
];

/// Add a reaction unless the user already reacted with that content
/// (GitHub answers 200 with the existing one, 201 for a new one).
pub fn react(
    w: &mut World,
    list: impl Fn(&mut World) -> Option<&mut Vec<Reaction>>,
    user_id: u64,
    body: &Value,
) -> Result<(Reaction, bool), ApiError> {
    let content = opt_str(body, "content", "Reaction")?
        .ok_or_else(|| ApiError::validation("Reaction", "content", "missing_field"))?;
    if !REACTIONS.contains(&content.as_str()) {
        return Err(ApiError::validation("Reaction", "content", "invalid"));
    }
    let id = w.alloc_id();
    let reactions = list(w).ok_or_else(ApiError::not_found)?;
    if let Some(existing) = reactions
        .iter()
        .find(|r| r.user_id == user_id && r.content == content)
    {
        return Ok((existing.clone(), false));
    }
    let reaction = Reaction {
        id,
        user_id,
        content,
        created_at: Utc::now(),
    };
    reactions.push(reaction.clone());
    Ok((reaction, true))
}

pub async fn list_reactions(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let content = query_value(&uri, "content");
    let items = w
        .issue(rid, number)?
        .reactions
        .iter()
        .filter(|r| content.as_deref().is_none_or(|c| c == r.content))
        .map(|r| render_reaction(ctx(&s, &w), r))
        .collect();
    paginated(items, &uri, &s.base)
}

pub async fn add_reaction(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let (reaction, new) = react(
        &mut w,
        |w| {
            w.repos
                .get_mut(&rid)?
                .issues
                .get_mut(&number)
                .map(|i| &mut i.reactions)
        },
        actor.0,
        &body,
    )?;
    let v = render_reaction(ctx(&s, &w), &reaction);
    if new { created(v) } else { ok(v) }
}

fn find_issue_by_id(w: &World, id: u64) -> Option<(u64, u64)> {
    w.repos.values().find_map(|r| {
        r.issues
            .values()
            .find(|i| i.id == id)
            .map(|i| (r.id, i.number))
    })
}

pub async fn sub_issues(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let items = w
        .issue(rid, number)?
        .sub_issues
        .iter()
        .filter_map(|(r, n)| {
            w.repos.get(r).and_then(|repo| {
                repo.issues
                    .get(n)
                    .map(|i| render_issue(ctx(&s, &w), repo, i))
            })
        })
        .collect();
    paginated(items, &uri, &s.base)
}

pub async fn add_sub_issue(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("issues"))?;
    w.actor(&c)?;
    let sub_id = body
        .get("sub_issue_id")
        .and_then(Value::as_u64)
        .ok_or_else(|| ApiError::validation("SubIssue", "sub_issue_id", "missing_field"))?;
    let replace = body
        .get("replace_parent")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let child = find_issue_by_id(&w, sub_id)
        .ok_or_else(|| ApiError::validation("SubIssue", "sub_issue_id", "invalid"))?;
    if child == (rid, number) {
        return Err(ApiError::validation("SubIssue", "sub_issue_id", "invalid"));
    }
    if w.issue(child.0, child.1)?.pull.is_some() {
        return Err(ApiError::validation("SubIssue", "sub_issue_id", "invalid"));
    }
    if let Some(old) = w.issue(child.0, child.1)?.parent {
        if old == (rid, number) {
            return Err(ApiError::validation(
                "SubIssue",
                "sub_issue_id",
                "already_exists",
            ));
        }
        if !replace {
            return Err(ApiError::validation("SubIssue", "parent", "already_exists"));
        }
        w.issue_mut(old.0, old.1)?
            .sub_issues
            .retain(|x| *x != child);
    }
    w.issue_mut(child.0, child.1)?.parent = Some((rid, number));
    w.issue_mut(rid, number)?.sub_issues.push(child);
    let r = w.repo(rid)?;
    created(render_issue(ctx(&s, &w), r, w.issue(rid, number)?))
}

pub async fn parent(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let (pr, pn) = w
        .issue(rid, number)?
        .parent
        .ok_or_else(ApiError::not_found)?;
    let r = w.repo(pr)?;
    ok(render_issue(ctx(&s, &w), r, w.issue(pr, pn)?))
}
