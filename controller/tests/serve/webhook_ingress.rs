//! `POST /webhook` answers exactly as SPEC §14 says, in front of an inbox.
//!
//! The inbox here is an in-memory implementation of `DeliveryInbox` that
//! deduplicates like the journal's table; the Postgres-backed one is tested
//! in the journal crate.
#![allow(clippy::unwrap_used)]

use autoforge::webhook::{
    DeliveryInbox, MAX_WEBHOOK_BODY_BYTES, ReceivedDelivery, StoreOutcome, sign_body,
    webhook_router,
};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use secrecy::SecretString;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

const SECRET: &str = "webhook-secret";
const DELIVERY: &str = "0b989ba4-242f-11e5-81e1-c7b6966d2516";

#[derive(Clone, Default)]
struct MemoryInbox {
    rows: Arc<Mutex<HashMap<String, ReceivedDelivery>>>,
    down: Arc<AtomicBool>,
    /// The store never answers (a database the pool keeps dialling).
    hangs: Arc<AtomicBool>,
}

impl DeliveryInbox for MemoryInbox {
    async fn store(&self, delivery: ReceivedDelivery) -> anyhow::Result<StoreOutcome> {
        if self.down.load(Ordering::SeqCst) {
            anyhow::bail!("database unreachable");
        }
        if self.hangs.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let mut rows = self.rows.lock().unwrap();
        if rows.contains_key(&delivery.delivery_id) {
            return Ok(StoreOutcome::Duplicate);
        }
        rows.insert(delivery.delivery_id.clone(), delivery);
        Ok(StoreOutcome::Stored)
    }
}

impl MemoryInbox {
    fn len(&self) -> usize {
        self.rows.lock().unwrap().len()
    }
}

fn secret() -> SecretString {
    SecretString::from(SECRET.to_owned())
}

fn fixture_body(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/github/webhooks")
        .join(name);
    std::fs::read(path).unwrap()
}

fn request(headers: &[(&str, &str)], body: Vec<u8>) -> Request<Body> {
    let mut builder = Request::post("/webhook").header("content-type", "application/json");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::from(body)).unwrap()
}

fn signed(event: &str, delivery: &str, body: Vec<u8>) -> Request<Body> {
    let signature = sign_body(&secret(), &body);
    request(
        &[
            ("X-GitHub-Event", event),
            ("X-GitHub-Delivery", delivery),
            ("X-Hub-Signature-256", &signature),
        ],
        body,
    )
}

