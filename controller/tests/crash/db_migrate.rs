//! A migration applied to a journal that holds live runs of the schema
//! before it (SPEC §6): the fixture database is built from the real
//! migration files up to the one before the newest, then filled with the
//! rows `serve` wrote for runs it was driving when it was SIGKILLed — one
//! parked in READY_FOR_MERGE, one in IMPLEMENT with its launch running,
//! one in IMPLEMENT with its pull request sent and not answered (the
//! `create_pr` effect attempted). The columns the newest migration added
//! are left out, as the older build never wrote them. The current `serve`
//! started on it migrates it and finishes every run, with every object on
//! GitHub once.
//!
//! The fixture is made afresh by every run of the test, so it always holds
//! what the current code writes; with the next migration it becomes the
//! journal of that migration's previous version without a change here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use autoforge::machine::Phase;
use autoforge_journal::testing::{TestDatabase, migration_versions};
use autoforge_journal::{EffectKind, RunFilter, Stage};
use common::scenario::{Agents, PATIENCE, Role, Scenario};
use fakehub::FaultRule;
use serde_json::Value;

use super::crash_serve::{comments_exactly_once, get};
use super::replica_serve::all_ready;

/// Where fakehub holds the first pull request a run sends.
const PR_GATE: &str = "first-pr";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_a_migration_applied_to_a_journal_with_live_runs_of_the_previous_schema_finishes_them_once()
 {
    let versions = migration_versions();
    let [.., previous, newest] = versions[..] else {
        panic!("at least two migrations: {versions:?}");
    };
    // Launch 2 of the implementer (the second issue's) waits for a
    // release that never comes: serve dies while it runs.
    let mut s = Scenario::new()
        .agents(
            Agents::scripted()
                .implement(["per_issue", "-"])
                .hold(Role::Implement, [2]),
        )
        .start()
        .await;
    let parked = s.new_issue("parked widget").await;
    let launched = s.new_issue("launched widget").await;
    let sent = s.new_issue("sent widget").await;

    s.operator_labels(parked).await;
    s.run_of(parked).await.reaches(Phase::ReadyForMerge).await;
    s.operator_labels(launched).await;
    s.launch_started(Role::Implement, 2).await;
    s.world.hub.set_faults(vec![
        FaultRule::hold("POST", "/repos/{owner}/{repo}/pulls", PR_GATE).times(1),
    ]);
    s.operator_labels(sent).await;
    let sent_run = s.run_of(sent).await.id;
    let journal = s.world.db.journal().clone();
    common::eventually(PATIENCE, "the pull request sent and held", || async {
        let effects = journal.list_effects(sent_run).await.unwrap();
        let attempted = effects
            .iter()
            .any(|e| e.kind == EffectKind::CreatePr && e.stage == Stage::Attempted);
        (attempted && s.world.hub.held(PR_GATE) == 1).then_some(())
    })
    .await;
    s.world.kill_serve();
    // The request serve sent goes on without it: the write may land with
    // nobody left to read the answer.
    s.world.hub.set_faults(Vec::new());
    s.world.hub.release(PR_GATE);

    let live = journal.list_runs(RunFilter::All, 100).await.unwrap();
    let phases: BTreeSet<&str> = live.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(live.len(), 3);
    assert!(live.iter().all(|r| r.active), "{live:?}");
    // The run whose pull request is in flight stands where its
    // transition put it (IMPLEMENT, or REVIEW once that is committed).
    assert!(
        phases.contains("IMPLEMENT") && phases.contains("READY_FOR_MERGE"),
        "{phases:?}"
    );
    let mut pending = 0;
    for run in &live {
        for effect in journal.list_effects(run.id).await.unwrap() {
            assert_eq!(effect.unanswered, 0, "no row needs the newest column");
            pending += usize::from(effect.stage != Stage::Observed);
        }
    }
    assert!(pending >= 1, "an effect is still in flight");

    let fixture = TestDatabase::fresh_migrated_to(previous).await;
    let copied = s.world.db.copy_rows_to(&fixture).await.unwrap();
    assert!(
        !fixture.journal().migrations_current().await.unwrap(),
        "the fixture stops before migration {newest}"
    );
    let current = std::mem::replace(&mut s.world.db, fixture);
    s.world.restart_serve(&[]).await;

    let journal = s.world.db.journal();
    assert!(journal.migrations_current().await.unwrap());
    all_ready(&s.world, 3, Duration::from_secs(300)).await;
    let owner = s.owner.clone();
    for run in journal.list_runs(RunFilter::All, 100).await.unwrap() {
        let effects = journal.list_effects(run.id).await.unwrap();
        comments_exactly_once(&s.world, &owner, &effects, &format!("run {}", run.id)).await;
        let prs = effects
            .iter()
            .filter(|e| e.kind == EffectKind::CreatePr)
            .count();
        assert_eq!(prs, 1, "run {}: one create_pr effect", run.id);
    }
    let pulls = get(
        &s.world,
        &owner,
        &format!(
            "/repos/{}/pulls?state=all&per_page=100",
            s.world.repository()
        ),
    )
    .await;
    let heads: BTreeSet<&str> = pulls
        .iter()
        .filter_map(|p| p["head"]["ref"].as_str())
        .collect();
    assert_eq!(pulls.len(), 3, "one pull request per run: {pulls:?}");
    assert_eq!(heads.len(), 3, "{pulls:?}");
    assert!(
        s.launches(Role::Implement) >= 4,
        "the launch serve died in was launched again"
    );
    let still_there: Vec<Value> = pulls.into_iter().filter(|p| p["state"] == "open").collect();
    assert_eq!(still_there.len(), 3);
    eprintln!(
        "db migrate: {copied} rows at migration {previous} (3 live runs, {pending} effects \
         in flight), migrated to {newest}, every run finished once"
    );
    drop(current);
}
