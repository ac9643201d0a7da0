//! Issues: list, get, create and update (title, body, state, labels,
//! assignees), and the webhook every issue change emits.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::Uri;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{S, Who, ctx};
use crate::Shared;
use crate::auth::Caller;
use crate::http::{
    ApiError, ApiResult, JsonBody, created, ok, opt_str, paginated, query_value, str_list,
};
use crate::render::{render_issue, render_pull};
use crate::webhooks::{Event, emit};
use crate::world::{Access, Permission, World};

use super::issue_labels::apply_labels;

type IssuePath = Path<(String, String, u64)>;

/// Emit the webhook GitHub sends for an issue change: `issues` for issues,
/// `pull_request` when the issue is a pull request.
pub fn issue_hook(
    s: &Arc<Shared>,
    w: &mut World,
    repo_id: u64,
    number: u64,
    action: &'static str,
    sender: u64,
    extra: Value,
) {
    let Ok(repo) = w.repo(repo_id) else { return };
    let Some(issue) = repo.issues.get(&number) else {
        return;
    };
    let c = ctx(s, w);
    let (name, mut body) = if issue.pull.is_some() {
        (
            "pull_request",
            json!({"number": number, "pull_request": render_pull(c, repo, issue)}),
        )
    } else {
        ("issues", json!({"issue": render_issue(c, repo, issue)}))
    };
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    emit(
        s,
        w,
        Event {
            name,
            action: Some(action),
            repo_id: Some(repo_id),
            only_installation: None,
            sender_id: sender,
            body,
        },
    );
}

/// Whether the caller may change issue metadata (labels, assignees, state of others' issues).
fn can_triage(w: &World, caller: &Caller, repo_id: u64) -> bool {
    match caller {
        Caller::User { user_id } => w
            .repo(repo_id)
            .ok()
            .and_then(|r| w.user_permission(r, *user_id))
            .is_some_and(|p| p >= Permission::Triage),
        Caller::Installation { .. } => true,
        _ => false,
    }
}

pub async fn list(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    let state = query_value(&uri, "state").unwrap_or_else(|| "open".into());
    if !["open", "closed", "all"].contains(&state.as_str()) {
        return Err(ApiError::validation("Issue", "state", "invalid"));
    }
    let labels: Vec<String> = query_value(&uri, "labels")
        .map(|l| {
            l.split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let since: Option<DateTime<Utc>> = query_value(&uri, "since").and_then(|t| t.parse().ok());
    let creator = query_value(&uri, "creator");
    let sort = query_value(&uri, "sort").unwrap_or_else(|| "created".into());
    let ascending = query_value(&uri, "direction").as_deref() == Some("asc");
    let mut items: Vec<_> = r
        .issues
        .values()
        .filter(|i| state == "all" || (state == "open") == i.state_open)
        .filter(|i| {
            labels
                .iter()
                .all(|l| i.labels.iter().any(|x| x.eq_ignore_ascii_case(l)))
        })
        .filter(|i| since.is_none_or(|t| i.updated_at >= t))
        .filter(|i| {
            creator.as_deref().is_none_or(|login| {
                w.users
                    .get(&i.user_id)
                    .is_some_and(|u| u.login.eq_ignore_ascii_case(login))
            })
        })
        .collect();
    items.sort_by_key(|i| match sort.as_str() {
        "updated" => (i.updated_at, i.number),
        _ => (i.created_at, i.number),
    });
    if !ascending {
        items.reverse();
    }
    let rendered = items
        .into_iter()
        .map(|i| render_issue(ctx(&s, &w), r, i))
        .collect();
    paginated(rendered, &uri, &s.base)
}

pub async fn get(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    ok(render_issue(
        ctx(&s, &w),
        r,
        r.issues.get(&number).ok_or_else(ApiError::not_found)?,
    ))
}

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let title = match body.get("title") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err(ApiError::validation("Issue", "title", "missing_field")),
    };
    let text = opt_str(&body, "body", "Issue")?;
    let labels = body
        .get("labels")
        .map(|l| str_list(l, "Issue", "labels"))
        .transpose()?
        .unwrap_or_default();
    let assignees = body
        .get("assignees")
        .map(|a| str_list(a, "Issue", "assignees"))
        .transpose()?
        .unwrap_or_default();
    let triage = can_triage(&w, &c, rid);
    let mut assignee_ids = Vec::new();
    for login in &assignees {
        let id = w
            .user_by_login(login)
            .ok_or_else(|| ApiError::validation("Issue", "assignees", "invalid"))?
            .id;
        assignee_ids.push(id);
    }
    let number = w.insert_issue(rid, actor.0, &title, text)?;
    if triage {
        for name in &labels {
            let label = w.ensure_label(rid, name)?;
            w.issue_mut(rid, number)?.labels.push(label.name);
        }
        w.issue_mut(rid, number)?.assignees = assignee_ids;
    }
    issue_hook(&s, &mut w, rid, number, "opened", actor.0, json!({}));
    let r = w.repo(rid)?;
    created(render_issue(ctx(&s, &w), r, w.issue(rid, number)?))
}

