//! The REST router: every operation of the OpenAPI subset, the control API
//! and the git smart-HTTP fallback.

pub mod apps;
pub mod checks;
pub mod comments;
pub mod compare;
pub mod issue_labels;
pub mod issue_relations;
pub mod issues;
pub mod merge;
pub mod pulls;
pub mod repos;
pub mod review_lines;
pub mod reviews;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};

use crate::render::Ctx;
use crate::world::World;
use crate::{Shared, control_http as control, git_http, middleware};

pub type S = axum::extract::State<Arc<Shared>>;
pub type Who = axum::Extension<crate::auth::Caller>;

pub fn ctx<'a>(s: &'a Shared, w: &'a World) -> Ctx<'a> {
    Ctx {
        base: &s.base,
        world: w,
    }
}

/// Build the router. GitHub accepts `POST` wherever it documents `PATCH`
/// (for clients that cannot send PATCH; octocrab edits comments that way),
/// so those routes take both.
pub fn router(shared: Arc<Shared>) -> Router {
    const R: &str = "/repos/{owner}/{repo}";
    let api = Router::new()
        .route(
            R,
            get(repos::get_repo)
                .patch(repos::update_repo)
                .post(repos::update_repo)
                .delete(repos::delete_repo),
        )
        .route(
            &format!("{R}/issues"),
            get(issues::list).post(issues::create),
        )
        .route(
            &format!("{R}/issues/{{number}}"),
            get(issues::get).patch(issues::update).post(issues::update),
        )
        .route(
            &format!("{R}/issues/{{number}}/comments"),
            get(comments::list).post(comments::create),
        )
        .route(
            &format!("{R}/issues/comments/{{id}}"),
            get(comments::get)
                .patch(comments::update)
                .post(comments::update)
                .delete(comments::delete),
        )
        .route(
            &format!("{R}/issues/comments/{{id}}/reactions"),
            get(comments::list_reactions).post(comments::add_reaction),
        )
        .route(
            &format!("{R}/issues/{{number}}/events"),
            get(issue_relations::events),
        )
        .route(
            &format!("{R}/issues/{{number}}/timeline"),
            get(issue_relations::timeline),
        )
        .route(
            &format!("{R}/issues/{{number}}/labels"),
            get(issue_labels::labels)
                .post(issue_labels::add_labels)
                .put(issue_labels::set_labels)
                .delete(issue_labels::clear_labels),
        )
        .route(
            &format!("{R}/issues/{{number}}/labels/{{name}}"),
            axum::routing::delete(issue_labels::remove_label),
        )
        .route(
            &format!("{R}/issues/{{number}}/reactions"),
            get(issue_relations::list_reactions).post(issue_relations::add_reaction),
        )
        .route(
            &format!("{R}/issues/{{number}}/sub_issues"),
            get(issue_relations::sub_issues).post(issue_relations::add_sub_issue),
        )
        .route(
            &format!("{R}/issues/{{number}}/parent"),
            get(issue_relations::parent),
        )
        .route(&format!("{R}/pulls"), get(pulls::list).post(pulls::create))
        .route(
            &format!("{R}/pulls/{{number}}"),
            get(pulls::get).patch(pulls::update).post(pulls::update),
        )
        .route(
            &format!("{R}/pulls/{{number}}/merge"),
            get(pulls::is_merged).put(merge::merge),
        )
        .route(&format!("{R}/pulls/{{number}}/files"), get(compare::files))
        .route(
            &format!("{R}/pulls/{{number}}/reviews"),
            get(reviews::list).post(reviews::create),
        )
        .route(
            &format!("{R}/pulls/{{number}}/reviews/{{review_id}}"),
            get(reviews::get_one),
        )
        .route(
            &format!("{R}/pulls/{{number}}/reviews/{{id}}/comments"),
            get(reviews::review_comments),
        )
        .route(
            &format!("{R}/pulls/{{number}}/comments"),
            get(reviews::pull_comments),
        )
        .route(
            &format!("{R}/rules/branches/{{*branch}}"),
            get(reviews::branch_rules),
        )
        .route(
            &format!("{R}/pulls/{{number}}/commits"),
            get(compare::commits),
        )
        .route(&format!("{R}/compare/{{*basehead}}"), get(compare::compare))
        .route(
            &format!("{R}/commits/{{*ref_and_view}}"),
            get(checks::commit_views),
        )
        .route(&format!("{R}/check-runs"), post(checks::create))
        .route(
            &format!("{R}/check-runs/{{id}}"),
            get(checks::get).patch(checks::update).post(checks::update),
        )
        .route(
            &format!("{R}/collaborators/{{username}}/permission"),
            get(repos::permission),
        )
        .route(&format!("{R}/git/ref/{{*ref}}"), get(repos::git_ref))
        .route(&format!("{R}/branches/{{*branch}}"), get(repos::branch))
        .route(
            &format!("{R}/contents/{{*path}}"),
            get(repos::get_contents)
                .put(repos::put_contents)
                .delete(repos::delete_contents),
        )
        .route(
            &format!("{R}/labels"),
            get(repos::list_labels).post(repos::create_label),
        )
        .route("/app", get(apps::get_app))
        .route("/app/installations", get(apps::installations))
        .route(
            "/app/installations/{id}/access_tokens",
            post(apps::access_token),
        )
        .route(
            "/app/installations/{id}/suspended",
            put(crate::suspension::api_suspend).delete(crate::suspension::api_unsuspend),
        )
        .route("/installation/repositories", get(apps::installation_repos))
        .route("/app/hook/deliveries", get(apps::deliveries))
        .route("/app/hook/deliveries/{id}", get(apps::delivery))
        .route("/app/hook/deliveries/{id}/attempts", post(apps::redeliver))
        .route("/app/hook/config", get(apps::hook_config))
        .route(
            "/app-manifests/{code}/conversions",
            post(crate::app_manifests::convert),
        )
        .route("/rate_limit", get(apps::rate_limit))
        .route("/user", get(apps::user).patch(apps::update_user))
        .route_layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            middleware::api_layer,
        ));
    let control = Router::new()
        .route("/_fakehub/users", post(control::http_create_user))
        .route("/_fakehub/repos", post(control::http_create_repo))
        .route(
            "/_fakehub/repos/{owner}/{repo}/collaborators/{login}",
            put(control::http_set_collaborator),
        )
        .route(
            "/_fakehub/repos/{owner}/{repo}/merge-rules",
            put(control::http_set_merge_rules),
        )
        .route("/_fakehub/apps", post(control::http_create_app))
        .route(
            "/_fakehub/apps/{id}/installations",
            post(control::http_install),
        )
        .route(
            "/_fakehub/installations/{id}/repositories",
            put(control::http_set_installation_repos),
        )
        .route(
            "/_fakehub/installations/{id}/suspended",
            put(crate::suspension::http_suspend).delete(crate::suspension::http_unsuspend),
        )
        .route("/_fakehub/checks", post(control::http_add_check))
        .route("/_fakehub/statuses", post(control::http_add_status))
        .route("/_fakehub/faults", post(control::http_set_faults))
        .route(
            "/_fakehub/faults/profiles",
            post(control::http_set_fault_profiles),
        )
        .route(
            "/_fakehub/closed_windows",
            get(control::http_closed_windows),
        )
        .route("/_fakehub/holds/{gate}", get(control::http_held))
        .route(
            "/_fakehub/holds/{gate}/release",
            post(control::http_release),
        )
        .route("/_fakehub/requests", get(control::http_requests))
        .route("/_fakehub/rate_usage", get(control::http_rate_usage))
        .route("/_fakehub/state", get(control::http_state));
    // GitHub's web pages of the App manifest flow (not the REST API).
    let web = Router::new()
        .route(
            "/settings/apps/new",
            post(crate::app_manifests::new_for_user),
        )
        .route(
            "/organizations/{org}/settings/apps/new",
            post(crate::app_manifests::new_for_org),
        )
        .route(
            "/settings/apps/new/{id}/create",
            post(crate::app_manifests::create),
        );
    api.merge(control)
        .merge(web)
        .fallback(git_http::handle)
        .with_state(shared)
}
