//! Git commits and changed files as the REST API shows them.

use chrono::DateTime;
use serde_json::{Value, json};

use super::{Ctx, node_id, render_user, ts};
use crate::git::{CommitInfo, FileChange};

fn git_user(ident: &(String, String, i64)) -> Value {
    let date = DateTime::from_timestamp(ident.2, 0)
        .map(ts)
        .unwrap_or_default();
    json!({"name": ident.0, "email": ident.1, "date": date})
}

/// The account GitHub links to a commit identity (by login or noreply email).
fn account(ctx: Ctx<'_>, ident: &(String, String, i64)) -> Value {
    ctx.world
        .users
        .values()
        .find(|u| {
            u.login.eq_ignore_ascii_case(&ident.0) || ident.1.starts_with(&format!("{}@", u.login))
        })
        .map(|u| render_user(ctx, u))
        .unwrap_or(Value::Null)
}

/// `commit` schema: `api` is the repository API URL, `html` its web URL.
pub fn render_commit(ctx: Ctx<'_>, api: &str, html: &str, info: &CommitInfo) -> Value {
    let sha = &info.sha;
    let parents: Vec<Value> = info
        .parents
        .iter()
        .map(|p| json!({"sha": p, "url": format!("{api}/commits/{p}"), "html_url": format!("{html}/commit/{p}")}))
        .collect();
    let short: u64 = u64::from_str_radix(sha.get(..12).unwrap_or("0"), 16).unwrap_or(0);
    json!({
        "url": format!("{api}/commits/{sha}"),
        "sha": sha,
        "node_id": node_id("C", short),
        "html_url": format!("{html}/commit/{sha}"),
        "comments_url": format!("{api}/commits/{sha}/comments"),
        "commit": {
            "url": format!("{api}/git/commits/{sha}"),
            "author": git_user(&info.author),
            "committer": git_user(&info.committer),
            "message": info.message,
            "tree": {"sha": info.tree, "url": format!("{api}/git/trees/{}", info.tree)},
            "comment_count": 0,
            "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null},
        },
        "author": account(ctx, &info.author),
        "committer": account(ctx, &info.committer),
        "parents": parents,
    })
}

/// `diff-entry` schema.
pub fn render_file(api: &str, html: &str, head: &str, change: &FileChange) -> Value {
    json!({
        "sha": change.blob,
        "filename": change.path,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": format!("{html}/blob/{head}/{}", change.path),
        "raw_url": format!("{html}/raw/{head}/{}", change.path),
        "contents_url": format!("{api}/contents/{}?ref={head}", change.path),
    })
}
