//! The dashboard's routes on a real journal: what a run page shows, and
//! who gets to see it.
#![allow(clippy::unwrap_used)]

use super::*;
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EffectKind, LaunchEnd, NewEffect, NewLaunch, NewRun};
use axum::body::Body;
use axum::http::Request;
use serde_json::json;
use std::time::Duration;
use tower::ServiceExt;

fn site() -> Site {
    Site {
        links: Links {
            html_base: "https://github.example".into(),
        },
        sandbox: SandboxMode::Bubblewrap,
    }
}

fn guarded(db: &TestDatabase, access: DashboardAccess) -> Router {
    access.guard(dashboard_router(db.journal().clone(), site()))
}

/// A run that went IMPLEMENT → BLOCKED with one observed comment and one
/// finished launch whose log holds a hostile line.
async fn seeded(db: &TestDatabase, log_dir: &std::path::Path) -> i64 {
    let journal = db.journal();
    let run = journal
        .create_run(&NewRun {
            repository: "acme/widgets".into(),
            epic: None,
            issue: autoforge_journal::testing::issue(12),
            phase: "IMPLEMENT".into(),
            state: json!({}),
        })
        .await
        .unwrap();
    let lease = journal
        .acquire_lease("dash-test", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let effect = NewEffect {
        kind: EffectKind::PostComment,
        identity: "autoforge-status:run=1".into(),
        target: "issue/12".into(),
        precondition: json!({}),
        payload: b"{}".to_vec(),
        completion: json!({}),
    };
    let state = json!({ "pr": 40, "review": { "round": 3 },
        "blocked": { "reason": "review cap <reached>" } });
    let mut tx = journal.begin().await.unwrap();
    tx.commit_transition(&lease, run.version, "BLOCKED", &state, &[effect])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    std::fs::write(
        log_dir.join("output.log"),
        "starting\n<script>steal()</script>\n",
    )
    .unwrap();
    let launch = journal
        .record_launch_started(
            &lease,
            &NewLaunch {
                phase: "IMPLEMENT".into(),
                role: "implement".into(),
                profile: "scripted".into(),
                attempt: 0,
                log_dir: log_dir.display().to_string(),
            },
        )
        .await
        .unwrap();
    journal
        .record_launch_finished(
            &lease,
            launch,
            &LaunchEnd {
                exit_status: Some(0),
                duration_ms: 2_500,
                tokens: Some(1234),
                outcome: "success".into(),
            },
        )
        .await
        .unwrap();
    run.id.0
}

async fn get(app: &Router, path: &str, auth: Option<&str>) -> (StatusCode, String) {
    let mut request = Request::get(path);
    if let Some(auth) = auth {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn a_run_page_shows_its_transitions_writes_launches_and_blocked_reason() {
    let db = TestDatabase::fresh().await;
    let logs = tempfile::tempdir().unwrap();
    let id = seeded(&db, logs.path()).await;
    let app = guarded(&db, DashboardAccess::Open);

    let (status, html) = get(&app, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("href=\"/runs/{id}\"")), "{html}");
    assert!(html.contains("BLOCKED"));

    let (status, html) = get(&app, &format!("/runs/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("IMPLEMENT → BLOCKED (1 GitHub write)"),
        "{html}"
    );
    assert!(html.contains("autoforge-status:run=1"));
    assert!(html.contains("Review round 3"));
    assert!(html.contains("https://github.example/acme/widgets/pull/40"));
    assert!(html.contains("review cap &lt;reached&gt;"));
    assert!(html.contains("2.5 s") && html.contains("1234 tokens"));
    assert!(html.contains("&lt;script&gt;steal()&lt;/script&gt;"));
    assert!(!html.contains("<script>steal"));
}

#[tokio::test]
async fn unknown_and_malformed_run_ids_are_told_apart() {
    let db = TestDatabase::fresh().await;
    let app = guarded(&db, DashboardAccess::Open);
    assert_eq!(
        get(&app, "/runs/999999", None).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&app, "/runs/abc", None).await.0,
        StatusCode::BAD_REQUEST
    );
    let (status, html) = get(&app, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("No run yet"));
}

#[tokio::test]
async fn with_a_token_every_page_needs_it_as_bearer_or_basic_password() {
    let db = TestDatabase::fresh().await;
    let token = SecretString::from("s3cret-token".to_owned());
    let app = guarded(&db, DashboardAccess::Token(token));
    let (status, body) = get(&app, "/", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.contains("s3cret"));
    assert_eq!(
        get(&app, "/", Some("Bearer wrong")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(&app, "/runs/1", Some("Bearer s3cret-token")).await.0,
        StatusCode::NOT_FOUND
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("anyone:s3cret-token");
    assert_eq!(
        get(&app, "/", Some(&format!("Basic {basic}"))).await.0,
        StatusCode::OK
    );
    let wrong = base64::engine::general_purpose::STANDARD.encode("anyone:nope");
    assert_eq!(
        get(&app, "/", Some(&format!("Basic {wrong}"))).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_public_listener_without_a_token_serves_no_dashboard() {
    let db = TestDatabase::fresh().await;
    let access = DashboardAccess::for_listener("0.0.0.0:8081", None);
    let app = guarded(&db, access);
    assert_eq!(get(&app, "/", None).await.0, StatusCode::NOT_FOUND);
}

#[test]
fn only_loopback_listeners_open_the_dashboard_without_a_token() {
    let open = |listen| {
        matches!(
            DashboardAccess::for_listener(listen, None),
            DashboardAccess::Open
        )
    };
    assert!(open("127.0.0.1:8080"));
    assert!(open("[::1]:9000"));
    assert!(open("localhost:8080"));
    assert!(!open("0.0.0.0:8080"));
    assert!(!open("192.168.1.4:8080"));
    let token = Some(SecretString::from("t".to_owned()));
    assert!(matches!(
        DashboardAccess::for_listener("0.0.0.0:8080", token),
        DashboardAccess::Token(_)
    ));
}
