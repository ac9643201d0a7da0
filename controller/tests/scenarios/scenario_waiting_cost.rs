//! Waiting costs nothing, on the real `autoforge serve`, measured by
//! fakehub's rate-limit accounting: once its ETags are warm, a run parked
//! in READY_FOR_MERGE (`merge.mode = "never"`) or BLOCKED, and repositories
//! with nothing labelled, are re-read every poll interval with conditional
//! requests that all answer `304` and cost no points. A change during the
//! wait is still seen when every webhook is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, FaultRule, POLL_SECONDS, Phase, Running, Scenario, Spent};

/// The backstop never grows past one poll interval here: a waiting run
/// re-reads its facts every interval, the most it ever reads.
fn every_interval() -> Scenario {
    Scenario::new().backstop_max_seconds(POLL_SECONDS)
}

/// A route only the run's facts read asks (the PR's merge base).
const COMPARE: &str = "/repos/{owner}/{repo}/compare/{*basehead}";

/// Poll intervals a run is given to warm its ETags after it settled.
const WARM_UP: u32 = 3;
/// Poll intervals measured: one simulated stretch of waiting.
const MEASURED: u32 = 10;

/// Waits for the ETags to warm, then measures `MEASURED` intervals and
/// requires them to be free while reads still happen (so the test would
/// see a read that is charged rather than pass on no reads at all).
async fn assert_waiting_is_free(s: &Running, what: &str) -> Spent {
    let _warm = s.spent_over(WARM_UP).await;
    let spent = s.spent_over(MEASURED).await;
    eprintln!("{what}: {spent:?}");
    assert!(
        spent.conditional_hits > 0,
        "{what}: the controller kept reading, conditionally: {spent:?}"
    );
    assert_eq!(
        spent.points, 0,
        "{what}: {MEASURED} poll intervals of waiting cost points: {spent:?}"
    );
    spent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_parked_for_a_human_merge_costs_no_points_once_its_etags_are_warm() {
    let s = every_interval().merge_mode("never").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let parked = run.snapshot().await;

    let spent = assert_waiting_is_free(&s, "a parked run").await;
    // About once per interval (a re-read's own time stretches the pauses).
    assert!(
        spent.reads_of(COMPARE) >= MEASURED as usize - 2,
        "the backstop re-read the facts every interval: {spent:?}"
    );
    run.assert_run_state_unchanged_since(&parked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_parked_run_rereads_its_facts_less_and_less_often() {
    let s = Scenario::new().merge_mode("never").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;

    // Pauses of 1, 2, 4, 8… poll intervals: a handful of facts reads in
    // twelve intervals where a fixed re-check would make twelve.
    let spent = s.spent_over(12).await;
    let reads = spent.reads_of(COMPARE);
    assert!((1..=5).contains(&reads), "{reads} facts reads: {spent:?}");
    run.reaches(Phase::ReadyForMerge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_run_costs_no_points_once_its_etags_are_warm() {
    let s = every_interval()
        .agents(Agents::scripted().implement(["workflow", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.new_issue("a widget with CI").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;

    assert_waiting_is_free(&s, "a blocked run").await;
    run.reaches(Phase::Blocked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_idle_repositories_polled_for_ten_intervals_cost_no_points() {
    let s = every_interval().start().await;
    s.add_idle_repositories(20).await;

    let spent = assert_waiting_is_free(&s, "twenty idle repositories").await;
    assert!(
        spent.requests >= 20 * MEASURED as usize,
        "every idle repository was polled every interval: {spent:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_merge_of_a_parked_pr_is_seen_with_every_webhook_dropped() {
    let s = Scenario::new().merge_mode("never").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let _warm = s.spent_over(WARM_UP).await;

    s.world.hub.set_faults(vec![FaultRule::drop_all_webhooks()]);
    let pull = s.pull().await;
    pull.merge_as(&s.owner).await;

    // Seen by the poll alone, within a few intervals.
    run.reaches_within(Phase::Done, s.poll_interval() * 4).await;
    pull.assert_merged_once().await;
}
