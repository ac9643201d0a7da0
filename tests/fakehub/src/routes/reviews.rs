//! Pull-request reviews (`GET`/`POST …/pulls/{n}/reviews`) with their
//! inline comments (`GET …/reviews/{id}/comments`, `GET …/pulls/{n}/comments`;
//! a comment must sit on a line of the diff at the review's `commit_id`,
//! see [`super::review_lines`]) and the rules that apply to a branch
//! (`GET …/rules/branches/{branch}`): what a ruleset requiring approving
//! reviews needs. A submitted review sends `pull_request_review`
//! `submitted`, and the PR's `mergeable_state` follows the approvals that
//! count (see [`crate::render::approvals`]).

use axum::extract::Path;
use axum::http::Uri;
use chrono::Utc;
use serde_json::{Value, json};

use super::pulls::locate;
use super::{S, Who, ctx};
use crate::git;
use crate::http::{ApiError, ApiResult, JsonBody, ok, opt_str, paginated};
use crate::render::{Ctx, node_id, render_pull, render_user, ts};
use crate::webhooks::{Event, emit};
use crate::world::{Access, Repo, Review, ReviewComment};

type PullPath = Path<(String, String, u64)>;

fn render_review(ctx: Ctx<'_>, repo: &Repo, number: u64, review: &Review) -> Value {
    let owner = ctx.world.users.get(&repo.owner_id);
    let owner_login = owner.map(|o| o.login.as_str()).unwrap_or("ghost");
    let full = format!("{owner_login}/{}", repo.name);
    let html = format!(
        "{}/{full}/pull/{number}#pullrequestreview-{}",
        ctx.base, review.id
    );
    let pull_url = format!("{}/repos/{full}/pulls/{number}", ctx.base);
    json!({
        "id": review.id,
        "node_id": node_id("PRR", review.id),
        "user": ctx.world.users.get(&review.user_id).map(|u| render_user(ctx, u)),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": crate::render::association(repo, review.user_id),
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
        "submitted_at": ts(review.submitted_at),
        "commit_id": review.commit_id,
    })
}

pub async fn list(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
    uri: Uri,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let pull = r
        .issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .ok_or_else(ApiError::not_found)?;
    let items = pull
        .reviews
        .iter()
        .map(|review| render_review(ctx(&s, &w), r, number, review))
        .collect();
    paginated(items, &uri, &s.base)
}

/// `event` as GitHub takes it, to the state a review is stored with.
fn review_state(event: &str) -> Result<&'static str, ApiError> {
    match event {
        "APPROVE" => Ok("APPROVED"),
        "REQUEST_CHANGES" => Ok("CHANGES_REQUESTED"),
        "COMMENT" => Ok("COMMENTED"),
        _ => Err(ApiError::validation(
            "PullRequestReview",
            "event",
            "invalid",
        )),
    }
}

/// Each file the pull request changes at `commit_id` (since its merge base
/// with the base branch), with GitHub's patch of it; 422 when the commit is
/// not part of the pull request.
async fn patches_at(
    path: &std::path::Path,
    base_ref: &str,
    head: &str,
    commit_id: &str,
) -> Result<Vec<(String, Option<String>)>, ApiError> {
    let internal = |e: anyhow::Error| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("git: {e:#}"),
        )
    };
    let not_part = || ApiError::Unprocessable {
        errors: vec![format!(
            "Commit {commit_id} is not part of the pull request"
        )],
    };
    let commit = git::rev_parse(path, commit_id).await.ok_or_else(not_part)?;
    if !git::is_ancestor(path, &commit, head).await {
        return Err(not_part());
    }
    let base = git::rev_parse(path, &format!("refs/heads/{base_ref}"))
        .await
        .ok_or_else(not_part)?;
    let from = git::merge_base(path, &base, &commit)
        .await
        .ok_or_else(not_part)?;
    let mut patches = git::patches(path, &from, &commit).await.map_err(internal)?;
    let changes = git::diff(path, &from, &commit).await.map_err(internal)?;
    Ok(changes
        .into_iter()
        .map(|change| {
            let patch = patches.remove(&change.path);
            (change.path, patch)
        })
        .collect())
}

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let (rid, path, ..) = locate(&s, &c, &owner, &repo, Access::Participate("pull_requests"))?;
    let event = opt_str(&body, "event", "PullRequestReview")?.unwrap_or_default();
    let state = review_state(&event)?;
    let text = opt_str(&body, "body", "PullRequestReview")?.unwrap_or_default();
    let (head, base_ref) = {
        let w = s.lock();
        let pull = w
            .issue(rid, number)?
            .pull
            .as_ref()
            .ok_or_else(ApiError::not_found)?;
        (pull.head_sha.clone(), pull.base_ref.clone())
    };
    let commit_id =
        opt_str(&body, "commit_id", "PullRequestReview")?.unwrap_or_else(|| head.clone());
    // Read from git before the world is locked; the lock is not held
    // across an await.
    let patches = patches_at(&path, &base_ref, &head, &commit_id).await?;
    let mut w = s.lock();
    let comments = super::review_lines::checked_comments(&body, &patches, || w.alloc_id())?;
    let actor = w.actor(&c)?;
    let issue = w.issue(rid, number)?;
    let author = issue.user_id;
    if state == "APPROVED" && author == actor.0 {
        return Err(ApiError::Validation {
            errors: vec![json!({"resource": "PullRequestReview", "code": "custom",
                "message": "Can not approve your own pull request"})],
        });
    }
    let id = w.alloc_id();
    let review = Review {
        id,
        user_id: actor.0,
        state: state.to_owned(),
        body: text,
        commit_id,
        submitted_at: Utc::now(),
        comments,
    };
    if let Some(pull) = w.issue_mut(rid, number)?.pull.as_mut() {
        pull.reviews.push(review.clone());
    }
    let r = w.repo(rid)?;
    let rendered = render_review(ctx(&s, &w), r, number, &review);
    let issue = w.issue(rid, number)?;
    let hook_body = json!({
        "review": rendered,
        "pull_request": render_pull(ctx(&s, &w), r, issue),
    });
    emit(
        &s,
        &mut w,
        Event {
            name: "pull_request_review",
            action: Some("submitted"),
            repo_id: Some(rid),
            only_installation: None,
            sender_id: actor.0,
            body: hook_body,
        },
    );
    s.mark_dirty();
    ok(rendered)
}

