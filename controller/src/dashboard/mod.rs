//! The read-only dashboard (SPEC §15): `/` lists runs (repository, issue,
//! EPIC, phase, round, age, tokens, blocked reason) with filters and
//! pages; `/runs/{id}` shows one run per issue it worked on — review
//! rounds, launches, validations, GitHub writes — under what it does now
//! and an SVG timeline. Every page carries a warning banner while
//! `agents.sandbox` is off.
//!
//! Who may look (SPEC §17): the pages show runs, agent logs and refusal
//! reasons, so [`DashboardAccess`] serves them openly only when the admin
//! listener is on a loopback address. On any other address they need the
//! access token (`AUTOFORGE_DASHBOARD_TOKEN`), sent as a bearer token or
//! as the password of HTTP basic authentication (what a phone's browser
//! can prompt for); without a token they are not served at all. `serve`
//! puts `/metrics` behind the same guard.

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod page_tests;
mod pages;
mod run_page;
mod story;
mod svg;
pub(crate) mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use autoforge_journal::{Journal, RunId};
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

pub use pages::{Links, age};

use crate::sandbox::SandboxMode;

/// Who may see the dashboard (and whatever else [`DashboardAccess::guard`]
/// wraps, such as `/metrics`).
#[derive(Clone)]
pub enum DashboardAccess {
    /// Loopback listener: whoever can reach it is on this machine.
    Open,
    /// Every request must carry this token.
    Token(SecretString),
    /// A public listener without a token: the pages are not served.
    Disabled,
}

impl DashboardAccess {
    /// The rule of SPEC §17 for the admin listener bound to `listen`.
    pub fn for_listener(listen: &str, token: Option<SecretString>) -> DashboardAccess {
        match token {
            Some(token) => DashboardAccess::Token(token),
            None if is_loopback(listen) => DashboardAccess::Open,
            None => DashboardAccess::Disabled,
        }
    }

    /// One line for `config check` and start-up logs: who gets the pages.
    pub fn describe(&self) -> &'static str {
        match self {
            DashboardAccess::Open => "served without a token (loopback address)",
            DashboardAccess::Token(_) => "served to requests carrying AUTOFORGE_DASHBOARD_TOKEN",
            DashboardAccess::Disabled => {
                "not served: the address is not loopback and AUTOFORGE_DASHBOARD_TOKEN is not set"
            }
        }
    }

    /// `routes` under this rule: as they are, behind the token check, or
    /// replaced by nothing (every path then answers 404).
    pub fn guard(self, routes: Router) -> Router {
        match self {
            DashboardAccess::Open => routes,
            DashboardAccess::Token(token) => routes.layer(middleware::from_fn_with_state(
                Arc::new(token),
                require_token,
            )),
            DashboardAccess::Disabled => {
                tracing::warn!(
                    "the dashboard and /metrics are off: the admin listener is on a \
                     non-loopback address and AUTOFORGE_DASHBOARD_TOKEN is not set"
                );
                Router::new()
            }
        }
    }
}

/// What every page needs besides its own data.
#[derive(Debug, Clone)]
pub struct Site {
    pub links: Links,
    /// `Off` puts the unsandboxed-agents banner on every page.
    pub sandbox: SandboxMode,
}

/// `127.0.0.1:8080`, `[::1]:8080` or `localhost:8080`.
fn is_loopback(listen: &str) -> bool {
    match listen.parse::<SocketAddr>() {
        Ok(address) => address.ip().is_loopback(),
        Err(_) => listen
            .rsplit_once(':')
            .is_some_and(|(host, _)| host == "localhost"),
    }
}

#[derive(Clone)]
struct Dashboard {
    journal: Journal,
    site: Arc<Site>,
}

/// The dashboard's routes, unguarded: wrap them in
/// [`DashboardAccess::guard`] before serving them.
pub fn dashboard_router(journal: Journal, site: Site) -> Router {
    let state = Dashboard {
        journal,
        site: Arc::new(site),
    };
    Router::new()
        .route("/", get(index))
        .route("/runs/{id}", get(run))
        .with_state(state)
}

async fn index(
    State(dashboard): State<Dashboard>,
    Query(filter): Query<view::IndexFilter>,
) -> Response {
    match view::load_index(&dashboard.journal, filter).await {
        Ok(page) => Html(pages::index(&page, &dashboard.site, chrono::Utc::now()).into_string())
            .into_response(),
        Err(error) => unavailable(&error),
    }
}

async fn run(State(dashboard): State<Dashboard>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return (StatusCode::BAD_REQUEST, "a run id is a number").into_response();
    };
    match view::load_run(&dashboard.journal, RunId(id)).await {
        Ok(Some(detail)) => {
            Html(run_page::run(&detail, &dashboard.site, chrono::Utc::now()).into_string())
                .into_response()
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no such run").into_response(),
        Err(error) => unavailable(&error),
    }
}

fn unavailable(error: &autoforge_journal::JournalError) -> Response {
    tracing::warn!(%error, "dashboard: the journal could not be read");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the journal cannot be read right now",
    )
        .into_response()
}

async fn require_token(
    State(token): State<Arc<SecretString>>,
    request: Request,
    next: Next,
) -> Response {
    if presented_token(request.headers()).is_some_and(|given| same_secret(&given, &token)) {
        return next.run(request).await;
    }
    let mut refused = (
        StatusCode::UNAUTHORIZED,
        "this page needs the dashboard access token",
    )
        .into_response();
    refused.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"autoforge\", charset=\"UTF-8\""),
    );
    refused
}

/// The token of `Authorization: Bearer …` or the password of `Basic …`.
fn presented_token(headers: &HeaderMap) -> Option<SecretString> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(SecretString::from(rest.trim().to_owned()));
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_, password) = text.split_once(':')?;
        return Some(SecretString::from(password.to_owned()));
    }
    None
}

/// Compares digests, so the time taken says nothing about how much of the
/// token a guess got right.
fn same_secret(given: &SecretString, expected: &SecretString) -> bool {
    let digest = |s: &SecretString| Sha256::digest(s.expose_secret().as_bytes());
    digest(given) == digest(expected)
}

#[cfg(test)]
mod tests;
