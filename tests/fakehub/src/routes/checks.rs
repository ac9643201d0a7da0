//! Check runs (create/get/update/list for a ref, filtered by `check_name`
//! and `status`), the combined status, and the `check_run` / `check_suite`
//! webhooks they cause. Only the App that created a check may update it.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use chrono::Utc;
use serde_json::{Value, json};

use super::pulls::locate;
use super::{S, Who, ctx};
use crate::Shared;
use crate::auth::Caller;
use crate::git;
use crate::http::{ApiError, ApiResult, JsonBody, created, ok, opt_str, page_of, query_value};
use crate::render::{check_pull_requests, node_id, render_app, render_check_run, render_repo, ts};
use crate::webhooks::{Event, emit};
use crate::world::{Access, NewCheck, World};

fn repo_api(s: &Shared, w: &World, repo_id: u64) -> String {
    let Ok(r) = w.repo(repo_id) else {
        return String::new();
    };
    let owner = w
        .users
        .get(&r.owner_id)
        .map(|u| u.login.as_str())
        .unwrap_or("ghost");
    format!("{}/repos/{owner}/{}", s.base, r.name)
}

fn suite_json(s: &Shared, w: &World, check_id: u64) -> Value {
    let Some(check) = w.check_runs.get(&check_id) else {
        return Value::Null;
    };
    let runs: Vec<_> = w
        .check_runs
        .values()
        .filter(|c| c.check_suite_id == check.check_suite_id)
        .collect();
    let done = runs.iter().all(|c| c.status == "completed");
    let conclusion = if !done {
        None
    } else if runs.iter().any(|c| {
        matches!(
            c.conclusion.as_deref(),
            Some("failure" | "timed_out" | "cancelled" | "action_required")
        )
    }) {
        Some("failure")
    } else {
        Some("success")
    };
    let api = repo_api(s, w, check.repo_id);
    let head_commit = w.repo(check.repo_id).ok().and_then(|r| {
        let owner = w.users.get(&r.owner_id)?;
        let info = git::commit_info_blocking(
            &git::repo_path(&s.repos_dir, &owner.login, &r.name),
            &check.head_sha,
        )?;
        let person = |p: &(String, String, i64)| json!({"name": p.0, "email": p.1});
        Some(json!({
            "id": info.sha,
            "tree_id": info.tree,
            "message": info.message,
            "timestamp": chrono::DateTime::from_timestamp(info.committer.2, 0).map(ts),
            "author": person(&info.author),
            "committer": person(&info.committer),
        }))
    });
    let head_branch = w.repo(check.repo_id).ok().and_then(|r| {
        r.issues.values().find_map(|i| {
            i.pull
                .as_ref()
                .filter(|p| p.head_sha == check.head_sha)
                .map(|p| p.head_ref.clone())
        })
    });
    json!({
        "id": check.check_suite_id,
        "node_id": node_id("CS", check.check_suite_id),
        "head_branch": head_branch,
        "head_sha": check.head_sha,
        "status": if done { "completed" } else { "in_progress" },
        "conclusion": conclusion,
        "url": format!("{api}/check-suites/{}", check.check_suite_id),
        "before": null,
        "after": check.head_sha,
        "head_commit": head_commit,
        "pull_requests": check_pull_requests(ctx(s, w), &api, check.repo_id, &check.head_sha),
        "app": check.app_id.and_then(|a| w.apps.get(&a)).map(|a| render_app(ctx(s, w), a)),
        "created_at": check.started_at.map(ts),
        "updated_at": ts(Utc::now()),
        "latest_check_runs_count": runs.len(),
        "check_runs_url": format!("{api}/check-suites/{}/check-runs", check.check_suite_id),
        "rerequestable": true,
        "runs_rerequestable": false,
    })
}

/// Emit `check_run.created` (when new), `check_run.completed` and, once
/// every run of the suite is done, `check_suite.completed`.
pub fn emit_check_events(s: &Arc<Shared>, w: &mut World, check_id: u64, sender: u64, is_new: bool) {
    let Some(check) = w.check_runs.get(&check_id).cloned() else {
        return;
    };
    let api = repo_api(s, w, check.repo_id);
    let mut run = render_check_run(ctx(s, w), &api, &check);
    run["check_suite"] = suite_json(s, w, check_id);
    let mut actions = Vec::new();
    if is_new {
        actions.push("created");
    }
    if check.status == "completed" {
        actions.push("completed");
    }
    for action in actions {
        emit(
            s,
            w,
            Event {
                name: "check_run",
                action: Some(action),
                repo_id: Some(check.repo_id),
                only_installation: None,
                sender_id: sender,
                body: json!({"check_run": run}),
            },
        );
    }
    let suite = suite_json(s, w, check_id);
    if suite["status"] == "completed" && check.status == "completed" {
        emit(
            s,
            w,
            Event {
                name: "check_suite",
                action: Some("completed"),
                repo_id: Some(check.repo_id),
                only_installation: None,
                sender_id: sender,
                body: json!({"check_suite": suite}),
            },
        );
    }
}

