//! GitHub App endpoints (`/app`, installations, installation tokens, hook
//! deliveries), `/installation/repositories`, `/rate_limit` and `/user`.

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::IntoResponse;
use chrono::Utc;
use serde_json::{Value, json};

use super::{S, Who, ctx};
use crate::auth::{Caller, mint_token};
use crate::http::{
    ApiError, ApiResult, JsonBody, Page, created, ok, page_of, paginated, query_value,
};
use crate::render::{
    render_app, render_delivery, render_installation, render_private_user, render_repo, ts,
};
use crate::world::{Grant, Installation, TokenScope, World};
use std::collections::BTreeMap;

/// Lifetime of an installation token, as on GitHub.
const TOKEN_LIFETIME_MINUTES: i64 = 60;

fn app_caller(c: &Caller) -> Result<u64, ApiError> {
    match c {
        Caller::App { app_id } => Ok(*app_id),
        Caller::Anonymous => Err(ApiError::requires_auth()),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
        )),
    }
}

pub async fn get_app(axum::extract::State(s): S, axum::Extension(c): Who) -> ApiResult {
    let app_id = app_caller(&c)?;
    let w = s.lock();
    ok(render_app(ctx(&s, &w), w.app(app_id)?))
}

pub async fn installations(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    uri: Uri,
) -> ApiResult {
    let app_id = app_caller(&c)?;
    let w = s.lock();
    let items = w
        .installations
        .values()
        .filter(|i| i.app_id == app_id)
        .map(|i| render_installation(ctx(&s, &w), i))
        .collect();
    paginated(items, &uri, &s.base)
}

pub async fn access_token(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path(id): Path<u64>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let app_id = app_caller(&c)?;
    let mut w = s.lock();
    let inst = w
        .installations
        .get(&id)
        .filter(|i| i.app_id == app_id)
        .ok_or_else(ApiError::not_found)?
        .clone();
    if inst.suspended_at.is_some() {
        return Err(ApiError::installation_suspended());
    }
    let app = w.app(app_id)?.clone();
    let scope = TokenScope {
        repository_ids: requested_repositories(&w, &inst, &body)?,
        permissions: requested_permissions(&app.permissions, &body)?,
    };
    let token = mint_token("ghs_");
    let expires_at = Utc::now() + chrono::Duration::minutes(TOKEN_LIFETIME_MINUTES);
    let repos: Vec<Value> = inst
        .repository_ids
        .iter()
        .filter(|r| scope.covers(**r))
        .filter_map(|r| w.repos.get(r))
        .map(|r| render_repo(ctx(&s, &w), r))
        .collect();
    let permissions = scope
        .permissions
        .clone()
        .unwrap_or_else(|| app.permissions.clone());
    w.tokens.insert(
        token.clone(),
        Grant::Installation {
            installation_id: id,
            expires_at,
            scope,
        },
    );
    s.mark_dirty();
    created(json!({
        "token": token,
        "expires_at": ts(expires_at),
        "permissions": permissions,
        "repository_selection": "selected",
        "repositories": repos,
    }))
}

/// The repositories a token is narrowed to (`repositories` by name and
/// `repository_ids`), each of which the installation must hold; `None` when
/// the request names none.
fn requested_repositories(
    w: &World,
    inst: &Installation,
    body: &Value,
) -> Result<Option<Vec<u64>>, ApiError> {
    let invalid = || ApiError::validation("Installation", "repositories", "invalid");
    let names = body.get("repositories").and_then(Value::as_array);
    let ids = body.get("repository_ids").and_then(Value::as_array);
    if names.is_none() && ids.is_none() {
        return Ok(None);
    }
    let mut chosen = Vec::new();
    for name in names.into_iter().flatten() {
        let name = name.as_str().ok_or_else(invalid)?;
        let id = inst
            .repository_ids
            .iter()
            .copied()
            .find(|r| {
                w.repos
                    .get(r)
                    .is_some_and(|r| r.name.eq_ignore_ascii_case(name))
            })
            .ok_or_else(invalid)?;
        chosen.push(id);
    }
    for id in ids.into_iter().flatten() {
        let id = id.as_u64().filter(|id| inst.repository_ids.contains(id));
        chosen.push(id.ok_or_else(invalid)?);
    }
    Ok(Some(chosen))
}

