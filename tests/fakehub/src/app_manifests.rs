//! The GitHub App manifest flow (registering an App from a manifest), as
//! GitHub runs it: a browser POSTs a `manifest` form field to
//! `/settings/apps/new` (or `/organizations/{org}/settings/apps/new`) with a
//! `state`; GitHub shows a confirmation page; its "Create GitHub App" button
//! creates the App and redirects to the manifest's `redirect_url` with a
//! temporary `code` and the same `state`; `POST /app-manifests/{code}/conversions`
//! trades the code (once, within an hour) for the App's id, private key and
//! webhook secret. The signed-in person on fakehub's web pages is the
//! oldest human user of the world.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use rand::Rng;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Shared;
use crate::control::{NewApp, create_app};
use crate::http::ApiError;
use crate::routes::ctx;
use crate::world::UserKind;

/// How long a conversion code stays valid (GitHub: one hour).
const CODE_LIFETIME: Duration = Duration::hours(1);

/// A manifest waiting for its confirmation, and codes waiting for their conversion.
#[derive(Debug, Default)]
pub struct Flows {
    pending: BTreeMap<String, Pending>,
    codes: BTreeMap<String, Issued>,
}

#[derive(Debug, Clone)]
struct Pending {
    manifest: Manifest,
    state: Option<String>,
    owner: String,
}

#[derive(Debug, Clone)]
struct Issued {
    app_id: u64,
    pem: String,
    webhook_secret: Option<String>,
    issued_at: DateTime<Utc>,
}

/// The fields of a manifest fakehub acts on (GitHub's names).
#[derive(Debug, Clone, Deserialize)]
struct Manifest {
    name: Option<String>,
    url: String,
    redirect_url: Option<String>,
    #[serde(default)]
    hook_attributes: Option<HookAttributes>,
    #[serde(default)]
    default_permissions: BTreeMap<String, String>,
    #[serde(default)]
    default_events: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct HookAttributes {
    url: String,
    #[serde(default = "active_by_default")]
    active: bool,
}

fn active_by_default() -> bool {
    true
}

#[derive(Debug, Deserialize)]
pub struct ManifestForm {
    manifest: String,
}

#[derive(Debug, Deserialize)]
pub struct StateQuery {
    state: Option<String>,
}

fn random_token(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    rand::rng().fill(raw.as_mut_slice());
    hex::encode(raw)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><h1>{title}</h1>{body}</body></html>",
        title = escape(title)
    );
    (status, Html(html)).into_response()
}

/// `POST /settings/apps/new`: the signed-in user's App.
pub async fn new_for_user(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<StateQuery>,
    Form(form): Form<ManifestForm>,
) -> Response {
    let owner = {
        let w = shared.lock();
        w.users
            .values()
            .filter(|u| u.kind == UserKind::User)
            .min_by_key(|u| u.id)
            .map(|u| u.login.clone())
    };
    match owner {
        Some(owner) => confirm(&shared, owner, query.state, &form.manifest),
        None => page(
            StatusCode::UNAUTHORIZED,
            "Sign in to GitHub",
            "<p>No user is signed in.</p>",
        ),
    }
}

/// `POST /organizations/{org}/settings/apps/new`: an organization's App.
pub async fn new_for_org(
    State(shared): State<Arc<Shared>>,
    Path(org): Path<String>,
    Query(query): Query<StateQuery>,
    Form(form): Form<ManifestForm>,
) -> Response {
    let known = shared
        .lock()
        .user_by_login(&org)
        .is_some_and(|u| u.kind == UserKind::Organization);
    if !known {
        return page(
            StatusCode::NOT_FOUND,
            "Not Found",
            "<p>No such organization.</p>",
        );
    }
    confirm(&shared, org, query.state, &form.manifest)
}