async fn resolve_ref(path: &std::path::Path, rev: &str) -> Result<String, ApiError> {
    if rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
        return Ok(rev.to_ascii_lowercase());
    }
    for candidate in [
        format!("refs/heads/{rev}"),
        format!("refs/tags/{rev}"),
        rev.to_string(),
    ] {
        if let Some(sha) = git::rev_parse(path, &candidate).await {
            return Ok(sha);
        }
    }
    Err(ApiError::validation("Commit", "ref", "invalid"))
}

/// `commits/{ref}/check-runs` and `commits/{ref}/status`, where the ref may
/// itself contain slashes (`heads/main`, `feature/x`) as GitHub allows.
pub async fn commit_views(
    state: S,
    who: Who,
    Path((owner, repo, rest)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    if let Some(rev) = rest.strip_suffix("/check-runs") {
        return list_for_ref(state, who, (owner, repo, rev.to_string()), uri).await;
    }
    if let Some(rev) = rest.strip_suffix("/status") {
        return combined_status(state, who, (owner, repo, rev.to_string())).await;
    }
    Err(ApiError::not_found())
}

async fn list_for_ref(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    (owner, repo, rev): (String, String, String),
    uri: Uri,
) -> ApiResult {
    let (rid, path, api, _) = locate(&s, &c, &owner, &repo, Access::Read("checks"))?;
    let sha = resolve_ref(&path, &rev).await?;
    let name = query_value(&uri, "check_name");
    let status = query_value(&uri, "status");
    let w = s.lock();
    let runs: Vec<Value> = w
        .check_runs
        .values()
        .rev()
        .filter(|ch| ch.repo_id == rid && ch.head_sha == sha)
        .filter(|ch| name.as_deref().is_none_or(|n| n == ch.name))
        .filter(|ch| status.as_deref().is_none_or(|st| st == ch.status))
        .map(|ch| render_check_run(ctx(&s, &w), &api, ch))
        .collect();
    let (page, link) = page_of(&runs, &uri, &s.base);
    let mut resp = ok(json!({"total_count": runs.len(), "check_runs": page}))?;
    if let Some(link) = link {
        resp.headers_mut().insert(axum::http::header::LINK, link);
    }
    Ok(resp)
}

async fn combined_status(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    (owner, repo, rev): (String, String, String),
) -> ApiResult {
    let (rid, path, api, _) = locate(&s, &c, &owner, &repo, Access::Read("statuses"))?;
    let sha = resolve_ref(&path, &rev)
        .await
        .map_err(|_| ApiError::not_found())?;
    let w = s.lock();
    // The latest status per context, as GitHub combines them.
    let mut latest: Vec<&crate::world::CommitStatus> = Vec::new();
    for st in w
        .statuses
        .iter()
        .rev()
        .filter(|st| st.repo_id == rid && st.sha == sha)
    {
        if !latest.iter().any(|l| l.context == st.context) {
            latest.push(st);
        }
    }
    let state = if latest
        .iter()
        .any(|st| st.state == "failure" || st.state == "error")
    {
        "failure"
    } else if latest.is_empty() || latest.iter().any(|st| st.state == "pending") {
        "pending"
    } else {
        "success"
    };
    let statuses: Vec<Value> = latest
        .iter()
        .map(|st| {
            json!({
                "id": st.id,
                "node_id": node_id("SC", st.id),
                "url": format!("{api}/statuses/{sha}"),
                "state": st.state,
                "description": st.description,
                "target_url": st.target_url,
                "context": st.context,
                "avatar_url": null,
                "created_at": ts(st.created_at),
                "updated_at": ts(st.created_at),
            })
        })
        .collect();
    ok(json!({
        "state": state,
        "total_count": statuses.len(),
        "statuses": statuses,
        "sha": sha,
        "repository": render_repo(ctx(&s, &w), w.repo(rid)?),
        "commit_url": format!("{api}/commits/{sha}"),
        "url": format!("{api}/commits/{sha}/status"),
    }))
}

fn app_of(w: &World, c: &Caller) -> Result<u64, ApiError> {
    match c {
        Caller::Installation {
            installation_id, ..
        } => Ok(w.installation(*installation_id)?.app_id),
        _ => Err(ApiError::forbidden(
            "You must authenticate via a GitHub App.",
        )),
    }
}

fn apply_output(check: &mut crate::world::CheckRun, body: &Value) -> Result<(), ApiError> {
    if let Some(output) = body.get("output").filter(|o| !o.is_null()) {
        check.output_title = opt_str(output, "title", "CheckRun")?;
        check.output_summary = opt_str(output, "summary", "CheckRun")?;
        check.output_text = opt_str(output, "text", "CheckRun")?;
    }
    Ok(())
}

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("checks"))?;
    let app_id = app_of(&w, &c)?;
    let new = NewCheck {
        head_sha: opt_str(&body, "head_sha", "CheckRun")?
            .ok_or_else(|| ApiError::validation("CheckRun", "head_sha", "missing_field"))?,
        name: opt_str(&body, "name", "CheckRun")?
            .ok_or_else(|| ApiError::validation("CheckRun", "name", "missing_field"))?,
        status: opt_str(&body, "status", "CheckRun")?,
        conclusion: opt_str(&body, "conclusion", "CheckRun")?,
        external_id: opt_str(&body, "external_id", "CheckRun")?,
        details_url: opt_str(&body, "details_url", "CheckRun")?,
    };
    let id = w.insert_check(rid, Some(app_id), new)?;
    if let Some(check) = w.check_runs.get_mut(&id) {
        apply_output(check, &body)?;
    }
    let sender = w.actor(&c)?.0;
    emit_check_events(&s, &mut w, id, sender, true);
    let api = repo_api(&s, &w, rid);
    created(render_check_run(
        ctx(&s, &w),
        &api,
        w.check_runs.get(&id).ok_or_else(ApiError::not_found)?,
    ))
}

