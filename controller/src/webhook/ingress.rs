//! `POST /webhook` (SPEC §14; the path and the body limit are
//! `webhook.path` and `webhook.max_body_bytes`): check, store, answer.
//! Nothing else.
//!
//! Order matters: the headers are checked first (400) and a declared
//! `Content-Length` over the limit is refused (413) before a byte of the
//! body is read; only then is the body read, still bounded, while at most
//! [`MAX_CONCURRENT_DELIVERIES`] requests hold one, so unauthenticated
//! requests cannot make the server buffer more than that many bodies. Then
//! the HMAC over the raw bytes (401) — before any parsing, so an unsigned
//! request costs no JSON work and leaves no row.
//! Only then are the inbox columns read and the delivery stored; the answer
//! (202 new, 200 duplicate) is sent once the inbox says it is durable.
//! The inbox is a trait so that the journal plugs in without this module
//! knowing about Postgres. Each request, and why one was refused, is
//! counted for `/metrics` (see [`crate::metrics`]).

use super::headers::{DeliveryHeaders, DeliveryMeta};
use crate::metrics::{self, InvalidDelivery};
use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use secrecy::SecretString;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// GitHub caps payloads at 25 MB; anything larger is not from GitHub. The
/// default, and the largest `webhook.max_body_bytes` may be.
pub const MAX_WEBHOOK_BODY_BYTES: usize = 25 * 1024 * 1024;

/// The longest a delivery waits for the inbox before it is refused with
/// 503 (GitHub gives up on an answer after 10 s).
pub const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Where deliveries are posted unless `webhook.path` says otherwise.
pub const DEFAULT_WEBHOOK_PATH: &str = "/webhook";

/// The webhook endpoint: its path, the largest body it reads, and the
/// secret deliveries are signed with.
#[derive(Clone)]
pub struct WebhookEndpoint {
    path: String,
    max_body_bytes: usize,
    secret: SecretString,
}

impl WebhookEndpoint {
    /// At [`DEFAULT_WEBHOOK_PATH`] with the [`MAX_WEBHOOK_BODY_BYTES`] limit.
    pub fn new(secret: SecretString) -> WebhookEndpoint {
        WebhookEndpoint {
            path: DEFAULT_WEBHOOK_PATH.to_owned(),
            max_body_bytes: MAX_WEBHOOK_BODY_BYTES,
            secret,
        }
    }

    /// Served at `path` (checked by the configuration: a plain absolute
    /// path no other route uses).
    pub fn at(mut self, path: &str) -> WebhookEndpoint {
        path.clone_into(&mut self.path);
        self
    }

    /// Bodies over `max_body_bytes` are refused with 413.
    pub fn with_body_limit(mut self, max_body_bytes: usize) -> WebhookEndpoint {
        self.max_body_bytes = max_body_bytes;
        self
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }
}

impl From<SecretString> for WebhookEndpoint {
    fn from(secret: SecretString) -> WebhookEndpoint {
        WebhookEndpoint::new(secret)
    }
}

impl std::fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("path", &self.path)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

/// Requests that may read and check a body at once; the others wait for a
/// turn before their body is read. Bounds what unauthenticated senders can
/// make the server hold in memory to this many bodies.
pub const MAX_CONCURRENT_DELIVERIES: usize = 32;

/// A body grows past this only while it holds one of the
/// [`MAX_CONCURRENT_LARGE_DELIVERIES`] turns for large bodies: GitHub's
/// deliveries are nearly all far smaller, and 32 bodies of 25 MiB each
/// would be 800 MiB held for senders nobody has authenticated yet.
pub const SMALL_BODY_BYTES: usize = 1024 * 1024;

/// Requests that may hold a body larger than [`SMALL_BODY_BYTES`] at once.
pub const MAX_CONCURRENT_LARGE_DELIVERIES: usize = 4;

/// A verified delivery, ready for the inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedDelivery {
    pub delivery_id: String,
    pub event: String,
    pub meta: DeliveryMeta,
    /// The raw body, byte for byte as signed.
    pub body: Vec<u8>,
}

/// What the inbox did with a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOutcome {
    /// Stored and durable.
    Stored,
    /// This delivery id was stored before; nothing changed.
    Duplicate,
}

/// Durable storage for deliveries, deduplicated on the delivery id (the
/// journal's `insert_delivery`). `store` must return only once the row is
/// committed, because the caller acknowledges GitHub right after.
pub trait DeliveryInbox: Send + Sync + 'static {
    fn store(
        &self,
        delivery: ReceivedDelivery,
    ) -> impl Future<Output = anyhow::Result<StoreOutcome>> + Send;
}

struct IngressState<I> {
    inbox: I,
    secret: SecretString,
    max_body_bytes: usize,
    reading: Semaphore,
    /// Turns for bodies past [`SMALL_BODY_BYTES`].
    reading_large: Semaphore,
}

/// The webhook route at the endpoint's path, ready to be merged into the
/// server's router. A bare secret means the default path and limit.
pub fn webhook_router<I: DeliveryInbox>(inbox: I, endpoint: impl Into<WebhookEndpoint>) -> Router {
    let endpoint = endpoint.into();
    Router::new()
        .route(&endpoint.path, post(receive::<I>))
        .layer(DefaultBodyLimit::max(endpoint.max_body_bytes))
        .with_state(Arc::new(IngressState {
            inbox,
            secret: endpoint.secret,
            max_body_bytes: endpoint.max_body_bytes,
            reading: Semaphore::new(MAX_CONCURRENT_DELIVERIES),
            reading_large: Semaphore::new(MAX_CONCURRENT_LARGE_DELIVERIES),
        }))
}

