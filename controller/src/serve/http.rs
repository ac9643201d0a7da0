//! The HTTP surface of `autoforge serve`, split over two listeners so that
//! whatever publishes `/webhook` (a tunnel, a reverse proxy) publishes
//! nothing else:
//!
//! - the webhook listener: `/webhook` over the journal inbox, `/healthz`
//!   (the process is up) and `/readyz` (the database answers and its schema
//!   is the one this build expects);
//! - the admin listener: the dashboard and `/metrics` (Prometheus), both
//!   behind the dashboard's access rule, plus the same two probes, open, so
//!   a probe can be pointed at either listener.

use std::sync::Arc;

use autoforge_journal::Journal;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::Notify;

use crate::dashboard::{DashboardAccess, Site, dashboard_router};
use crate::intake::JournalInbox;
use crate::sandbox::SandboxMode;
use crate::webhook::{WebhookEndpoint, webhook_router};

/// What the webhook listener answers. `wakeup` is notified for each new
/// delivery.
pub fn webhook_listener_router(
    journal: Journal,
    webhook: impl Into<WebhookEndpoint>,
    wakeup: Arc<Notify>,
) -> Router {
    webhook_router(JournalInbox::new(&journal, wakeup), webhook).merge(probes(journal))
}

/// What the admin listener answers: the probes, and the dashboard and
/// `/metrics` as `access` allows. `/metrics` takes the dashboard's token
/// the same ways the pages do, so Prometheus scrapes it with
/// `authorization: { credentials: … }` (a bearer token) or `basic_auth`.
pub fn admin_listener_router(journal: Journal, site: Site, access: DashboardAccess) -> Router {
    let guarded = dashboard_router(journal.clone(), site)
        .merge(crate::metrics::metrics_router(journal.clone()));
    access.guard(guarded).merge(probes(journal))
}

fn probes(journal: Journal) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(journal)
}

async fn ready(
    State(journal): State<Journal>,
    sandbox: Option<axum::Extension<SandboxMode>>,
) -> (StatusCode, &'static str) {
    match journal.migrations_current().await {
        Ok(true) if sandbox.is_some_and(|s| s.0 == SandboxMode::Off) => (
            StatusCode::OK,
            "ready; agents.sandbox is off: agents run unsandboxed",
        ),
        Ok(true) => (StatusCode::OK, "ready"),
        Ok(false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "migrations are not current",
        ),
        Err(error) => {
            tracing::warn!(%error, "readiness: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dashboard::Links;
    use autoforge_journal::testing::TestDatabase;
    use axum::body::Body;
    use axum::http::{Method, Request, header};
    use secrecy::SecretString;
    use tower::ServiceExt;

    fn webhook_side(db: &TestDatabase) -> Router {
        let secret = SecretString::from("s".to_owned());
        webhook_listener_router(db.journal().clone(), secret, Arc::new(Notify::new()))
    }

    fn admin_side(db: &TestDatabase, access: DashboardAccess) -> Router {
        let site = Site {
            links: Links {
                html_base: "https://github.example".into(),
            },
            sandbox: SandboxMode::Bubblewrap,
        };
        admin_listener_router(db.journal().clone(), site, access)
    }

    async fn answer(
        app: &Router,
        method: Method,
        path: &str,
        auth: Option<&str>,
    ) -> (StatusCode, String) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        let response = app
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 22)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn status_of(app: &Router, path: &str) -> StatusCode {
        answer(app, Method::GET, path, None).await.0
    }

    #[tokio::test]
    async fn readyz_waits_for_current_migrations_while_healthz_is_always_ok() {
        let db = TestDatabase::fresh_unmigrated().await;
        let apps = [webhook_side(&db), admin_side(&db, DashboardAccess::Open)];
        for app in &apps {
            assert_eq!(status_of(app, "/healthz").await, StatusCode::OK);
            assert_eq!(
                status_of(app, "/readyz").await,
                StatusCode::SERVICE_UNAVAILABLE
            );
        }
        db.journal().migrate().await.unwrap();
        for app in &apps {
            assert_eq!(status_of(app, "/readyz").await, StatusCode::OK);
        }
    }

    #[tokio::test]
    async fn readyz_is_unavailable_once_the_database_is_gone() {
        let db = TestDatabase::fresh().await;
        let app = webhook_side(&db);
        assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
        db.journal().close().await;
        assert_eq!(
            status_of(&app, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);
    }

    #[tokio::test]
    async fn the_webhook_listener_serves_neither_dashboard_nor_metrics() {
        let db = TestDatabase::fresh().await;
        let app = webhook_side(&db);
        for path in ["/", "/runs/1", "/metrics"] {
            assert_eq!(status_of(&app, path).await, StatusCode::NOT_FOUND, "{path}");
        }
        // The webhook itself is there: an unsigned delivery is refused, not unknown.
        let (status, _) = answer(&app, Method::POST, "/webhook", None).await;
        assert_ne!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn the_admin_listener_serves_dashboard_and_metrics_but_no_webhook() {
        let db = TestDatabase::fresh().await;
        let app = admin_side(&db, DashboardAccess::Open);
        let (status, html) = answer(&app, Method::GET, "/", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains("No run yet"), "{html}");
        assert_eq!(status_of(&app, "/metrics").await, StatusCode::OK);
        let (status, _) = answer(&app, Method::POST, "/webhook", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn metrics_take_the_dashboard_token_and_stay_off_without_one_off_loopback() {
        let db = TestDatabase::fresh().await;
        let token = SecretString::from("admin-token".to_owned());
        let app = admin_side(&db, DashboardAccess::Token(token));
        for path in ["/metrics", "/"] {
            let (status, _) = answer(&app, Method::GET, path, None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
            let (status, _) = answer(&app, Method::GET, path, Some("Bearer nope")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
            let (status, _) = answer(&app, Method::GET, path, Some("Bearer admin-token")).await;
            assert_eq!(status, StatusCode::OK, "{path}");
        }
        // Probes stay open: they say nothing about runs.
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);

        let access = DashboardAccess::for_listener("0.0.0.0:8081", None);
        let app = admin_side(&db, access);
        for path in ["/metrics", "/", "/runs/1"] {
            assert_eq!(status_of(&app, path).await, StatusCode::NOT_FOUND, "{path}");
        }
        assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
    }

    #[tokio::test]
    async fn readyz_says_so_on_both_listeners_when_the_sandbox_is_off() {
        let db = TestDatabase::fresh().await;
        for app in [webhook_side(&db), admin_side(&db, DashboardAccess::Open)] {
            let app = app.layer(axum::Extension(SandboxMode::Off));
            let (status, body) = answer(&app, Method::GET, "/readyz", None).await;
            assert_eq!(status, StatusCode::OK);
            assert!(body.contains("agents.sandbox is off"), "{body}");
        }
    }
}
