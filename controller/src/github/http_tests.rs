//! End-to-end behaviour of the client against fakehub, the GitHub
//! simulator: pagination, retries of 5xx, secondary and primary rate limits,
//! conditional reads, permission reads and App installation tokens. Faults
//! come from fakehub's fault rules and every assertion about what went over
//! the wire reads fakehub's request log.
//!
//! Three behaviours need answers fakehub never gives (a broken `next` link,
//! a link to a foreign host, an Enterprise `/api/v3` prefix); they keep a
//! tiny in-test server at the end of this file.
#![allow(clippy::unwrap_used)]

use super::*;
use autoforge_journal::IssueNumber;
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use fakehub::{FaultKind, FaultRule};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use std::time::{Duration, Instant};

const OWNER: &str = "octo";
const NAME: &str = "widgets";
const ISSUE_ROUTE: &str = "/repos/{owner}/{repo}/issues/{number}";
const COMMENTS_ROUTE: &str = "/repos/{owner}/{repo}/issues/{number}/comments";
const PERMISSION_ROUTE: &str = "/repos/{owner}/{repo}/collaborators/{username}/permission";
const TOKEN_ROUTE: &str = "/app/installations/{id}/access_tokens";

pub(super) fn fast_options() -> ClientOptions {
    ClientOptions {
        retry: BackoffPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
        },
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    }
}

pub(super) fn repo() -> RepoName {
    RepoName::new(OWNER, NAME).unwrap()
}

/// A fakehub with user `octo` owning `octo/widgets` (with `dir/a.toml`),
/// and a token client acting as `octo`.
pub(super) struct Hub {
    pub(super) hub: fakehub::Handle,
    client: GitHubClient,
    pub(super) api: GitHubApi,
}

impl Hub {
    pub(super) async fn start() -> Hub {
        Self::start_with(fast_options()).await
    }

    async fn start_with(options: ClientOptions) -> Hub {
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let owner = hub
            .create_user(OWNER, fakehub::world::UserKind::User)
            .unwrap();
        hub.create_repo(&fakehub::RepoSpec {
            owner: OWNER.into(),
            name: NAME.into(),
            default_branch: "main".into(),
            private: true,
            files: [("dir/a.toml".to_owned(), "key = 1\n".to_owned())].into(),
            required_checks: vec![],
        })
        .await
        .unwrap();
        let client = token_client(&hub, &owner.token, options);
        let api = client.installation(0).unwrap();
        Hub { hub, client, api }
    }

    /// A user with `permission` on the repository and a client acting as them.
    fn person(&self, login: &str, permission: Option<&str>) -> GitHubApi {
        let user = self
            .hub
            .create_user(login, fakehub::world::UserKind::User)
            .unwrap();
        if let Some(permission) = permission {
            self.hub
                .set_collaborator(OWNER, NAME, login, permission)
                .unwrap();
        }
        token_client(&self.hub, &user.token, fast_options())
            .installation(0)
            .unwrap()
    }

    pub(super) async fn issue(&self) -> IssueNumber {
        writes::create_issue(&self.api, &repo(), "an issue", "body", &[])
            .await
            .unwrap()
            .number
    }

    pub(super) async fn comments(&self, issue: IssueNumber, count: usize) {
        for index in 0..count {
            writes::create_comment(&self.api, &repo(), issue, &format!("comment {index}"))
                .await
                .unwrap();
        }
    }

    fn fault(&self, method: &str, route: &str, kind: FaultKind, count: Option<u32>) {
        self.hub.set_faults(vec![FaultRule {
            method: Some(method.to_owned()),
            route: Some(route.to_owned()),
            kind,
            probability: None,
            count,
        }]);
    }

    /// Statuses fakehub answered on `method route`, in order.
    fn answered(&self, method: &str, route: &str) -> Vec<u16> {
        self.hub
            .requests()
            .into_iter()
            .filter(|r| r.method == method && r.route == route)
            .map(|r| r.status)
            .collect()
    }

    fn reset_log(&self) -> usize {
        self.hub.requests().len()
    }

    fn answered_since(&self, mark: usize, method: &str, route: &str) -> Vec<u16> {
        self.hub
            .requests()
            .into_iter()
            .skip(mark)
            .filter(|r| r.method == method && r.route == route)
            .map(|r| r.status)
            .collect()
    }
}

