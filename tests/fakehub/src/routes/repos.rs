//! Repository-level endpoints: the repository itself, labels, collaborator
//! permission, git refs, branches and file contents (read and write).

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::pulls::locate;
use super::{S, Who, ctx};
use crate::auth::Caller;
use crate::git;
use crate::git_http::on_refs_changed;
use crate::http::{ApiError, ApiResult, JsonBody, created, ok, opt_str, paginated, query_value};
use crate::render::{node_id, render_commit, render_label, render_repo, render_user};
use crate::webhooks::{Event, emit};
use crate::world::{Access, Label, Permission, RepoSettings};

type RepoPath = Path<(String, String)>;

pub async fn get_repo(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): RepoPath,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("metadata"))?;
    let r = w.repo(rid)?;
    let mut answer = render_repo(ctx(&s, &w), r);
    answer["permissions"] = caller_permissions(&w, r, &c);
    ok(answer)
}

/// `permissions` of the repository answer: what the caller may do. An
/// installation token is judged by the app's grants.
fn caller_permissions(w: &crate::world::World, r: &crate::world::Repo, c: &Caller) -> Value {
    let role = match c {
        Caller::User { user_id } => w.user_permission(r, *user_id),
        Caller::Installation {
            installation_id, ..
        } => {
            let grants = w
                .installation(*installation_id)
                .and_then(|i| w.app(i.app_id))
                .map(|app| app.permissions.clone())
                .unwrap_or_default();
            let granted = |name: &str| grants.get(name).map(String::as_str) == Some("write");
            Some(if granted("administration") {
                Permission::Admin
            } else if granted("contents") {
                Permission::Write
            } else {
                Permission::Read
            })
        }
        _ => None,
    };
    let at_least = |wanted: Permission| role.is_some_and(|p| p >= wanted);
    json!({
        "admin": at_least(Permission::Admin),
        "maintain": at_least(Permission::Maintain),
        "push": at_least(Permission::Write),
        "triage": at_least(Permission::Triage),
        "pull": at_least(Permission::Read),
    })
}

/// Applies the merge settings `PATCH /repos/{owner}/{repo}` names.
fn apply_settings(settings: &mut RepoSettings, body: &Value) -> Result<(), ApiError> {
    let fields: [(&str, &mut bool); 7] = [
        ("allow_squash_merge", &mut settings.allow_squash_merge),
        ("allow_merge_commit", &mut settings.allow_merge_commit),
        ("allow_rebase_merge", &mut settings.allow_rebase_merge),
        ("allow_auto_merge", &mut settings.allow_auto_merge),
        (
            "delete_branch_on_merge",
            &mut settings.delete_branch_on_merge,
        ),
        ("allow_update_branch", &mut settings.allow_update_branch),
        (
            "use_squash_pr_title_as_default",
            &mut settings.use_squash_pr_title_as_default,
        ),
    ];
    for (name, slot) in fields {
        match body.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(value)) => *slot = *value,
            Some(_) => return Err(ApiError::validation("Repository", name, "invalid")),
        }
    }
    Ok(())
}

pub async fn update_repo(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): RepoPath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let (rid, path, _, _) = locate(&s, &c, &owner, &repo, Access::Write("administration"))?;
    if let Some(branch) = opt_str(&body, "default_branch", "Repository")? {
        git::rev_parse(&path, &format!("refs/heads/{branch}"))
            .await
            .ok_or_else(|| ApiError::validation("Repository", "default_branch", "invalid"))?;
        s.lock().repo_mut(rid)?.default_branch = branch;
    }
    if let Some(private) = body.get("private").and_then(Value::as_bool) {
        s.lock().repo_mut(rid)?.private = private;
    }
    let mut settings = s.lock().repo(rid)?.settings.clone();
    apply_settings(&mut settings, &body)?;
    {
        let mut w = s.lock();
        let all_off = !settings.allow_squash_merge
            && !settings.allow_merge_commit
            && !settings.allow_rebase_merge;
        // GitHub keeps at least one merge method on.
        if all_off {
            return Err(ApiError::Validation {
                errors: vec![json!({
                    "resource": "Repository",
                    "code": "custom",
                    "message": "Sorry, you need to allow at least one merge strategy."
                })],
            });
        }
        w.repo_mut(rid)?.settings = settings;
    }
    let w = s.lock();
    let r = w.repo(rid)?;
    let mut answer = render_repo(ctx(&s, &w), r);
    answer["permissions"] = caller_permissions(&w, r, &c);
    ok(answer)
}

