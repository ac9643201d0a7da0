//! Git over smart HTTP: the real `git http-backend` CGI behind axum, with
//! GitHub's token forms, and what a push causes (`push` webhooks, PR heads
//! moving with `pull_request.synchronize`, mergeability recomputed).

use std::process::Stdio;
use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::Shared;
use crate::auth::{Caller, authenticate, credential};
use crate::git;
use crate::http::ApiError;
use crate::routes::issues::issue_hook;
use crate::routes::pulls::refresh_pulls;
use crate::webhooks::{Event, emit};
use crate::world::{Access, World};

/// Largest pack fakehub accepts in one push.
const MAX_PACK: usize = 512 * 1024 * 1024;
const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

fn challenge() -> Response {
    let mut resp = (StatusCode::UNAUTHORIZED, "Authentication required\n").into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"GitHub\""),
    );
    resp
}

/// Router fallback: serve `/{owner}/{repo}.git/...` or answer GitHub's 404.
/// In a task of its own, like the merge: a push whose client hangs up
/// after the pack arrived still updates the refs and then the pull
/// requests and webhooks that follow from them, as on GitHub.
pub async fn handle(state: State<Arc<Shared>>, req: Request) -> Response {
    tokio::spawn(handle_to_the_end(state, req))
        .await
        .unwrap_or_else(|error| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the git task failed: {error}"),
            )
            .into_response()
        })
}

async fn handle_to_the_end(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let mut parts = path.trim_start_matches('/').splitn(3, '/');
    let (Some(owner), Some(repo_git), Some(rest)) = (parts.next(), parts.next(), parts.next())
    else {
        return ApiError::not_found().into_response();
    };
    let Some(name) = repo_git.strip_suffix(".git") else {
        return ApiError::not_found().into_response();
    };
    let latency = s.git_latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let query = req.uri().query().unwrap_or_default().to_string();
    let is_push = rest == "git-receive-pack" || query.contains("service=git-receive-pack");
    let token = credential(req.headers());
    let (rid, actor, login) = {
        let w = s.lock();
        let caller = match authenticate(&w, token.as_deref(), Utc::now()) {
            Ok(c) => c,
            // A suspended installation's token: refused, not challenged.
            Err(e) if e.status() == axum::http::StatusCode::FORBIDDEN => {
                return (e.status(), "This installation has been suspended\n").into_response();
            }
            Err(_) => return challenge(),
        };
        let need = if is_push {
            Access::Write("contents")
        } else {
            Access::Read("contents")
        };
        let rid = match w.resolve_repo(&caller, owner, name, need) {
            Ok(r) => r,
            Err(_) if caller == Caller::Anonymous => return challenge(),
            Err(e) => {
                return (e.status(), "Repository not found or access denied\n").into_response();
            }
        };
        let actor = w.actor(&caller).map(|a| a.0).ok();
        let login = actor
            .and_then(|a| w.users.get(&a))
            .map(|u| u.login.clone())
            .unwrap_or_default();
        (rid, actor, login)
    };
    let repo_dir = git::repo_path(&s.repos_dir, owner, name);
    let before = if rest == "git-receive-pack" {
        git::refs(&repo_dir).await.unwrap_or_default()
    } else {
        Default::default()
    };
    let method = req.method().to_string();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let encoding = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let protocol = req
        .headers()
        .get("git-protocol")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = match to_bytes(req.into_body(), MAX_PACK).await {
        Ok(b) => b,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, "pack too large\n").into_response(),
    };
    let path_info = format!(
        "/{}/{}.git/{rest}",
        owner.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    );
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &s.repos_dir)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PATH_INFO", path_info)
        .env("REQUEST_METHOD", method)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", content_type)
        .env(
            "REMOTE_USER",
            if login.is_empty() {
                "anonymous".to_string()
            } else {
                login
            },
        )
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if !encoding.is_empty() {
        cmd.env("HTTP_CONTENT_ENCODING", encoding);
    }
    if !protocol.is_empty() {
        cmd.env("GIT_PROTOCOL", protocol);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("git http-backend: {e}"),
            )
            .into_response();
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            let _ = stdin.write_all(&body).await;
        });
    }
    let out = match child.wait_with_output().await {
        Ok(o) => o,
        Err(e) => {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("git http-backend: {e}"),
            )
            .into_response();
        }
    };
    let resp = cgi_response(&out.stdout);
    if rest == "git-receive-pack"
        && let Ok(after) = git::refs(&repo_dir).await
    {
        let mut changes = Vec::new();
        for (name, sha) in &after {
            if before.get(name) != Some(sha) {
                changes.push((
                    name.clone(),
                    before.get(name).cloned().unwrap_or_else(|| ZERO_SHA.into()),
                    sha.clone(),
                ));
            }
        }
        for (name, sha) in &before {
            if !after.contains_key(name) {
                changes.push((name.clone(), sha.clone(), ZERO_SHA.into()));
            }
        }
        if !changes.is_empty()
            && let Some(actor) = actor
        {
            on_refs_changed(&s, rid, changes, actor).await;
        }
    }
    resp
}

