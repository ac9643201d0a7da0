//! The two listeners of the real `autoforge serve`: what a tunnel in front of
//! the webhook listener can reach (only `/webhook` and the probes), what the
//! admin listener answers, and the configuration that would merge them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{World, WorldOptions};

async fn status(world: &World, method: reqwest::Method, url: String) -> reqwest::StatusCode {
    world
        .http
        .request(method, url)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_listener_hides_dashboard_and_metrics_which_the_admin_listener_serves() {
    let world = World::start().await;
    let (webhook, admin) = (world.serve_url(), world.admin_url());
    assert_ne!(webhook, admin);
    let get = reqwest::Method::GET;

    for path in ["/", "/runs/1", "/metrics"] {
        let url = format!("{webhook}{path}");
        assert_eq!(status(&world, get.clone(), url).await, 404, "{path}");
    }
    let index = world.http.get(format!("{admin}/")).send().await.unwrap();
    assert_eq!(index.status(), 200);
    assert!(index.text().await.unwrap().contains("Runs"));
    let metrics = world
        .http
        .get(format!("{admin}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.text().await.unwrap().contains("autoforge_"));

    // A correctly signed delivery still finds no webhook on the admin side.
    let body = br#"{"zen":"wrong door","hook_id":1}"#;
    let signature =
        autoforge::webhook::sign_body(&secrecy::SecretString::from(common::WEBHOOK_SECRET), body);
    let delivery = world
        .http
        .post(format!("{admin}/webhook"))
        .header("x-github-event", "ping")
        .header("x-github-delivery", "admin-door-1")
        .header("x-hub-signature-256", signature)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(delivery.status(), 404);
    let stored = world.db.journal().get_delivery("admin-door-1").await;
    assert!(stored.unwrap().is_none());

    // Probes answer on both, so either can be given to an orchestrator.
    for base in [webhook, admin] {
        for probe in ["/healthz", "/readyz"] {
            let url = format!("{base}{probe}");
            assert_eq!(status(&world, get.clone(), url).await, 200, "{base}{probe}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_sandbox_off_the_dashboard_and_readyz_say_so() {
    let world = World::start_with(WorldOptions {
        config_toml: Some("[agents]\nsandbox = \"off\"\n".to_owned()),
        ..WorldOptions::default()
    })
    .await;
    let page = world
        .http
        .get(format!("{}/", world.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Agents run unsandboxed."), "{page}");
    for base in [world.serve_url(), world.admin_url()] {
        let ready = world
            .http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 200);
        let body = ready.text().await.unwrap();
        assert!(body.contains("agents.sandbox is off"), "{base}: {body}");
    }
}

/// A world whose admin listener binds every address (`0.0.0.0`, a free
/// port), with `env` added; requests still go over loopback.
async fn world_with_public_admin(env: &[(&str, &str)]) -> (World, String) {
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push(("AUTOFORGE_SERVER_ADMIN_LISTEN".into(), "0.0.0.0:0".into()));
    let world = World::start_with(WorldOptions {
        env,
        ..WorldOptions::default()
    })
    .await;
    let admin = world.admin_url().replace("0.0.0.0", "127.0.0.1");
    (world, admin)
}

#[tokio::test(flavor = "multi_thread")]
async fn off_loopback_without_a_token_neither_dashboard_nor_metrics_is_served() {
    let (world, admin) = world_with_public_admin(&[]).await;
    for path in ["/", "/metrics"] {
        let url = format!("{admin}{path}");
        assert_eq!(
            status(&world, reqwest::Method::GET, url).await,
            404,
            "{path}"
        );
    }
    let url = format!("{admin}/readyz");
    assert_eq!(status(&world, reqwest::Method::GET, url).await, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn off_loopback_metrics_and_pages_need_the_dashboard_token_as_bearer() {
    let token = "scrape-me-7c1f";
    let (world, admin) = world_with_public_admin(&[("AUTOFORGE_DASHBOARD_TOKEN", token)]).await;
    for path in ["/", "/metrics"] {
        let bare = world.http.get(format!("{admin}{path}")).send().await;
        assert_eq!(bare.unwrap().status(), 401, "{path}");
        let scraped = world
            .http
            .get(format!("{admin}{path}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(scraped.status(), 200, "{path}");
        assert!(!scraped.text().await.unwrap().contains(token));
    }
}

#[test]
fn serve_refuses_one_address_for_both_listeners() {
    let state = tempfile::tempdir().unwrap();
    let output = common::serve_command(state.path())
        .env("AUTOFORGE_WEBHOOK_SECRET", common::WEBHOOK_SECRET)
        .env("AUTOFORGE_SERVER_LISTEN", "127.0.0.1:18080")
        .env("AUTOFORGE_SERVER_ADMIN_LISTEN", "127.0.0.1:18080")
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("server.admin_listen (from AUTOFORGE_SERVER_ADMIN_LISTEN)"),
        "{stderr}"
    );
    assert!(stderr.contains("[rule: distinct-listeners]"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).is_empty());
    // Refused while loading the configuration: no database was started.
    assert!(!state.path().join("postgres").exists());
}