pub async fn update(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Participate("issues"))?;
    let actor = w.actor(&c)?;
    let triage = can_triage(&w, &c, rid);
    let issue = w.issue(rid, number)?.clone();
    if !triage && issue.user_id != actor.0 {
        return Err(ApiError::forbidden(
            "Must have triage access to update this issue.",
        ));
    }
    let mut changes = json!({});
    if let Some(title) = opt_str(&body, "title", "Issue")? {
        if title.trim().is_empty() {
            return Err(ApiError::validation("Issue", "title", "missing_field"));
        }
        if title != issue.title {
            changes["title"] = json!({"from": issue.title});
            w.record_event(rid, number, actor, "renamed", None, None)?;
            w.issue_mut(rid, number)?.title = title;
        }
    }
    if body.get("body").is_some() {
        let text = opt_str(&body, "body", "Issue")?;
        if text != issue.body {
            changes["body"] = json!({"from": issue.body.clone().unwrap_or_default()});
            w.issue_mut(rid, number)?.body = text;
        }
    }
    let state = opt_str(&body, "state", "Issue")?;
    let reason = opt_str(&body, "state_reason", "Issue")?;
    if let Some(reason) = &reason
        && !["completed", "not_planned", "reopened", "duplicate"].contains(&reason.as_str())
    {
        return Err(ApiError::validation("Issue", "state_reason", "invalid"));
    }
    if let Some(labels) = body.get("labels").filter(|l| !l.is_null())
        && triage
    {
        apply_labels(
            &s,
            &mut w,
            rid,
            number,
            actor,
            str_list(labels, "Issue", "labels")?,
        )?;
    }
    if let Some(list) = body.get("assignees").filter(|l| !l.is_null())
        && triage
    {
        let mut ids = Vec::new();
        for login in str_list(list, "Issue", "assignees")? {
            ids.push(
                w.user_by_login(&login)
                    .ok_or_else(|| ApiError::validation("Issue", "assignees", "invalid"))?
                    .id,
            );
        }
        let before = w.issue(rid, number)?.assignees.clone();
        for id in ids.iter().filter(|i| !before.contains(i)) {
            w.record_event(rid, number, actor, "assigned", None, None)?;
            let assignee = w
                .user(*id)
                .map(|u| crate::render::render_user(ctx(&s, &w), u))?;
            w.issue_mut(rid, number)?.assignees.push(*id);
            issue_hook(
                &s,
                &mut w,
                rid,
                number,
                "assigned",
                actor.0,
                json!({ "assignee": assignee }),
            );
        }
        for id in before.iter().filter(|i| !ids.contains(i)) {
            w.record_event(rid, number, actor, "unassigned", None, None)?;
            let assignee = w
                .user(*id)
                .map(|u| crate::render::render_user(ctx(&s, &w), u))?;
            w.issue_mut(rid, number)?.assignees.retain(|x| x != id);
            issue_hook(
                &s,
                &mut w,
                rid,
                number,
                "unassigned",
                actor.0,
                json!({ "assignee": assignee }),
            );
        }
    }
    let now = Utc::now();
    match state.as_deref() {
        None => {}
        Some("closed") if issue.state_open => {
            if issue.pull.as_ref().is_some_and(|p| p.merged_at.is_some()) {
                return Err(ApiError::validation("Issue", "state", "invalid"));
            }
            let i = w.issue_mut(rid, number)?;
            i.state_open = false;
            i.closed_at = Some(now);
            i.closed_by = Some(actor.0);
            i.state_reason = if i.pull.is_some() {
                None
            } else {
                Some(reason.clone().unwrap_or_else(|| "completed".into()))
            };
            w.record_event(rid, number, actor, "closed", None, None)?;
            issue_hook(&s, &mut w, rid, number, "closed", actor.0, json!({}));
        }
        Some("open") if !issue.state_open => {
            if issue.pull.as_ref().is_some_and(|p| p.merged_at.is_some()) {
                return Err(ApiError::validation("PullRequest", "state", "invalid"));
            }
            let i = w.issue_mut(rid, number)?;
            i.state_open = true;
            i.closed_at = None;
            i.closed_by = None;
            i.state_reason = if i.pull.is_some() {
                None
            } else {
                Some("reopened".into())
            };
            w.record_event(rid, number, actor, "reopened", None, None)?;
            issue_hook(&s, &mut w, rid, number, "reopened", actor.0, json!({}));
        }
        Some("open" | "closed") => {
            if let Some(reason) = reason
                && !issue.state_open
            {
                w.issue_mut(rid, number)?.state_reason = Some(reason);
            }
        }
        Some(_) => return Err(ApiError::validation("Issue", "state", "invalid")),
    }
    if changes.as_object().is_some_and(|m| !m.is_empty()) {
        issue_hook(
            &s,
            &mut w,
            rid,
            number,
            "edited",
            actor.0,
            json!({ "changes": changes }),
        );
    }
    w.issue_mut(rid, number)?.updated_at = now;
    let r = w.repo(rid)?;
    ok(render_issue(ctx(&s, &w), r, w.issue(rid, number)?))
}