async fn receive<I: DeliveryInbox>(
    State(state): State<Arc<IngressState<I>>>,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    // Only a label from the allow-list is derived from this header.
    let event_header = headers
        .get(super::headers::EVENT_HEADER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    metrics::delivery_received(event_header);
    let delivery_headers = match DeliveryHeaders::from_headers(&headers) {
        Ok(parsed) => parsed,
        Err(error) => {
            metrics::delivery_invalid(event_header, InvalidDelivery::BadHeaders);
            tracing::warn!(%error, "webhook refused: bad headers");
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
    };
    if declared_length(&headers).is_some_and(|length| length > state.max_body_bytes) {
        metrics::delivery_invalid(event_header, InvalidDelivery::TooLarge);
        tracing::warn!("webhook refused: declared body over the limit");
        return too_large(state.max_body_bytes);
    }
    // A closed semaphore cannot happen (it is never closed); waiting here
    // holds no body, only the connection.
    let Ok(_reading) = state.reading.acquire().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    };
    // Read only now, within the body limit.
    let body = match read_body(&state, request.into_body()).await {
        Ok(body) => body,
        Err(refusal) => {
            metrics::delivery_invalid(event_header, refusal.reason);
            tracing::warn!(error = %refusal.message, "webhook refused: body");
            return refusal.response;
        }
    };
    let span = tracing::info_span!(
        "delivery",
        delivery_id = %delivery_headers.delivery_id,
        event = %delivery_headers.event
    );
    let _entered = span.enter();
    if let Err(error) = delivery_headers.verify(&state.secret, &body) {
        metrics::delivery_invalid(event_header, InvalidDelivery::BadSignature);
        tracing::warn!(%error, "webhook refused: signature");
        return (StatusCode::UNAUTHORIZED, error.to_string()).into_response();
    }
    let meta = match DeliveryMeta::from_body(&body) {
        Ok(meta) => meta,
        Err(error) => {
            // Most likely the hook is configured for form encoding.
            metrics::delivery_invalid(event_header, InvalidDelivery::NotJson);
            tracing::warn!(%error, "webhook refused: body is not JSON");
            let message = format!("{error}; set the webhook content type to application/json");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    drop(_entered);
    let delivery = ReceivedDelivery {
        delivery_id: delivery_headers.delivery_id,
        event: delivery_headers.event,
        meta,
        body,
    };
    // Bounded well inside GitHub's 10 s: a database that does not answer
    // (a TCP connect the pool retries while the server restarts) must
    // give GitHub a 503 it records as failed, not a timeout. A row that
    // lands after the bound is only answered 503; its redelivery is then
    // a duplicate.
    let stored = tokio::time::timeout(STORE_TIMEOUT, state.inbox.store(delivery))
        .await
        .unwrap_or_else(|_elapsed| {
            Err(anyhow::anyhow!(
                "the inbox did not answer within {STORE_TIMEOUT:?}"
            ))
        });
    match stored {
        Ok(StoreOutcome::Stored) => (StatusCode::ACCEPTED, "stored").into_response(),
        Ok(StoreOutcome::Duplicate) => {
            metrics::delivery_duplicate(event_header);
            (StatusCode::OK, "duplicate").into_response()
        }
        Err(error) => {
            // Not acknowledged: GitHub marks the delivery failed and the
            // poller redelivers it once the inbox is back.
            tracing::error!(error = format!("{error:#}"), "webhook not stored");
            (StatusCode::SERVICE_UNAVAILABLE, "inbox unavailable").into_response()
        }
    }
}

/// Why a body was not read whole.
struct BodyRefusal {
    reason: InvalidDelivery,
    message: String,
    response: Response,
}

/// Reads the body up to the limit. Past [`SMALL_BODY_BYTES`] it waits for
/// a turn for large bodies first, so the memory unauthenticated senders
/// can make us hold is bounded by the two semaphores, not by how many
/// connect.
async fn read_body<I>(state: &IngressState<I>, mut body: Body) -> Result<Vec<u8>, BodyRefusal> {
    let mut buffer: Vec<u8> = Vec::new();
    let mut large_turn = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|error| BodyRefusal {
            reason: InvalidDelivery::UnreadableBody,
            message: error.to_string(),
            response: (StatusCode::BAD_REQUEST, "the body could not be read").into_response(),
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let length = buffer.len() + data.len();
        if length > state.max_body_bytes {
            return Err(BodyRefusal {
                reason: InvalidDelivery::TooLarge,
                message: "body over the limit".to_owned(),
                response: too_large(state.max_body_bytes),
            });
        }
        if length > SMALL_BODY_BYTES && large_turn.is_none() {
            // Never closed, like `reading`.
            let Ok(turn) = state.reading_large.acquire().await else {
                return Err(BodyRefusal {
                    reason: InvalidDelivery::UnreadableBody,
                    message: "shutting down".to_owned(),
                    response: (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response(),
                });
            };
            large_turn = Some(turn);
            // One allocation of the largest body allowed instead of
            // doubling up to 32 MiB: the bound stays 25 MiB per turn.
            buffer.reserve_exact(state.max_body_bytes.saturating_sub(buffer.len()));
        }
        buffer.extend_from_slice(&data);
    }
    Ok(buffer)
}

/// The `Content-Length` the sender declared, if it declared a readable one.
fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(axum::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn too_large(limit: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is over the limit of {limit} bytes"),
    )
        .into_response()
}
