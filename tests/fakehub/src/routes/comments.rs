//! Issue and pull-request comments and their reactions.

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::issue_relations::react;
use super::{S, Who, ctx};
use crate::Shared;
use crate::http::{ApiError, ApiResult, JsonBody, created, ok, paginated, query_value};
use crate::render::{render_comment, render_issue, render_reaction};
use crate::webhooks::{Event, emit};
use crate::world::{Access, Comment, Permission, World};

/// GitHub's limit on comment bodies.
const MAX_BODY_CHARS: usize = 65_536;

fn comment_hook(
    s: &std::sync::Arc<Shared>,
    w: &mut World,
    comment_id: u64,
    action: &'static str,
    sender: u64,
    extra: Value,
) {
    let Some(cm) = w.comments.get(&comment_id) else {
        return;
    };
    let Ok(repo) = w.repo(cm.repo_id) else { return };
    let Some(issue) = repo.issues.get(&cm.issue_number) else {
        return;
    };
    let c = ctx(s, w);
    let mut body =
        json!({"issue": render_issue(c, repo, issue), "comment": render_comment(c, repo, cm)});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    let repo_id = cm.repo_id;
    emit(
        s,
        w,
        Event {
            name: "issue_comment",
            action: Some(action),
            repo_id: Some(repo_id),
            only_installation: None,
            sender_id: sender,
            body,
        },
    );
}

fn body_text(body: &Value) -> Result<String, ApiError> {
    let text = body
        .get("body")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::validation("IssueComment", "body", "missing_field"))?;
    if text.chars().count() > MAX_BODY_CHARS {
        return Err(ApiError::validation("IssueComment", "body", "custom"));
    }
    Ok(text.to_string())
}

pub async fn list(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    let since: Option<DateTime<Utc>> = query_value(&uri, "since").and_then(|t| t.parse().ok());
    let items = w
        .issue(rid, number)?
        .comment_ids
        .iter()
        .filter_map(|id| w.comments.get(id))
        .filter(|cm| since.is_none_or(|t| cm.updated_at >= t))
        .map(|cm| render_comment(ctx(&s, &w), r, cm))
        .collect();
    paginated(items, &uri, &s.base)
}

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let text = body_text(&body)?;
    if w.issue(rid, number)?.locked {
        return Err(ApiError::forbidden(
            "Unable to create comment because issue is locked.",
        ));
    }
    let id = w.alloc_id();
    let now = Utc::now();
    w.comments.insert(
        id,
        Comment {
            id,
            repo_id: rid,
            issue_number: number,
            user_id: actor.0,
            body: text,
            created_at: now,
            updated_at: now,
            reactions: Vec::new(),
            app_id: actor.1,
        },
    );
    let issue = w.issue_mut(rid, number)?;
    issue.comment_ids.push(id);
    issue.updated_at = now;
    comment_hook(&s, &mut w, id, "created", actor.0, json!({}));
    let r = w.repo(rid)?;
    created(render_comment(
        ctx(&s, &w),
        r,
        w.comments.get(&id).ok_or_else(ApiError::not_found)?,
    ))
}

/// The comment with `id` in `owner/repo`, 404 when it belongs elsewhere.
fn comment_in(w: &World, rid: u64, id: u64) -> Result<&Comment, ApiError> {
    w.comments
        .get(&id)
        .filter(|cm| cm.repo_id == rid)
        .ok_or_else(ApiError::not_found)
}

pub async fn get(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    ok(render_comment(
        ctx(&s, &w),
        w.repo(rid)?,
        comment_in(&w, rid, id)?,
    ))
}

/// Authors may edit and delete their own comments; otherwise maintainers only.
fn may_modify(w: &World, rid: u64, actor: u64, cm: &Comment) -> bool {
    cm.user_id == actor
        || w.repo(rid)
            .ok()
            .and_then(|r| w.user_permission(r, actor))
            .is_some_and(|p| p >= Permission::Write)
}

pub async fn update(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let text = body_text(&body)?;
    let cm = comment_in(&w, rid, id)?;
    if actor.1.is_none() && !may_modify(&w, rid, actor.0, cm) {
        return Err(ApiError::forbidden("Must have admin rights to Repository."));
    }
    let old = cm.body.clone();
    if let Some(cm) = w.comments.get_mut(&id) {
        cm.body = text;
        cm.updated_at = Utc::now();
    }
    comment_hook(
        &s,
        &mut w,
        id,
        "edited",
        actor.0,
        json!({"changes": {"body": {"from": old}}}),
    );
    ok(render_comment(
        ctx(&s, &w),
        w.repo(rid)?,
        comment_in(&w, rid, id)?,
    ))
}

pub async fn delete(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let cm = comment_in(&w, rid, id)?;
    if actor.1.is_none() && !may_modify(&w, rid, actor.0, cm) {
        return Err(ApiError::forbidden("Must have admin rights to Repository."));
    }
    comment_hook(&s, &mut w, id, "deleted", actor.0, json!({}));
    if let Some(cm) = w.comments.remove(&id)
        && let Ok(issue) = w.issue_mut(rid, cm.issue_number)
    {
        issue.comment_ids.retain(|x| *x != id);
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn list_reactions(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let content = query_value(&uri, "content");
    let items = comment_in(&w, rid, id)?
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
    Path((owner, repo, id)): Path<(String, String, u64)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    comment_in(&w, rid, id)?;
    let (reaction, new) = react(
        &mut w,
        |w| w.comments.get_mut(&id).map(|cm| &mut cm.reactions),
        actor.0,
        &body,
    )?;
    let v = render_reaction(ctx(&s, &w), &reaction);
    if new { created(v) } else { ok(v) }
}
