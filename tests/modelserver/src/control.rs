//! The router: the three model APIs, the control API under `/_modelserver/`
//! (load a script, read the request log and the claimed usage, release a
//! hold) for tests that run the server as a separate process, and the 404
//! fallback.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::conversation::Wire;
use crate::script::Script;
use crate::state::Shared;
use crate::wire;

/// Request bodies larger than this are refused; Claude Code's first request
/// (system prompt and tool schemas) is well under it.
const MAX_BODY: usize = 32 * 1024 * 1024;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/responses", post(responses))
        .route("/v1/chat/completions", post(chat))
        .route("/_modelserver/scripts", post(load))
        .route("/_modelserver/requests", get(requests))
        .route("/_modelserver/usage", get(usage))
        .route("/_modelserver/release/{name}", post(release))
        .fallback(wire::no_route)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

async fn messages(State(s): State<Arc<Shared>>, uri: Uri, h: HeaderMap, b: Bytes) -> Response {
    wire::answer(s, Wire::Anthropic, uri, h, b).await
}

async fn responses(State(s): State<Arc<Shared>>, uri: Uri, h: HeaderMap, b: Bytes) -> Response {
    wire::answer(s, Wire::Responses, uri, h, b).await
}

async fn chat(State(s): State<Arc<Shared>>, uri: Uri, h: HeaderMap, b: Bytes) -> Response {
    wire::answer(s, Wire::Chat, uri, h, b).await
}

async fn load(State(shared): State<Arc<Shared>>, Json(script): Json<Script>) -> Response {
    match shared.load(script) {
        Ok(()) => StatusCode::CREATED.into_response(),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": e.to_string()})),
        )
            .into_response(),
    }
}

async fn requests(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.requests()).into_response()
}

async fn usage(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.claims()).into_response()
}

async fn release(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    if shared.release(&name) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no script named `{name}`")})),
        )
            .into_response()
    }
}
