//! The request flow shared by the three APIs: parse the body into a
//! conversation, decide, apply the script's fault, send the reply as a
//! stream or one JSON object, log the request and book the claimed usage.
//! Also the 404 for every other route.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::conversation::{Conversation, Wire};
use crate::script::FaultKind;
use crate::state::{Claim, Decision, Outcome, RequestRecord, Shared, Turn};
use crate::{anthropic, chat, responses};

/// How long a cut stream waits after its first half before breaking.
const CUT_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// An error answered in the vendor's envelope.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("modelserver: rate limited by the script")]
    RateLimited,
    #[error("Overloaded (injected by the modelserver script)")]
    Overloaded,
    #[error("modelserver: no loaded script's marker is in this conversation's user messages")]
    NoScript,
    #[error("modelserver: bad request: {0}")]
    BadRequest(String),
}

/// One SSE frame: an optional `event:` line, a `data:` line, a blank line.
pub(crate) fn sse_frame(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn parse(wire: Wire, body: &Value) -> Result<Conversation, String> {
    match wire {
        Wire::Anthropic => anthropic::parse(body),
        Wire::Responses => responses::parse(body),
        Wire::Chat => chat::parse(body),
    }
}

fn error_response(wire: Wire, e: &ApiError) -> Response {
    let (status, body) = match wire {
        Wire::Anthropic => anthropic::error(e),
        Wire::Responses | Wire::Chat => responses::error(e),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    if matches!(e, ApiError::RateLimited | ApiError::Overloaded) {
        // Short waits keep retrying tests fast; both SDK families read these.
        let headers = response.headers_mut();
        headers.insert("retry-after", HeaderValue::from_static("1"));
        headers.insert("retry-after-ms", HeaderValue::from_static("200"));
    }
    response
}

fn tool_name(wire: Wire, turn: &Turn) -> Option<&'static str> {
    match wire {
        Wire::Anthropic => anthropic::tool_call(turn).map(|(name, _)| name),
        Wire::Responses => responses::tool_name(turn),
        Wire::Chat => chat::tool_call(turn).map(|(name, _)| name),
    }
}

fn auth_kind(headers: &HeaderMap) -> Option<String> {
    if headers.contains_key("x-api-key") {
        return Some("x-api-key".to_owned());
    }
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let scheme = value.split_whitespace().next().unwrap_or("");
    Some(scheme.to_ascii_lowercase())
}

fn new_record(method: &Method, uri: &Uri, headers: &HeaderMap, outcome: Outcome) -> RequestRecord {
    RequestRecord {
        seq: 0,
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned()),
        wire: None,
        script: None,
        step: None,
        model: None,
        stream: None,
        offered_tools: Vec::new(),
        tool_results: 0,
        auth: auth_kind(headers),
        held: false,
        status: 0,
        outcome,
        body: None,
    }
}

/// Handles one API request end to end.
pub(crate) async fn answer(
    shared: Arc<Shared>,
    wire: Wire,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut record = new_record(&Method::POST, &uri, &headers, Outcome::NoScript);
    record.wire = Some(wire);
    let parsed = serde_json::from_slice::<Value>(&body)
        .map_err(|e| format!("body is not JSON: {e}"))
        .and_then(|value| parse(wire, &value).map(|conv| (value, conv)));
    let (value, conv) = match parsed {
        Ok(ok) => ok,
        Err(reason) => {
            record.outcome = Outcome::BadRequest {
                reason: reason.clone(),
            };
            return finish(
                &shared,
                record,
                error_response(wire, &ApiError::BadRequest(reason)),
            );
        }
    };
    record.body = Some(value);
    record.model = Some(conv.model.clone());
    record.stream = Some(conv.stream);
    record.offered_tools = conv.offered_tools.clone();
    record.tool_results = conv.tool_results.len();
    let Some(mut decision) = shared.decide(&conv) else {
        return finish(&shared, record, error_response(wire, &ApiError::NoScript));
    };
    record.script = Some(decision.script.clone());
    record.step = Some(decision.step);
    if let Some(mut release) = decision.hold.take() {
        // Logged at once, so a test sees the client is waiting; the reply
        // after the release is a second record marked `held`.
        let mut hung = record.clone();
        hung.outcome = Outcome::Fault {
            fault: FaultKind::Hang,
        };
        shared.record(hung);
        record.held = true;
        // A dropped sender cannot happen while the script is loaded.
        let _ = release.wait_for(|released| *released).await;
    }
    let error = match decision.fault {
        Some(FaultKind::RateLimited) => Some(ApiError::RateLimited),
        Some(FaultKind::Overloaded) => Some(ApiError::Overloaded),
        _ => None,
    };
    if let (Some(e), Some(fault)) = (error, decision.fault) {
        record.outcome = Outcome::Fault { fault };
        return finish(&shared, record, error_response(wire, &e));
    }
    let cut = decision.fault == Some(FaultKind::CutStream);
    record.outcome = outcome(wire, &decision);
    let claimed = if cut {
        cut_usage(wire, conv.stream, decision.usage)
    } else {
        Some(decision.usage)
    };
    if let Some(usage) = claimed {
        shared.claim(
            &decision.script,
            Claim {
                step: decision.step,
                usage,
                side: decision.side,
                cut,
            },
        );
    }
    let response = reply(wire, &decision, &conv, cut);
    finish(&shared, record, response)
}