fn token_client(
    hub: &fakehub::Handle,
    token: &SecretString,
    options: ClientOptions,
) -> GitHubClient {
    let auth = GitHubAuth::Token(SecretString::from(token.expose_secret().to_owned()));
    GitHubClient::with_options(hub.base_url(), auth, options).unwrap()
}

#[tokio::test]
async fn listing_follows_link_headers_to_the_last_page() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.comments(issue, 205).await;
    let mark = hub.reset_log();
    let comments = hub.api.issue_comments(&repo(), issue).await.unwrap();
    let bodies: Vec<String> = comments.iter().map(|c| c.body.clone()).collect();
    let expected: Vec<String> = (0..205).map(|i| format!("comment {i}")).collect();
    assert_eq!(bodies, expected);
    assert_eq!(
        hub.answered_since(mark, "GET", COMMENTS_ROUTE),
        [200, 200, 200]
    );
    let limits = hub.client.rate_limits();
    assert_eq!(limits.len(), 1);
    assert_eq!(limits[0].1.limit, Some(5000));
    assert!(limits[0].1.remaining.is_some_and(|r| r < 5000));
}

#[tokio::test]
async fn read_retries_server_errors_then_succeeds() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault(
        "GET",
        ISSUE_ROUTE,
        FaultKind::Status { status: 502 },
        Some(2),
    );
    assert_eq!(hub.api.issue(&repo(), issue).await.unwrap().number, issue);
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [502, 502, 200]);
}

#[tokio::test]
async fn read_gives_up_after_the_attempt_bound() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault("GET", ISSUE_ROUTE, FaultKind::Status { status: 503 }, None);
    let error = hub.api.issue(&repo(), issue).await.unwrap_err();
    assert_eq!(error.status(), Some(503));
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [503, 503, 503]);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let stranger = hub.person("stranger", None);
    let error = stranger.issue(&repo(), issue).await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [404]);
}

#[tokio::test]
async fn write_is_sent_once_and_a_server_error_leaves_the_outcome_unknown() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault(
        "POST",
        COMMENTS_ROUTE,
        FaultKind::AmbiguousWrite { drop: false },
        Some(1),
    );
    let error = writes::create_comment(&hub.api, &repo(), issue, "hello")
        .await
        .unwrap_err();
    assert!(error.is_outcome_unknown(), "{error}");
    assert_eq!(hub.answered("POST", COMMENTS_ROUTE), [502]);
    // It did land: exactly why the caller must reconcile, not resend.
    let comments = hub.api.issue_comments(&repo(), issue).await.unwrap();
    assert_eq!(comments.len(), 1);
}

#[tokio::test]
async fn write_refusal_is_definite_and_carries_the_message() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let reader = hub.person("reader", Some("read"));
    let error = writes::add_labels(&reader, &repo(), issue, &["x".to_owned()])
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403));
    assert!(!error.is_outcome_unknown());
    assert!(error.to_string().contains("push access"), "{error}");
    assert_eq!(
        hub.answered("POST", "/repos/{owner}/{repo}/issues/{number}/labels"),
        [403]
    );
}

#[tokio::test]
async fn slow_write_times_out_with_unknown_outcome() {
    let hub = Hub::start_with(ClientOptions {
        request_timeout: Duration::from_millis(200),
        ..fast_options()
    })
    .await;
    let issue = hub.issue().await;
    hub.fault(
        "POST",
        COMMENTS_ROUTE,
        FaultKind::Latency { ms: 2_000 },
        Some(1),
    );
    let error = writes::create_comment(&hub.api, &repo(), issue, "x")
        .await
        .unwrap_err();
    // On a pooled connection the socket read timeout fires first and
    // surfaces as a transport error; either way the outcome is unknown.
    let timed_out = match &error {
        GitHubError::Timeout { .. } => true,
        GitHubError::Transport { message, .. } => message.contains("timed out"),
        _ => false,
    };
    assert!(timed_out, "{error}");
    assert!(error.is_outcome_unknown());
}

