//! The one world every integration test stands in: fakehub playing GitHub
//! with the owner `octo` and the private repository `octo/widgets`, a fresh
//! journal database, and the owner's API client. What a test adds to it —
//! runs for an in-process driver ([`super::driving`]), a leased run for the
//! effect executor ([`super::effects`]) or a running `autoforge serve`
//! ([`super::serve`]) — lives in the world too, so all of them share the
//! helpers here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use autoforge::github::{
    BackoffPolicy, ClientOptions, GitHubApi, GitHubAuth, GitHubClient, RepoName,
};
use autoforge_journal::testing::TestDatabase;
use fakehub::RepoSpec;
use fakehub::world::UserKind;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use super::effects::LeasedRun;
use super::serve::Served;

/// The repository owner, an operator.
pub const OWNER: &str = "octo";
/// The repository's name.
pub const NAME: &str = "widgets";
/// The repository's full name, as the journal records it.
pub const REPOSITORY: &str = "octo/widgets";
/// The same name as [`NAME`], as the serve tests spell it.
pub const REPO: &str = NAME;

/// fakehub, the journal and what the test started on them.
pub struct World {
    pub hub: fakehub::Handle,
    pub db: TestDatabase,
    /// The owner's client, with short retries so faults show up quickly.
    pub api: GitHubApi,
    pub repo: RepoName,
    /// The owner's token.
    pub token: SecretString,
    pub http: reqwest::Client,
    /// The run the effect tests drive, leased by the test.
    pub(super) leased: Option<LeasedRun>,
    /// `autoforge serve`, for the tests of the real binary.
    pub(super) served: Option<Served>,
}

impl Drop for World {
    fn drop(&mut self) {
        // serve goes first: it must not outlive the fakehub and the
        // database it is connected to.
        drop(self.served.take());
    }
}

/// A person acting on fakehub with their own token.
#[derive(Clone)]
pub struct Person {
    pub login: String,
    pub token: String,
}

impl World {
    /// A world with `issues` open issues, numbered from 1.
    pub async fn new(issues: u64) -> World {
        let world = World::empty().await;
        for number in 1..=issues {
            let created = autoforge::github::writes::create_issue(
                &world.api,
                &world.repo,
                &format!("Issue {number}"),
                "please do it",
                &[],
            )
            .await
            .unwrap();
            assert_eq!(created.number.get(), number);
        }
        world
    }

    /// The owner, the repository with a README, and a fresh database.
    pub(super) async fn empty() -> World {
        Self::empty_on(None).await
    }

    /// [`Self::empty`] with its database on `server` when given.
    pub(super) async fn empty_on(server: Option<&SecretString>) -> World {
        let db = match server {
            Some(server) => TestDatabase::fresh_on(server).await,
            None => TestDatabase::fresh().await,
        };
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let owner = hub.create_user(OWNER, UserKind::User).unwrap();
        let files = BTreeMap::from([("README.md".to_owned(), "hello\n".to_owned())]);
        hub.create_repo(&RepoSpec {
            owner: OWNER.into(),
            name: NAME.into(),
            default_branch: "main".into(),
            private: true,
            files,
            required_checks: vec![],
        })
        .await
        .unwrap();
        let options = ClientOptions {
            retry: BackoffPolicy {
                max_attempts: 2,
                base_delay: Duration::from_millis(5),
                max_delay: Duration::from_millis(10),
            },
            request_timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        };
        let token = owner.token.clone();
        let api =
            GitHubClient::with_options(hub.base_url(), GitHubAuth::Token(token.clone()), options)
                .unwrap()
                .installation(0)
                .unwrap();
        World {
            hub,
            db,
            api,
            repo: REPOSITORY.parse().unwrap(),
            token,
            http: reqwest::Client::new(),
            leased: None,
            served: None,
        }
    }

    /// The full name the journal uses.
    pub fn repository(&self) -> String {
        REPOSITORY.to_owned()
    }

    pub fn owner(&self) -> Person {
        Person {
            login: OWNER.into(),
            token: self.token.expose_secret().to_owned(),
        }
    }

    /// A new user with `permission` (`read`, `write`, `admin`, …) on the repository.
    pub fn person(&self, login: &str, permission: &str) -> Person {
        let user = self
            .hub
            .create_user(login, UserKind::User)
            .expect("create a user");
        self.hub
            .set_collaborator(OWNER, NAME, login, permission)
            .expect("grant a permission");
        Person {
            login: login.into(),
            token: user.token.expose_secret().to_owned(),
        }
    }

    /// A REST call to fakehub as `person`; panics unless it succeeds.
    pub async fn rest_as(
        &self,
        person: &Person,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Value {
        let (status, text) = self.try_rest_as(person, method, path, body).await;
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// A REST call to fakehub as `person`: its status and body, whatever
    /// they are (a person's own call meets injected faults too).
    pub async fn try_rest_as(
        &self,
        person: &Person,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> (reqwest::StatusCode, String) {
        let response = self
            .http
            .request(method, format!("{}{path}", self.hub.base_url()))
            .header("authorization", format!("token {}", person.token))
            .header("user-agent", "autoforge-tests")
            .json(&body)
            .send()
            .await
            .expect("fakehub answers");
        let status = response.status();
        (status, response.text().await.expect("body"))
    }

    /// Answered API writes (anything but GET) to routes matching `route`.
    pub fn writes_to(&self, method: &str, route_suffix: &str) -> usize {
        self.hub
            .requests()
            .iter()
            .filter(|r| r.method == method && r.route.ends_with(route_suffix))
            .count()
    }

    /// Every API write of any kind (the control API excluded).
    pub fn all_writes(&self) -> usize {
        self.hub
            .requests()
            .iter()
            .filter(|r| r.method != "GET" && !r.path.starts_with("/_fakehub"))
            .count()
    }

    /// Requests fakehub answered whose route matches `route`.
    pub fn requests_to(&self, route: &str) -> Vec<fakehub::world::RequestRecord> {
        self.hub
            .requests()
            .into_iter()
            .filter(|r| r.route == route)
            .collect()
    }

    /// Answered `PUT …/merge` requests on pull request `pr`.
    pub fn merge_requests(&self, pr: autoforge_journal::PullNumber) -> usize {
        let path = format!("/repos/{REPOSITORY}/pulls/{pr}/merge");
        self.hub
            .requests()
            .iter()
            .filter(|r| r.method == "PUT" && r.path == path)
            .count()
    }

    /// A completed check run named `name` on `sha` with `conclusion`, as
    /// an external CI reports it.
    pub fn add_check(&self, sha: &str, name: &str, conclusion: &str) {
        self.hub
            .add_check(&fakehub::control::CheckSpec {
                owner: OWNER.into(),
                repo: NAME.into(),
                sha: sha.into(),
                name: name.into(),
                status: Some("completed".into()),
                conclusion: Some(conclusion.into()),
            })
            .expect("fakehub records the check");
    }
}

/// Polls `check` every 100 ms until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
