//! Pull requests: list/get/create/update, merge (merge, squash, rebase with
//! real git), files, commits and compare. Git facts are cached on the pull
//! and recomputed whenever its head or base moves.

use std::path::PathBuf;
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
use crate::git;
use crate::http::{ApiError, ApiResult, JsonBody, created, ok, opt_str, paginated, query_value};
use crate::render::render_pull;
use crate::world::{Access, PullData, PullStats};

/// How long GitHub reports `mergeable: null` after a head or base move.
const MERGEABILITY_DELAY_MS: i64 = 300;

type PullPath = Path<(String, String, u64)>;

fn internal(e: anyhow::Error) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("git: {e:#}"))
}

/// Repository id, bare-repo path and API/web URLs, checked for `need`.
pub fn locate(
    s: &Shared,
    c: &Caller,
    owner: &str,
    repo: &str,
    need: Access,
) -> Result<(u64, PathBuf, String, String), ApiError> {
    let w = s.lock();
    let rid = w.resolve_repo(c, owner, repo, need)?;
    let r = w.repo(rid)?;
    let owner_login = w.user(r.owner_id)?.login.clone();
    let path = git::repo_path(&s.repos_dir, &owner_login, &r.name);
    let full = format!("{owner_login}/{}", r.name);
    Ok((
        rid,
        path,
        format!("{}/repos/{full}", s.base),
        format!("{}/{full}", s.base),
    ))
}

/// What git says about `head` against the tip of `base_ref`.
pub async fn compute_stats(
    path: &std::path::Path,
    base_ref: &str,
    head: &str,
) -> anyhow::Result<PullStats> {
    let base_sha = git::rev_parse(path, &format!("refs/heads/{base_ref}"))
        .await
        .unwrap_or_default();
    if base_sha.is_empty() {
        return Ok(PullStats {
            conflict: true,
            ..Default::default()
        });
    }
    let merge_base = git::merge_base(path, &base_sha, head).await;
    let conflict = git::merge_tree(path, &base_sha, head, None).await?.is_err();
    let behind = !git::is_ancestor(path, &base_sha, head).await;
    let from = merge_base.clone().unwrap_or_else(|| base_sha.clone());
    let commits = git::rev_list(path, &from, head).await?.len();
    let changes = git::diff(path, &from, head).await?;
    Ok(PullStats {
        base_sha,
        merge_base_sha: merge_base,
        conflict,
        behind,
        commits,
        additions: changes.iter().map(|c| c.additions).sum(),
        deletions: changes.iter().map(|c| c.deletions).sum(),
        changed_files: changes.len(),
    })
}

/// Recompute the git facts of every open pull in a repository (after any
/// ref moved) and restart GitHub's short "mergeability unknown" window.
pub async fn refresh_pulls(s: &Arc<Shared>, repo_id: u64) {
    let (path, pulls) = {
        let w = s.lock();
        let Ok(r) = w.repo(repo_id) else { return };
        let Ok(owner) = w.user(r.owner_id) else {
            return;
        };
        let pulls: Vec<(u64, String, String)> = r
            .issues
            .values()
            .filter(|i| i.state_open)
            .filter_map(|i| {
                i.pull
                    .as_ref()
                    .map(|p| (i.number, p.base_ref.clone(), p.head_sha.clone()))
            })
            .collect();
        (git::repo_path(&s.repos_dir, &owner.login, &r.name), pulls)
    };
    for (number, base_ref, head) in pulls {
        let Ok(stats) = compute_stats(&path, &base_ref, &head).await else {
            continue;
        };
        let mut w = s.lock();
        if let Ok(issue) = w.issue_mut(repo_id, number)
            && let Some(pull) = issue.pull.as_mut()
            && pull.head_sha == head
        {
            if pull.stats.base_sha != stats.base_sha {
                pull.mergeable_known_at =
                    Utc::now() + chrono::Duration::milliseconds(MERGEABILITY_DELAY_MS);
            }
            pull.stats = stats;
        }
    }
}

