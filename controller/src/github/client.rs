//! The one GitHub client type: octocrab underneath for authentication (App
//! JWT → installation tokens, cached, refreshed before expiry and after a
//! 401; or a personal token), with our own request loop on top for what
//! octocrab does not do the way we need: bounded jittered retries for reads
//! only, a per-installation rate-limit gate, ETag-conditional reads (every
//! GET: a `304` costs no rate limit, so waiting is free) and complete
//! pagination.
//!
//! Every request uses a relative path: octocrab attaches credentials only to
//! relative URLs (or the literal `api.github.com`), which is also what keeps
//! our token away from any absolute URL found in a payload.

use super::backoff::BackoffPolicy;
use super::error::{GitHubError, describe_octocrab_error};
use super::etag::EtagCache;
use super::ratelimit::{Admission, RateGates, RateLimitState, RateScope, RequestKind};
use http::header::{ETAG, HeaderMap, HeaderName, HeaderValue, IF_NONE_MATCH, LINK};
use http::{Method, StatusCode, Uri};
use octocrab::Octocrab;
use octocrab::models::{AppId, InstallationId};
use octocrab::service::middleware::retry::RetryConfig;
use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The REST API version every request pins.
const API_VERSION: &str = "2022-11-28";

/// How the client authenticates.
pub enum GitHubAuth {
    /// A GitHub App: its id and PEM private key.
    App {
        app_id: u64,
        private_key_pem: SecretString,
    },
    /// A personal (or fine-grained) access token.
    Token(SecretString),
}

/// Tunables; the defaults suit a production poller.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub retry: BackoffPolicy,
    /// Whole-request bound (connect, send, receive the body).
    pub request_timeout: Duration,
    /// Requests per window kept back from reads for writes.
    pub read_reserve: u64,
    /// Longest a request waits on the rate-limit gate before failing with
    /// [`GitHubError::RateLimited`] instead.
    pub max_rate_limit_wait: Duration,
    /// Number of conditional-read entries kept.
    pub etag_capacity: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            retry: BackoffPolicy::default(),
            request_timeout: Duration::from_secs(30),
            read_reserve: 50,
            max_rate_limit_wait: Duration::from_secs(120),
            etag_capacity: 4096,
        }
    }
}

pub(super) struct Shared {
    api_base: Uri,
    gates: RateGates,
    etags: EtagCache,
    options: ClientOptions,
    /// One octocrab per installation, shared by every handle: a cloned
    /// `Octocrab` copies its token cache, so sharing it is what makes an
    /// installation token minted once serve every later request.
    installations: Mutex<HashMap<u64, Arc<Octocrab>>>,
    /// The personal token in token mode, handed to git as its credential;
    /// an App's git credential is a narrowed installation token instead.
    pub(super) personal_token: Option<SecretString>,
    /// The App's own (JWT) client, which mints those narrowed tokens.
    pub(super) app: Option<Arc<Octocrab>>,
    /// Narrowed git tokens by installation and repository.
    pub(super) git_tokens: super::git_token::GitTokens,
}

/// Entry point: one per process, cheap to clone.
#[derive(Clone)]
pub struct GitHubClient {
    root: Arc<Octocrab>,
    is_app: bool,
    shared: Arc<Shared>,
}

impl GitHubClient {
    /// `api_url` is `https://api.github.com`, `https://HOST/api/v3` for
    /// GitHub Enterprise Server, or a fakehub address. Must be called inside
    /// a Tokio runtime.
    pub fn new(api_url: &str, auth: GitHubAuth) -> Result<Self, GitHubError> {
        Self::with_options(api_url, auth, ClientOptions::default())
    }

