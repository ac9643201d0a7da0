//! The HTTP surface of `autoforge serve`: `/webhook` over the journal inbox,
//! `/healthz` (the process is up) and `/readyz` (the database answers and
//! its schema is the one this build expects).

use autoforge_journal::Journal;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use secrecy::SecretString;

use super::inbox::JournalInbox;
use crate::webhook::webhook_router;

/// Every route `serve` answers.
pub fn router(journal: Journal, webhook_secret: SecretString) -> Router {
    let probes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(journal.clone());
    webhook_router(JournalInbox::new(journal), webhook_secret).merge(probes)
}

async fn ready(State(journal): State<Journal>) -> (StatusCode, &'static str) {
    match journal.migrations_current().await {
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