pub async fn delete_repo(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): RepoPath,
) -> ApiResult {
    let (rid, path, _, _) = locate(&s, &c, &owner, &repo, Access::Write("administration"))?;
    {
        let mut w = s.lock();
        if let crate::auth::Caller::User { user_id } = c {
            let r = w.repo(rid)?;
            if w.user_permission(r, user_id) != Some(Permission::Admin) {
                return Err(ApiError::forbidden("Must have admin rights to Repository."));
            }
        }
        w.repos.remove(&rid);
        w.comments.retain(|_, cm| cm.repo_id != rid);
        w.check_runs.retain(|_, ch| ch.repo_id != rid);
        for inst in w.installations.values_mut() {
            inst.repository_ids.retain(|r| *r != rid);
        }
    }
    let _ = tokio::fs::remove_dir_all(&path).await;
    crate::git::forget_repository(&path);
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn list_labels(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): RepoPath,
    uri: Uri,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("issues"))?;
    let r = w.repo(rid)?;
    paginated(
        r.labels
            .iter()
            .map(|l| render_label(ctx(&s, &w), r, l))
            .collect(),
        &uri,
        &s.base,
    )
}

pub async fn create_label(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo)): RepoPath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("issues"))?;
    let actor = w.actor(&c)?;
    let name = opt_str(&body, "name", "Label")?
        .ok_or_else(|| ApiError::validation("Label", "name", "missing_field"))?;
    let color = opt_str(&body, "color", "Label")?
        .unwrap_or_else(|| "ededed".into())
        .trim_start_matches('#')
        .to_ascii_lowercase();
    if color.len() != 6 || !color.chars().all(|ch| ch.is_ascii_hexdigit()) {
        return Err(ApiError::validation("Label", "color", "invalid"));
    }
    if w.repo(rid)?
        .labels
        .iter()
        .any(|l| l.name.eq_ignore_ascii_case(&name))
    {
        return Err(ApiError::validation("Label", "name", "already_exists"));
    }
    let id = w.alloc_id();
    let label = Label {
        id,
        name,
        color,
        description: opt_str(&body, "description", "Label")?,
    };
    w.repo_mut(rid)?.labels.push(label.clone());
    let rendered = render_label(ctx(&s, &w), w.repo(rid)?, &label);
    emit(
        &s,
        &mut w,
        Event {
            name: "label",
            action: Some("created"),
            repo_id: Some(rid),
            only_installation: None,
            sender_id: actor.0,
            body: json!({"label": rendered}),
        },
    );
    created(rendered)
}

pub async fn permission(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, login)): Path<(String, String, String)>,
) -> ApiResult {
    let w = s.lock();
    let rid = w.resolve_repo(&c, &owner, &repo, Access::Read("metadata"))?;
    let r = w.repo(rid)?;
    let user = w
        .user_by_login(&login)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("{login} is not a user")))?;
    let perm = w.user_permission(r, user.id);
    let (legacy, role) = match perm {
        Some(p) => (p.legacy(), p.as_str()),
        None => ("none", "none"),
    };
    let mut rendered = render_user(ctx(&s, &w), user);
    rendered["role_name"] = json!(role);
    rendered["permissions"] = json!({
        "admin": perm >= Some(Permission::Admin),
        "maintain": perm >= Some(Permission::Maintain),
        "push": perm >= Some(Permission::Write),
        "triage": perm >= Some(Permission::Triage),
        "pull": perm.is_some(),
    });
    ok(json!({"permission": legacy, "role_name": role, "user": rendered}))
}