/// Turn CGI output (headers, blank line, body) into a response.
fn cgi_response(stdout: &[u8]) -> Response {
    let split = stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| stdout.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((at, sep)) = split else {
        return (StatusCode::BAD_GATEWAY, "malformed CGI response\n").into_response();
    };
    let head = String::from_utf8_lossy(&stdout[..at]);
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            let code = v
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            builder = builder
                .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
        } else {
            builder = builder.header(k.trim(), v);
        }
    }
    builder
        .body(Body::from(stdout[at + sep..].to_vec()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// Emit GitHub's `push` event for one ref update.
pub fn push_hook(
    s: &Arc<Shared>,
    w: &mut World,
    rid: u64,
    (name, before, after): (&str, &str, &str),
    pusher: u64,
    (commits, forced): (Vec<serde_json::Value>, bool),
) {
    let login = w
        .users
        .get(&pusher)
        .map(|u| u.login.clone())
        .unwrap_or_default();
    let compare = w
        .repo(rid)
        .ok()
        .and_then(|r| {
            w.users.get(&r.owner_id).map(|o| {
                format!(
                    "{}/{}/{}/compare/{}...{}",
                    s.base,
                    o.login,
                    r.name,
                    &before[..12.min(before.len())],
                    &after[..12.min(after.len())]
                )
            })
        })
        .unwrap_or_default();
    let body = json!({
        "ref": name,
        "before": before,
        "after": after,
        "created": before == ZERO_SHA,
        "deleted": after == ZERO_SHA,
        "forced": forced,
        "base_ref": null,
        "compare": compare,
        "head_commit": commits.last().cloned(),
        "commits": commits,
        "pusher": {"name": login, "email": format!("{login}@users.noreply.fakehub")},
    });
    if let Ok(r) = w.repo_mut(rid) {
        r.pushed_at = Utc::now();
    }
    emit(
        s,
        w,
        Event {
            name: "push",
            action: None,
            repo_id: Some(rid),
            only_installation: None,
            sender_id: pusher,
            body,
        },
    );
}

/// Most commits a `push` payload lists, as on GitHub.
const PUSH_COMMITS: usize = 20;

/// The `commits` of a push payload for `before..after` (for a new branch,
/// the commits not on the default branch), oldest first.
pub async fn push_commits(
    path: &std::path::Path,
    html: &str,
    before: &str,
    after: &str,
    default_tip: Option<&str>,
) -> Vec<serde_json::Value> {
    if after == ZERO_SHA {
        return Vec::new();
    }
    let range = if before == ZERO_SHA {
        match default_tip {
            Some(tip) if tip != after => git::rev_list(path, tip, after).await,
            _ => Ok(vec![after.to_string()]),
        }
    } else {
        git::rev_list(path, before, after).await
    };
    let shas = range.unwrap_or_default();
    let mut out = Vec::new();
    for sha in shas.iter().rev().take(PUSH_COMMITS).rev() {
        let Ok(info) = git::commit_info(path, sha).await else {
            continue;
        };
        let mut added = Vec::new();
        let mut removed = Vec::new();
        let mut modified = Vec::new();
        if let Some(parent) = info.parents.first() {
            for change in git::diff(path, parent, sha).await.unwrap_or_default() {
                match change.status.as_str() {
                    "added" => added.push(change.path),
                    "removed" => removed.push(change.path),
                    _ => modified.push(change.path),
                }
            }
        }
        let person =
            |p: &(String, String, i64)| json!({"name": p.0, "email": p.1, "username": p.0});
        out.push(json!({
            "id": info.sha,
            "tree_id": info.tree,
            "distinct": true,
            "message": info.message,
            "timestamp": chrono::DateTime::from_timestamp(info.committer.2, 0).map(crate::render::ts),
            "url": format!("{html}/commit/{}", info.sha),
            "author": person(&info.author),
            "committer": person(&info.committer),
            "added": added,
            "removed": removed,
            "modified": modified,
        }));
    }
    out
}

/// Everything a ref move causes: `push` events, PR heads following their
/// branch (`pull_request.synchronize`), and fresh mergeability.
pub async fn on_refs_changed(
    s: &Arc<Shared>,
    rid: u64,
    changes: Vec<(String, String, String)>,
    pusher: u64,
) {
    let (path, html, default_tip) = {
        let w = s.lock();
        let Ok(r) = w.repo(rid) else { return };
        let owner = w
            .users
            .get(&r.owner_id)
            .map(|u| u.login.clone())
            .unwrap_or_default();
        (
            git::repo_path(&s.repos_dir, &owner, &r.name),
            format!("{}/{owner}/{}", s.base, r.name),
            r.default_branch.clone(),
        )
    };
    let default_tip = git::rev_parse(&path, &format!("refs/heads/{default_tip}")).await;
    let mut listed = Vec::new();
    for (_, before, after) in &changes {
        // A push is forced when the old tip is not in the new history.
        let forced = before != ZERO_SHA
            && after != ZERO_SHA
            && !git::is_ancestor(&path, before, after).await;
        listed.push((
            push_commits(&path, &html, before, after, default_tip.as_deref()).await,
            forced,
        ));
    }
    let mut synced = Vec::new();
    {
        let mut w = s.lock();
        for ((name, before, after), commits) in changes.iter().zip(listed) {
            w.ref_updates.push(crate::world::RefUpdate {
                repo_id: rid,
                name: name.clone(),
                before: before.clone(),
                after: after.clone(),
                pusher,
            });
            push_hook(s, &mut w, rid, (name, before, after), pusher, commits);
            let Some(branch) = name.strip_prefix("refs/heads/") else {
                continue;
            };
            let Ok(repo) = w.repo_mut(rid) else { continue };
            for issue in repo.issues.values_mut().filter(|i| i.state_open) {
                if let Some(pull) = issue.pull.as_mut()
                    && pull.head_ref == branch
                    && after != ZERO_SHA
                    && &pull.head_sha != after
                {
                    pull.head_sha = after.clone();
                    pull.mergeable_known_at = Utc::now() + chrono::Duration::milliseconds(300);
                    issue.updated_at = Utc::now();
                    synced.push((issue.number, before.clone(), after.clone()));
                }
            }
        }
    }
    refresh_pulls(s, rid).await;
    let mut w = s.lock();
    for (number, before, after) in synced {
        issue_hook(
            s,
            &mut w,
            rid,
            number,
            "synchronize",
            pusher,
            json!({"before": before, "after": after}),
        );
    }
    s.mark_dirty();
}
