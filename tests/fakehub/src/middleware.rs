//! The layer every REST request passes through: authentication, injected
//! faults (a held request waits here, before its handler reads the world),
//! primary rate limits with `x-ratelimit-*` headers, ETags with
//! `If-None-Match` → 304 (free of rate limit, as on GitHub), the request
//! log, and the accounting of points each rate scope spent (every token of
//! an installation counts against the installation, as on GitHub).

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use sha2::{Digest, Sha256};

use crate::Shared;
use crate::auth::{Caller, authenticate, credential};
use crate::faults::FaultKind;
use crate::faults_windows::{Closed, WindowKind};
use crate::http::ApiError;
use crate::world::{RateWindow, RequestRecord};

/// Most request records kept for `GET /_fakehub/requests`.
const MAX_LOGGED_REQUESTS: usize = 100_000;

/// Largest response body the ETag layer buffers.
const MAX_BODY: usize = 64 * 1024 * 1024;

pub async fn api_layer(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    // GitHub finishes a request that reached it even when the client goes
    // away (a controller killed mid-request): the write lands and is
    // logged. Served on a task of its own, the request is not cancelled
    // with the client's connection, so the log never misses a write that
    // landed.
    let served = tokio::spawn(serve_request(shared, req, next));
    served.await.unwrap_or_else(|error| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("fakehub: the request's task failed: {error}"),
        )
            .into_response()
    })
}

