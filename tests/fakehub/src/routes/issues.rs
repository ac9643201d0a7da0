//! Issues: list/get/create/update, labels, events, timeline, reactions,
//! sub-issues and parent.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{S, Who, ctx};
use crate::Shared;
use crate::auth::Caller;
use crate::http::{
    ApiError, ApiResult, JsonBody, created, ok, opt_str, paginated, query_value, str_list,
};
use crate::render::{
    render_comment, render_event, render_issue, render_label, render_pull, render_reaction,
};
use crate::webhooks::{Event, emit};
use crate::world::{Access, Permission, Reaction, World};

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

/// Apply a label change to an issue: record the event and emit the webhook.
fn apply_labels(
    s: &Arc<Shared>,
    w: &mut World,
    rid: u64,
    number: u64,
    actor: (u64, Option<u64>),
    wanted: Vec<String>,
) -> Result<(), ApiError> {
    let current = w.issue(rid, number)?.labels.clone();
    let mut names = Vec::new();
    for name in &wanted {
        let label = w.ensure_label(rid, name)?;
        if !names.contains(&label.name) {
            names.push(label.name);
        }
    }
    for removed in current.iter().filter(|l| !names.contains(l)) {
        w.issue_mut(rid, number)?.labels.retain(|x| x != removed);
        w.record_event(rid, number, actor, "unlabeled", Some(removed.clone()), None)?;
        let label = w
            .repo(rid)?
            .labels
            .iter()
            .find(|l| &l.name == removed)
            .cloned();
        let repo = w.repo(rid)?;
        let label = label.map(|l| render_label(ctx(s, w), repo, &l));
        issue_hook(
            s,
            w,
            rid,
            number,
            "unlabeled",
            actor.0,
            json!({ "label": label }),
        );
    }
    for added in names.iter().filter(|l| !current.contains(l)) {
        w.issue_mut(rid, number)?.labels.push(added.clone());
        w.record_event(rid, number, actor, "labeled", Some(added.clone()), None)?;
        let label = w
            .repo(rid)?
            .labels
            .iter()
            .find(|l| &l.name == added)
            .cloned();
        let repo = w.repo(rid)?;
        let label = label.map(|l| render_label(ctx(s, w), repo, &l));
        issue_hook(
            s,
            w,
            rid,
            number,
            "labeled",
            actor.0,
            json!({ "label": label }),
        );
    }
    w.issue_mut(rid, number)?.updated_at = Utc::now();
    Ok(())
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

fn label_list(s: &Shared, w: &World, rid: u64, number: u64) -> Result<Vec<Value>, ApiError> {
    let r = w.repo(rid)?;
    let issue = w.issue(rid, number)?;
    Ok(issue
        .labels
        .iter()
        .filter_map(|name| r.labels.iter().find(|l| &l.name == name))
        .map(|l| render_label(ctx(s, w), r, l))
        .collect())
}

pub async fn labels(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    paginated(label_list(&s, &w, rid, number)?, &uri, &s.base)
}

fn body_labels(body: &Value) -> Result<Vec<String>, ApiError> {
    match body {
        Value::Array(_) => str_list(body, "Label", "labels"),
        Value::Object(o) => match o.get("labels") {
            Some(l) => str_list(l, "Label", "labels"),
            None => Err(ApiError::validation("Label", "labels", "missing_field")),
        },
        _ => Err(ApiError::validation("Label", "labels", "invalid")),
    }
}

async fn change_labels(
    s: Arc<Shared>,
    c: Caller,
    owner: String,
    repo: String,
    number: u64,
    body: Option<Value>,
    replace: bool,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("issues"))?;
    let actor = w.actor(&c)?;
    let given = match body {
        Some(b) => body_labels(&b)?,
        None => Vec::new(),
    };
    let wanted = if replace {
        given
    } else {
        let mut all = w.issue(rid, number)?.labels.clone();
        all.extend(given);
        all
    };
    apply_labels(&s, &mut w, rid, number, actor, wanted)?;
    ok(json!(label_list(&s, &w, rid, number)?))
}

pub async fn add_labels(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    change_labels(s, c, owner, repo, number, Some(body), false).await
}

pub async fn set_labels(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    change_labels(s, c, owner, repo, number, Some(body), true).await
}

pub async fn clear_labels(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): IssuePath,
) -> ApiResult {
    change_labels(s, c, owner, repo, number, None, true).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn remove_label(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number, name)): Path<(String, String, u64, String)>,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("issues"))?;
    let actor = w.actor(&c)?;
    let current = w.issue(rid, number)?.labels.clone();
    if !current.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "Label does not exist"));
    }
    let keep: Vec<String> = current
        .into_iter()
        .filter(|l| !l.eq_ignore_ascii_case(&name))
        .collect();
    apply_labels(&s, &mut w, rid, number, actor, keep)?;
    ok(json!(label_list(&s, &w, rid, number)?))
}

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
