//! Shared harness of the effect executor tests: a fakehub with one user and
//! one repository, a fresh journal database with one leased run, and helpers
//! to journal planned effects and drive them.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use autoforge::effects::{DriveOutcome, EffectExecutor, PlanContext, plan};
use autoforge::github::{
    BackoffPolicy, ClientOptions, GitHubApi, GitHubAuth, GitHubClient, RepoName,
};
use autoforge::machine::EffectIntent;
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{Effect, EffectId, Lease, NewEffect, NewRun, RunId};
use fakehub::world::UserKind;
use fakehub::{FaultKind, FaultRule, RepoSpec};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

pub const OWNER: &str = "alice";
pub const NAME: &str = "widgets";

pub struct World {
    pub hub: fakehub::Handle,
    pub db: TestDatabase,
    pub api: GitHubApi,
    pub repo: RepoName,
    pub token: SecretString,
    pub lease: Lease,
    pub run_id: RunId,
    version: i64,
}

impl World {
    pub async fn new() -> World {
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let alice = hub.create_user(OWNER, UserKind::User).unwrap();
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
        let token = alice.token.clone();
        let api =
            GitHubClient::with_options(hub.base_url(), GitHubAuth::Token(token.clone()), options)
                .unwrap()
                .installation(0)
                .unwrap();
        let db = TestDatabase::fresh().await;
        let run = db
            .journal()
            .create_run(&NewRun {
                repository: format!("{OWNER}/{NAME}"),
                epic: None,
                issue: 1,
                phase: "IMPLEMENT".into(),
                state: json!({}),
            })
            .await
            .unwrap();
        let lease = db
            .journal()
            .acquire_lease_for(run.id, "effects-test", Duration::from_secs(300))
            .await
            .unwrap()
            .expect("lease");
        World {
            hub,
            db,
            api,
            repo: format!("{OWNER}/{NAME}").parse().unwrap(),
            token,
            lease,
            run_id: run.id,
            version: run.version,
        }
    }

    pub fn executor(&self) -> EffectExecutor {
        EffectExecutor::new(
            self.db.journal().clone(),
            self.api.clone(),
            self.repo.clone(),
            OWNER.into(),
        )
    }

    /// Plans `intent` with `bodies` as the bodies read at phase start.
    pub fn plan(&self, intent: &EffectIntent, bodies: &BTreeMap<u64, String>) -> NewEffect {
        plan(intent, &self.plan_context(bodies)).expect("plan")
    }

    pub fn plan_context<'a>(&'a self, bodies: &'a BTreeMap<u64, String>) -> PlanContext<'a> {
        PlanContext {
            run_id: self.run_id,
            repo: &self.repo,
            html_base: "https://github.com",
            default_branch: "main",
            merge_method: "merge",
            bodies,
        }
    }

    /// Commits a transition carrying `effects` and returns their rows.
    pub async fn journal(&mut self, effects: Vec<NewEffect>) -> Vec<Effect> {
        let mut tx = self.db.journal().begin().await.unwrap();
        let (version, ids) = tx
            .commit_transition(&self.lease, self.version, "IMPLEMENT", &json!({}), &effects)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        self.version = version;
        let mut rows = Vec::new();
        for id in ids {
            rows.push(self.row(id).await);
        }
        rows
    }

    pub async fn row(&self, id: EffectId) -> Effect {
        self.db
            .journal()
            .get_effect(id)
            .await
            .unwrap()
            .expect("effect row")
    }

    /// Drives the current row of `id` once.
    pub async fn drive(&self, executor: &EffectExecutor, id: EffectId) -> DriveOutcome {
        let row = self.row(id).await;
        executor.drive(&self.lease, &row).await.expect("drive")
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

    pub fn fault(&self, method: &str, route: &str, kind: FaultKind, count: Option<u32>) {
        self.hub.set_faults(vec![FaultRule {
            method: Some(method.into()),
            route: Some(route.into()),
            kind,
            probability: None,
            count,
        }]);
    }

    pub fn clear_faults(&self) {
        self.hub.set_faults(Vec::new());
    }

    /// Creates an issue as alice, outside the executor (test setup or a
    /// human acting on GitHub).
    pub async fn human_issue(&self, title: &str, body: &str) -> u64 {
        autoforge::github::writes::create_issue(&self.api, &self.repo, title, body, &[])
            .await
            .unwrap()
            .number
    }

    pub async fn human_comment(&self, issue: u64, body: &str) -> u64 {
        autoforge::github::writes::create_comment(&self.api, &self.repo, issue, body)
            .await
            .unwrap()
            .id
    }

    pub async fn human_edit_issue(&self, issue: u64, body: &str) {
        autoforge::github::writes::update_issue_body(&self.api, &self.repo, issue, body)
            .await
            .unwrap();
    }

    pub fn token_text(&self) -> String {
        self.token.expose_secret().to_owned()
    }
}

/// The `body` field of a comment/body payload.
pub fn payload_body(effect: &NewEffect) -> String {
    let value: serde_json::Value = serde_json::from_slice(&effect.payload).unwrap();
    value["body"].as_str().unwrap().to_owned()
}

pub fn ambiguous(drop: bool) -> FaultKind {
    FaultKind::AmbiguousWrite { drop }
}