async fn send(inbox: &MemoryInbox, request: Request<Body>) -> StatusCode {
    webhook_router(inbox.clone(), secret())
        .oneshot(request)
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn signed_delivery_is_stored_with_its_raw_body_and_accepted() {
    let inbox = MemoryInbox::default();
    let body = fixture_body("issue_comment.created.3.json");
    let status = send(&inbox, signed("issue_comment", DELIVERY, body.clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let rows = inbox.rows.lock().unwrap();
    let stored = rows.get(DELIVERY).unwrap();
    assert_eq!(stored.event, "issue_comment");
    assert_eq!(stored.body, body);
    assert_eq!(stored.meta.action.as_deref(), Some("created"));
    assert_eq!(
        stored.meta.repository.as_deref(),
        Some("Codertocat/Hello-World")
    );
    assert_eq!(stored.meta.installation_id, Some(1));
}

#[tokio::test]
async fn a_repeated_delivery_is_answered_200_and_stored_once() {
    let inbox = MemoryInbox::default();
    let body = fixture_body("ping.event.0.json");
    assert_eq!(
        send(&inbox, signed("ping", DELIVERY, body.clone())).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        send(&inbox, signed("ping", DELIVERY, body)).await,
        StatusCode::OK
    );
    assert_eq!(inbox.len(), 1);
}

#[tokio::test]
async fn tampered_body_is_401_and_leaves_no_row() {
    let inbox = MemoryInbox::default();
    let body = fixture_body("issues.labeled.9.json");
    let signature = sign_body(&secret(), &body);
    let mut tampered = body;
    tampered.extend_from_slice(b" ");
    let status = send(
        &inbox,
        request(
            &[
                ("X-GitHub-Event", "issues"),
                ("X-GitHub-Delivery", DELIVERY),
                ("X-Hub-Signature-256", &signature),
            ],
            tampered,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn wrong_secret_missing_signature_and_sha1_only_are_401() {
    let inbox = MemoryInbox::default();
    let body = fixture_body("issues.labeled.9.json");
    let other = sign_body(&SecretString::from("other".to_owned()), &body);
    let cases: [Vec<(&str, &str)>; 3] = [
        vec![("X-Hub-Signature-256", other.as_str())],
        vec![],
        vec![(
            "X-Hub-Signature",
            "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6",
        )],
    ];
    for extra in cases {
        let mut headers = vec![
            ("X-GitHub-Event", "issues"),
            ("X-GitHub-Delivery", DELIVERY),
        ];
        headers.extend(extra.iter().copied());
        let status = send(&inbox, request(&headers, body.clone())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{extra:?}");
    }
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn missing_event_or_delivery_header_is_400() {
    let inbox = MemoryInbox::default();
    let body = fixture_body("ping.event.0.json");
    let signature = sign_body(&secret(), &body);
    for headers in [
        vec![
            ("X-GitHub-Delivery", DELIVERY),
            ("X-Hub-Signature-256", signature.as_str()),
        ],
        vec![
            ("X-GitHub-Event", "ping"),
            ("X-Hub-Signature-256", signature.as_str()),
        ],
    ] {
        assert_eq!(
            send(&inbox, request(&headers, body.clone())).await,
            StatusCode::BAD_REQUEST
        );
    }
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn signed_form_encoded_body_is_400_with_advice() {
    let inbox = MemoryInbox::default();
    let body = b"payload=%7B%22zen%22%3A%22x%22%7D".to_vec();
    let response = webhook_router(inbox.clone(), secret())
        .oneshot(signed("ping", DELIVERY, body))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&text).contains("application/json"));
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn body_over_the_limit_is_refused_before_anything_else() {
    let inbox = MemoryInbox::default();
    let body = vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1];
    let status = send(&inbox, signed("ping", DELIVERY, body)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn inbox_failure_is_not_acknowledged() {
    let inbox = MemoryInbox::default();
    inbox.down.store(true, Ordering::SeqCst);
    let status = send(
        &inbox,
        signed("ping", DELIVERY, fixture_body("ping.event.0.json")),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn an_inbox_that_does_not_answer_is_refused_with_503() {
    let inbox = MemoryInbox::default();
    inbox.hangs.store(true, Ordering::SeqCst);
    let answered = send(
        &inbox,
        signed("ping", DELIVERY, fixture_body("ping.event.0.json")),
    );
    // Without a bound of its own the route would wait for ever.
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), answered)
        .await
        .expect("the route answers although the inbox does not");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn signature_made_by_openssl_is_accepted_end_to_end() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/github/webhooks/pull_request.synchronize.22.json");
    let output = std::process::Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", SECRET, "-r"])
        .arg(&path)
        .output()
        .expect("openssl must be installed to run this test");
    assert!(output.status.success());
    let digest = String::from_utf8(output.stdout).unwrap();
    let header = format!("sha256={}", digest.split_whitespace().next().unwrap());
    let inbox = MemoryInbox::default();
    let status = send(
        &inbox,
        request(
            &[
                ("X-GitHub-Event", "pull_request"),
                ("X-GitHub-Delivery", DELIVERY),
                ("X-Hub-Signature-256", &header),
            ],
            std::fs::read(&path).unwrap(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(inbox.len(), 1);
}

/// Serves the route on a loopback port, for requests whose body is sent
/// late or never (which `oneshot` cannot express).
async fn serve_on_loopback(inbox: &MemoryInbox) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = webhook_router(inbox.clone(), secret());
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// Opens a connection and sends only the request head.
async fn send_head(address: std::net::SocketAddr, head: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// The status line of the answer, or `None` if none came within `wait`.
async fn status_line(
    stream: &mut tokio::net::TcpStream,
    wait: std::time::Duration,
) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0_u8; 512];
    let read = tokio::time::timeout(wait, stream.read(&mut buffer))
        .await
        .ok()?
        .unwrap();
    let text = String::from_utf8_lossy(&buffer[..read]).into_owned();
    text.lines().next().map(str::to_owned)
}

fn head(headers: &[(&str, &str)], content_length: usize) -> String {
    let mut head = format!(
        "POST /webhook HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {content_length}\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test]
async fn bad_headers_are_refused_before_the_body_is_read() {
    let inbox = MemoryInbox::default();
    let address = serve_on_loopback(&inbox).await;
    // The body is announced and never sent: an answer proves it was not awaited.
    let mut stream = send_head(address, &head(&[("X-GitHub-Delivery", DELIVERY)], 1000)).await;
    let status = status_line(&mut stream, PATIENCE).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 400 Bad Request"));
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_the_body_is_read() {
    let inbox = MemoryInbox::default();
    let address = serve_on_loopback(&inbox).await;
    let headers = [
        ("X-GitHub-Event", "ping"),
        ("X-GitHub-Delivery", DELIVERY),
        ("X-Hub-Signature-256", "sha256=00"),
    ];
    let mut stream = send_head(address, &head(&headers, MAX_WEBHOOK_BODY_BYTES + 1)).await;
    let status = status_line(&mut stream, PATIENCE).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    assert_eq!(inbox.len(), 0);
}

#[tokio::test]
async fn only_a_bounded_number_of_requests_read_a_body_at_once() {
    use tokio::io::AsyncWriteExt;
    let inbox = MemoryInbox::default();
    let address = serve_on_loopback(&inbox).await;
    let headers = [
        ("X-GitHub-Event", "ping"),
        ("X-GitHub-Delivery", DELIVERY),
        ("X-Hub-Signature-256", "sha256=00"),
    ];
    // Senders that announce a body and never send it hold every turn.
    let mut stalled = Vec::new();
    for _ in 0..autoforge::webhook::MAX_CONCURRENT_DELIVERIES {
        stalled.push(send_head(address, &head(&headers, 1000)).await);
    }
    let body = fixture_body("ping.event.0.json");
    let signature = sign_body(&secret(), &body);
    let honest_headers = [
        ("X-GitHub-Event", "ping"),
        ("X-GitHub-Delivery", "honest-1"),
        ("X-Hub-Signature-256", signature.as_str()),
    ];
    let mut honest = send_head(address, &head(&honest_headers, body.len())).await;
    honest.write_all(&body).await.unwrap();
    let waited = status_line(&mut honest, std::time::Duration::from_millis(500)).await;
    assert_eq!(waited, None, "the request past the bound was read at once");
    assert_eq!(inbox.len(), 0);
    // One stalled sender goes away: its turn passes to the waiting request.
    drop(stalled.pop());
    let status = status_line(&mut honest, PATIENCE).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 202 Accepted"));
    assert_eq!(inbox.len(), 1);
}
