//! Pull-request files and commits, and `compare/{base}...{head}`, read from git.

use axum::extract::Path;
use axum::http::Uri;
use serde_json::json;

use super::pulls::locate;
use super::{S, Who, ctx};
use crate::git;
use crate::git::FileChange;
use crate::http::{ApiError, ApiResult, ok, page_of, paginated};
use crate::render::{render_commit, render_file};
use crate::world::Access;

fn internal(e: anyhow::Error) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("git: {e:#}"),
    )
}

/// [`render_file`] with GitHub's `patch` of the change, when it has one
/// (not for a binary file); `patches` from [`git::patches`].
fn render_with_patch(
    (api, html): (&str, &str),
    head: &str,
    change: &FileChange,
    patches: &std::collections::BTreeMap<String, String>,
) -> serde_json::Value {
    let mut file = render_file(api, html, head, change);
    if let Some(patch) = patches.get(&change.path) {
        file["patch"] = json!(patch);
    }
    file
}

/// `(head_sha, merge base or base tip)` of a pull request.
fn pull_range(s: &crate::Shared, rid: u64, number: u64) -> Result<(String, String), ApiError> {
    let w = s.lock();
    let pull = w
        .issue(rid, number)?
        .pull
        .clone()
        .ok_or_else(ApiError::not_found)?;
    let from = pull
        .stats
        .merge_base_sha
        .clone()
        .unwrap_or(pull.stats.base_sha.clone());
    Ok((pull.head_sha, from))
}

/// GitHub lists at most this many files of a pull request, however many
/// it changes (its `changed_files` still counts them all).
pub const PULL_FILES_CAP: usize = 3000;

/// GitHub lists at most this many files of a comparison.
pub const COMPARE_FILES_CAP: usize = 300;

pub async fn files(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    uri: Uri,
) -> ApiResult {
    let (rid, path, api, html) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let (head, from) = pull_range(&s, rid, number)?;
    let changes = git::diff(&path, &from, &head).await.map_err(internal)?;
    let patches = git::patches(&path, &from, &head).await.map_err(internal)?;
    let files = changes
        .iter()
        .take(PULL_FILES_CAP)
        .map(|ch| render_with_patch((&api, &html), &head, ch, &patches))
        .collect();
    paginated(files, &uri, &s.base)
}

pub async fn commits(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    uri: Uri,
) -> ApiResult {
    let (rid, path, api, html) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let (head, from) = pull_range(&s, rid, number)?;
    let shas = git::rev_list(&path, &from, &head).await.map_err(internal)?;
    let mut infos = Vec::new();
    for sha in &shas {
        infos.push(git::commit_info(&path, sha).await.map_err(internal)?);
    }
    let w = s.lock();
    paginated(
        infos
            .iter()
            .map(|i| render_commit(ctx(&s, &w), &api, &html, i))
            .collect(),
        &uri,
        &s.base,
    )
}

async fn resolve(path: &std::path::Path, rev: &str) -> Result<String, ApiError> {
    let rev = rev.split_once(':').map(|(_, r)| r).unwrap_or(rev);
    match git::rev_parse(path, &format!("refs/heads/{rev}")).await {
        Some(sha) => Ok(sha),
        None => git::rev_parse(path, rev)
            .await
            .ok_or_else(ApiError::not_found),
    }
}

pub async fn compare(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, basehead)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    let (_, path, api, html) = locate(&s, &c, &owner, &repo, Access::Read("contents"))?;
    let (base, head) = basehead.split_once("...").ok_or_else(ApiError::not_found)?;
    let base_sha = resolve(&path, base).await?;
    let head_sha = resolve(&path, head).await?;
    let merge_base = git::merge_base(&path, &base_sha, &head_sha)
        .await
        .ok_or_else(ApiError::not_found)?;
    let ahead = git::rev_list(&path, &base_sha, &head_sha)
        .await
        .map_err(internal)?;
    let behind = git::rev_list(&path, &head_sha, &base_sha)
        .await
        .map_err(internal)?;
    let status = match (ahead.is_empty(), behind.is_empty()) {
        (true, true) => "identical",
        (false, true) => "ahead",
        (true, false) => "behind",
        (false, false) => "diverged",
    };
    let base_info = git::commit_info(&path, &base_sha).await.map_err(internal)?;
    let mb_info = git::commit_info(&path, &merge_base)
        .await
        .map_err(internal)?;
    let (page, _) = page_of(&ahead, &uri, &s.base);
    let mut infos = Vec::new();
    for sha in &page {
        infos.push(git::commit_info(&path, sha).await.map_err(internal)?);
    }
    let changes = git::diff(&path, &merge_base, &head_sha)
        .await
        .map_err(internal)?;
    let patches = git::patches(&path, &merge_base, &head_sha)
        .await
        .map_err(internal)?;
    let files: Vec<serde_json::Value> = changes
        .iter()
        .take(COMPARE_FILES_CAP)
        .map(|ch| render_with_patch((&api, &html), &head_sha, ch, &patches))
        .collect();
    let w = s.lock();
    let cx = ctx(&s, &w);
    ok(json!({
        "url": format!("{api}/compare/{basehead}"),
        "html_url": format!("{html}/compare/{basehead}"),
        "permalink_url": format!("{html}/compare/{base_sha}...{head_sha}"),
        "diff_url": format!("{html}/compare/{basehead}.diff"),
        "patch_url": format!("{html}/compare/{basehead}.patch"),
        "base_commit": render_commit(cx, &api, &html, &base_info),
        "merge_base_commit": render_commit(cx, &api, &html, &mb_info),
        "status": status,
        "ahead_by": ahead.len(),
        "behind_by": behind.len(),
        "total_commits": ahead.len(),
        "commits": infos.iter().map(|i| render_commit(cx, &api, &html, i)).collect::<Vec<_>>(),
        "files": files,
    }))
}
