//! Work kept across relaunches on the real `autoforge serve`: a relaunch
//! after a failed validation or a crash continues from the last candidate
//! (its commits and uncommitted files left in place and described), is
//! shown each command's outcome and output or the crashed launch's output
//! tail, and the reviewer sees the validation of the HEAD it reviews. A
//! relaunch after a failed launch waits a recorded, doubling pause, which
//! a stop ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;
use serde_json::Value;

use scenario::{Agents, Phase, Role, Scenario};

const ISSUE_URL: &str = "{hub}/octo/widgets/issues/1";

/// Passes only on a tree holding both the first launch's and the repair's
/// file, so a relaunch that lost the first commit cannot pass it.
const BOTH_FILES: &str = "test -f feature.txt || { echo feature.txt is missing; exit 1; }; \
                          test -f repaired.txt || { echo repaired.txt is missing; exit 1; }";

fn implementer(modes: [&str; 2]) -> Agents {
    Agents::scripted().implement([
        "by_launch",
        ISSUE_URL,
        "{evidence}/implement.count",
        modes[0],
        modes[1],
    ])
}

fn implementer3(modes: [&str; 3]) -> Agents {
    Agents::scripted().implement([
        "by_launch",
        ISSUE_URL,
        "{evidence}/implement.count",
        modes[0],
        modes[1],
        modes[2],
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaunch_after_a_failed_validation_continues_from_the_failed_candidate() {
    let s = Scenario::new()
        .agents(implementer(["leave_notes", "repair"]))
        .validation(["echo checking the widget", BOTH_FILES])
        .validation_cap(3)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Implement), 2);
    let first = s.prompt(Role::Implement, 1);
    assert!(!first.contains("## This worktree has uncommitted changes"));
    assert!(!first.contains("validation of your last candidate failed"));
    let second = s.prompt(Role::Implement, 2);
    for expected in [
        "## The controller's validation of your last candidate failed",
        "This is attempt 2 of\nat most 3",
        "- [0] `echo checking the widget` PASS in",
        "` FAIL in",
        "repaired.txt is missing",
        "checking the widget",
        "## Earlier work on this issue is kept",
        "## This worktree has uncommitted changes",
        "?? notes.txt",
    ] {
        assert!(second.contains(expected), "{expected:?} in:\n{second}");
    }
    assert!(
        !second.contains("The controller reset this worktree"),
        "nothing forced a reset: {second}"
    );
    let review = s.prompt(Role::Review, 1);
    let head = s.pull().await.head_sha().await;
    for expected in [
        "## The controller's own validation".to_owned(),
        format!("exported the tree of\n`{head}`"),
        "PASS in".to_owned(),
        "checking the widget".to_owned(),
    ] {
        assert!(review.contains(&expected), "{expected:?} in:\n{review}");
    }
    assert!(!review.contains("` FAIL in"), "{review}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaunch_after_a_crash_gets_the_crashed_launchs_commits_and_output_tail() {
    let s = Scenario::new()
        .agents(implementer(["crash_midway", "repair"]))
        .validation([BOTH_FILES])
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Implement), 2);
    let second = s.prompt(Role::Implement, 2);
    for expected in [
        "## The previous launch of this phase did not finish",
        "`exit-nonzero`",
        "halfway through the widget, then the agent died",
        "## Earlier work on this issue is kept",
    ] {
        assert!(second.contains(expected), "{expected:?} in:\n{second}");
    }
}

/// The relaunch pauses the driver recorded for `run`, oldest first.
async fn relaunch_pauses(s: &scenario::Running, run: autoforge_journal::RunId) -> Vec<Value> {
    s.world
        .db
        .journal()
        .list_audit_events(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| event.kind == autoforge::driver::RELAUNCH_BACKOFF)
        .map(|event| event.detail)
        .collect()
}

fn until(pause: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(pause["until"].as_str().unwrap())
        .unwrap()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relaunches_after_failed_launches_wait_a_recorded_doubling_pause_and_success_resets_it() {
    let s = Scenario::new()
        .agents(implementer3(["crash", "crash", "good"]))
        .relaunch_backoff(1, 30)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Implement), 3);
    let pauses = relaunch_pauses(&s, run.id).await;
    assert_eq!(
        pauses.len(),
        2,
        "one pause per relaunch, none after success: {pauses:?}"
    );
    let retries: Vec<u64> = pauses
        .iter()
        .map(|p| p["retry"].as_u64().unwrap())
        .collect();
    assert_eq!(retries, [1, 2]);
    let delays: Vec<u64> = pauses
        .iter()
        .map(|p| p["delay_ms"].as_u64().unwrap())
        .collect();
    // Equal jitter: half of the doubled pause fixed, half drawn.
    assert!((500..=1_000).contains(&delays[0]), "{delays:?}");
    assert!((1_000..=2_000).contains(&delays[1]), "{delays:?}");
    for pause in &pauses {
        assert_eq!(pause["after_outcome"], "exit-nonzero", "{pause}");
    }
    // Each relaunch's row starts after the deadline its pause recorded.
    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implement: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    assert_eq!(implement.len(), 3);
    for (pause, relaunch) in pauses.iter().zip(&implement[1..]) {
        assert!(
            relaunch.started_at >= until(pause),
            "{pause} vs {relaunch:?}"
        );
        assert_eq!(pause["after_launch"].as_i64(), Some(relaunch.id.0 - 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_the_pause_before_a_relaunch_and_nothing_is_launched_again() {
    // Ten minutes to twenty before the relaunch: far beyond the test's
    // patience, so only the stop can end the wait.
    let s = Scenario::new()
        .agents(implementer(["crash", "good"]))
        .relaunch_backoff(1_200, 1_200)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let pause = scenario::eventually(scenario::PATIENCE, "a recorded pause", || async {
        relaunch_pauses(&s, run.id).await.into_iter().next()
    })
    .await;
    assert!(pause["delay_ms"].as_u64().unwrap() >= 600_000, "{pause}");

    s.comment_as(&s.owner, issue, "/autoforge stop").await;
    run.reaches(Phase::Stopped).await;

    assert_eq!(s.launches(Role::Implement), 1, "the relaunch never started");
    let journal = s.world.db.journal();
    assert_eq!(journal.list_launches(run.id).await.unwrap().len(), 1);
}
