//! A suspended installation, as GitHub behaves: the installation shows
//! `suspended_at`/`suspended_by`, no token can be minted for it, the
//! tokens it had are refused (REST and git), only the `installation`
//! webhooks `suspend` and `unsuspend` are sent, and unsuspending restores
//! everything.

use serde_json::Value;

use crate::support::{try_clone, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_installation_is_refused_until_it_is_unsuspended() {
    let w = world().await;
    let token = w.installation_token().await;
    let id = w.installation_id;
    // Not in the OpenAPI subset the schema checks use: sent as they are.
    let suspended = format!("{}/app/installations/{id}/suspended", w.hub.base_url());
    let answer = w
        .http
        .put(&suspended)
        .bearer_auth(w.jwt())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    let (status, listed) = w
        .call(
            "GET",
            "/app/installations",
            "/app/installations",
            &w.jwt(),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let mine = listed
        .as_array()
        .and_then(|all| all.iter().find(|i| i["id"] == id))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(mine["suspended_at"].is_string(), "{mine}");
    assert_eq!(mine["suspended_by"]["login"], "alice", "{mine}");

    let tokens = format!("/app/installations/{id}/access_tokens");
    let (status, refused) = w
        .call(
            "POST",
            "/app/installations/{installation_id}/access_tokens",
            &tokens,
            &w.jwt(),
            None,
        )
        .await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (403, Some("This installation has been suspended"))
    );
    let (status, refused) = w
        .call(
            "GET",
            "/repos/{owner}/{repo}",
            "/repos/alice/widgets",
            &token,
            None,
        )
        .await;
    assert_eq!(
        (status, refused["message"].as_str()),
        (403, Some("This installation has been suspended"))
    );
    let clone_dir = tempfile::tempdir().unwrap();
    assert!(!try_clone(
        &w.hub,
        "alice",
        "widgets",
        &token,
        &clone_dir.path().join("a")
    ));
    // Nothing but `installation` reaches a suspended installation.
    let (status, _) = w
        .call(
            "POST",
            "/repos/{owner}/{repo}/issues",
            "/repos/alice/widgets/issues",
            &w.alice,
            Some(serde_json::json!({"title": "while suspended"})),
        )
        .await;
    assert_eq!(status, 201);

    let answer = w
        .http
        .delete(&suspended)
        .bearer_auth(w.jwt())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 204);
    let (status, _) = w
        .call(
            "GET",
            "/repos/{owner}/{repo}",
            "/repos/alice/widgets",
            &token,
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(try_clone(
        &w.hub,
        "alice",
        "widgets",
        &token,
        &clone_dir.path().join("b")
    ));
    w.installation_token().await;

    let suspend = w
        .wait_for_hook(|r| r.event() == "installation" && r.json()["action"] == "suspend")
        .await
        .json();
    assert!(
        suspend["installation"]["suspended_at"].is_string(),
        "{suspend}"
    );
    assert_eq!(suspend["installation"]["suspended_by"]["login"], "alice");
    let unsuspend = w
        .wait_for_hook(|r| r.event() == "installation" && r.json()["action"] == "unsuspend")
        .await
        .json();
    assert!(
        unsuspend["installation"]["suspended_at"].is_null(),
        "{unsuspend}"
    );
    let opened_while_suspended = w
        .received
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.event() == "issues" && r.json()["issue"]["title"] == "while suspended");
    assert!(
        !opened_while_suspended,
        "a suspended installation got a webhook"
    );
    w.assert_no_schema_failures();
}
