//! End-to-end behaviour of the client against a tiny in-test HTTP server.
//!
//! TO MOVE TO FAKEHUB: these tests exist only because fakehub is not
//! available yet. Each covers a behaviour a real GitHub shows (pagination
//! links, 5xx, secondary limits, 304s, App token minting) that fakehub will
//! simulate; once it does, port them there and delete this file.
#![allow(clippy::unwrap_used)]

use super::*;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use secrecy::SecretString;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Clone, Default)]
struct Hits(Arc<AtomicUsize>);

impl Hits {
    fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

fn fast_options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
        },
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    }
}

fn token_client(base: &str, options: ClientOptions) -> GitHubApi {
    let auth = GitHubAuth::Token(SecretString::from("test-token".to_owned()));
    GitHubClient::with_options(base, auth, options)
        .unwrap()
        .installation(1)
        .unwrap()
}

fn issue_json(number: u64) -> Value {
    json!({
        "id": number, "number": number, "title": format!("issue {number}"), "body": null,
        "state": "open", "labels": [{"name": "autoforge"}], "html_url": "https://example/1",
        "user": {"login": "alice", "id": 1, "type": "User"}
    })
}

fn repo() -> RepoName {
    "o/r".parse().unwrap()
}

#[tokio::test]
async fn listing_follows_link_headers_to_the_last_page() {
    let app = Router::new().route(
        "/repos/o/r/issues/1/comments",
        get(
            |State(base): State<Arc<std::sync::OnceLock<String>>>,
             axum::extract::RawQuery(query): axum::extract::RawQuery| async move {
                let page: u64 = query
                    .unwrap_or_default()
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("page="))
                    .map_or(1, |p| p.parse().unwrap());
                let base = base.get().unwrap();
                let comment = |id: u64| {
                    json!({"id": id, "body": format!("c{id}"), "html_url": "h",
                           "created_at": "t", "updated_at": "t",
                           "user": {"login": "bob", "id": 2, "type": "User"}})
                };
                let items = vec![comment(page * 10), comment(page * 10 + 1)];
                let mut headers = HeaderMap::new();
                headers.insert("x-ratelimit-remaining", "4321".parse().unwrap());
                headers.insert("x-ratelimit-limit", "5000".parse().unwrap());
                headers.insert("x-ratelimit-reset", "4102444800".parse().unwrap());
                if page < 3 {
                    let next = format!(
                        "<{base}/repos/o/r/issues/1/comments?per_page=2&page={}>; rel=\"next\"",
                        page + 1
                    );
                    headers.insert("link", next.parse().unwrap());
                }
                (headers, axum::Json(items))
            },
        ),
    );
    let cell = Arc::new(std::sync::OnceLock::new());
    let base = serve(app.with_state(Arc::clone(&cell))).await;
    cell.set(base.clone()).unwrap();
    let auth = GitHubAuth::Token(SecretString::from("t".to_owned()));
    let client = GitHubClient::with_options(&base, auth, fast_options()).unwrap();
    let api = client.installation(1).unwrap();

    let comments = api.issue_comments(&repo(), 1).await.unwrap();
    let ids: Vec<u64> = comments.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![10, 11, 20, 21, 30, 31]);
    let limits = client.rate_limits();
    assert_eq!(limits.len(), 1);
    assert_eq!(limits[0].1.remaining, Some(4321));
    assert_eq!(limits[0].1.limit, Some(5000));
}

#[tokio::test]
async fn listing_that_fails_on_a_later_page_is_an_error_not_a_truncation() {
    let app = Router::new()
        .route(
            "/repos/o/r/pulls/1/files",
            get(|| async {
                let mut headers = HeaderMap::new();
                headers.insert("link", "</broken?page=2>; rel=\"next\"".parse().unwrap());
                (
                    headers,
                    axum::Json(json!([{"filename": "a", "status": "added"}])),
                )
            }),
        )
        .route("/broken", get(|| async { StatusCode::NOT_FOUND }));
    let api = token_client(&serve(app).await, fast_options());
    let error = api.pull_request_files(&repo(), 1).await.unwrap_err();
    assert!(
        matches!(error, GitHubError::IncompleteListing { pages_read: 1, .. }),
        "{error}"
    );
    assert_eq!(error.status(), Some(404));
}

