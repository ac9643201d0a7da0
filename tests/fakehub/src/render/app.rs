//! GitHub Apps, installations, check runs and webhook deliveries.

use serde_json::{Value, json};

use super::{Ctx, node_id, render_user, ts};
use crate::world::{App, CheckRun, Delivery, Installation};

pub fn render_app(ctx: Ctx<'_>, app: &App) -> Value {
    let owner = ctx
        .world
        .users
        .get(&app.owner_id)
        .map(|u| render_user(ctx, u))
        .unwrap_or(Value::Null);
    json!({
        "id": app.id,
        "slug": app.slug,
        "client_id": format!("Iv1.{:016x}", app.id),
        "node_id": node_id("A", app.id),
        "owner": owner,
        "name": app.name,
        "description": null,
        "external_url": format!("{}/apps/{}", ctx.base, app.slug),
        "html_url": format!("{}/apps/{}", ctx.base, app.slug),
        "created_at": ts(app.created_at),
        "updated_at": ts(app.created_at),
        "permissions": app.permissions,
        "events": app.events,
        "installations_count": ctx.world.installations.values().filter(|i| i.app_id == app.id).count(),
    })
}

pub fn render_installation(ctx: Ctx<'_>, inst: &Installation) -> Value {
    let app = ctx.world.apps.get(&inst.app_id);
    let account = ctx.world.users.get(&inst.account_id);
    // GitHub documents `account` as both a simple user and an enterprise
    // (allOf), so the enterprise's required fields are present too.
    let account_json = account.map(|u| {
        let mut v = render_user(ctx, u);
        v["name"] = json!(u.login);
        v["slug"] = json!(u.login.to_ascii_lowercase());
        v["created_at"] = json!(ts(u.created_at));
        v["updated_at"] = json!(ts(u.created_at));
        v
    });
    json!({
        "id": inst.id,
        "account": account_json,
        "repository_selection": "selected",
        "access_tokens_url": format!("{}/app/installations/{}/access_tokens", ctx.base, inst.id),
        "repositories_url": format!("{}/installation/repositories", ctx.base),
        "html_url": format!("{}/settings/installations/{}", ctx.base, inst.id),
        "app_id": inst.app_id,
        "app_slug": app.map(|a| a.slug.clone()).unwrap_or_default(),
        "target_id": inst.account_id,
        "target_type": account.map(|u| u.kind.as_str()).unwrap_or("User"),
        "permissions": app.map(|a| json!(a.permissions)).unwrap_or_else(|| json!({})),
        "events": app.map(|a| json!(a.events)).unwrap_or_else(|| json!([])),
        "created_at": ts(inst.created_at),
        "updated_at": ts(inst.created_at),
        "single_file_name": null,
        "has_multiple_single_files": false,
        "single_file_paths": [],
        "suspended_by": inst.suspended_by.and_then(|id| ctx.world.users.get(&id)).map(|u| render_user(ctx, u)),
        "suspended_at": inst.suspended_at.map(ts),
    })
}

/// The installation object of `installation*` webhooks, where GitHub sends
/// the timestamps as Unix seconds.
pub fn render_installation_hook(ctx: Ctx<'_>, inst: &Installation) -> Value {
    let mut v = render_installation(ctx, inst);
    v["created_at"] = json!(inst.created_at.timestamp());
    v["updated_at"] = json!(inst.created_at.timestamp());
    v
}

pub fn render_check_run(ctx: Ctx<'_>, api: &str, check: &CheckRun) -> Value {
    let app = check
        .app_id
        .and_then(|id| ctx.world.apps.get(&id))
        .map(|a| super::render_app(ctx, a));
    json!({
        "id": check.id,
        "head_sha": check.head_sha,
        "node_id": node_id("CR", check.id),
        "external_id": check.external_id,
        "url": format!("{api}/check-runs/{}", check.id),
        "html_url": format!("{}/runs/{}", api.replace("/repos/", "/"), check.id),
        "details_url": check.details_url,
        "status": check.status,
        "conclusion": check.conclusion,
        "started_at": check.started_at.map(ts),
        "completed_at": check.completed_at.map(ts),
        "output": {
            "title": check.output_title,
            "summary": check.output_summary,
            "text": check.output_text,
            "annotations_count": 0,
            "annotations_url": format!("{api}/check-runs/{}/annotations", check.id),
        },
        "name": check.name,
        "check_suite": { "id": check.check_suite_id },
        "app": app,
        "pull_requests": check_pull_requests(ctx, api, check.repo_id, &check.head_sha),
    })
}

/// The open pull requests of the repository whose head is `sha`, in the
/// minimal shape GitHub puts into check runs and suites.
pub fn check_pull_requests(ctx: Ctx<'_>, api: &str, repo_id: u64, sha: &str) -> Value {
    let Ok(repo) = ctx.world.repo(repo_id) else {
        return json!([]);
    };
    let repo_ref = json!({"id": repo.id, "url": api, "name": repo.name});
    let pulls: Vec<Value> = repo
        .issues
        .values()
        .filter(|issue| issue.state_open)
        .filter_map(|issue| {
            let pull = issue.pull.as_ref().filter(|p| p.head_sha == sha)?;
            Some(json!({
                "id": issue.id,
                "number": issue.number,
                "url": format!("{api}/pulls/{}", issue.number),
                "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": repo_ref},
                "base": {"ref": pull.base_ref, "sha": pull.stats.base_sha, "repo": repo_ref},
            }))
        })
        .collect();
    Value::Array(pulls)
}

pub fn render_delivery(delivery: &Delivery) -> Value {
    json!({
        "id": delivery.id,
        "guid": delivery.guid,
        "delivered_at": ts(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": delivery.duration_secs,
        "status": delivery.status,
        "status_code": delivery.status_code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": delivery.installation_id,
        "repository_id": delivery.repository_id,
        "throttled_at": null,
    })
}
