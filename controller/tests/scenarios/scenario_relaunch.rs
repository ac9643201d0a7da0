//! Work kept across relaunches on the real `autoforge serve`: a relaunch
//! after a failed validation or a crash continues from the last candidate
//! (its commits and uncommitted files left in place and described), is
//! shown each command's outcome and output or the crashed launch's output
//! tail, and the reviewer sees the validation of the HEAD it reviews.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

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
