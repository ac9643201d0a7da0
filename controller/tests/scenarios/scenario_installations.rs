//! Installations change while `serve` runs: a repository added to the
//! App's installation is served without a restart, the runs of one
//! removed from it stop with the reason recorded and nothing written, and
//! a suspended installation's runs wait, writing nothing, and complete
//! once it is unsuspended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::{IssueNumber, testing};
use reqwest::Method;
use scenario::{
    Agents, FaultKind, FaultRule, OWNER, PATIENCE, POLL_SECONDS, Phase, REPO, Role, Running,
    Scenario, eventually,
};
use serde_json::json;
use std::time::Duration;

const ADDED: &str = "gadgets";

/// Opens an issue in `repository` as the owner and labels it; its number
/// (an [`scenario::Issue`] handle names the scenario's own repository).
async fn labelled_issue_in(s: &Running, repository: &str) -> IssueNumber {
    let number = s
        .world
        .rest_as(
            &s.owner,
            Method::POST,
            &format!("/repos/{OWNER}/{repository}/issues"),
            json!({"title": "a gadget", "body": "please"}),
        )
        .await["number"]
        .as_u64()
        .unwrap();
    let issue = testing::issue(number);
    s.world
        .rest_as(
            &s.owner,
            Method::POST,
            &format!("/repos/{OWNER}/{repository}/issues/{issue}/labels"),
            json!({"labels": ["autoforge"]}),
        )
        .await;
    issue
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_added_to_the_installation_later_is_served_without_a_restart() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["per_issue", "-"]))
        .start()
        .await;
    s.world.add_repository_to_installation(ADDED).await;
    let issue = labelled_issue_in(&s, ADDED).await;

    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;
    assert_eq!(state.repository, format!("{OWNER}/{ADDED}"));
    let pulls = s
        .world
        .rest_as(
            &s.owner,
            Method::GET,
            &format!("/repos/{OWNER}/{ADDED}/pulls"),
            json!({}),
        )
        .await;
    assert_eq!(pulls.as_array().map(Vec::len), Some(1), "{pulls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_a_repository_removed_from_the_installation_stops_and_writes_nothing_more() {
    let s = Scenario::new().start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let writes_before = s.world.all_writes();

    s.world.add_repository_to_installation(ADDED).await;
    s.world.set_installation_repositories(&[ADDED]);
    let stopped = run.reaches(Phase::Stopped).await;
    let reason = stopped.failure.expect("the reason is recorded");
    assert!(
        reason.contains(&format!("{OWNER}/{REPO} is no longer served")),
        "{reason}"
    );
    let audit = s
        .world
        .db
        .journal()
        .list_audit_events_of_kind("repository_access_lost", 10)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    // Adding the second repository wrote nothing either: no write reached
    // GitHub after the run parked.
    assert_eq!(s.world.all_writes(), writes_before);
}

/// The run's GitHub writes, in the order fakehub answered them, as
/// `METHOD route` (numbers and ids vary between worlds; routes do not).
fn repository_writes(s: &Running) -> Vec<String> {
    s.world
        .hub
        .requests()
        .iter()
        .filter(|r| r.method != "GET" && r.route.starts_with("/repos/"))
        .map(|r| format!("{} {}", r.method, r.route))
        .collect()
}

/// The writes of a run nothing disturbs, from labelling to READY_FOR_MERGE.
async fn undisturbed_writes() -> Vec<String> {
    let s = Scenario::new().start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    s.run_of(issue).await.reaches(Phase::ReadyForMerge).await;
    repository_writes(&s)
}