    pub fn with_options(
        api_url: &str,
        auth: GitHubAuth,
        options: ClientOptions,
    ) -> Result<Self, GitHubError> {
        // octocrab spawns its service buffer on the current runtime and
        // panics without one; refuse instead.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(GitHubError::Setup(
                "the GitHub client must be created inside a Tokio runtime".into(),
            ));
        }
        let api_base: Uri = api_url
            .trim_end_matches('/')
            .parse()
            .map_err(|_| GitHubError::Setup(format!("`{api_url}` is not a valid API URL")))?;
        if api_base.scheme().is_none() || api_base.authority().is_none() {
            return Err(GitHubError::Setup(format!(
                "`{api_url}` must be an absolute http(s) URL"
            )));
        }
        let builder = Octocrab::builder()
            .base_uri(api_base.clone())
            .map_err(|e| GitHubError::Setup(describe_octocrab_error(&e)))?
            // Our loop retries reads with backoff; octocrab's own retry would
            // re-send writes blind and hammer GitHub with immediate retries.
            .add_retry_config(RetryConfig::None)
            .set_connect_timeout(Some(options.request_timeout))
            .set_read_timeout(Some(options.request_timeout))
            .set_write_timeout(Some(options.request_timeout))
            .add_header(
                HeaderName::from_static("x-github-api-version"),
                API_VERSION.to_owned(),
            );
        let personal_token = match &auth {
            GitHubAuth::Token(token) => Some(token.clone()),
            GitHubAuth::App { .. } => None,
        };
        let (builder, is_app) = match auth {
            GitHubAuth::App {
                app_id,
                private_key_pem,
            } => {
                let key =
                    octocrab::EncodingKey::from_rsa_pem(private_key_pem.expose_secret().as_bytes())
                        .map_err(|_| {
                            GitHubError::Setup(
                                "the GitHub App private key is not an RSA PEM key".into(),
                            )
                        })?;
                (builder.app(AppId(app_id), key), true)
            }
            GitHubAuth::Token(token) => (builder.personal_token(token), false),
        };
        let root = builder
            .build()
            .map_err(|e| GitHubError::Setup(describe_octocrab_error(&e)))?;
        let root = Arc::new(root);
        Ok(GitHubClient {
            root: Arc::clone(&root),
            is_app,
            shared: Arc::new(Shared {
                api_base,
                gates: RateGates::default(),
                etags: EtagCache::new(options.etag_capacity),
                options,
                installations: Mutex::new(HashMap::new()),
                personal_token,
                app: is_app.then_some(root),
                git_tokens: Default::default(),
            }),
        })
    }

    /// A handle acting as installation `id` (App), or as the token, which
    /// acts for every repository it can see.
    pub fn installation(&self, id: u64) -> Result<GitHubApi, GitHubError> {
        if !self.is_app {
            return Ok(self.handle(Arc::clone(&self.root), RateScope::Token));
        }
        let mut installations = self
            .shared
            .installations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let crab = match installations.get(&id) {
            Some(crab) => Arc::clone(crab),
            None => {
                let crab = Arc::new(
                    self.root
                        .installation(InstallationId(id))
                        .map_err(|e| GitHubError::Setup(describe_octocrab_error(&e)))?,
                );
                installations.insert(id, Arc::clone(&crab));
                crab
            }
        };
        drop(installations);
        Ok(self.handle(crab, RateScope::Installation(id)))
    }

    /// A handle acting as the App itself (JWT): installations, hook deliveries.
    pub fn app(&self) -> Result<GitHubApi, GitHubError> {
        if !self.is_app {
            return Err(GitHubError::Setup(
                "this endpoint needs GitHub App credentials, not a token".into(),
            ));
        }
        Ok(self.handle(Arc::clone(&self.root), RateScope::App))
    }

    /// Last known budget per scope, for the `/metrics` gauges.
    pub fn rate_limits(&self) -> Vec<(RateScope, RateLimitState)> {
        self.shared.gates.snapshot()
    }

    fn handle(&self, crab: Arc<Octocrab>, scope: RateScope) -> GitHubApi {
        GitHubApi {
            crab,
            scope,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// One response, read to the end.
#[derive(Debug, Clone)]
pub(super) struct RawResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// A read that may have been answered from the ETag cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional<T> {
    /// GitHub sent a new body.
    Modified(T),
    /// `304`: the cached body is still current (and cost no rate limit).
    NotModified(T),
}

impl<T> Conditional<T> {
    pub fn into_inner(self) -> T {
        match self {
            Conditional::Modified(value) | Conditional::NotModified(value) => value,
        }
    }

    pub fn is_modified(&self) -> bool {
        matches!(self, Conditional::Modified(_))
    }
}

/// A handle bound to one credential scope. Reads live in `reads.rs`, writes
/// in `writes.rs`; both go through the request loop here.
#[derive(Clone)]
pub struct GitHubApi {
    crab: Arc<Octocrab>,
    pub(super) scope: RateScope,
    pub(super) shared: Arc<Shared>,
}

impl GitHubApi {
    pub fn scope(&self) -> RateScope {
        self.scope
    }

    /// The App's own (JWT) handle sharing this handle's state; `None` in
    /// token mode.
    pub(super) fn app_handle(&self) -> Option<GitHubApi> {
        self.shared.app.as_ref().map(|crab| GitHubApi {
            crab: Arc::clone(crab),
            scope: RateScope::App,
            shared: Arc::clone(&self.shared),
        })
    }

    pub(super) fn api_base(&self) -> &Uri {
        &self.shared.api_base
    }

    /// Waits on the gate, sends once, reads the whole body, feeds the gate.
    pub(super) async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        extra_headers: &HeaderMap,
        kind: RequestKind,
    ) -> Result<RawResponse, GitHubError> {
        let method_name = method_name(&method);
        self.wait_for_gate(kind).await?;
        let mut builder = http::Request::builder().method(method).uri(path);
        builder = builder.header(http::header::ACCEPT, "application/vnd.github+json");
        for (name, value) in extra_headers {
            builder = builder.header(name, value);
        }
        let request =
            self.crab
                .build_request(builder, body)
                .map_err(|e| GitHubError::Transport {
                    method: method_name,
                    path: path.to_owned(),
                    message: describe_octocrab_error(&e),
                })?;
        let started = std::time::Instant::now();
        let exchange = async {
            let response = self.crab.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = self.crab.body_to_string(response).await?;
            Ok::<_, octocrab::Error>(RawResponse {
                status,
                headers,
                body,
            })
        };
        let outcome = tokio::time::timeout(self.shared.options.request_timeout, exchange)
            .await
            .map_err(|_| GitHubError::Timeout {
                method: method_name,
                path: path.to_owned(),
            })?
            .map_err(|e| match e {
                // `execute` does not turn statuses into errors, so a GitHub
                // error here comes from minting the installation token: the
                // request itself was never sent.
                octocrab::Error::GitHub { ref source, .. } => GitHubError::Credentials {
                    status: source.status_code.as_u16(),
                    message: source.message.clone(),
                },
                other => GitHubError::Transport {
                    method: method_name,
                    path: path.to_owned(),
                    message: describe_octocrab_error(&other),
                },
            });
        crate::metrics::github_request(method_name, call_result(&outcome), started.elapsed());
        let response = outcome?;
        let state = self.shared.gates.observe(
            self.scope,
            response.status.as_u16(),
            &response.headers,
            SystemTime::now(),
        );
        crate::metrics::rate_limit(self.scope.gauge_label(), state.remaining, state.limit);
        Ok(response)
    }

    async fn wait_for_gate(&self, kind: RequestKind) -> Result<(), GitHubError> {
        let options = &self.shared.options;
        loop {
            let now = SystemTime::now();
            match self
                .shared
                .gates
                .admit(self.scope, kind, options.read_reserve, now)
            {
                Admission::Go => return Ok(()),
                Admission::WaitUntil(until) => {
                    let wait = until.duration_since(now).unwrap_or_default();
                    if wait > options.max_rate_limit_wait {
                        return Err(GitHubError::RateLimited {
                            scope: self.scope,
                            until,
                        });
                    }
                    tracing::info!(scope = ?self.scope, wait_ms = wait.as_millis(), "rate limit: waiting");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// A GET with retries on transient failures and rate limits; any other
    /// non-success answer is returned as [`GitHubError::Status`].
    pub(super) async fn read(
        &self,
        path: &str,
        extra_headers: &HeaderMap,
    ) -> Result<RawResponse, GitHubError> {
        let policy = self.shared.options.retry;
        let mut retry = 0;
        loop {
            let outcome = self
                .send_once(Method::GET, path, None, extra_headers, RequestKind::Read)
                .await
                .and_then(|response| self.check_status("GET", path, response));
            let error = match outcome {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            let limited = error.status().is_some_and(|status| {
                self.shared
                    .gates
                    .state(self.scope)
                    .is_limited_response(status, SystemTime::now())
            });
            if !(error.is_transient() || limited) {
                return Err(error);
            }
            retry += 1;
            match policy.random_delay_before_retry(retry) {
                Some(delay) => {
                    tracing::debug!(%path, retry, delay_ms = delay.as_millis(), error = %error, "retrying read");
                    tokio::time::sleep(delay).await;
                }
                None => return Err(error),
            }
        }
    }

    fn check_status(
        &self,
        method: &'static str,
        path: &str,
        response: RawResponse,
    ) -> Result<RawResponse, GitHubError> {
        if response.status.is_success() || response.status == StatusCode::NOT_MODIFIED {
            return Ok(response);
        }
        Err(GitHubError::Status {
            method,
            path: path.to_owned(),
            status: response.status.as_u16(),
            message: error_message(&response.body),
        })
    }

    /// A GET decoded into `T`. Every read is conditional (see
    /// [`Self::read_conditional`]): an unchanged answer costs no rate limit
    /// and is the very body the last `200` carried.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<T, GitHubError> {
        Ok(self.get_conditional(path).await?.into_inner())
    }

    /// A GET that sends `If-None-Match` when we hold an ETag for `path`,
    /// and says whether GitHub sent something new.
    pub async fn get_conditional<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Conditional<T>, GitHubError> {
        let (response, modified) = self.read_conditional(path).await?;
        let value = decode(path, &response.body)?;
        Ok(if modified {
            Conditional::Modified(value)
        } else {
            Conditional::NotModified(value)
        })
    }

    /// Drops the cached answer of `path`, so its next read asks GitHub
    /// unconditionally: for an answer that is not final yet (a pull
    /// request whose mergeability GitHub is still computing).
    pub(super) fn forget_cached(&self, path: &str) {
        self.shared.etags.forget(self.scope, path);
    }

    /// A conditional GET whose `304` is replaced by the cached body and
    /// `Link` header; the flag says whether GitHub sent something new.
    /// Only a `200` with an ETag is stored.
    pub(super) async fn read_conditional(
        &self,
        path: &str,
    ) -> Result<(RawResponse, bool), GitHubError> {
        let etags = &self.shared.etags;
        let mut headers = HeaderMap::new();
        if let Some(value) = etags
            .etag(self.scope, path)
            .and_then(|etag| HeaderValue::from_str(&etag).ok())
        {
            headers.insert(IF_NONE_MATCH, value);
        }
        let mut response = self.read(path, &headers).await?;
        if response.status == StatusCode::NOT_MODIFIED {
            let Some(cached) = etags.answer(self.scope, path) else {
                // A 304 without a cached body: ask again without the condition.
                etags.forget(self.scope, path);
                return Ok((self.read(path, &HeaderMap::new()).await?, true));
            };
            response.status = StatusCode::OK;
            response.body = String::from_utf8_lossy(&cached.body).into_owned();
            if let Some(link) = cached.link.and_then(|l| HeaderValue::from_str(&l).ok()) {
                response.headers.insert(LINK, link);
            }
            return Ok((response, false));
        }
        let etag = response.headers.get(ETAG).and_then(|v| v.to_str().ok());
        match etag {
            Some(etag) if response.status == StatusCode::OK => {
                let link = response.headers.get(LINK).and_then(|v| v.to_str().ok());
                etags.store(self.scope, path, etag, link, response.body.as_bytes());
            }
            // Whatever we held for the path is no longer GitHub's answer.
            _ => etags.forget(self.scope, path),
        }
        Ok((response, true))
    }

    /// Sends a write once GitHub accepts it for processing. Any other
    /// non-success answer is an error; a timeout, transport failure or 5xx
    /// leaves the outcome unknown ([`GitHubError::is_outcome_unknown`]).
    /// A rate-limit refusal (secondary limit, exhausted budget) is GitHub
    /// saying it did not process the request: it is sent again once the
    /// gate opens (at most the retry policy's number of tries), so a
    /// rate limit never counts as an attempt of the effect behind it.
    pub(super) async fn write(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<RawResponse, GitHubError> {
        let method_name = method_name(&method);
        let mut tries = 1;
        loop {
            let response = self
                .send_once(
                    method.clone(),
                    path,
                    body,
                    &HeaderMap::new(),
                    RequestKind::Write,
                )
                .await?;
            let limited = self
                .shared
                .gates
                .state(self.scope)
                .is_limited_response(response.status.as_u16(), SystemTime::now());
            if !limited || tries >= self.shared.options.retry.max_attempts {
                return self.check_status(method_name, path, response);
            }
            tries += 1;
            // `send_once` waits at the gate until the limit lifts.
            tracing::info!(%path, status = response.status.as_u16(), "write refused by a rate limit; sending it again once the limit lifts");
        }
    }
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(
    path: &str,
    body: &str,
) -> Result<T, GitHubError> {
    serde_json::from_str(body).map_err(|source| GitHubError::Decode {
        path: path.to_owned(),
        source,
    })
}

/// GitHub's error bodies carry a `message`; anything else is shown bounded.
fn error_message(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        message: String,
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) => parsed.message,
        Err(_) => body.chars().take(200).collect(),
    }
}

fn call_result(outcome: &Result<RawResponse, GitHubError>) -> crate::metrics::CallResult {
    use crate::metrics::CallResult;
    match outcome {
        Ok(response) => CallResult::Status(response.status.as_u16()),
        Err(GitHubError::Timeout { .. }) => CallResult::Timeout,
        Err(_) => CallResult::NoAnswer,
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "request",
    }
}
