//! `/metrics` on the real routes of serve's admin listener (deliveries sent
//! to its webhook listener's routes): it renders valid text exposition,
//! webhook deliveries move the right counters, and GitHub reads against
//! fakehub move the request counter and the rate-limit gauges.
//!
//! The recorder is process-wide and these tests run in parallel in one
//! binary, so every assertion is on the change of one series, and each test
//! uses label values (events, installations) no other test here touches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::exposition;

use std::sync::Arc;

use autoforge::dashboard::{DashboardAccess, Links, Site};
use autoforge::github::{GitHubAuth, GitHubClient, RateScope};
use autoforge::sandbox::SandboxMode;
use autoforge::serve::{admin_listener_router, webhook_listener_router};
use autoforge::webhook::{MAX_WEBHOOK_BODY_BYTES, sign_body};
use autoforge_journal::testing::TestDatabase;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use tokio::sync::Notify;
use tower::ServiceExt;

use exposition::{Sample, parse_exposition, value_of};

const SECRET: &str = "metrics-test-secret";

/// The routes of serve's two listeners: deliveries go to one, scrapes to
/// the other, as in production.
struct Listeners {
    webhook: Router,
    admin: Router,
}

async fn serve_router(db: &TestDatabase) -> Listeners {
    let site = Site {
        links: Links {
            html_base: "https://github.example".into(),
        },
        sandbox: SandboxMode::Bubblewrap,
    };
    Listeners {
        webhook: webhook_listener_router(
            db.journal().clone(),
            SecretString::from(SECRET.to_owned()),
            Arc::new(Notify::new()),
        ),
        admin: admin_listener_router(db.journal().clone(), site, DashboardAccess::Open),
    }
}

/// Scrapes `/metrics` on the admin listener and checks the whole text parses.
async fn scrape(app: &Listeners) -> Vec<Sample> {
    let response = app
        .admin
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()[header::CONTENT_TYPE].to_str().unwrap();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    parse_exposition(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

async fn post_webhook(app: &Listeners, headers: &[(&str, &str)], body: Vec<u8>) -> StatusCode {
    let mut builder = Request::post("/webhook").header("content-type", "application/json");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    app.webhook
        .clone()
        .oneshot(builder.body(Body::from(body)).unwrap())
        .await
        .unwrap()
        .status()
}

async fn post_signed(app: &Listeners, event: &str, delivery: &str, body: Vec<u8>) -> StatusCode {
    let signature = sign_body(&SecretString::from(SECRET.to_owned()), &body);
    post_webhook(
        app,
        &[
            ("X-GitHub-Event", event),
            ("X-GitHub-Delivery", delivery),
            ("X-Hub-Signature-256", &signature),
        ],
        body,
    )
    .await
}

fn payload() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": "created",
        "installation": { "id": 7 },
        "repository": { "full_name": "octo/widgets" }
    }))
    .unwrap()
}

const RECEIVED: &str = "autoforge_webhook_deliveries_received_total";
const DUPLICATE: &str = "autoforge_webhook_deliveries_duplicate_total";
const INVALID: &str = "autoforge_webhook_deliveries_invalid_total";

#[tokio::test]
async fn metrics_renders_valid_exposition_with_the_described_families() {
    let db = TestDatabase::fresh().await;
    let app = serve_router(&db).await;
    // One recording so that at least one family has a sample and its HELP.
    assert_eq!(
        post_signed(&app, "ping", "metrics-render-1", payload()).await,
        StatusCode::ACCEPTED
    );
    let response = app
        .admin
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains("# TYPE autoforge_webhook_deliveries_received_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# HELP autoforge_webhook_deliveries_received_total "),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    parse_exposition(&text).unwrap();
}