/// Suspends the installation while the reviewer runs, lets the reviewer
/// finish during the suspension, and unsuspends: nothing at all is sent
/// for the installation meanwhile (GitHub would answer 403), the run
/// records why it waits, and it then completes with the writes of `s`'s
/// undisturbed twin.
async fn suspended_while_reviewing(s: &Running) -> Vec<String> {
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    s.launch_started(Role::Review, 1).await;
    let requests_before = s.world.hub.requests().len();
    let writes_before = repository_writes(s);

    s.world.suspend_installation();
    let journal = s.world.db.journal();
    let suspended = eventually(PATIENCE, "the run records why it waits", || async {
        let events = journal.list_audit_events(run.id).await.unwrap();
        events
            .into_iter()
            .find(|event| event.kind == "installation_suspended")
    })
    .await;
    s.release(Role::Review, 1);
    // The review's verdict is journalled with the writes it asks for (a
    // transition with effects after the suspension), and those writes wait
    // for the installation.
    eventually(PATIENCE, "the review verdict is journalled", || async {
        let events = journal.list_audit_events(run.id).await.unwrap();
        events
            .into_iter()
            .find(|event| {
                event.id > suspended.id
                    && event.kind == "transition"
                    && event.detail["effects"].as_i64() > Some(0)
            })
            .map(|_| ())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(POLL_SECONDS + 2)).await;
    let during: Vec<_> = s.world.hub.requests()[requests_before..]
        .iter()
        .filter(|r| r.status == 403 || r.route.starts_with("/repos/"))
        .map(|r| format!("{} {} {}", r.status, r.method, r.path))
        .collect();
    assert!(during.is_empty(), "sent while suspended: {during:?}");
    assert_eq!(repository_writes(s), writes_before);
    let reason = suspended.detail["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("installation on {OWNER} was suspended by {OWNER}")),
        "{reason}"
    );

    s.world.unsuspend_installation();
    let done = run.reaches(Phase::ReadyForMerge).await;
    assert_eq!(done.failure, None);
    let resumed = journal.list_audit_events(run.id).await.unwrap();
    assert!(
        resumed
            .iter()
            .any(|event| event.kind == "installation_unsuspended"),
        "{resumed:?}"
    );
    repository_writes(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_suspended_while_its_reviewer_runs_waits_and_completes_with_the_writes_of_an_undisturbed_run()
 {
    let expected = undisturbed_writes().await;
    let s = Scenario::new()
        .agents(Agents::scripted().hold(Role::Review, [1]))
        .start()
        .await;
    let writes = suspended_while_reviewing(&s).await;
    assert_eq!(writes, expected);
    assert_eq!(
        s.launches(Role::Review),
        1,
        "the verdict was kept, not redone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_whose_webhooks_are_lost_is_seen_by_the_poller_and_behaves_the_same() {
    let expected = undisturbed_writes().await;
    let s = Scenario::new()
        .agents(Agents::scripted().hold(Role::Review, [1]))
        .faults(vec![FaultRule::on_webhook(
            "installation",
            FaultKind::WebhookDrop,
        )])
        .start()
        .await;
    let writes = suspended_while_reviewing(&s).await;
    assert_eq!(writes, expected);
    assert_eq!(
        s.launches(Role::Review),
        1,
        "the verdict was kept, not redone"
    );
    let delivered = s
        .world
        .db
        .journal()
        .list_audit_events_of_kind("installation_suspended", 10)
        .await
        .unwrap();
    assert!(!delivered.is_empty());
}

const PR_GATE: &str = "create-pr";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_in_flight_when_the_installation_is_suspended_stays_attempted_and_lands_once_after_unsuspension()
 {
    let s = Scenario::new()
        .faults(vec![FaultRule::hold(
            "POST",
            "/repos/{owner}/{repo}/pulls",
            PR_GATE,
        )])
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    eventually(PATIENCE, "the pull request's creation held", || async {
        (s.world.hub.held(PR_GATE) == 1).then_some(())
    })
    .await;
    s.world.hub.set_faults(Vec::new());
    // GitHub suspends the installation while the write is on its way: it
    // reaches GitHub afterwards and is refused with 403.
    s.world.suspend_installation();
    assert_eq!(s.world.hub.release(PR_GATE), 1);
    let journal = s.world.db.journal();
    eventually(PATIENCE, "the run records why it waits", || async {
        let events = journal.list_audit_events(run.id).await.unwrap();
        events
            .iter()
            .any(|event| event.kind == "installation_suspended")
            .then_some(())
    })
    .await;
    let refused: Vec<_> = s
        .world
        .hub
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.route == "/repos/{owner}/{repo}/pulls")
        .map(|r| r.status)
        .collect();
    assert_eq!(refused, [403], "the held write was refused");
    let create = journal
        .list_effects(run.id)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == autoforge_journal::EffectKind::CreatePr)
        .expect("the pull request's effect");
    assert_eq!(
        create.stage,
        autoforge_journal::Stage::Attempted,
        "an unknown outcome, not a refusal: {create:?}"
    );

    s.world.unsuspend_installation();
    let done = run.reaches(Phase::ReadyForMerge).await;
    assert_eq!(done.failure, None);
    assert!(done.blocked.is_none(), "{:?}", done.blocked);
    let phases = run.phase_history().await;
    assert!(!phases.contains(&Phase::Blocked), "{phases:?}");
    let pulls = s
        .world
        .rest_as(
            &s.owner,
            Method::GET,
            &format!("/repos/{OWNER}/{REPO}/pulls?state=all"),
            json!({}),
        )
        .await;
    assert_eq!(pulls.as_array().map(Vec::len), Some(1), "{pulls}");
}