pub async fn get(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("checks"))?;
    let check = w
        .check_runs
        .get(&id)
        .filter(|ch| ch.repo_id == rid)
        .ok_or_else(ApiError::not_found)?;
    ok(render_check_run(ctx(&s, &w), &repo_api(&s, &w, rid), check))
}

pub async fn update(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("checks"))?;
    let app_id = app_of(&w, &c)?;
    let sender = w.actor(&c)?.0;
    let check = w
        .check_runs
        .get_mut(&id)
        .filter(|ch| ch.repo_id == rid)
        .ok_or_else(ApiError::not_found)?;
    if check.app_id != Some(app_id) {
        return Err(ApiError::forbidden(
            "Invalid app_id `0` - check run can only be modified by the GitHub App that created it.",
        ));
    }
    let was_completed = check.status == "completed";
    if let Some(name) = opt_str(&body, "name", "CheckRun")? {
        check.name = name;
    }
    if let Some(url) = opt_str(&body, "details_url", "CheckRun")? {
        check.details_url = Some(url);
    }
    if let Some(external_id) = opt_str(&body, "external_id", "CheckRun")? {
        check.external_id = Some(external_id);
    }
    let conclusion = opt_str(&body, "conclusion", "CheckRun")?;
    let status = opt_str(&body, "status", "CheckRun")?
        .or_else(|| conclusion.as_ref().map(|_| "completed".to_string()));
    if let Some(status) = status {
        if !["queued", "in_progress", "completed"].contains(&status.as_str()) {
            return Err(ApiError::validation("CheckRun", "status", "invalid"));
        }
        if status == "completed" && conclusion.is_none() && check.conclusion.is_none() {
            return Err(ApiError::validation(
                "CheckRun",
                "conclusion",
                "missing_field",
            ));
        }
        if status != "completed" {
            // Back in progress (a re-run): the earlier verdict no longer holds.
            check.conclusion = None;
            check.completed_at = None;
        }
        check.status = status;
    }
    if conclusion.is_some() {
        check.conclusion = conclusion;
    }
    if check.status == "completed" && check.completed_at.is_none() {
        check.completed_at = Some(Utc::now());
    }
    apply_output(check, &body)?;
    let now_completed = check.status == "completed";
    if now_completed && !was_completed {
        emit_check_events(&s, &mut w, id, sender, false);
    }
    let _ = StatusCode::OK;
    let api = repo_api(&s, &w, rid);
    ok(render_check_run(
        ctx(&s, &w),
        &api,
        w.check_runs.get(&id).ok_or_else(ApiError::not_found)?,
    ))
}
