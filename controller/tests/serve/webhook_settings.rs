//! `webhook.path`, `webhook.max_body_bytes` and `database.max_connections`
//! do what they say: loaded from the environment as an operator sets them,
//! they decide where `serve`'s router takes deliveries, how large a body it
//! reads, and how many connections the journal opens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use autoforge::config::{DatabaseSource, Environment, load};
use autoforge::database::OpenDatabase;
use autoforge::webhook::sign_body;
use autoforge_journal::testing::TestDatabase;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use tower::ServiceExt;

fn configured(vars: &[(&str, &str)]) -> autoforge::config::Config {
    let home = tempfile::tempdir().unwrap();
    let mut env = vec![("HOME", home.path().to_str().unwrap())];
    env.extend_from_slice(vars);
    load(None, None, &Environment::from_pairs(env.iter().copied())).unwrap()
}

fn post(path: &str, secret: &SecretString, body: Vec<u8>, guid: &str) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .header("X-GitHub-Event", "ping")
        .header("X-GitHub-Delivery", guid)
        .header("X-Hub-Signature-256", sign_body(secret, &body))
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_path_and_body_limit_are_the_routers() {
    let config = configured(&[
        ("AUTOFORGE_WEBHOOK_PATH", "/github/events"),
        ("AUTOFORGE_WEBHOOK_MAX_BODY_BYTES", "4096"),
    ]);
    let db = TestDatabase::fresh().await;
    let secret = SecretString::from("configured".to_owned());
    let router = autoforge::serve::webhook_listener_router(
        db.journal().clone(),
        config.settings.webhook.endpoint(secret.clone()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let send = |request| {
        let router = router.clone();
        async move { router.oneshot(request).await.unwrap() }
    };
    let ping = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#.to_vec();
    let guid = "9d1c7e7a-0000-4000-8000-000000000001";
    assert_eq!(
        send(post("/github/events", &secret, ping.clone(), guid))
            .await
            .status(),
        StatusCode::ACCEPTED
    );
    assert!(db.journal().get_delivery(guid).await.unwrap().is_some());
    let elsewhere = "9d1c7e7a-0000-4000-8000-000000000002";
    assert_eq!(
        send(post("/webhook", &secret, ping, elsewhere))
            .await
            .status(),
        StatusCode::NOT_FOUND,
        "the default path is not served once another is configured"
    );
    let mut big = br#"{"zen":""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 4096));
    big.extend_from_slice(br#""}"#);
    let large = "9d1c7e7a-0000-4000-8000-000000000003";
    let refused = send(post("/github/events", &secret, big, large)).await;
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let text = axum::body::to_bytes(refused.into_body(), 1024)
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text).contains("4096 bytes"),
        "{text:?}"
    );
    assert!(db.journal().get_delivery(large).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_pool_size_is_the_journals() {
    let config = configured(&[("AUTOFORGE_DATABASE_MAX_CONNECTIONS", "3")]);
    let db = TestDatabase::fresh().await;
    let source = DatabaseSource::External(SecretString::from(db.url().expose_secret().to_owned()));
    let database = OpenDatabase::open(&source, config.settings.database.max_connections)
        .await
        .unwrap();
    assert_eq!(database.journal.max_connections(), 3);
    database.shutdown().await;
}

#[test]
fn a_webhook_path_serve_already_answers_is_refused() {
    for path in ["/healthz", "/metrics", "/", "/runs/1", "/webhook/{id}"] {
        let home = tempfile::tempdir().unwrap();
        let env = Environment::from_pairs([
            ("HOME", home.path().to_str().unwrap()),
            ("AUTOFORGE_WEBHOOK_PATH", path),
        ]);
        let error = load(None, None, &env).unwrap_err().to_string();
        assert!(
            error.contains("webhook.path (from AUTOFORGE_WEBHOOK_PATH)"),
            "{path}: {error}"
        );
    }
}