pub async fn git_ref(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, name)): Path<(String, String, String)>,
) -> ApiResult {
    let (_, path, api, _) = locate(&s, &c, &owner, &repo, Access::Read("contents"))?;
    let full = format!("refs/{}", name.trim_start_matches('/'));
    let refs = git::refs(&path)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let sha = refs.get(&full).ok_or_else(ApiError::not_found)?;
    let short: u64 = u64::from_str_radix(sha.get(..12).unwrap_or("0"), 16).unwrap_or(0);
    ok(json!({
        "ref": full,
        "node_id": node_id("REF", short),
        "url": format!("{api}/git/{full}"),
        "object": {"type": "commit", "sha": sha, "url": format!("{api}/git/commits/{sha}")},
    }))
}

pub async fn branch(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, name)): Path<(String, String, String)>,
) -> ApiResult {
    let (rid, path, api, html) = locate(&s, &c, &owner, &repo, Access::Read("contents"))?;
    let sha = git::rev_parse(&path, &format!("refs/heads/{name}"))
        .await
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "Branch not found"))?;
    let info = git::commit_info(&path, &sha)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let protected = name == r.default_branch && !r.required_checks.is_empty();
    ok(json!({
        "name": name,
        "commit": render_commit(ctx(&s, &w), &api, &html, &info),
        "_links": {"html": format!("{html}/tree/{name}"), "self": format!("{api}/branches/{name}")},
        "protected": protected,
        "protection": {
            "enabled": protected,
            "required_status_checks": {
                "enforcement_level": if protected { "non_admins" } else { "off" },
                "strict": protected && r.require_up_to_date,
                "contexts": if protected { json!(r.required_checks) } else { json!([]) },
                "checks": r.required_checks.iter().filter(|_| protected).map(|c| json!({"context": c, "app_id": null})).collect::<Vec<_>>(),
            },
        },
        "protection_url": format!("{api}/branches/{name}/protection"),
    }))
}

fn content_json(
    api: &str,
    html: &str,
    rev: &str,
    file: &str,
    sha: &str,
    bytes: Option<&[u8]>,
    size: usize,
) -> Value {
    let name = file.rsplit('/').next().unwrap_or(file);
    let mut v = json!({
        "type": "file",
        "size": size,
        "name": name,
        "path": file,
        "sha": sha,
        "url": format!("{api}/contents/{file}?ref={rev}"),
        "git_url": format!("{api}/git/blobs/{sha}"),
        "html_url": format!("{html}/blob/{rev}/{file}"),
        "download_url": format!("{html}/raw/{rev}/{file}"),
        "_links": {"self": format!("{api}/contents/{file}?ref={rev}"), "git": format!("{api}/git/blobs/{sha}"), "html": format!("{html}/blob/{rev}/{file}")},
    });
    if let Some(bytes) = bytes {
        // GitHub wraps base64 content at 60 characters per line.
        let b64 = STANDARD.encode(bytes);
        let wrapped: Vec<String> = b64
            .as_bytes()
            .chunks(60)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        v["content"] = json!(format!("{}\n", wrapped.join("\n")));
        v["encoding"] = json!("base64");
    }
    v
}

pub async fn get_contents(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, file)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    let (rid, path, api, html) = locate(&s, &c, &owner, &repo, Access::Read("contents"))?;
    let rev = match query_value(&uri, "ref") {
        Some(r) => r,
        None => s.lock().repo(rid)?.default_branch.clone(),
    };
    let commit = match git::rev_parse(&path, &format!("refs/heads/{rev}")).await {
        Some(sha) => sha,
        None => git::rev_parse(&path, &rev).await.ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("No commit found for the ref {rev}"),
            )
        })?,
    };
    let internal =
        |e: anyhow::Error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    if let Some((bytes, sha)) = git::read_file(&path, &commit, &file)
        .await
        .map_err(internal)?
    {
        return ok(content_json(
            &api,
            &html,
            &rev,
            &file,
            &sha,
            Some(&bytes),
            bytes.len(),
        ));
    }
    let entries = git::list_dir(&path, &commit, &file)
        .await
        .map_err(internal)?
        .ok_or_else(ApiError::not_found)?;
    let dir = file.trim_end_matches('/');
    let listing: Vec<Value> = entries
        .iter()
        .map(|e| {
            let child = format!("{dir}/{}", e.name);
            let mut v = content_json(&api, &html, &rev, &child, &e.sha, None, e.size);
            v["type"] = json!(e.kind);
            if e.kind == "dir" {
                v["download_url"] = Value::Null;
                v["html_url"] = json!(format!("{html}/tree/{rev}/{child}"));
                v["git_url"] = json!(format!("{api}/git/trees/{}", e.sha));
            }
            v
        })
        .collect();
    ok(json!(listing))
}

