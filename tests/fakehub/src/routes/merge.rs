//! `PUT /repos/{owner}/{repo}/pulls/{n}/merge`: a real merge, squash or
//! rebase onto the base branch, with GitHub's 405/409 refusals, the merged
//! and closed events, closing keywords, and `push`/`pull_request` webhooks.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::StatusCode;
use chrono::Utc;
use serde_json::{Value, json};

use super::issues::issue_hook;
use super::pulls::{compute_stats, refresh_pulls};
use super::{S, Who};
use crate::Shared;
use crate::git;
use crate::http::{ApiError, ApiResult, JsonBody, ok, opt_str};
use crate::render::{approvals, mergeability};
use crate::world::{Access, RepoSettings, World};

fn not_mergeable() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "Pull Request is not mergeable",
    )
}

/// GitHub's 405 for a method the repository's settings turn off.
fn method_allowed(settings: &RepoSettings, method: &str) -> Result<(), ApiError> {
    let (allowed, message) = match method {
        "squash" => (
            settings.allow_squash_merge,
            "Squash merges are not allowed on this repository.",
        ),
        "rebase" => (
            settings.allow_rebase_merge,
            "Rebase merges are not allowed on this repository.",
        ),
        _ => (
            settings.allow_merge_commit,
            "Merge commits are not allowed on this repository.",
        ),
    };
    if allowed {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message))
    }
}

fn internal(e: anyhow::Error) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("git: {e:#}"))
}

/// The merge runs in a task of its own: GitHub finishes a merge it began
/// whatever its client does, and axum drops a handler whose client hung
/// up, which would leave the base branch moved and the pull request open
/// (a controller killed mid-request then finds it "not mergeable").
pub async fn merge(
    state: S,
    who: Who,
    path: Path<(String, String, u64)>,
    body: JsonBody,
) -> ApiResult {
    tokio::spawn(merge_to_the_end(state, who, path, body))
        .await
        .unwrap_or_else(|error| {
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the merge task failed: {error}"),
            ))
        })
}

async fn merge_to_the_end(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let method = opt_str(&body, "merge_method", "PullRequest")?.unwrap_or_else(|| "merge".into());
    if !["merge", "squash", "rebase"].contains(&method.as_str()) {
        return Err(ApiError::validation(
            "PullRequest",
            "merge_method",
            "invalid",
        ));
    }
    let expected_sha = opt_str(&body, "sha", "PullRequest")?;
    {
        let w = s.lock();
        let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("contents"))?;
        method_allowed(&w.repo(rid)?.settings, &method)?;
    }
    let (rid, path, pull, title, author_login, head_owner) = {
        let w = s.lock();
        let rid = w.resolve_repo(&c, &owner, &repo, Access::Write("contents"))?;
        w.actor(&c)?;
        let r = w.repo(rid)?;
        let issue = r.issues.get(&number).ok_or_else(ApiError::not_found)?;
        let pull = issue.pull.clone().ok_or_else(ApiError::not_found)?;
        if pull.merged_at.is_some() || !issue.state_open {
            return Err(not_mergeable());
        }
        if expected_sha
            .as_deref()
            .is_some_and(|sha| sha != pull.head_sha)
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "Head branch was modified. Review and try the merge again.",
            ));
        }
        let owner_login = w.user(r.owner_id)?.login.clone();
        let author = w.user(issue.user_id)?.login.clone();
        (
            rid,
            git::repo_path(&s.repos_dir, &owner_login, &r.name),
            pull,
            issue.title.clone(),
            author,
            owner_login,
        )
    };
    // Decide from fresh git facts rather than the cached (possibly unknown) ones.
    let stats = compute_stats(&path, &pull.base_ref, &pull.head_sha)
        .await
        .map_err(internal)?;
    {
        let mut w = s.lock();
        if let Some(p) = w.issue_mut(rid, number)?.pull.as_mut() {
            p.stats = stats.clone();
            p.mergeable_known_at = Utc::now();
        }
        let r = w.repo(rid)?;
        let issue = w.issue(rid, number)?;
        let (mergeable, state) = mergeability(super::ctx(&s, &w), r, issue);
        let required = r.required_approving_reviews;
        if state == "blocked"
            && let Some(p) = &issue.pull
            && approvals(super::ctx(&s, &w), r, p) < required
        {
            let noun = if required == 1 {
                "review is"
            } else {
                "reviews are"
            };
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!(
                    "At least {required} approving {noun} required by reviewers with write access."
                ),
            ));
        }
        if state == "behind" {
            return Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "Head branch is not up to date with the base branch",
            ));
        }
        if mergeable != Some(true) || !["clean", "unstable", "has_hooks"].contains(&state) {
            return Err(not_mergeable());
        }
    }
    let base_sha = stats.base_sha.clone();
    let commit_title = opt_str(&body, "commit_title", "PullRequest")?;
    let commit_message = opt_str(&body, "commit_message", "PullRequest")?;
    let committer = git::COMMITTER;
    let author_email = format!("{author_login}@users.noreply.fakehub");
    let new_tip = match method.as_str() {
        "merge" => {
            let tree = git::merge_tree(&path, &base_sha, &pull.head_sha, None)
                .await
                .map_err(internal)?
                .map_err(|()| not_mergeable())?;
            let headline = commit_title.unwrap_or_else(|| {
                format!(
                    "Merge pull request #{number} from {head_owner}/{}",
                    pull.head_ref
                )
            });
            let message = format!("{headline}\n\n{}", commit_message.unwrap_or(title.clone()));
            git::commit_tree(
                &path,
                &tree,
                &[&base_sha, &pull.head_sha],
                message.trim_end(),
                (&author_login, &author_email),
                committer,
            )
            .await
            .map_err(internal)?
        }
        "squash" => {
            let tree = git::merge_tree(&path, &base_sha, &pull.head_sha, None)
                .await
                .map_err(internal)?
                .map_err(|()| not_mergeable())?;
            let headline = commit_title.unwrap_or_else(|| format!("{title} (#{number})"));
            let message = match commit_message {
                Some(m) => format!("{headline}\n\n{m}"),
                None => headline,
            };
            git::commit_tree(
                &path,
                &tree,
                &[&base_sha],
                message.trim_end(),
                (&author_login, &author_email),
                committer,
            )
            .await
            .map_err(internal)?
        }
        _ => {
            rebase(
                &path,
                &base_sha,
                &pull.head_sha,
                stats.merge_base_sha.as_deref(),
            )
            .await?
        }
    };
    git::update_ref(
        &path,
        &format!("refs/heads/{}", pull.base_ref),
        &new_tip,
        Some(&base_sha),
    )
    .await
    .map_err(|_| {
        ApiError::new(
            StatusCode::CONFLICT,
            "Base branch was modified. Review and try the merge again.",
        )
    })?;
    let html = format!(
        "{}/{head_owner}/{}",
        s.base,
        path.file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    );
    let pushed = crate::git_http::push_commits(&path, &html, &base_sha, &new_tip, None).await;
    {
        let mut w = s.lock();
        let actor = w.actor(&c)?;
        let now = Utc::now();
        let issue = w.issue_mut(rid, number)?;
        issue.state_open = false;
        issue.closed_at = Some(now);
        issue.closed_by = Some(actor.0);
        issue.updated_at = now;
        let body_text = issue.body.clone().unwrap_or_default();
        if let Some(p) = issue.pull.as_mut() {
            p.merged_at = Some(now);
            p.merged_by = Some(actor.0);
            p.merge_commit_sha = Some(new_tip.clone());
        }
        w.record_event(rid, number, actor, "merged", None, Some(new_tip.clone()))?;
        w.record_event(rid, number, actor, "closed", None, Some(new_tip.clone()))?;
        crate::git_http::push_hook(
            &s,
            &mut w,
            rid,
            (
                &format!("refs/heads/{}", pull.base_ref),
                &base_sha,
                &new_tip,
            ),
            actor.0,
            (pushed, false),
        );
        issue_hook(&s, &mut w, rid, number, "closed", actor.0, json!({}));
        let default_branch = w.repo(rid)?.default_branch.clone();
        if pull.base_ref == default_branch {
            close_referenced(&s, &mut w, rid, number, &body_text, actor, &new_tip);
        }
    }
    refresh_pulls(&s, rid).await;
    ok(json!({"sha": new_tip, "merged": true, "message": "Pull Request successfully merged"}))
}