#[tokio::test]
async fn after_a_secondary_rate_limit_no_request_goes_out_before_retry_after() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault(
        "GET",
        ISSUE_ROUTE,
        FaultKind::SecondaryRateLimit { retry_after: 2 },
        Some(1),
    );
    let started = Instant::now();
    let api = hub.api.clone();
    let limited = tokio::spawn(async move { api.issue(&repo(), issue).await });
    // Wait until the client has seen the 403, then ask for something else
    // on the same credentials: it too must wait for the gate.
    let paused_until = loop {
        let paused = hub
            .client
            .rate_limits()
            .into_iter()
            .find_map(|(_, state)| state.paused_until);
        if let Some(until) = paused {
            break until;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the 403 was never seen"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let mark = hub.reset_log();
    let comments = hub.api.issue_comments(&repo(), issue).await.unwrap();
    let other_sent_after = std::time::SystemTime::now();
    assert!(comments.is_empty());
    assert_eq!(limited.await.unwrap().unwrap().number, issue);
    assert!(
        other_sent_after >= paused_until,
        "the second read finished before retry-after"
    );
    assert!(started.elapsed() >= Duration::from_millis(1_900));
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [403, 200]);
    // Nothing was refused after the limit: every later request waited.
    assert!(
        hub.hub
            .requests()
            .iter()
            .skip(mark)
            .all(|r| r.status == 200),
        "a request went out during the secondary limit"
    );
}

#[tokio::test]
async fn a_write_refused_by_a_secondary_rate_limit_is_sent_again_after_retry_after_and_lands_once()
{
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault(
        "POST",
        COMMENTS_ROUTE,
        FaultKind::TooManyRequests { retry_after: 1 },
        Some(1),
    );
    let started = Instant::now();
    let posted = writes::create_comment(&hub.api, &repo(), issue, "once").await;
    assert!(posted.is_ok(), "{posted:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(hub.answered("POST", COMMENTS_ROUTE), [429, 201]);
    assert!(hub.hub.closed_window_requests().is_empty());
    let comments = hub.api.issue_comments(&repo(), issue).await.unwrap();
    assert_eq!(comments.len(), 1);
}

#[tokio::test]
async fn rate_limit_longer_than_the_wait_bound_fails_fast() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.fault("GET", ISSUE_ROUTE, FaultKind::ExhaustPrimary, Some(1));
    let error = hub.api.issue(&repo(), issue).await.unwrap_err();
    assert!(matches!(error, GitHubError::RateLimited { .. }), "{error}");
    // The gate stopped the retry and the write before they were sent.
    let again = writes::create_comment(&hub.api, &repo(), issue, "x")
        .await
        .unwrap_err();
    assert!(matches!(again, GitHubError::RateLimited { .. }), "{again}");
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [403]);
    assert!(hub.answered("POST", COMMENTS_ROUTE).is_empty());
}

#[tokio::test]
async fn conditional_read_reports_not_modified_from_the_cache() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let first = hub.api.issue_if_changed(&repo(), issue).await.unwrap();
    assert!(first.is_modified());
    let second = hub.api.issue_if_changed(&repo(), issue).await.unwrap();
    assert!(!second.is_modified());
    assert_eq!(first.into_inner(), second.into_inner());
    let hits: Vec<bool> = hub
        .hub
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.route == ISSUE_ROUTE)
        .map(|r| r.conditional_hit)
        .collect();
    assert_eq!(hits, [false, true]);
}

#[tokio::test]
async fn conditional_listing_is_unchanged_only_when_every_page_is() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.comments(issue, 101).await;
    let first = hub
        .api
        .issue_comments_if_changed(&repo(), issue)
        .await
        .unwrap();
    assert!(first.is_modified());
    assert_eq!(first.into_inner().len(), 101);
    let unchanged = hub
        .api
        .issue_comments_if_changed(&repo(), issue)
        .await
        .unwrap();
    assert!(!unchanged.is_modified());
    assert_eq!(unchanged.into_inner().len(), 101);

    // A change on the second page only must still be seen.
    hub.comments(issue, 1).await;
    let changed = hub
        .api
        .issue_comments_if_changed(&repo(), issue)
        .await
        .unwrap();
    assert!(changed.is_modified(), "a change on page 2 must be seen");
    let comments = changed.into_inner();
    assert_eq!(comments.len(), 102);
    assert_eq!(comments[101].body, "comment 0");
}

#[tokio::test]
async fn absent_parent_and_file_are_none_and_unknown_user_has_no_permission() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let _maintainer = hub.person("maint", Some("maintain"));
    let _stranger = hub.person("ghost", None);
    assert_eq!(hub.api.parent_issue(&repo(), issue).await.unwrap(), None);
    assert_eq!(
        hub.api
            .file_contents(&repo(), ".github/autoforge.toml", "main")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        hub.api
            .collaborator_permission(&repo(), "ghost")
            .await
            .unwrap(),
        crate::commands::Permission::None
    );
    assert_eq!(
        hub.api
            .collaborator_permission(&repo(), "maint")
            .await
            .unwrap(),
        crate::commands::Permission::Maintain
    );
}