/// Shared by PUT and DELETE: the branch, its tip, and the file's current blob.
async fn file_target(
    s: &crate::Shared,
    rid: u64,
    path: &std::path::Path,
    body: &Value,
    file: &str,
) -> Result<(String, String, Option<String>), ApiError> {
    let branch = match opt_str(body, "branch", "Content")? {
        Some(b) => b,
        None => s.lock().repo(rid)?.default_branch.clone(),
    };
    let tip = git::rev_parse(path, &format!("refs/heads/{branch}"))
        .await
        .ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, format!("Branch {branch} not found"))
        })?;
    let current = git::read_file(path, &tip, file)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map(|(_, sha)| sha);
    Ok((branch, tip, current))
}

async fn write_file(
    s: &std::sync::Arc<crate::Shared>,
    c: &crate::auth::Caller,
    owner: &str,
    repo: &str,
    file: &str,
    body: &Value,
    delete: bool,
) -> ApiResult {
    let (rid, path, api, html) = locate(s, c, owner, repo, Access::Write("contents"))?;
    let (actor, login) = {
        let w = s.lock();
        let actor = w.actor(c)?;
        (actor, w.user(actor.0)?.login.clone())
    };
    let message = opt_str(body, "message", "Content")?
        .ok_or_else(|| ApiError::validation("Content", "message", "missing_field"))?;
    let (branch, tip, current) = file_target(s, rid, &path, body, file).await?;
    let given_sha = opt_str(body, "sha", "Content")?;
    let content = if delete {
        if current.is_none() {
            return Err(ApiError::not_found());
        }
        None
    } else {
        let b64 = opt_str(body, "content", "Content")?
            .ok_or_else(|| ApiError::validation("Content", "content", "missing_field"))?;
        Some(
            STANDARD
                .decode(b64.replace(['\n', '\r'], ""))
                .map_err(|_| ApiError::validation("Content", "content", "invalid"))?,
        )
    };
    if current.is_some() && given_sha != current {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("{file} does not match {}", given_sha.unwrap_or_default()),
        ));
    }
    let email = format!("{login}@users.noreply.fakehub");
    let new = git::commit_file(
        &path,
        &tip,
        file,
        content.as_deref(),
        &message,
        (&login, &email),
    )
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    git::update_ref(&path, &format!("refs/heads/{branch}"), &new, Some(&tip))
        .await
        .map_err(|_| ApiError::new(StatusCode::CONFLICT, "Branch was modified"))?;
    on_refs_changed(
        s,
        rid,
        vec![(format!("refs/heads/{branch}"), tip, new.clone())],
        actor.0,
    )
    .await;
    let info = git::commit_info(&path, &new)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let blob = git::read_file(&path, &new, file)
        .await
        .ok()
        .flatten()
        .map(|(_, sha)| sha);
    let w = s.lock();
    let mut commit = render_commit(ctx(s, &w), &api, &html, &info);
    if let Value::Object(m) = &mut commit {
        // The contents API answers with the git-commit shape, flattened.
        let inner = m.remove("commit").unwrap_or(Value::Null);
        for key in ["author", "committer", "message", "tree", "verification"] {
            m.insert(key.to_string(), inner[key].clone());
        }
    }
    let content_value = match (&content, &blob) {
        (Some(bytes), Some(sha)) => {
            content_json(&api, &html, &branch, file, sha, None, bytes.len())
        }
        _ => Value::Null,
    };
    let status = if delete || current.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        axum::Json(json!({"content": content_value, "commit": commit})),
    )
        .into_response())
}

pub async fn put_contents(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, file)): Path<(String, String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    write_file(&s, &c, &owner, &repo, &file, &body, false).await
}

pub async fn delete_contents(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, file)): Path<(String, String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    write_file(&s, &c, &owner, &repo, &file, &body, true).await
}
