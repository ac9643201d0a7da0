//! Shared setup: a fakehub with users, a repository, an installed app and a
//! webhook receiver; GitHub's OpenAPI schemas converted for `jsonschema`;
//! and a client that validates every response against them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use axum::http::HeaderMap;
use fakehub::world::UserKind;
use fakehub::{Handle, NewApp, NewInstallation, RepoSpec};
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

pub fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/github")
}

/// The OpenAPI subset, parsed once.
pub fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        serde_json::from_slice(&std::fs::read(fixtures().join("openapi-subset.json")).unwrap())
            .unwrap()
    })
}

/// OpenAPI 3.0 → JSON Schema: `nullable: true` becomes a type union, and
/// `oneOf` becomes `anyOf` — GitHub's description uses `oneOf` for
/// alternatives without discriminators that overlap (for example two error
/// shapes with no required fields), which no body could satisfy strictly.
pub fn to_json_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| k.as_str() != "nullable")
                .map(|(k, v)| {
                    (
                        if k == "oneOf" {
                            "anyOf".to_string()
                        } else {
                            k.clone()
                        },
                        to_json_schema(v),
                    )
                })
                .collect();
            if m.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([t, "null"]));
                    if let Some(Value::Array(e)) = out.get_mut("enum") {
                        e.push(Value::Null);
                    }
                } else {
                    return json!({"anyOf": [Value::Object(out), {"type": "null"}]});
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

/// Validation errors of `body` against the documented response schema of
/// `method template` with `status`; `None` when GitHub documents no JSON body.
pub fn schema_errors(
    method: &str,
    template: &str,
    status: u16,
    body: &Value,
) -> Option<Vec<String>> {
    let op = &spec()["paths"][template][method.to_ascii_lowercase()];
    assert!(
        op.is_object(),
        "{method} {template} is not in the OpenAPI subset"
    );
    let response = &op["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {template}: GitHub documents no {status} response (body {body})"
    );
    let schema = response
        .get("content")
        .and_then(|c| c.get("application/json"))
        .and_then(|c| c.get("schema"))?;
    let validator = jsonschema::validator_for(&to_json_schema(schema)).unwrap();
    Some(
        validator
            .iter_errors(body)
            .take(8)
            .map(|e| {
                format!(
                    "{} at {} (schema {})",
                    e,
                    e.instance_path(),
                    e.schema_path()
                )
            })
            .collect(),
    )
}

/// A webhook as received by the test's endpoint.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn event(&self) -> String {
        self.headers
            .get("x-github-event")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub const WEBHOOK_SECRET: &str = "test-secret";

/// A running fakehub with `alice` (owner of `alice/widgets`), `bob` (write
/// collaborator), `carol` (no access), an app installed on the repository,
/// and a webhook receiver.
pub struct World {
    pub hub: Handle,
    pub alice: String,
    pub bob: String,
    pub carol: String,
    pub app_id: u64,
    pub installation_id: u64,
    pub app_key: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    pub http: reqwest::Client,
    pub covered: Mutex<BTreeSet<(String, String)>>,
    pub failures: Mutex<Vec<String>>,
}

pub async fn receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let store: Arc<Mutex<Vec<Received>>> = Arc::default();
    let sink = store.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(Received { headers, body });
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook"), store)
}

pub async fn world() -> World {
    let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
    let alice = hub
        .create_user("alice", UserKind::User)
        .unwrap()
        .token
        .expose_secret()
        .to_string();
    let bob = hub
        .create_user("bob", UserKind::User)
        .unwrap()
        .token
        .expose_secret()
        .to_string();
    let carol = hub
        .create_user("carol", UserKind::User)
        .unwrap()
        .token
        .expose_secret()
        .to_string();
    let files = BTreeMap::from([
        ("README.md".to_string(), "# widgets\n".to_string()),
        (
            "src/lib.rs".to_string(),
            "pub fn one() -> u32 { 1 }\n".to_string(),
        ),
    ]);
    hub.create_repo(&RepoSpec {
        owner: "alice".into(),
        name: "widgets".into(),
        default_branch: "main".into(),
        private: true,
        files,
        required_checks: vec![],
    })
    .await
    .unwrap();
    hub.set_collaborator("alice", "widgets", "bob", "write")
        .unwrap();
    let (url, received) = receiver().await;
    let permissions = ["issues", "pull_requests", "contents", "checks", "statuses"]
        .iter()
        .map(|p| (p.to_string(), "write".to_string()))
        .chain([("metadata".to_string(), "read".to_string())])
        .collect();
    let app = hub
        .create_app(&NewApp {
            slug: "autoforge".into(),
            owner: Some("alice".into()),
            webhook_url: Some(url),
            webhook_secret: Some(WEBHOOK_SECRET.into()),
            permissions,
            events: vec![],
        })
        .await
        .unwrap();
    let installation_id = hub
        .install(
            app.id,
            &NewInstallation {
                account: "alice".into(),
                repositories: vec!["widgets".into()],
            },
        )
        .unwrap();
    World {
        hub,
        alice,
        bob,
        carol,
        app_id: app.id,
        installation_id,
        app_key: app.private_key_pem.expose_secret().to_string(),
        received,
        http: reqwest::Client::new(),
        covered: Mutex::default(),
        failures: Mutex::default(),
    }
}