pub async fn list(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("pull_requests"))?;
    let r = w.repo(rid)?;
    let state = query_value(&uri, "state").unwrap_or_else(|| "open".into());
    if !["open", "closed", "all"].contains(&state.as_str()) {
        return Err(ApiError::validation("PullRequest", "state", "invalid"));
    }
    let owner_login = w.user(r.owner_id)?.login.clone();
    let head = query_value(&uri, "head").map(|h| match h.split_once(':') {
        Some((o, b)) => (o.to_string(), b.to_string()),
        None => (owner_login.clone(), h),
    });
    let base = query_value(&uri, "base");
    let ascending = query_value(&uri, "direction").as_deref() == Some("asc");
    let mut items: Vec<_> = r
        .issues
        .values()
        .filter(|i| state == "all" || (state == "open") == i.state_open)
        .filter_map(|i| i.pull.as_ref().map(|p| (i, p)))
        .filter(|(_, p)| {
            head.as_ref()
                .is_none_or(|(o, b)| o.eq_ignore_ascii_case(&owner_login) && &p.head_ref == b)
        })
        .filter(|(_, p)| base.as_ref().is_none_or(|b| &p.base_ref == b))
        .map(|(i, _)| i)
        .collect();
    items.sort_by_key(|i| (i.created_at, i.number));
    if !ascending {
        items.reverse();
    }
    let rendered = items
        .into_iter()
        .map(|i| render_pull(ctx(&s, &w), r, i))
        .collect();
    paginated(rendered, &uri, &s.base)
}

pub async fn get(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("pull_requests"))?;
    let r = w.repo(rid)?;
    let issue = r
        .issues
        .get(&number)
        .filter(|i| i.pull.is_some())
        .ok_or_else(ApiError::not_found)?;
    ok(render_pull(ctx(&s, &w), r, issue))
}

fn strip_owner(head: &str) -> &str {
    head.split_once(':').map(|(_, b)| b).unwrap_or(head)
}

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let (rid, path, _, _) = locate(&s, &c, &owner, &repo, Access::Write("pull_requests"))?;
    let head_ref = opt_str(&body, "head", "PullRequest")?
        .ok_or_else(|| ApiError::validation("PullRequest", "head", "missing_field"))?;
    let head_ref = strip_owner(&head_ref).to_string();
    let base_ref = opt_str(&body, "base", "PullRequest")?
        .ok_or_else(|| ApiError::validation("PullRequest", "base", "missing_field"))?;
    let title = opt_str(&body, "title", "PullRequest")?
        .ok_or_else(|| ApiError::validation("PullRequest", "title", "missing_field"))?;
    let text = opt_str(&body, "body", "PullRequest")?;
    let draft = body.get("draft").and_then(Value::as_bool).unwrap_or(false);
    let head_sha = git::rev_parse(&path, &format!("refs/heads/{head_ref}"))
        .await
        .ok_or_else(|| ApiError::validation("PullRequest", "head", "invalid"))?;
    git::rev_parse(&path, &format!("refs/heads/{base_ref}"))
        .await
        .ok_or_else(|| ApiError::validation("PullRequest", "base", "invalid"))?;
    let stats = compute_stats(&path, &base_ref, &head_sha)
        .await
        .map_err(internal)?;
    if stats.commits == 0 {
        return Err(ApiError::Validation {
            errors: vec![
                json!({"resource": "PullRequest", "code": "custom", "message": format!("No commits between {base_ref} and {head_ref}")}),
            ],
        });
    }
    let mut w = s.lock();
    let actor = w.actor(&c)?;
    let duplicate = w.repo(rid)?.issues.values().any(|i| {
        i.state_open
            && i.pull
                .as_ref()
                .is_some_and(|p| p.head_ref == head_ref && p.base_ref == base_ref)
    });
    if duplicate {
        return Err(ApiError::Validation {
            errors: vec![
                json!({"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {owner}:{head_ref}.")}),
            ],
        });
    }
    let number = w.insert_issue(rid, actor.0, &title, text)?;
    w.issue_mut(rid, number)?.pull = Some(PullData {
        head_ref,
        head_sha,
        base_ref,
        draft,
        merged_at: None,
        merged_by: None,
        merge_commit_sha: None,
        mergeable_known_at: Utc::now() + chrono::Duration::milliseconds(MERGEABILITY_DELAY_MS),
        stats,
        reviews: Vec::new(),
    });
    issue_hook(&s, &mut w, rid, number, "opened", actor.0, json!({}));
    let r = w.repo(rid)?;
    created(render_pull(ctx(&s, &w), r, w.issue(rid, number)?))
}