/// The permissions a token is narrowed to; each at most what the app holds,
/// as GitHub refuses anything more with 422.
fn requested_permissions(
    granted: &BTreeMap<String, String>,
    body: &Value,
) -> Result<Option<BTreeMap<String, String>>, ApiError> {
    let Some(requested) = body.get("permissions").and_then(Value::as_object) else {
        return Ok(None);
    };
    let rank = |level: &str| match level {
        "read" => Some(1),
        "write" => Some(2),
        "admin" => Some(3),
        _ => None,
    };
    let mut narrowed = BTreeMap::new();
    for (name, level) in requested {
        let level = level.as_str().unwrap_or_default();
        let held = granted.get(name).and_then(|held| rank(held));
        match (rank(level), held) {
            (Some(wanted), Some(held)) if wanted <= held => {
                narrowed.insert(name.clone(), level.to_owned());
            }
            _ => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "The permissions requested are not granted to this installation.",
                ));
            }
        }
    }
    Ok(Some(narrowed))
}

pub async fn installation_repos(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    uri: Uri,
) -> ApiResult {
    let Caller::Installation {
        installation_id,
        scope,
    } = c
    else {
        return Err(ApiError::forbidden(
            "This endpoint can only be accessed with an installation token",
        ));
    };
    let w = s.lock();
    let inst = w.installation(installation_id)?;
    let repos: Vec<Value> = inst
        .repository_ids
        .iter()
        .filter(|r| scope.covers(**r))
        .filter_map(|r| w.repos.get(r))
        .map(|r| render_repo(ctx(&s, &w), r))
        .collect();
    let (page, link) = page_of(&repos, &uri, &s.base);
    let mut resp = ok(
        json!({"total_count": repos.len(), "repository_selection": "selected", "repositories": page}),
    )?;
    if let Some(link) = link {
        resp.headers_mut().insert(axum::http::header::LINK, link);
    }
    Ok(resp)
}

fn app_deliveries(w: &World, app_id: u64) -> Vec<&crate::world::Delivery> {
    let mut list: Vec<_> = w.deliveries.iter().filter(|d| d.app_id == app_id).collect();
    list.reverse();
    list
}

/// `GET /app/hook/deliveries`, newest first, paged as GitHub pages it: by
/// an opaque `cursor` named in the `Link: rel="next"` URL (no page
/// numbers, no `last` link).
pub async fn deliveries(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    uri: Uri,
) -> ApiResult {
    let app_id = app_caller(&c)?;
    let w = s.lock();
    let listed = app_deliveries(&w, app_id);
    let (page, next) = cursor_page(&listed, &uri);
    let body: Vec<Value> = page.iter().map(|d| render_delivery(d)).collect();
    let mut resp = ok(json!(body))?;
    if let Some(cursor) = next {
        let per_page = Page::from_uri(&uri).per_page;
        let link = format!(
            "<{}{}?per_page={per_page}&cursor={cursor}>; rel=\"next\"",
            s.base,
            uri.path()
        );
        if let Ok(value) = axum::http::HeaderValue::from_str(&link) {
            resp.headers_mut().insert(axum::http::header::LINK, value);
        }
    }
    Ok(resp)
}

/// One page of `listed` (newest first) from the `cursor` query value on,
/// and the cursor of the next page if there is one. The cursor names the
/// id of the next page's first delivery, so deliveries arriving between
/// two page reads do not shift the pages.
fn cursor_page<'a>(
    listed: &[&'a crate::world::Delivery],
    uri: &Uri,
) -> (Vec<&'a crate::world::Delivery>, Option<String>) {
    let per_page = Page::from_uri(uri).per_page;
    let from = query_value(uri, "cursor")
        .and_then(|c| c.strip_prefix("v1_").and_then(|id| id.parse::<u64>().ok()));
    let rest: Vec<&crate::world::Delivery> = listed
        .iter()
        .copied()
        .filter(|d| from.is_none_or(|from| d.id <= from))
        .collect();
    let next = rest.get(per_page).map(|d| format!("v1_{}", d.id));
    (rest.into_iter().take(per_page).collect(), next)
}

