//! Hostile webhook traffic against the real `autoforge serve`: malformed,
//! oversized (with and without `Content-Length`), forged and replayed
//! deliveries are refused or deduplicated, none crashes the process, a
//! refused one leaves no row, and 200 oversized unsigned posts at once
//! leave its peak memory bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use autoforge::webhook::{MAX_WEBHOOK_BODY_BYTES, sign_body};
use secrecy::SecretString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{WEBHOOK_SECRET, World};

fn secret() -> SecretString {
    SecretString::from(WEBHOOK_SECRET.to_owned())
}

/// The serve process's webhook listener as `host:port`.
fn address(world: &World) -> String {
    world
        .serve_url()
        .strip_prefix("http://")
        .expect("an http URL")
        .to_owned()
}

/// Posts `body` to `/webhook` with GitHub's headers; the answer's status.
async fn post(world: &World, delivery: &str, signature: Option<&str>, body: Vec<u8>) -> u16 {
    let mut request = world
        .http
        .post(format!("{}/webhook", world.serve_url()))
        .header("content-type", "application/json")
        .header("X-GitHub-Event", "issues")
        .header("X-GitHub-Delivery", delivery);
    if let Some(signature) = signature {
        request = request.header("X-Hub-Signature-256", signature);
    }
    request.body(body).send().await.unwrap().status().as_u16()
}

/// The status line answered to a raw request: `head`, then `body_bytes`
/// zero bytes sent as chunks of 64 KiB (`chunked`) or plainly, until the
/// server answers or closes.
async fn raw_post(address: &str, head: &str, body_bytes: usize, chunked: bool) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b'0'; 64 * 1024];
    let mut sent = 0;
    while sent < body_bytes {
        let written = if chunked {
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(&chunk);
            framed.extend_from_slice(b"\r\n");
            stream.write_all(&framed).await
        } else {
            stream.write_all(&chunk).await
        };
        // The server answered and closed the connection before the end.
        if written.is_err() {
            break;
        }
        sent += chunk.len();
    }
    if chunked && sent >= body_bytes {
        let _ = stream.write_all(b"0\r\n\r\n").await;
    }
    let mut answer = vec![0_u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(120), stream.read(&mut answer))
        .await
        .expect("an answer in time")
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&answer[..read]).into_owned();
    text.lines().next().unwrap_or("(closed)").to_owned()
}

fn head(delivery: &str, length: Option<usize>) -> String {
    let framing = match length {
        Some(length) => format!("content-length: {length}\r\n"),
        None => "transfer-encoding: chunked\r\n".to_owned(),
    };
    format!(
        "POST /webhook HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n{framing}\
         x-github-event: issues\r\nx-github-delivery: {delivery}\r\nx-hub-signature-256: sha256={}\r\n\r\n",
        "0".repeat(64)
    )
}

async fn stored(world: &World, delivery: &str) -> bool {
    world
        .db
        .journal()
        .get_delivery(delivery)
        .await
        .unwrap()
        .is_some()
}

/// Kilobytes of a `/proc/PID/status` line (`VmHWM`, `VmRSS`).
fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_deliveries_are_refused_or_deduplicated_and_a_refused_one_leaves_no_row() {
    let world = World::start().await;
    let body = br#"{"action":"opened","issue":{"number":1}}"#.to_vec();
    let signature = sign_body(&secret(), &body);
    let forged = sign_body(&SecretString::from("not-the-secret".to_owned()), &body);

    let malformed = b"{\"action\": \"opened\", \"issue\": ".to_vec();
    let malformed_signature = sign_body(&secret(), &malformed);
    assert_eq!(
        post(&world, "h-malformed", Some(&malformed_signature), malformed).await,
        400
    );
    assert_eq!(
        post(&world, "h-forged", Some(&forged), body.clone()).await,
        401
    );
    assert_eq!(post(&world, "h-unsigned", None, body.clone()).await, 401);
    let tampered = br#"{"action":"opened","issue":{"number":2}}"#.to_vec();
    assert_eq!(
        post(&world, "h-tampered", Some(&signature), tampered).await,
        401
    );

    let address = address(&world);
    let over = MAX_WEBHOOK_BODY_BYTES + 1;
    let declared = raw_post(&address, &head("h-declared", Some(over)), 0, false).await;
    assert_eq!(declared, "HTTP/1.1 413 Payload Too Large");
    let chunked = raw_post(&address, &head("h-chunked", None), over, true).await;
    assert_eq!(chunked, "HTTP/1.1 413 Payload Too Large");

    assert_eq!(
        post(&world, "h-replayed", Some(&signature), body.clone()).await,
        202
    );
    for _ in 0..3 {
        assert_eq!(
            post(&world, "h-replayed", Some(&signature), body.clone()).await,
            200
        );
    }

    for refused in [
        "h-malformed",
        "h-forged",
        "h-unsigned",
        "h-tampered",
        "h-declared",
        "h-chunked",
    ] {
        assert!(!stored(&world, refused).await, "{refused} left a row");
    }
    assert!(stored(&world, "h-replayed").await);
    let ready = world
        .http
        .get(format!("{}/readyz", world.serve_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "serve still serves");
}

/// 200 senders at once each stream more than 25 MiB without a
/// `Content-Length` and without a valid signature. Every one is refused
/// with 413, and the serve process's peak resident memory grows by less
/// than 448 MiB: at most 32 bodies are read at once and at most 4 of them
/// past 1 MiB. Measured: about +300 MiB; with 32 bodies of up to 25 MiB
/// each (no second bound) it was +785 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_oversized_unsigned_posts_at_once_leave_serves_peak_memory_bounded() {
    let world = World::start().await;
    let pid = world.serve_pid();
    let peak_before = proc_kib(pid, "VmHWM");
    let address = address(&world);
    let over = MAX_WEBHOOK_BODY_BYTES + 64 * 1024;
    let senders: Vec<_> = (0..200)
        .map(|i| {
            let address = address.clone();
            tokio::spawn(async move {
                raw_post(&address, &head(&format!("h-big-{i}"), None), over, true).await
            })
        })
        .collect();
    for sender in senders {
        let status = sender.await.unwrap();
        assert!(
            status == "HTTP/1.1 413 Payload Too Large" || status == "(closed)",
            "{status}"
        );
    }
    let peak_after = proc_kib(pid, "VmHWM");
    let rss_after = proc_kib(pid, "VmRSS");
    let growth_mib = peak_after.saturating_sub(peak_before) / 1024;
    eprintln!(
        "hostile oversized posts: peak RSS {} MiB before, {} MiB after (+{growth_mib} MiB), RSS now {} MiB",
        peak_before / 1024,
        peak_after / 1024,
        rss_after / 1024
    );
    assert!(growth_mib < 448, "peak memory grew by {growth_mib} MiB");
    let ready = world
        .http
        .get(format!("{}/readyz", world.serve_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "serve still serves");
}
