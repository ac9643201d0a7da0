//! Pull-request reviews (`GET`/`POST …/pulls/{n}/reviews`) and the rules
//! that apply to a branch (`GET …/rules/branches/{branch}`): what a
//! ruleset requiring approving reviews needs. A submitted review sends
//! `pull_request_review` `submitted`, and the PR's `mergeable_state`
//! follows the approvals that count (see [`crate::render::approvals`]).

use axum::extract::Path;
use axum::http::Uri;
use chrono::Utc;
use serde_json::{Value, json};

use super::pulls::locate;
use super::{S, Who, ctx};
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

pub async fn create(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number)): PullPath,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Participate("pull_requests"))?;
    let event = opt_str(&body, "event", "PullRequestReview")?.unwrap_or_default();
    let state = review_state(&event)?;
    let text = opt_str(&body, "body", "PullRequestReview")?.unwrap_or_default();
    let mut w = s.lock();
    let actor = w.actor(&c)?;
    let issue = w.issue(rid, number)?;
    let author = issue.user_id;
    let pull = issue.pull.as_ref().ok_or_else(ApiError::not_found)?;
    let commit_id =
        opt_str(&body, "commit_id", "PullRequestReview")?.unwrap_or_else(|| pull.head_sha.clone());
    if state == "APPROVED" && author == actor.0 {
        return Err(ApiError::Validation {
            errors: vec![json!({"resource": "PullRequestReview", "code": "custom",
                "message": "Can not approve your own pull request"})],
        });
    }
    let id = w.alloc_id();
    let mut comments = Vec::new();
    for (path, line, body) in inline_comments(&body)? {
        comments.push(ReviewComment {
            id: w.alloc_id(),
            path,
            line,
            body,
        });
    }
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
                "strict_required_status_checks_policy": false,
                "do_not_enforce_on_create": false,
                "required_status_checks": required,
            },
        }));
    }
    paginated(rules, &uri, &s.base)
}

/// The `comments` of a review submission: `path`, `line` and `body` each.
fn inline_comments(body: &Value) -> Result<Vec<(String, u64, String)>, ApiError> {
    let invalid = || ApiError::validation("PullRequestReview", "comments", "invalid");
    let Some(list) = body.get("comments") else {
        return Ok(Vec::new());
    };
    let list = list.as_array().ok_or_else(invalid)?;
    list.iter()
        .map(|comment| {
            let path = comment["path"].as_str().ok_or_else(invalid)?;
            let line = comment["line"].as_u64().ok_or_else(invalid)?;
            let text = comment["body"].as_str().ok_or_else(invalid)?;
            Ok((path.to_owned(), line, text.to_owned()))
        })
        .collect()
}

fn render_review_comment(
    ctx: Ctx<'_>,
    repo: &Repo,
    number: u64,
    review: &Review,
    comment: &ReviewComment,
) -> Value {
    let owner = ctx.world.users.get(&repo.owner_id);
    let owner_login = owner.map(|o| o.login.as_str()).unwrap_or("ghost");
    let full = format!("{owner_login}/{}", repo.name);
    json!({
        "id": comment.id,
        "node_id": node_id("PRRC", comment.id),
        "pull_request_review_id": review.id,
        "path": comment.path,
        "line": comment.line,
        "original_line": comment.line,
        "side": "RIGHT",
        "commit_id": review.commit_id,
        "original_commit_id": review.commit_id,
        "user": ctx.world.users.get(&review.user_id).map(|u| render_user(ctx, u)),
        "body": comment.body,
        "html_url": format!("{}/{full}/pull/{number}#discussion_r{}", ctx.base, comment.id),
        "pull_request_url": format!("{}/repos/{full}/pulls/{number}", ctx.base),
        "author_association": crate::render::association(repo, review.user_id),
        "created_at": ts(review.submitted_at),
        "updated_at": ts(review.submitted_at),
    })
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

/// `GET …/pulls/{n}/reviews/{id}/comments`: that review's inline comments.
pub async fn comments(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path((owner, repo, number, review_id)): Path<(String, String, u64, u64)>,
    uri: Uri,
) -> ApiResult {
    let (rid, ..) = locate(&s, &c, &owner, &repo, Access::Read("pull_requests"))?;
    let w = s.lock();
    let r = w.repo(rid)?;
    let review = find_review(r, number, review_id)?;
    let items = review
        .comments
        .iter()
        .map(|comment| render_review_comment(ctx(&s, &w), r, number, review, comment))
        .collect();
    paginated(items, &uri, &s.base)
}

fn find_review(repo: &Repo, number: u64, review_id: u64) -> Result<&Review, ApiError> {
    repo.issues
        .get(&number)
        .and_then(|i| i.pull.as_ref())
        .and_then(|pull| pull.reviews.iter().find(|r| r.id == review_id))
        .ok_or_else(ApiError::not_found)
}