impl World {
    /// A fresh App JWT signed with the app's key.
    pub fn jwt(&self) -> String {
        let now = chrono::Utc::now().timestamp();
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(self.app_key.as_bytes()).unwrap();
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &json!({"iss": self.app_id, "iat": now - 30, "exp": now + 540}),
            &key,
        )
        .unwrap()
    }

    /// A fresh installation token minted through the REST API.
    pub async fn installation_token(&self) -> String {
        let (status, body) = self
            .call(
                "POST",
                "/app/installations/{installation_id}/access_tokens",
                &format!("/app/installations/{}/access_tokens", self.installation_id),
                &self.jwt(),
                None,
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["token"].as_str().unwrap().to_string()
    }

    /// Send a request, validate the body against GitHub's schema for the
    /// operation and status, record coverage, and return status and body.
    pub async fn call(
        &self,
        method: &str,
        template: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (status, _, value) = self
            .call_with_headers(method, template, path, token, body)
            .await;
        (status, value)
    }

    pub async fn call_with_headers(
        &self,
        method: &str,
        template: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, HeaderMap, Value) {
        let url = format!("{}{path}", self.hub.base_url());
        let mut req = self
            .http
            .request(Method::from_bytes(method.as_bytes()).unwrap(), &url)
            .header("accept", "application/vnd.github+json");
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        if let Some(errors) = schema_errors(method, template, status, &value)
            && !errors.is_empty()
        {
            self.failures.lock().unwrap().push(format!(
                "{method} {template} → {status}:\n  {}",
                errors.join("\n  ")
            ));
        }
        self.covered
            .lock()
            .unwrap()
            .insert((method.to_string(), template.to_string()));
        (status, headers, value)
    }

    pub fn assert_no_schema_failures(&self) {
        let failures = self.failures.lock().unwrap();
        assert!(
            failures.is_empty(),
            "{} responses drift from GitHub's schema:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    /// Wait until the webhook receiver holds a delivery matching `pred`.
    pub async fn wait_for_hook(&self, pred: impl Fn(&Received) -> bool) -> Received {
        for _ in 0..200 {
            if let Some(r) = self.received.lock().unwrap().iter().find(|r| pred(r)) {
                return r.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("webhook never arrived");
    }
}

/// Run git with a clean config, failing the test on error.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "alice")
        .env("GIT_AUTHOR_EMAIL", "alice@users.noreply.fakehub")
        .env("GIT_COMMITTER_NAME", "alice")
        .env("GIT_COMMITTER_EMAIL", "alice@users.noreply.fakehub")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Clone `owner/repo` with a token the way GitHub documents
/// (`x-access-token` basic auth, passed as an extra header, not in the URL).
/// Returns whether git succeeded.
pub fn try_clone(hub: &Handle, owner: &str, repo: &str, token: &str, into: &Path) -> bool {
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
    let header = format!("http.extraHeader=Authorization: Basic {basic}");
    let out = std::process::Command::new("git")
        .args([
            "-c",
            &header,
            "clone",
            "--quiet",
            &hub.git_url(owner, repo),
            into.to_str().unwrap(),
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    if out.status.success() {
        git(
            into,
            &[
                "config",
                "http.extraHeader",
                &format!("Authorization: Basic {basic}"),
            ],
        );
    }
    out.status.success()
}

pub fn clone(hub: &Handle, owner: &str, repo: &str, token: &str, into: &Path) {
    assert!(
        try_clone(hub, owner, repo, token, into),
        "cloning {owner}/{repo} failed"
    );
}