/// The usage a cut reply still claims in the half that is sent. Only an
/// Anthropic stream carries any: its first event, `message_start`, holds
/// the input usage (the output count comes in `message_delta`, near the
/// end, which a cut never reaches). The OpenAI streams put usage in their
/// last events.
fn cut_usage(
    wire: Wire,
    stream: bool,
    usage: crate::script::Usage,
) -> Option<crate::script::Usage> {
    (wire == Wire::Anthropic && stream).then_some(crate::script::Usage {
        output_tokens: 0,
        ..usage
    })
}

/// What a reply (not an error) is logged as.
fn outcome(wire: Wire, d: &Decision) -> Outcome {
    if d.fault == Some(FaultKind::CutStream) {
        return Outcome::Fault {
            fault: FaultKind::CutStream,
        };
    }
    if d.side {
        return Outcome::Side;
    }
    match tool_name(wire, &d.turn) {
        Some(tool) => Outcome::ToolCall {
            tool: tool.to_owned(),
        },
        None => Outcome::Final,
    }
}

fn finish(shared: &Shared, mut record: RequestRecord, response: Response) -> Response {
    record.status = response.status().as_u16();
    tracing::debug!(path = %record.path, status = record.status, outcome = ?record.outcome, "request");
    shared.record(record);
    response
}

/// How the first frame carrying part of the reply's content begins: a cut
/// stream ends right after it, so the client always holds a started but
/// unfinished reply (half a tool call's arguments, an item in progress).
fn first_content_frame(wire: Wire) -> &'static str {
    match wire {
        Wire::Anthropic => "event: content_block_delta",
        Wire::Responses => "event: response.output_item.added",
        Wire::Chat => "data: {",
    }
}

/// The reply body: SSE frames or one JSON object. A cut stream sends whole
/// frames up to the first one with content (the same bytes on every run)
/// and then breaks the connection; a cut JSON reply sends half its bytes.
fn reply(wire: Wire, d: &Decision, conv: &Conversation, cut: bool) -> Response {
    let model = conv.model.as_str();
    let (pieces, content_type): (Vec<String>, &str) = if conv.stream {
        let frames = match wire {
            Wire::Anthropic => anthropic::frames(d, model),
            Wire::Responses => responses::frames(d, model),
            Wire::Chat => chat::frames(d, model),
        };
        (frames, "text/event-stream")
    } else {
        let object = match wire {
            Wire::Anthropic => anthropic::message(d, model),
            Wire::Responses => responses::response(d, model),
            Wire::Chat => chat::completion(d, model),
        };
        (vec![object.to_string()], "application/json")
    };
    let body = if cut {
        let half = if conv.stream {
            let marker = first_content_frame(wire);
            let last = pieces
                .iter()
                .position(|f| f.starts_with(marker))
                .unwrap_or(0);
            Bytes::from(pieces[..=last].concat().into_bytes())
        } else {
            let all = Bytes::from(pieces.concat().into_bytes());
            all.slice(..all.len() / 2)
        };
        // The pause lets the headers and the first half reach the client
        // before the connection breaks, as when a real stream dies midway.
        let tail = futures_util::stream::once(async {
            tokio::time::sleep(CUT_PAUSE).await;
            Err(std::io::Error::other(
                "stream cut by the modelserver script",
            ))
        });
        Body::from_stream(futures_util::stream::iter([Ok(half)]).chain(tail))
    } else {
        let chunks = pieces
            .into_iter()
            .map(|p| Ok::<_, std::io::Error>(Bytes::from(p)));
        Body::from_stream(futures_util::stream::iter(chunks))
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Any route other than the three APIs and the control API: a logged 404
/// saying what is served.
pub(crate) async fn no_route(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let record = new_record(&method, &uri, &headers, Outcome::NoRoute);
    let body = json!({"error": {
        "type": "not_found_error",
        "message": format!(
            "modelserver: no route for {method} {}; it serves POST /v1/messages, \
             POST /v1/responses and POST /v1/chat/completions",
            uri.path()
        ),
    }});
    finish(
        &shared,
        record,
        (StatusCode::NOT_FOUND, axum::Json(body)).into_response(),
    )
}