/// Replay `merge_base..head` onto `onto`, one commit at a time, keeping authors.
async fn rebase(
    path: &std::path::Path,
    onto: &str,
    head: &str,
    merge_base: Option<&str>,
) -> Result<String, ApiError> {
    let from = merge_base.unwrap_or(onto);
    let commits = git::rev_list(path, from, head).await.map_err(internal)?;
    let mut tip = onto.to_string();
    for sha in commits {
        let info = git::commit_info(path, &sha).await.map_err(internal)?;
        let parent = info.parents.first().cloned().ok_or_else(not_mergeable)?;
        let tree = git::merge_tree(path, &tip, &sha, Some(&parent))
            .await
            .map_err(internal)?
            .map_err(|()| not_mergeable())?;
        let author = (info.author.0.as_str(), info.author.1.as_str());
        tip = git::commit_tree(path, &tree, &[&tip], &info.message, author, git::COMMITTER)
            .await
            .map_err(internal)?;
    }
    Ok(tip)
}

/// Issue numbers a PR body closes (`closes #4`, `Fixes #7`, …), as GitHub
/// does when the PR merges into the default branch.
pub fn closing_references(text: &str) -> Vec<u64> {
    const KEYWORDS: &[&str] = &[
        "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
    ];
    let words: Vec<&str> = text
        .split(|ch: char| ch.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let keyword = pair[0].trim_end_matches(':').to_ascii_lowercase();
        if KEYWORDS.contains(&keyword.as_str())
            && let Some(num) = pair[1].strip_prefix('#')
        {
            let digits: String = num.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<u64>()
                && !found.contains(&n)
            {
                found.push(n);
            }
        }
    }
    found
}

fn close_referenced(
    s: &Arc<Shared>,
    w: &mut World,
    rid: u64,
    pr: u64,
    body: &str,
    actor: (u64, Option<u64>),
    sha: &str,
) {
    for n in closing_references(body) {
        let Ok(issue) = w.issue_mut(rid, n) else {
            continue;
        };
        if n == pr || !issue.state_open || issue.pull.is_some() {
            continue;
        }
        issue.state_open = false;
        issue.state_reason = Some("completed".into());
        issue.closed_at = Some(Utc::now());
        issue.closed_by = Some(actor.0);
        if w.record_event(rid, n, actor, "closed", None, Some(sha.to_string()))
            .is_ok()
        {
            issue_hook(
                s,
                w,
                rid,
                n,
                "closed",
                actor.0,
                Value::Object(Default::default()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::closing_references;

    #[test]
    fn closing_keywords_are_found_case_insensitively_and_once() {
        assert_eq!(
            closing_references("Closes #4\n\nalso fixes #7, and Fixes #4"),
            vec![4, 7]
        );
        assert!(closing_references("see #4 and closes nothing").is_empty());
        assert_eq!(closing_references("Resolved: #12"), vec![12]);
    }
}