async fn serve_request(shared: Arc<Shared>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let path = req.uri().path().to_string();
    let token = credential(req.headers());
    let caller = authenticate(&shared.lock(), token.as_deref(), Utc::now());
    let caller_kind = caller.as_ref().map(Caller::kind).unwrap_or("invalid");
    let rate_scope = caller
        .as_ref()
        .map(Caller::rate_scope)
        .unwrap_or_else(|_| "invalid".to_owned());
    // `cost` is what the request was charged: 0 unless it was served
    // without a conditional hit. `applied` is the handler's own status when
    // a fault answered the client otherwise after the handler ran.
    let log = |status: StatusCode, hit: bool, cost: u64, applied: Option<StatusCode>| {
        let mut w = shared.lock();
        // Keep the log bounded for long-running demos: drop the oldest tenth.
        if w.requests.len() >= MAX_LOGGED_REQUESTS {
            w.requests.drain(..MAX_LOGGED_REQUESTS / 10);
        }
        w.requests.push(RequestRecord {
            method: method.to_string(),
            route: route.clone(),
            path: path.clone(),
            status: status.as_u16(),
            token_kind: caller_kind.to_string(),
            conditional_hit: hit,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            rate_scope: rate_scope.clone(),
            cost,
            applied_status: applied.map(|s| s.as_u16()),
        });
    };
    let caller = match caller {
        Ok(c) => c,
        Err(e) => {
            // Rejected credentials are answered with the anonymous limits, as on GitHub.
            let mut resp = e.into_response();
            add_rate_headers(&shared, "anonymous", 60, &mut resp);
            log(resp.status(), false, 0, None);
            return resp;
        }
    };
    let now_ms = Utc::now().timestamp_millis();
    let entered = shared
        .faults()
        .windows
        .enter(&rate_scope, now_ms, method.as_str(), &path);
    if let Some(closed) = entered {
        let resp = window_refusal(closed, now_ms);
        log(resp.status(), false, 0, None);
        return resp;
    }
    let fired = shared.faults().for_request(method.as_str(), &route);
    let rate_key = token.clone().unwrap_or_else(|| "anonymous".to_string());
    let limit = if caller == Caller::Anonymous {
        60
    } else {
        shared.rate_limit
    };
    let mut ambiguous = None;
    for fault in &fired {
        match fault {
            FaultKind::Latency { ms } => {
                tokio::time::sleep(std::time::Duration::from_millis(*ms)).await
            }
            FaultKind::Hold { gate } => shared.gates.wait(gate).await,
            FaultKind::Status { status } => {
                let status =
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let resp =
                    ApiError::new(status, status.canonical_reason().unwrap_or("Server Error"))
                        .into_response();
                log(resp.status(), false, 0, None);
                return resp;
            }
            FaultKind::SecondaryRateLimit { retry_after }
            | FaultKind::TooManyRequests { retry_after } => {
                let status = if matches!(fault, FaultKind::TooManyRequests { .. }) {
                    StatusCode::TOO_MANY_REQUESTS
                } else {
                    StatusCode::FORBIDDEN
                };
                let until = now_ms.saturating_add_unsigned(retry_after.saturating_mul(1000));
                shared
                    .faults()
                    .windows
                    .close(&rate_scope, WindowKind::Secondary, now_ms, until);
                let resp = secondary_refusal(status, *retry_after);
                log(resp.status(), false, 0, None);
                return resp;
            }
            FaultKind::ExhaustPrimary => {
                let mut w = shared.lock();
                let window = window(&mut w.rate, &rate_key, limit);
                window.used = window.limit;
            }
            FaultKind::PrimaryExhausted { reset_seconds } => {
                let reset = {
                    let mut w = shared.lock();
                    let window = window(&mut w.rate, &rate_key, limit);
                    window.used = window.limit;
                    window.reset = Utc::now()
                        .timestamp()
                        .saturating_add_unsigned(*reset_seconds);
                    window.reset
                };
                shared.faults().windows.close(
                    &rate_scope,
                    WindowKind::Primary,
                    now_ms,
                    reset.saturating_mul(1000),
                );
            }
            FaultKind::AmbiguousWrite { drop } => {
                ambiguous = Some(if *drop {
                    Ambiguous::Drop
                } else {
                    Ambiguous::BadGateway
                })
            }
            FaultKind::AmbiguousHang { ms } => ambiguous = Some(Ambiguous::Hang(*ms)),
            _ => {}
        }
    }
    // A request held at a gate reaches the handler only now: an
    // installation suspended meanwhile refuses it, as GitHub refuses a
    // request that arrives after the suspension.
    let held = fired.iter().any(|f| matches!(f, FaultKind::Hold { .. }));
    // The world's lock is let go before the answer is logged (which takes it).
    let now_refused = held
        .then(|| authenticate(&shared.lock(), token.as_deref(), Utc::now()).err())
        .flatten();
    if let Some(e) = now_refused {
        let resp = e.into_response();
        log(resp.status(), false, 0, None);
        return resp;
    }
    let exhausted = {
        let mut w = shared.lock();
        let window = window(&mut w.rate, &rate_key, limit);
        window.used >= window.limit
    };
    if exhausted {
        let mut resp = ApiError::forbidden(
            "API rate limit exceeded. Check out the documentation for more details.",
        )
        .into_response();
        add_rate_headers(&shared, &rate_key, limit, &mut resp);
        log(resp.status(), false, 0, None);
        return resp;
    }
    let if_none_match = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    req.extensions_mut().insert(caller);
    let resp = next.run(req).await;
    let (mut parts, body) = resp.into_parts();
    let mut hit = false;
    let body = if method == Method::GET && parts.status == StatusCode::OK {
        let bytes = to_bytes(body, MAX_BODY).await.unwrap_or_default();
        let digest = Sha256::digest(&bytes);
        let etag = format!("\"{}\"", hex::encode(&digest[..16]));
        if let Ok(v) = HeaderValue::from_str(&etag) {
            parts.headers.insert(header::ETAG, v);
        }
        parts.headers.insert(
            header::VARY,
            HeaderValue::from_static("Accept, Authorization, Cookie, X-GitHub-OTP"),
        );
        if if_none_match.as_deref().is_some_and(|inm| {
            inm.split(',')
                .any(|t| t.trim().trim_start_matches("W/") == etag)
        }) {
            hit = true;
            parts.status = StatusCode::NOT_MODIFIED;
            parts.headers.remove(header::CONTENT_TYPE);
            Body::empty()
        } else {
            Body::from(bytes)
        }
    } else {
        body
    };
    let cost = u64::from(!hit);
    if !hit {
        let mut w = shared.lock();
        window(&mut w.rate, &rate_key, limit).used += 1;
        *w.points.entry(rate_scope.clone()).or_default() += 1;
    }
    let mut resp = Response::from_parts(parts, body);
    add_rate_headers(&shared, &rate_key, limit, &mut resp);
    if method != Method::GET {
        shared.mark_dirty();
    }
    match ambiguous {
        Some(Ambiguous::BadGateway) => {
            let applied = resp.status();
            let resp = ApiError::new(StatusCode::BAD_GATEWAY, "Bad Gateway").into_response();
            log(resp.status(), false, cost, Some(applied));
            resp
        }
        Some(dropped @ (Ambiguous::Drop | Ambiguous::Hang(_))) => {
            if let Ambiguous::Hang(ms) = dropped {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            log(StatusCode::BAD_GATEWAY, false, cost, Some(resp.status()));
            // A body that fails mid-stream makes hyper abort the connection.
            let stream = futures_error_stream();
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::from_stream(stream))
                .unwrap_or_default()
        }
        None => {
            log(resp.status(), hit, cost, None);
            resp
        }
    }
}