pub async fn update(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let (rid, path, _, _) = locate(&s, &c, &owner, &repo, Access::Write("pull_requests"))?;
    let new_base = opt_str(&body, "base", "PullRequest")?;
    if let Some(b) = &new_base
        && git::rev_parse(&path, &format!("refs/heads/{b}"))
            .await
            .is_none()
    {
        return Err(ApiError::validation("PullRequest", "base", "invalid"));
    }
    {
        let mut w = s.lock();
        let actor = w.actor(&c)?;
        let issue = w.issue(rid, number)?.clone();
        let pull = issue.pull.clone().ok_or_else(ApiError::not_found)?;
        let mut changes = json!({});
        if let Some(title) = opt_str(&body, "title", "PullRequest")?
            && title != issue.title
        {
            changes["title"] = json!({"from": issue.title});
            w.issue_mut(rid, number)?.title = title;
        }
        if body.get("body").is_some() {
            let text = opt_str(&body, "body", "PullRequest")?;
            if text != issue.body {
                changes["body"] = json!({"from": issue.body.clone().unwrap_or_default()});
                w.issue_mut(rid, number)?.body = text;
            }
        }
        if let Some(b) = new_base
            && b != pull.base_ref
        {
            changes["base"] =
                json!({"ref": {"from": pull.base_ref}, "sha": {"from": pull.stats.base_sha}});
            if let Some(p) = w.issue_mut(rid, number)?.pull.as_mut() {
                p.base_ref = b;
            }
        }
        match opt_str(&body, "state", "PullRequest")?.as_deref() {
            Some("closed") if issue.state_open => {
                let i = w.issue_mut(rid, number)?;
                i.state_open = false;
                i.closed_at = Some(Utc::now());
                w.record_event(rid, number, actor, "closed", None, None)?;
                issue_hook(&s, &mut w, rid, number, "closed", actor.0, json!({}));
            }
            Some("open") if !issue.state_open => {
                if pull.merged_at.is_some() {
                    return Err(ApiError::validation("PullRequest", "state", "invalid"));
                }
                let i = w.issue_mut(rid, number)?;
                i.state_open = true;
                i.closed_at = None;
                w.record_event(rid, number, actor, "reopened", None, None)?;
                issue_hook(&s, &mut w, rid, number, "reopened", actor.0, json!({}));
            }
            None | Some("open" | "closed") => {}
            Some(_) => return Err(ApiError::validation("PullRequest", "state", "invalid")),
        }
        if changes.as_object().is_some_and(|m| !m.is_empty()) {
            issue_hook(
                &s,
                &mut w,
                rid,
                number,
                "edited",
                actor.0,
                json!({"changes": changes}),
            );
        }
        w.issue_mut(rid, number)?.updated_at = Utc::now();
    }
    refresh_pulls(&s, rid).await;
    let w = s.lock();
    let r = w.repo(rid)?;
    ok(render_pull(ctx(&s, &w), r, w.issue(rid, number)?))
}

pub async fn is_merged(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("pull_requests"))?;
    let merged = w
        .issue(rid, number)?
        .pull
        .as_ref()
        .is_some_and(|p| p.merged_at.is_some());
    if merged {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found())
    }
}