#[tokio::test]
async fn a_signed_delivery_and_its_duplicate_move_received_and_duplicate() {
    let db = TestDatabase::fresh().await;
    let app = serve_router(&db).await;
    // `issue_comment` belongs to this test alone in this binary.
    let labels = [("event", "issue_comment")];
    let before = scrape(&app).await;

    let delivery = "metrics-dup-1";
    assert_eq!(
        post_signed(&app, "issue_comment", delivery, payload()).await,
        StatusCode::ACCEPTED
    );
    let after_first = scrape(&app).await;
    assert_eq!(
        value_of(&after_first, RECEIVED, &labels) - value_of(&before, RECEIVED, &labels),
        1.0
    );
    assert_eq!(
        value_of(&after_first, DUPLICATE, &labels) - value_of(&before, DUPLICATE, &labels),
        0.0
    );

    assert_eq!(
        post_signed(&app, "issue_comment", delivery, payload()).await,
        StatusCode::OK
    );
    let after_second = scrape(&app).await;
    assert_eq!(
        value_of(&after_second, RECEIVED, &labels) - value_of(&before, RECEIVED, &labels),
        2.0
    );
    assert_eq!(
        value_of(&after_second, DUPLICATE, &labels) - value_of(&before, DUPLICATE, &labels),
        1.0
    );
    for reason in ["bad_headers", "bad_signature", "not_json", "too_large"] {
        let labels = [("event", "issue_comment"), ("reason", reason)];
        assert_eq!(
            value_of(&after_second, INVALID, &labels),
            value_of(&before, INVALID, &labels),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn refused_requests_are_counted_by_reason_and_unknown_events_as_other() {
    let db = TestDatabase::fresh().await;
    let app = serve_router(&db).await;
    let before = scrape(&app).await;

    // Wrong secret: `pull_request_review` is this test's event.
    let forged = sign_body(&SecretString::from("not-the-secret".to_owned()), &payload());
    let status = post_webhook(
        &app,
        &[
            ("X-GitHub-Event", "pull_request_review"),
            ("X-GitHub-Delivery", "metrics-forged-1"),
            ("X-Hub-Signature-256", &forged),
        ],
        payload(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // No delivery id at all.
    let status = post_webhook(
        &app,
        &[("X-GitHub-Event", "pull_request_review")],
        payload(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Signed, but not JSON.
    assert_eq!(
        post_signed(
            &app,
            "pull_request_review",
            "metrics-form-1",
            b"payload=%7B%7D".to_vec()
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    // Over GitHub's size cap.
    let status = post_webhook(
        &app,
        &[
            ("X-GitHub-Event", "pull_request_review"),
            ("X-GitHub-Delivery", "metrics-huge-1"),
        ],
        vec![b' '; MAX_WEBHOOK_BODY_BYTES + 1],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // An event name outside the allow-list is never a label value.
    assert_eq!(
        post_signed(&app, "zz_metrics_unknown_event", "metrics-odd-1", payload()).await,
        StatusCode::ACCEPTED
    );

    let after = scrape(&app).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value_of(&after, name, labels) - value_of(&before, name, labels)
    };
    let event = ("event", "pull_request_review");
    assert_eq!(delta(RECEIVED, &[event]), 4.0);
    for reason in ["bad_signature", "bad_headers", "not_json", "too_large"] {
        assert_eq!(
            delta(INVALID, &[event, ("reason", reason)]),
            1.0,
            "{reason}"
        );
    }
    assert!(delta(RECEIVED, &[("event", "other")]) >= 1.0);
    assert!(
        after
            .iter()
            .all(|sample| !sample.labels.values().any(|v| v.contains("zz_metrics"))),
        "a free-text event became a label"
    );
}

#[tokio::test]
async fn a_github_read_sets_the_installation_rate_limit_gauges_from_the_response() {
    let db = TestDatabase::fresh().await;
    let app = serve_router(&db).await;
    let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
    hub.create_user("octo", fakehub::world::UserKind::User)
        .unwrap();
    hub.create_repo(&fakehub::RepoSpec {
        owner: "octo".into(),
        name: "widgets".into(),
        default_branch: "main".into(),
        private: true,
        files: [("README.md".to_owned(), "widgets\n".to_owned())].into(),
        required_checks: vec![],
    })
    .await
    .unwrap();
    let created = hub
        .create_app(&fakehub::NewApp {
            slug: "autoforge-metrics".into(),
            owner: Some("octo".into()),
            webhook_url: None,
            webhook_secret: None,
            permissions: [("issues", "write"), ("metadata", "read")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            events: vec![],
        })
        .await
        .unwrap();
    let installation = hub
        .install(
            created.id,
            &fakehub::NewInstallation {
                account: "octo".into(),
                repositories: vec!["widgets".into()],
            },
        )
        .unwrap();
    let client = GitHubClient::new(
        hub.base_url(),
        GitHubAuth::App {
            app_id: created.id,
            private_key_pem: SecretString::from(created.private_key_pem.expose_secret().to_owned()),
        },
    )
    .unwrap();
    let before = scrape(&app).await;
    let get_2xx = [("method", "GET"), ("status_class", "2xx")];

    let api = client.installation(installation).unwrap();
    let repositories = api.installation_repositories().await.unwrap();
    assert_eq!(repositories.len(), 1);

    let after = scrape(&app).await;
    let id = installation.to_string();
    let labels = [("installation", id.as_str())];
    let state = client
        .rate_limits()
        .into_iter()
        .find(|(scope, _)| *scope == RateScope::Installation(installation))
        .map(|(_, state)| state)
        .expect("the gate saw the installation's response");
    let limit = state.limit.expect("fakehub sends x-ratelimit-limit");
    let remaining = state
        .remaining
        .expect("fakehub sends x-ratelimit-remaining");
    assert!(remaining < limit, "the read spent budget");
    #[allow(clippy::cast_precision_loss)]
    {
        assert_eq!(
            value_of(&after, "autoforge_github_rate_limit_limit", &labels),
            limit as f64
        );
        assert_eq!(
            value_of(&after, "autoforge_github_rate_limit_remaining", &labels),
            remaining as f64
        );
    }
    assert!(
        value_of(&after, "autoforge_github_requests_total", &get_2xx)
            > value_of(&before, "autoforge_github_requests_total", &get_2xx)
    );

    let durations = "autoforge_github_request_duration_seconds_count";
    assert!(
        value_of(&after, durations, &[("method", "GET")])
            > value_of(&before, durations, &[("method", "GET")])
    );

    // Reading the unchanged listing again is a free `304`; a read of
    // another path spends one more request, and the gauge follows both.
    api.installation_repositories().await.unwrap();
    let unchanged = scrape(&app).await;
    assert_eq!(
        value_of(&unchanged, "autoforge_github_rate_limit_remaining", &labels),
        value_of(&after, "autoforge_github_rate_limit_remaining", &labels)
    );
    let _repository: serde_json::Value = api.get_json("/repos/octo/widgets").await.unwrap();
    let again = scrape(&app).await;
    assert_eq!(
        value_of(&again, "autoforge_github_rate_limit_remaining", &labels),
        value_of(&after, "autoforge_github_rate_limit_remaining", &labels) - 1.0
    );
}