#[tokio::test]
async fn operator_decision_asks_github_only_for_humans_not_allow_listed() {
    use crate::commands::{Actor, ActorKind, OperatorPolicy};
    let hub = Hub::start().await;
    let _writer = hub.person("writer", Some("write"));
    let _triager = hub.person("triager", Some("triage"));
    let policy = OperatorPolicy {
        allow: vec!["friend".to_owned()],
        ..OperatorPolicy::default()
    };
    let person = |login: &str, kind| Actor {
        login: login.to_owned(),
        kind,
    };
    let decide = |actor: Actor| {
        let api = hub.api.clone();
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
    assert!(
        hub.answered("GET", PERMISSION_ROUTE).is_empty(),
        "no request for bots or allow-listed logins"
    );
    assert!(decide(person("writer", ActorKind::User)).await);
    assert!(!decide(person("triager", ActorKind::User)).await);
    assert_eq!(hub.answered("GET", PERMISSION_ROUTE).len(), 2);
}

#[tokio::test]
async fn file_contents_are_decoded_from_base64() {
    let hub = Hub::start().await;
    let file = hub
        .api
        .file_contents(&repo(), "dir/a.toml", "main")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(file.bytes, b"key = 1\n");
    assert!(!file.sha.is_empty());
}

/// An App installed on `octo/widgets` and a client authenticating as it.
async fn installed_app(hub: &Hub) -> (GitHubClient, u64) {
    let app = hub
        .hub
        .create_app(&fakehub::NewApp {
            slug: "autoforge-client".into(),
            owner: Some(OWNER.into()),
            webhook_url: None,
            webhook_secret: None,
            permissions: [
                ("issues".to_owned(), "write".to_owned()),
                ("contents".to_owned(), "write".to_owned()),
            ]
            .into(),
            events: vec![],
        })
        .await
        .unwrap();
    let installation = hub
        .hub
        .install(
            app.id,
            &fakehub::NewInstallation {
                account: OWNER.into(),
                repositories: vec![NAME.into()],
            },
        )
        .unwrap();
    let auth = GitHubAuth::App {
        app_id: app.id,
        private_key_pem: SecretString::from(app.private_key_pem.expose_secret().to_owned()),
    };
    let client = GitHubClient::with_options(hub.hub.base_url(), auth, fast_options()).unwrap();
    (client, installation)
}

#[tokio::test]
async fn app_auth_mints_an_installation_token_once_and_reuses_it() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let (client, installation) = installed_app(&hub).await;
    let api = client.installation(installation).unwrap();
    assert_eq!(api.scope(), RateScope::Installation(installation));
    assert_eq!(api.issue(&repo(), issue).await.unwrap().number, issue);
    // A second handle for the same installation reuses the cached token.
    let again = client.installation(installation).unwrap();
    assert_eq!(again.issue(&repo(), issue).await.unwrap().number, issue);
    assert_eq!(hub.answered("POST", TOKEN_ROUTE), [201]);
    let kinds: Vec<String> = hub
        .hub
        .requests()
        .into_iter()
        .filter(|r| r.route == ISSUE_ROUTE && r.method == "GET")
        .map(|r| r.token_kind)
        .collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.iter().all(|k| k == &kinds[0]), "{kinds:?}");
}

#[tokio::test]
async fn an_expired_installation_token_is_reminted_and_the_read_succeeds() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let (client, installation) = installed_app(&hub).await;
    let api = client.installation(installation).unwrap();
    assert_eq!(api.issue(&repo(), issue).await.unwrap().number, issue);
    // Expire every installation token fakehub handed out.
    {
        let mut world = hub.hub.shared().lock();
        for grant in world.tokens.values_mut() {
            if let fakehub::world::Grant::Installation { expires_at, .. } = grant {
                *expires_at = chrono::Utc::now() - chrono::Duration::seconds(1);
            }
        }
    }
    assert_eq!(api.issue(&repo(), issue).await.unwrap().number, issue);
    assert_eq!(hub.answered("POST", TOKEN_ROUTE), [201, 201]);
    // Every read is conditional: the retry with the new token is a `304`.
    assert_eq!(hub.answered("GET", ISSUE_ROUTE), [200, 401, 304]);
}