/// How a write that was applied is answered.
#[derive(Debug, Clone, Copy)]
enum Ambiguous {
    BadGateway,
    Drop,
    /// Answer nothing for this long, then drop the connection.
    Hang(u64),
}

/// GitHub's documentation of secondary limits, which its refusals link.
const SECONDARY_DOCS: &str = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits";

/// GitHub's answer when a secondary rate limit refuses a request.
fn secondary_refusal(status: StatusCode, retry_after: u64) -> Response {
    let body = serde_json::json!({
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
        "documentation_url": SECONDARY_DOCS,
        "status": status.as_u16().to_string(),
    });
    let mut resp = (status, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    resp
}

/// The answer to a request sent while its scope's window is closed: the
/// refusal that closed it again, with what is left of the wait.
fn window_refusal(closed: Closed, now_ms: i64) -> Response {
    let remaining_s = u64::try_from((closed.remaining_ms + 999) / 1000).unwrap_or(1);
    match closed.kind {
        WindowKind::Secondary => secondary_refusal(StatusCode::FORBIDDEN, remaining_s),
        WindowKind::Primary => {
            let mut resp = ApiError::forbidden(
                "API rate limit exceeded. Check out the documentation for more details.",
            )
            .into_response();
            let reset = (now_ms + closed.remaining_ms + 999) / 1000;
            let h = resp.headers_mut();
            h.insert("x-ratelimit-remaining", HeaderValue::from(0));
            h.insert("x-ratelimit-reset", HeaderValue::from(reset));
            h.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
            resp
        }
    }
}

fn futures_error_stream()
-> impl futures_util::Stream<Item = Result<axum::body::Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::once(async {
        Err(std::io::Error::other(
            "connection dropped by fault injection",
        ))
    })
}

fn window<'a>(
    rate: &'a mut std::collections::HashMap<String, RateWindow>,
    key: &str,
    limit: u64,
) -> &'a mut RateWindow {
    let now = Utc::now().timestamp();
    let w = rate.entry(key.to_string()).or_insert_with(|| RateWindow {
        limit,
        used: 0,
        reset: now + 3600,
    });
    if w.reset <= now {
        w.used = 0;
        w.reset = now + 3600;
    }
    w
}

fn add_rate_headers(shared: &Shared, key: &str, limit: u64, resp: &mut Response) {
    let (limit, used, reset) = {
        let mut w = shared.lock();
        let win = window(&mut w.rate, key, limit);
        (win.limit, win.used, win.reset)
    };
    let h = resp.headers_mut();
    h.insert("x-ratelimit-limit", HeaderValue::from(limit));
    h.insert(
        "x-ratelimit-remaining",
        HeaderValue::from(limit.saturating_sub(used)),
    );
    h.insert("x-ratelimit-used", HeaderValue::from(used));
    h.insert("x-ratelimit-reset", HeaderValue::from(reset));
    h.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
    h.insert(
        "x-github-api-version-selected",
        HeaderValue::from_static("2022-11-28"),
    );
    if let Ok(id) = HeaderValue::from_str(
        &uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .to_ascii_uppercase(),
    ) {
        h.insert("x-github-request-id", id);
    }
}