fn render_comment(
    ctx: Ctx<'_>,
    repo: &Repo,
    number: u64,
    review: &Review,
    comment: &ReviewComment,
) -> Value {
    let owner = ctx.world.users.get(&repo.owner_id);
    let owner_login = owner.map(|o| o.login.as_str()).unwrap_or("ghost");
    let full = format!("{owner_login}/{}", repo.name);
    let html = format!(
        "{}/{full}/pull/{number}#discussion_r{}",
        ctx.base, comment.id
    );
    let api = format!("{}/repos/{full}/pulls/comments/{}", ctx.base, comment.id);
    let pull_url = format!("{}/repos/{full}/pulls/{number}", ctx.base);
    json!({
        "id": comment.id,
        "node_id": node_id("PRRC", comment.id),
        "url": api,
        "pull_request_review_id": review.id,
        "diff_hunk": comment.diff_hunk,
        "path": comment.path,
        "position": null,
        "original_position": null,
        "commit_id": review.commit_id,
        "original_commit_id": review.commit_id,
        "user": ctx.world.users.get(&review.user_id).map(|u| render_user(ctx, u)),
        "body": comment.body,
        "created_at": ts(review.submitted_at),
        "updated_at": ts(review.submitted_at),
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": crate::render::association(repo, review.user_id),
        "_links": {"self": {"href": api}, "html": {"href": html},
            "pull_request": {"href": pull_url}},
        "start_line": comment.start_line,
        "original_start_line": comment.start_line,
        "start_side": comment.start_side,
        "line": comment.line,
        "original_line": comment.line,
        "side": comment.side,
        "subject_type": "line",
    })
}

/// `GET …/pulls/{n}/reviews/{id}/comments`: one review's inline comments.
pub async fn review_comments(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number, id)): Path<(String, String, u64, u64)>,
    uri: Uri,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let review = r
        .issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .and_then(|p| p.reviews.iter().find(|review| review.id == id))
        .ok_or_else(ApiError::not_found)?;
    let items = review
        .comments
        .iter()
        .map(|comment| render_comment(ctx(&s, &w), r, number, review, comment))
        .collect();
    paginated(items, &uri, &s.base)
}

/// `GET …/pulls/{n}/comments`: every review's inline comments, oldest first.
pub async fn pull_comments(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
    uri: Uri,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let pull = r
        .issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .ok_or_else(ApiError::not_found)?;
    let items = pull
        .reviews
        .iter()
        .flat_map(|review| {
            review
                .comments
                .iter()
                .map(|comment| render_comment(ctx(&s, &w), r, number, review, comment))
        })
        .collect();
    paginated(items, &uri, &s.base)
}

/// The rules active on `branch`: on the default branch, a `pull_request`
/// rule while a ruleset requires approving reviews and a
/// `required_status_checks` rule while checks are required.
pub async fn branch_rules(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, branch)): Path<(String, String, String)>,
    uri: Uri,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("metadata"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let mut rules = Vec::new();
    if branch == r.default_branch && r.required_approving_reviews > 0 {
        rules.push(json!({
            "type": "pull_request",
            "ruleset_source_type": "Repository",
            "ruleset_source": format!("{owner}/{repo}"),
            "ruleset_id": r.id,
            "parameters": {
                "required_approving_review_count": r.required_approving_reviews,
                "dismiss_stale_reviews_on_push": false,
                "require_code_owner_review": false,
                "require_last_push_approval": false,
                "required_review_thread_resolution": false,
            },
        }));
    }
    if branch == r.default_branch && !r.required_checks.is_empty() {
        let required: Vec<Value> = r
            .required_checks
            .iter()
            .map(|context| json!({"context": context}))
            .collect();
        rules.push(json!({
            "type": "required_status_checks",
            "ruleset_source_type": "Repository",
            "ruleset_source": format!("{owner}/{repo}"),
            "ruleset_id": r.id,
            "parameters": {
                "strict_required_status_checks_policy": r.require_up_to_date,
                "do_not_enforce_on_create": false,
                "required_status_checks": required,
            },
        }));
    }
    paginated(rules, &uri, &s.base)
}

/// `GET …/pulls/{n}/reviews/{id}`: one review.
pub async fn get_one(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number, review_id)): Path<(String, String, u64, u64)>,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let review = find_review(r, number, review_id)?;
    ok(render_review(ctx(&s, &w), r, number, review))
}

fn find_review(repo: &Repo, number: u64, review_id: u64) -> Result<&Review, ApiError> {
    repo.issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .and_then(|pull| pull.reviews.iter().find(|r| r.id == review_id))
        .ok_or_else(ApiError::not_found)
}