#[tokio::test]
async fn an_installation_that_refuses_tokens_is_a_credentials_error_sent_once() {
    let hub = Hub::start().await;
    let (client, _installation) = installed_app(&hub).await;
    let api = client.installation(987_654).unwrap();
    let error = writes::create_comment(&api, &repo(), autoforge_journal::testing::issue(1), "x")
        .await
        .unwrap_err();
    assert!(
        matches!(error, GitHubError::Credentials { status: 404, .. }),
        "{error}"
    );
    assert!(!error.is_outcome_unknown(), "the comment was never sent");
    assert!(hub.answered("POST", COMMENTS_ROUTE).is_empty());
    let read_error = api
        .issue(&repo(), autoforge_journal::testing::issue(1))
        .await
        .unwrap_err();
    assert!(matches!(read_error, GitHubError::Credentials { .. }));
    assert_eq!(
        hub.answered("POST", TOKEN_ROUTE),
        [404, 404],
        "a definite refusal is not retried"
    );
}

// ---- Behaviours fakehub never shows: a tiny in-test server. ----

pub(super) async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

pub(super) fn test_token_client(base: &str) -> GitHubApi {
    let auth = GitHubAuth::Token(SecretString::from("test-token".to_owned()));
    GitHubClient::with_options(base, auth, fast_options())
        .unwrap()
        .installation(1)
        .unwrap()
}

fn issue_json(number: u64) -> serde_json::Value {
    json!({
        "id": number, "number": number, "title": format!("issue {number}"), "body": null,
        "state": "open", "labels": [{"name": "autoforge"}], "html_url": "https://example/1",
        "user": {"login": "alice", "id": 1, "type": "User"}
    })
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
    let api = test_token_client(&serve(app).await);
    let error = api
        .pull_request_files(&"o/r".parse().unwrap(), autoforge_journal::testing::pull(1))
        .await
        .unwrap_err();
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
    let api = test_token_client(&serve(app).await);
    let error = api
        .pull_request_files(&"o/r".parse().unwrap(), autoforge_journal::testing::pull(1))
        .await
        .unwrap_err();
    let GitHubError::IncompleteListing { source, .. } = error else {
        panic!("expected an incomplete listing, got {error}");
    };
    assert!(matches!(
        *source,
        GitHubError::Link(LinkError::ForeignHost(_))
    ));
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
    let api = test_token_client(&format!("{base}/api/v3"));
    assert_eq!(
        api.issue(
            &"o/r".parse().unwrap(),
            autoforge_journal::testing::issue(2)
        )
        .await
        .unwrap()
        .number,
        autoforge_journal::testing::issue(2)
    );
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

#[tokio::test]
async fn the_git_credential_of_an_installation_is_its_own_narrowed_token_minted_once() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    let (client, installation) = installed_app(&hub).await;
    let api = client.installation(installation).unwrap();
    assert_eq!(api.issue(&repo(), issue).await.unwrap().number, issue);
    let first = api.git_credential(&repo()).await.unwrap();
    let second = client
        .installation(installation)
        .unwrap()
        .git_credential(&repo())
        .await
        .unwrap();
    assert_eq!(first.expose_secret(), second.expose_secret());
    assert!(!first.expose_secret().is_empty());
    assert_eq!(
        hub.answered("POST", TOKEN_ROUTE),
        [201, 201],
        "one token for the reads and one narrowed token for git, each minted once"
    );
}

#[tokio::test]
async fn git_credentials_come_from_the_token_or_an_installation_never_the_app() {
    let hub = Hub::start().await;
    let token = "ghp_gitCredentialTest0123456789abcdefAB";
    let client = GitHubClient::new(
        hub.hub.base_url(),
        GitHubAuth::Token(SecretString::from(token)),
    )
    .unwrap();
    let credential = client
        .installation(0)
        .unwrap()
        .git_credential(&repo())
        .await;
    assert_eq!(credential.unwrap().expose_secret(), token);

    let (app_client, _installation) = installed_app(&hub).await;
    let app_error = app_client
        .app()
        .unwrap()
        .git_credential(&repo())
        .await
        .unwrap_err();
    assert!(matches!(app_error, GitHubError::Setup(_)), "{app_error}");
    let unknown = app_client
        .installation(987_654)
        .unwrap()
        .git_credential(&repo())
        .await;
    assert!(
        matches!(unknown, Err(GitHubError::Credentials { status: 404, .. })),
        "{:?}",
        unknown.map(|_| "a token")
    );
}
