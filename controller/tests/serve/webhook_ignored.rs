//! Deliveries that concern no run travel the real path — `serve`'s router
//! in front of the journal, then the dispatcher — and end processed, not
//! refused and not failed: GitHub would mark a refused delivery failed and
//! the poller would redeliver it, and a failed one would be retried.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use autoforge::commands::OperatorPolicy;
use autoforge::github::{GitHubAuth, GitHubClient};
use autoforge::intake::{Dispatcher, GitHubAccess};
use autoforge::webhook::sign_body;
use autoforge_journal::Delivery;
use autoforge_journal::testing::TestDatabase;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use tower::ServiceExt;

const SECRET: &str = "ignored-deliveries-secret";

/// A database, a fakehub App installed on one repository, and the access
/// the dispatcher reads with (unused by ignored deliveries).
struct Setup {
    _hub: fakehub::Handle,
    db: TestDatabase,
    access: GitHubAccess,
}

impl Setup {
    async fn start() -> Setup {
        let db = TestDatabase::fresh().await;
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        hub.create_user("octo", fakehub::world::UserKind::User)
            .unwrap();
        let app = hub
            .create_app(&fakehub::NewApp {
                slug: "autoforge-ignored".into(),
                owner: Some("octo".into()),
                webhook_url: None,
                webhook_secret: None,
                permissions: [("issues".to_owned(), "write".to_owned())].into(),
                events: vec![],
            })
            .await
            .unwrap();
        let auth = GitHubAuth::App {
            app_id: app.id,
            private_key_pem: SecretString::from(app.private_key_pem.expose_secret().to_owned()),
        };
        let access = GitHubAccess::from_parts(
            GitHubClient::new(hub.base_url(), auth).unwrap(),
            "autoforge-ignored".into(),
            OperatorPolicy::default(),
            "autoforge".into(),
            vec![],
            true,
        );
        Setup {
            _hub: hub,
            db,
            access,
        }
    }

    /// POSTs a signed delivery to `serve`'s own router.
    async fn deliver(&self, event: &str, guid: &str, body: Vec<u8>) -> StatusCode {
        let secret = SecretString::from(SECRET.to_owned());
        let app = autoforge::serve::webhook_listener_router(
            self.db.journal().clone(),
            secret.clone(),
            Arc::new(tokio::sync::Notify::new()),
        );
        let request = Request::post("/webhook")
            .header("content-type", "application/json")
            .header("X-GitHub-Event", event)
            .header("X-GitHub-Delivery", guid)
            .header("X-Hub-Signature-256", sign_body(&secret, &body))
            .body(Body::from(body))
            .unwrap();
        app.oneshot(request).await.unwrap().status()
    }

    /// Claims and dispatches what is due, then reads `guid`'s row back.
    async fn dispatch(&self, guid: &str) -> Delivery {
        let dispatcher = Dispatcher {
            journal: self.db.journal().clone(),
            access: self.access.clone(),
            worker: "ignored-test".into(),
            wakeup: Arc::new(tokio::sync::Notify::new()),
            notifier: Arc::new(autoforge::driver::RunNotifier::default()),
        };
        let claimed = self
            .db
            .journal()
            .claim_deliveries("ignored-test", 10, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(claimed.iter().any(|d| d.delivery_id == guid), "not due");
        for delivery in &claimed {
            dispatcher.dispatch_one(delivery).await;
        }
        self.db.journal().get_delivery(guid).await.unwrap().unwrap()
    }
}

fn assert_processed(row: &Delivery) {
    assert!(row.processed_at.is_some(), "{row:?}");
    assert!(row.failed_at.is_none(), "{row:?}");
    assert_eq!(row.error, None);
    assert_eq!(row.attempts, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_whose_name_has_digits_is_stored_and_ignored() {
    let setup = Setup::start().await;
    // The shape GitHub documents for a Projects (v2) item change.
    let body = serde_json::to_vec(&serde_json::json!({
        "action": "edited",
        "projects_v2_item": {"id": 11, "node_id": "PVTI_x", "project_node_id": "PVT_x",
                             "content_node_id": "I_x", "content_type": "Issue"},
        "organization": {"login": "octo", "id": 1},
        "sender": {"login": "octo", "id": 1, "type": "User"},
        "installation": {"id": 1, "node_id": "x"}
    }))
    .unwrap();
    let guid = "6f1b2c3d-0000-4000-8000-000000000001";
    assert_eq!(
        setup.deliver("projects_v2_item", guid, body).await,
        StatusCode::ACCEPTED
    );
    let row = setup.dispatch(guid).await;
    assert_eq!(row.event, "projects_v2_item");
    assert_eq!(row.action.as_deref(), Some("edited"));
    assert_processed(&row);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_check_suite_without_an_installation_is_processed_not_retried() {
    let setup = Setup::start().await;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/github/webhooks/check_suite.completed.0.json");
    let body = std::fs::read(fixture).unwrap();
    let guid = "6f1b2c3d-0000-4000-8000-000000000002";
    assert_eq!(
        setup.deliver("check_suite", guid, body).await,
        StatusCode::ACCEPTED
    );
    let row = setup.dispatch(guid).await;
    assert_eq!(row.installation_id, None);
    assert_processed(&row);
}
