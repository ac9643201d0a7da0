//! The effect executor's side of the world: one run, leased by the test,
//! whose transitions journal planned effects, and helpers to drive them
//! and to inject faults.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use autoforge::effects::{DriveOutcome, EffectExecutor, PlanContext, plan};
use autoforge::machine::EffectIntent;
use autoforge_journal::{Effect, EffectId, IssueNumber, Lease, NewEffect, NewRun, RunId};
use fakehub::{FaultKind, FaultRule};
use secrecy::ExposeSecret;
use serde_json::json;

use super::world::{OWNER, REPOSITORY, World};

/// The run of [`World::with_leased_run`] and the version its next
/// transition commits on.
pub struct LeasedRun {
    lease: Lease,
    run_id: RunId,
    version: i64,
}

impl World {
    /// An empty world with one run in IMPLEMENT for issue #1, leased by
    /// the test, so effects can be journalled and driven for it.
    pub async fn with_leased_run() -> World {
        let mut world = World::empty().await;
        let journal = world.db.journal();
        let run = journal
            .create_run(&NewRun {
                repository: REPOSITORY.into(),
                epic: None,
                issue: autoforge_journal::testing::issue(1),
                phase: "IMPLEMENT".into(),
                state: json!({}),
            })
            .await
            .unwrap();
        let lease = journal
            .acquire_lease_for(run.id, "effects-test", Duration::from_secs(300))
            .await
            .unwrap()
            .expect("lease");
        world.leased = Some(LeasedRun {
            lease,
            run_id: run.id,
            version: run.version,
        });
        world
    }

    fn leased(&self) -> &LeasedRun {
        self.leased
            .as_ref()
            .expect("a world made by World::with_leased_run")
    }

    /// The test's lease on its run.
    pub fn lease(&self) -> &Lease {
        &self.leased().lease
    }

    /// The leased run.
    pub fn run_id(&self) -> RunId {
        self.leased().run_id
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
    pub fn plan(&self, intent: &EffectIntent, bodies: &BTreeMap<IssueNumber, String>) -> NewEffect {
        plan(intent, &self.plan_context(bodies)).expect("plan")
    }

    pub fn plan_context<'a>(
        &'a self,
        bodies: &'a BTreeMap<IssueNumber, String>,
    ) -> PlanContext<'a> {
        PlanContext {
            run_id: self.run_id(),
            repo: &self.repo,
            html_base: "https://github.com",
            default_branch: "main",
            bodies,
            diffs: &autoforge::effects::NO_DIFFS,
        }
    }

    /// Commits a transition carrying `effects` and returns their rows.
    pub async fn journal(&mut self, effects: Vec<NewEffect>) -> Vec<Effect> {
        let leased = self.leased();
        let mut tx = self.db.journal().begin().await.unwrap();
        let (version, ids) = tx
            .commit_transition(
                &leased.lease,
                leased.version,
                "IMPLEMENT",
                &json!({}),
                &effects,
            )
            .await
            .unwrap();
        tx.commit().await.unwrap();
        if let Some(leased) = self.leased.as_mut() {
            leased.version = version;
        }
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
        executor.drive(self.lease(), &row).await.expect("drive")
    }

    pub fn fault(&self, method: &str, route: &str, kind: FaultKind, count: Option<u32>) {
        let rule = FaultRule::on(method, route, kind);
        self.hub.set_faults(vec![match count {
            Some(count) => rule.times(count),
            None => rule,
        }]);
    }

    pub fn clear_faults(&self) {
        self.hub.set_faults(Vec::new());
    }

    /// Creates an issue as the owner, outside the executor (test setup or a
    /// human acting on GitHub).
    pub async fn human_issue(&self, title: &str, body: &str) -> IssueNumber {
        autoforge::github::writes::create_issue(&self.api, &self.repo, title, body, &[])
            .await
            .unwrap()
            .number
    }

    pub async fn human_comment(&self, issue: IssueNumber, body: &str) -> u64 {
        autoforge::github::writes::create_comment(&self.api, &self.repo, issue, body)
            .await
            .unwrap()
            .id
    }

    pub async fn human_edit_issue(&self, issue: IssueNumber, body: &str) {
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
