//! Labels on issues and pull requests: add, replace, remove, list, with
//! `labeled`/`unlabeled` events and webhooks.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use chrono::Utc;
use serde_json::{Value, json};

use super::issues::issue_hook;
use super::{S, Who, ctx};
use crate::Shared;
use crate::auth::Caller;
use crate::http::{ApiError, ApiResult, JsonBody, ok, paginated, str_list};
use crate::render::render_label;
use crate::world::{Access, World};

type IssuePath = Path<(String, String, u64)>;

/// Apply a label change to an issue: record the event and emit the webhook.
pub fn apply_labels(
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