pub async fn delivery(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path(id): Path<u64>,
) -> ApiResult {
    let app_id = app_caller(&c)?;
    let w = s.lock();
    let d = app_deliveries(&w, app_id)
        .into_iter()
        .find(|d| d.id == id)
        .ok_or_else(ApiError::not_found)?;
    let mut v = render_delivery(d);
    v["url"] = json!(null);
    v["request"] = json!({"headers": {"X-GitHub-Event": d.event, "X-GitHub-Delivery": d.guid}, "payload": d.payload});
    v["response"] = json!({"headers": {}, "payload": null});
    ok(v)
}

pub async fn redeliver(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    Path(id): Path<u64>,
) -> ApiResult {
    let app_id = app_caller(&c)?;
    let mut w = s.lock();
    if !app_deliveries(&w, app_id).iter().any(|d| d.id == id) {
        return Err(ApiError::not_found());
    }
    crate::webhooks::redeliver(&s, &mut w, id).ok_or_else(ApiError::not_found)?;
    Ok((StatusCode::ACCEPTED, axum::Json(json!({})).into_response()).into_response())
}

pub async fn rate_limit(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    headers: axum::http::HeaderMap,
) -> ApiResult {
    let key = crate::auth::credential(&headers).unwrap_or_else(|| "anonymous".into());
    let w = s.lock();
    let limit = if c == Caller::Anonymous {
        60
    } else {
        s.rate_limit
    };
    let (limit, used, reset) = w
        .rate
        .get(&key)
        .map(|r| (r.limit, r.used, r.reset))
        .unwrap_or((limit, 0, Utc::now().timestamp() + 3600));
    let core = json!({"limit": limit, "used": used, "remaining": limit.saturating_sub(used), "reset": reset});
    let search = json!({"limit": 30, "used": 0, "remaining": 30, "reset": reset});
    ok(json!({"resources": {"core": core, "search": search, "graphql": core}, "rate": core}))
}

pub async fn user(axum::extract::State(s): S, axum::Extension(c): Who) -> ApiResult {
    match c {
        Caller::User { user_id } => {
            let w = s.lock();
            ok(render_private_user(ctx(&s, &w), w.user(user_id)?))
        }
        Caller::Anonymous => Err(ApiError::requires_auth()),
        _ => Err(ApiError::forbidden(
            "Resource not accessible by integration",
        )),
    }
}

pub async fn update_user(
    axum::extract::State(s): S,
    axum::Extension(c): Who,
    JsonBody(_body): JsonBody,
) -> ApiResult {
    // Profile fields are not modelled; GitHub answers with the profile.
    user(axum::extract::State(s), axum::Extension(c)).await
}

/// `GET /app/hook/config`: the App's webhook configuration as GitHub shows
/// it, the secret masked when one is set.
pub async fn hook_config(axum::extract::State(s): S, axum::Extension(c): Who) -> ApiResult {
    let app_id = app_caller(&c)?;
    let w = s.lock();
    let app = w.app(app_id)?;
    let secret = app.webhook_secret.as_ref().map(|_| "********");
    ok(json!({
        "content_type": "json",
        "insecure_ssl": "0",
        "url": app.webhook_url.clone().unwrap_or_default(),
        "secret": secret,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn app_permissions() -> BTreeMap<String, String> {
        [("contents", "write"), ("issues", "read")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn a_token_may_be_narrowed_to_less_than_the_app_holds_but_never_more() {
        let granted = app_permissions();
        let narrowed =
            requested_permissions(&granted, &json!({"permissions": {"contents": "read"}})).unwrap();
        assert_eq!(
            narrowed,
            Some([("contents".to_owned(), "read".to_owned())].into())
        );
        assert_eq!(requested_permissions(&granted, &json!({})).unwrap(), None);
        for too_much in [
            json!({"permissions": {"issues": "write"}}),
            json!({"permissions": {"pull_requests": "read"}}),
            json!({"permissions": {"contents": "owner"}}),
        ] {
            let error = requested_permissions(&granted, &too_much).unwrap_err();
            assert_eq!(
                error.status(),
                StatusCode::UNPROCESSABLE_ENTITY,
                "{too_much}"
            );
        }
    }
}