#[tokio::test]
async fn link_to_a_foreign_host_is_not_followed() {
    let app = Router::new().route(
        "/repos/o/r/pulls/1/files",
        get(|| async {
            let mut headers = HeaderMap::new();
            headers.insert(
                "link",
                "<http://evil.example/steal?page=2>; rel=\"next\""
                    .parse()
                    .unwrap(),
            );
            (headers, axum::Json(json!([])))
        }),
    );
    let api = token_client(&serve(app).await, fast_options());
    let error = api.pull_request_files(&repo(), 1).await.unwrap_err();
    let GitHubError::IncompleteListing { source, .. } = error else {
        panic!("expected an incomplete listing, got {error}");
    };
    assert!(matches!(
        *source,
        GitHubError::Link(LinkError::ForeignHost(_))
    ));
}

#[tokio::test]
async fn read_retries_server_errors_then_succeeds() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/7",
            get(|State(hits): State<Hits>| async move {
                if hits.bump() < 3 {
                    StatusCode::BAD_GATEWAY.into_response()
                } else {
                    axum::Json(issue_json(7)).into_response()
                }
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let issue = api.issue(&repo(), 7).await.unwrap();
    assert_eq!(issue.number, 7);
    assert_eq!(hits.count(), 3);
}

#[tokio::test]
async fn read_gives_up_after_the_attempt_bound() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/7",
            get(|State(hits): State<Hits>| async move {
                hits.bump();
                StatusCode::SERVICE_UNAVAILABLE
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let error = api.issue(&repo(), 7).await.unwrap_err();
    assert_eq!(error.status(), Some(503));
    assert_eq!(hits.count(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/7",
            get(|State(hits): State<Hits>| async move {
                hits.bump();
                (
                    StatusCode::FORBIDDEN,
                    axum::Json(json!({"message": "Resource not accessible"})),
                )
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let error = api.issue(&repo(), 7).await.unwrap_err();
    assert!(
        error.to_string().contains("Resource not accessible"),
        "{error}"
    );
    assert_eq!(hits.count(), 1);
}

#[tokio::test]
async fn write_is_sent_once_and_a_server_error_leaves_the_outcome_unknown() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/3/comments",
            post(|State(hits): State<Hits>| async move {
                hits.bump();
                StatusCode::BAD_GATEWAY
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let error = writes::create_comment(&api, &repo(), 3, "hello")
        .await
        .unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert_eq!(hits.count(), 1);
}

#[tokio::test]
async fn write_refusal_is_definite_and_carries_the_message() {
    let app = Router::new().route(
        "/repos/o/r/pulls/5/merge",
        axum::routing::put(|| async {
            (
                StatusCode::CONFLICT,
                axum::Json(json!({"message": "Head branch was modified"})),
            )
        }),
    );
    let api = token_client(&serve(app).await, fast_options());
    let error = writes::merge_pull_request(&api, &repo(), 5, "abc", "squash")
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(409));
    assert!(!error.is_outcome_unknown());
}

#[tokio::test]
async fn slow_write_times_out_with_unknown_outcome() {
    let app = Router::new().route(
        "/repos/o/r/issues/3/comments",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            StatusCode::CREATED
        }),
    );
    let options = ClientOptions {
        request_timeout: Duration::from_millis(200),
        ..fast_options()
    };
    let api = token_client(&serve(app).await, options);
    let error = writes::create_comment(&api, &repo(), 3, "x")
        .await
        .unwrap_err();
    assert!(matches!(error, GitHubError::Timeout { .. }), "{error}");
    assert!(error.is_outcome_unknown());
}

#[tokio::test]
async fn secondary_rate_limit_pauses_then_the_read_succeeds() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/7",
            get(|State(hits): State<Hits>| async move {
                if hits.bump() == 1 {
                    let mut headers = HeaderMap::new();
                    headers.insert("retry-after", "1".parse().unwrap());
                    (
                        StatusCode::FORBIDDEN,
                        headers,
                        axum::Json(json!({"message": "secondary rate limit"})),
                    )
                        .into_response()
                } else {
                    axum::Json(issue_json(7)).into_response()
                }
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let started = std::time::Instant::now();
    let issue = api.issue(&repo(), 7).await.unwrap();
    assert_eq!(issue.number, 7);
    assert_eq!(hits.count(), 2);
    // The retry waited for the gate, not just the short backoff.
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn rate_limit_longer_than_the_wait_bound_fails_fast() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/7",
            get(|State(hits): State<Hits>| async move {
                hits.bump();
                let mut headers = HeaderMap::new();
                headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
                headers.insert("x-ratelimit-reset", "4102444800".parse().unwrap());
                (StatusCode::FORBIDDEN, headers, "limit")
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let error = api.issue(&repo(), 7).await.unwrap_err();
    assert!(matches!(error, GitHubError::RateLimited { .. }), "{error}");
    // The gate stopped the retry before it was sent.
    assert_eq!(hits.count(), 1);
    let again = writes::create_comment(&api, &repo(), 7, "x")
        .await
        .unwrap_err();
    assert!(matches!(again, GitHubError::RateLimited { .. }), "{again}");
    assert_eq!(hits.count(), 1);
}

#[tokio::test]
async fn conditional_read_reports_not_modified_from_the_cache() {
    let hits = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues/9",
            get(|State(hits): State<Hits>, headers: HeaderMap| async move {
                hits.bump();
                if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some("\"v1\"") {
                    return StatusCode::NOT_MODIFIED.into_response();
                }
                let mut out = HeaderMap::new();
                out.insert("etag", "\"v1\"".parse().unwrap());
                (out, axum::Json(issue_json(9))).into_response()
            }),
        )
        .with_state(hits.clone());
    let api = token_client(&serve(app).await, fast_options());
    let first = api.issue_if_changed(&repo(), 9).await.unwrap();
    assert!(first.is_modified());
    let second = api.issue_if_changed(&repo(), 9).await.unwrap();
    assert!(!second.is_modified());
    assert_eq!(first.into_inner(), second.into_inner());
    assert_eq!(hits.count(), 2);
}

/// Two pages with ETags `"p1-<version>"` / `"p2-<version>"`; the version of
/// page 2 is bumped through the shared counter to simulate a change there.
#[tokio::test]
async fn conditional_listing_is_unchanged_only_when_every_page_is() {
    let version = Hits::default();
    let sent_304 = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/issues",
            get(
                |State((version, sent_304)): State<(Hits, Hits)>,
                 axum::extract::RawQuery(query): axum::extract::RawQuery,
                 headers: HeaderMap| async move {
                    let page2 = query.unwrap_or_default().contains("page=2");
                    let etag = if page2 {
                        format!("\"p2-{}\"", version.count())
                    } else {
                        "\"p1\"".to_owned()
                    };
                    if headers.get("if-none-match").and_then(|v| v.to_str().ok())
                        == Some(etag.as_str())
                    {
                        sent_304.bump();
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    let mut out = HeaderMap::new();
                    out.insert("etag", etag.parse().unwrap());
                    let body = if page2 {
                        json!([issue_json(20 + version.count() as u64)])
                    } else {
                        out.insert(
                            "link",
                            "</repos/o/r/issues?state=open&per_page=100&page=2>; rel=\"next\""
                                .parse()
                                .unwrap(),
                        );
                        json!([issue_json(10)])
                    };
                    (out, axum::Json(body)).into_response()
                },
            ),
        )
        .with_state((version.clone(), sent_304.clone()));
    let api = token_client(&serve(app).await, fast_options());
    let numbers = |issues: &[Issue]| issues.iter().map(|i| i.number).collect::<Vec<_>>();

    let first = api
        .get_all_if_changed::<Issue>("/repos/o/r/issues?state=open")
        .await
        .unwrap();
    assert!(first.is_modified());
    assert_eq!(numbers(&first.into_inner()), vec![10, 20]);

    let unchanged = api
        .get_all_if_changed::<Issue>("/repos/o/r/issues?state=open")
        .await
        .unwrap();
    assert!(!unchanged.is_modified());
    assert_eq!(numbers(&unchanged.into_inner()), vec![10, 20]);
    assert_eq!(sent_304.count(), 2);

    version.bump();
    let changed = api
        .get_all_if_changed::<Issue>("/repos/o/r/issues?state=open")
        .await
        .unwrap();
    assert!(changed.is_modified(), "a change on page 2 must be seen");
    assert_eq!(numbers(&changed.into_inner()), vec![10, 21]);
}

#[tokio::test]
async fn absent_parent_and_file_are_none_and_unknown_user_has_no_permission() {
    let app = Router::new()
        .route(
            "/repos/o/r/issues/4/parent",
            get(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            "/repos/o/r/contents/.github/autoforge.toml",
            get(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            "/repos/o/r/collaborators/{login}/permission",
            get(
                |axum::extract::Path(login): axum::extract::Path<String>| async move {
                    if login == "maint" {
                        axum::Json(
                            json!({"permission": "write", "role_name": "maintain", "user": null}),
                        )
                        .into_response()
                    } else {
                        StatusCode::NOT_FOUND.into_response()
                    }
                },
            ),
        );
    let api = token_client(&serve(app).await, fast_options());
    assert_eq!(api.parent_issue(&repo(), 4).await.unwrap(), None);
    assert_eq!(
        api.file_contents(&repo(), ".github/autoforge.toml", "main")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        api.collaborator_permission(&repo(), "ghost").await.unwrap(),
        crate::commands::Permission::None
    );
    assert_eq!(
        api.collaborator_permission(&repo(), "maint").await.unwrap(),
        crate::commands::Permission::Maintain
    );
}

#[tokio::test]
async fn operator_decision_asks_github_only_for_humans_not_allow_listed() {
    use crate::commands::{Actor, ActorKind, OperatorPolicy};
    let asked = Hits::default();
    let app = Router::new()
        .route(
            "/repos/o/r/collaborators/{login}/permission",
            get(
                |State(asked): State<Hits>,
                 axum::extract::Path(login): axum::extract::Path<String>| async move {
                    asked.bump();
                    let role = if login == "writer" { "write" } else { "triage" };
                    axum::Json(json!({"permission": "read", "role_name": role, "user": null}))
                },
            ),
        )
        .with_state(asked.clone());
    let api = token_client(&serve(app).await, fast_options());
    let policy = OperatorPolicy {
        allow: vec!["friend".to_owned()],
        ..OperatorPolicy::default()
    };
    let person = |login: &str, kind| Actor {
        login: login.to_owned(),
        kind,
    };
    let decide = |actor: Actor| {
        let api = api.clone();
        let policy = policy.clone();
        async move {
            api.operator_decision(&repo(), &actor, &policy, "autoforge")
                .await
                .unwrap()
                .is_allowed()
        }
    };
    assert!(!decide(person("ci", ActorKind::Bot)).await);
    assert!(!decide(person("autoforge[bot]", ActorKind::Bot)).await);
    assert!(decide(person("friend", ActorKind::User)).await);
    assert_eq!(
        asked.count(),
        0,
        "no request for bots or allow-listed logins"
    );
    assert!(decide(person("writer", ActorKind::User)).await);
    assert!(!decide(person("triager", ActorKind::User)).await);
    assert_eq!(asked.count(), 2);
}

#[tokio::test]
async fn file_contents_are_decoded_from_base64() {
    let app = Router::new().route(
        "/repos/o/r/contents/dir/a.toml",
        get(|| async {
            axum::Json(json!({"type": "file", "encoding": "base64", "sha": "s1",
                              "content": "a2V5ID0g\nMQo=\n"}))
        }),
    );
    let api = token_client(&serve(app).await, fast_options());
    let file = api
        .file_contents(&repo(), "dir/a.toml", "main")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(file.bytes, b"key = 1\n");
    assert_eq!(file.sha, "s1");
}

#[tokio::test]
async fn enterprise_base_path_prefixes_every_request() {
    let app = Router::new().route(
        "/api/v3/repos/o/r/issues/2",
        get(|headers: HeaderMap| async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
            if auth != Some("Bearer test-token") {
                return StatusCode::UNAUTHORIZED.into_response();
            }
            axum::Json(issue_json(2)).into_response()
        }),
    );
    let base = serve(app).await;
    let api = token_client(&format!("{base}/api/v3"), fast_options());
    assert_eq!(api.issue(&repo(), 2).await.unwrap().number, 2);
}

fn generate_rsa_pem() -> String {
    let output = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "2048"])
        .output()
        .expect("openssl must be installed for the App auth test");
    assert!(output.status.success(), "openssl genrsa failed");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn app_auth_mints_an_installation_token_and_sends_it_on_relative_paths() {
    let mints = Hits::default();
    let app = Router::new()
        .route(
            "/app/installations/42/access_tokens",
            post(|State(mints): State<Hits>, headers: HeaderMap| async move {
                let bearer = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                // A JWT has three dot-separated parts.
                if bearer.strip_prefix("Bearer ").map(|t| t.split('.').count()) != Some(3) {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                mints.bump();
                (
                    StatusCode::CREATED,
                    axum::Json(
                        json!({"token": "ghs_inst42", "expires_at": "2099-01-01T00:00:00Z",
                                      "permissions": {}}),
                    ),
                )
                    .into_response()
            }),
        )
        .route(
            "/repos/o/r/issues/1",
            get(|headers: HeaderMap| async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
                if auth != Some("Bearer ghs_inst42") {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                axum::Json(issue_json(1)).into_response()
            }),
        )
        .with_state(mints.clone());
    let base = serve(app).await;
    let auth = GitHubAuth::App {
        app_id: 1,
        private_key_pem: SecretString::from(generate_rsa_pem()),
    };
    let client = GitHubClient::with_options(&base, auth, fast_options()).unwrap();
    let api = client.installation(42).unwrap();
    assert_eq!(api.scope(), RateScope::Installation(42));
    assert_eq!(api.issue(&repo(), 1).await.unwrap().number, 1);
    // A second handle for the same installation reuses the cached token.
    let again = client.installation(42).unwrap();
    assert_eq!(again.issue(&repo(), 1).await.unwrap().number, 1);
    assert_eq!(mints.count(), 1, "the installation token is cached");
}

#[tokio::test]
async fn a_revoked_installation_token_is_reminted_after_a_401() {
    let mints = Hits::default();
    let app = Router::new()
        .route(
            "/app/installations/42/access_tokens",
            post(|State(mints): State<Hits>| async move {
                // The first token is "revoked" (refused below), the second works.
                let token = format!("ghs_{}", mints.bump());
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"token": token, "expires_at": "2099-01-01T00:00:00Z",
                                      "permissions": {}})),
                )
            }),
        )
        .route(
            "/repos/o/r/issues/1",
            get(|headers: HeaderMap| async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
                if auth != Some("Bearer ghs_2") {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                axum::Json(issue_json(1)).into_response()
            }),
        )
        .with_state(mints.clone());
    let base = serve(app).await;
    let auth = GitHubAuth::App {
        app_id: 1,
        private_key_pem: SecretString::from(generate_rsa_pem()),
    };
    let client = GitHubClient::with_options(&base, auth, fast_options()).unwrap();
    let api = client.installation(42).unwrap();
    assert_eq!(api.issue(&repo(), 1).await.unwrap().number, 1);
    assert_eq!(mints.count(), 2);
}

#[tokio::test]
async fn an_installation_that_refuses_tokens_is_a_credentials_error_sent_once() {
    let mints = Hits::default();
    let app = Router::new()
        .route(
            "/app/installations/42/access_tokens",
            post(|State(mints): State<Hits>| async move {
                mints.bump();
                (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"message": "Not Found"})),
                )
            }),
        )
        .with_state(mints.clone());
    let base = serve(app).await;
    let auth = GitHubAuth::App {
        app_id: 1,
        private_key_pem: SecretString::from(generate_rsa_pem()),
    };
    let client = GitHubClient::with_options(&base, auth, fast_options()).unwrap();
    let api = client.installation(42).unwrap();
    let error = writes::create_comment(&api, &repo(), 1, "x")
        .await
        .unwrap_err();
    assert!(
        matches!(error, GitHubError::Credentials { status: 404, .. }),
        "{error}"
    );
    assert!(!error.is_outcome_unknown(), "the comment was never sent");
    let read_error = api.issue(&repo(), 1).await.unwrap_err();
    assert!(matches!(read_error, GitHubError::Credentials { .. }));
    assert_eq!(mints.count(), 2, "a definite refusal is not retried");
}

#[test]
fn creating_a_client_outside_a_runtime_is_an_error_not_a_panic() {
    let token = GitHubAuth::Token(SecretString::from("t".to_owned()));
    let error = GitHubClient::new("https://api.github.com", token)
        .err()
        .unwrap();
    assert!(error.to_string().contains("Tokio runtime"), "{error}");
}

#[tokio::test]
async fn setup_errors_are_clear() {
    let bad_key = GitHubAuth::App {
        app_id: 1,
        private_key_pem: SecretString::from("not a key".to_owned()),
    };
    let error = GitHubClient::new("https://api.github.com", bad_key)
        .err()
        .unwrap();
    assert!(error.to_string().contains("private key"), "{error}");
    let token = || GitHubAuth::Token(SecretString::from("t".to_owned()));
    assert!(GitHubClient::new("not a url", token()).is_err());
    let client = GitHubClient::new("https://api.github.com", token()).unwrap();
    assert!(client.app().is_err(), "a token cannot act as the App");
}