fn confirm(shared: &Arc<Shared>, owner: String, state: Option<String>, manifest: &str) -> Response {
    let manifest: Manifest = match serde_json::from_str(manifest) {
        Ok(manifest) => manifest,
        Err(e) => {
            let body = format!(
                "<p>The manifest is not valid: {}</p>",
                escape(&e.to_string())
            );
            return page(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid GitHub App manifest",
                &body,
            );
        }
    };
    if manifest.redirect_url.is_none() {
        let body = "<p>The manifest has no redirect_url.</p>";
        return page(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid GitHub App manifest",
            body,
        );
    }
    let id = random_token(8);
    let name = manifest.name.clone().unwrap_or_default();
    let permissions: String = manifest
        .default_permissions
        .iter()
        .map(|(k, v)| format!("<li>{}: {}</li>", escape(k), escape(v)))
        .collect();
    let events: String = manifest
        .default_events
        .iter()
        .map(|e| format!("<li>{}</li>", escape(e)))
        .collect();
    let body = format!(
        "<form method=\"post\" action=\"/settings/apps/new/{id}/create\">\
         <p>Owner: {owner}</p><p>Homepage: {homepage}</p>\
         <label>GitHub App name <input name=\"name\" value=\"{name}\"></label>\
         <h2>Permissions</h2><ul>{permissions}</ul><h2>Events</h2><ul>{events}</ul>\
         <button type=\"submit\">Create GitHub App</button></form>",
        owner = escape(&owner),
        homepage = escape(&manifest.url),
        name = escape(&name),
    );
    let pending = Pending {
        manifest,
        state,
        owner,
    };
    shared.manifest_flows().pending.insert(id, pending);
    page(StatusCode::OK, "Create GitHub App", &body)
}

#[derive(Debug, Deserialize)]
pub struct CreateForm {
    name: String,
}

fn slug_of(name: &str) -> String {
    let slug: String = name
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    slug.trim_matches('-').to_owned()
}

/// `POST /settings/apps/new/{id}/create`: the confirmation's button.
pub async fn create(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Form(form): Form<CreateForm>,
) -> Response {
    let Some(pending) = shared.manifest_flows().pending.remove(&id) else {
        return page(
            StatusCode::NOT_FOUND,
            "Not Found",
            "<p>This form has expired.</p>",
        );
    };
    let slug = slug_of(&form.name);
    if slug.is_empty() {
        return page(StatusCode::UNPROCESSABLE_ENTITY, "Name can't be blank", "");
    }
    let hook = pending
        .manifest
        .hook_attributes
        .as_ref()
        .filter(|h| h.active);
    let webhook_secret = hook.map(|_| random_token(20));
    let new = NewApp {
        slug: slug.clone(),
        owner: Some(pending.owner.clone()),
        webhook_url: hook.map(|h| h.url.clone()),
        webhook_secret: webhook_secret.clone(),
        permissions: pending.manifest.default_permissions.clone(),
        events: pending.manifest.default_events.clone(),
    };
    let created = match create_app(&shared, &new).await {
        Ok(created) => created,
        Err(_) => {
            let body = "<p>Name is already in use.</p>";
            return page(
                StatusCode::UNPROCESSABLE_ENTITY,
                "GitHub App not created",
                body,
            );
        }
    };
    if let Some(app) = shared.lock().apps.get_mut(&created.id) {
        app.name = form.name.trim().to_owned();
    }
    let code = random_token(16);
    let issued = Issued {
        app_id: created.id,
        pem: created.private_key_pem.expose_secret().to_owned(),
        webhook_secret,
        issued_at: Utc::now(),
    };
    shared.manifest_flows().codes.insert(code.clone(), issued);
    shared.mark_dirty();
    let mut target =
        match url::Url::parse(pending.manifest.redirect_url.as_deref().unwrap_or_default()) {
            Ok(url) => url,
            Err(_) => return page(StatusCode::UNPROCESSABLE_ENTITY, "Invalid redirect_url", ""),
        };
    target.query_pairs_mut().append_pair("code", &code);
    if let Some(state) = &pending.state {
        target.query_pairs_mut().append_pair("state", state);
    }
    (StatusCode::FOUND, [(header::LOCATION, target.to_string())]).into_response()
}

/// `POST /app-manifests/{code}/conversions`.
pub async fn convert(
    State(shared): State<Arc<Shared>>,
    Path(code): Path<String>,
) -> Result<Response, ApiError> {
    let issued = shared
        .manifest_flows()
        .codes
        .remove(&code)
        .filter(|issued| Utc::now() - issued.issued_at < CODE_LIFETIME)
        .ok_or_else(ApiError::not_found)?;
    let w = shared.lock();
    let app = w.apps.get(&issued.app_id).ok_or_else(ApiError::not_found)?;
    let mut body: Value = crate::render::render_app(ctx(&shared, &w), app);
    body["client_secret"] = json!(random_token(20));
    body["webhook_secret"] = json!(issued.webhook_secret);
    body["pem"] = json!(issued.pem);
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}
