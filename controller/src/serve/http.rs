//! The HTTP surface of `autoforge serve`: `/webhook` over the journal inbox,
//! `/healthz` (the process is up), `/readyz` (the database answers and
//! its schema is the one this build expects) and `/metrics` (Prometheus).

use std::sync::Arc;

use autoforge_journal::Journal;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::Notify;

use crate::intake::JournalInbox;
use crate::sandbox::SandboxMode;
use crate::webhook::{WebhookEndpoint, webhook_router};

/// Every route `serve` answers. `wakeup` is notified for each new delivery.
pub fn router(
    journal: Journal,
    webhook: impl Into<WebhookEndpoint>,
    wakeup: Arc<Notify>,
) -> Router {
    let probes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(journal.clone());
    webhook_router(JournalInbox::new(journal, wakeup), webhook)
        .merge(probes)
        .merge(crate::metrics::metrics_router())
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
    use autoforge_journal::testing::TestDatabase;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    fn test_router(db: &TestDatabase) -> Router {
        let secret = secrecy::SecretString::from("s".to_owned());
        router(db.journal().clone(), secret, Arc::new(Notify::new()))
    }

    async fn status_of(app: &Router, path: &str) -> StatusCode {
        app.clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    }

    #[tokio::test]
    async fn readyz_waits_for_current_migrations_while_healthz_is_always_ok() {
        let db = TestDatabase::fresh_unmigrated().await;
        let app = test_router(&db);
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);
        assert_eq!(
            status_of(&app, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        db.journal().migrate().await.unwrap();
        assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
    }

    #[tokio::test]
    async fn readyz_is_unavailable_once_the_database_is_gone() {
        let db = TestDatabase::fresh().await;
        let app = test_router(&db);
        assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
        db.journal().close().await;
        assert_eq!(
            status_of(&app, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status_of(&app, "/healthz").await, StatusCode::OK);
    }
}
