//! Validation on the real `autoforge serve` (SPEC §12): a failing
//! candidate is never pushed, IMPLEMENT runs again with the failure in its
//! prompt, and the bound blocks the run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Phase, Role, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_validation_relaunches_implement_with_the_failure_and_blocks_at_the_cap() {
    let s = Scenario::new()
        .validation(["echo the widget test failed; exit 1"])
        .validation_cap(2)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("validation"), "{reason}");
    assert_eq!(s.launches(Role::Implement), 2);
    assert!(
        !s.prompt(Role::Implement, 1)
            .contains("validation of your last candidate failed"),
        "the first launch has no failure to show"
    );
    let second = s.prompt(Role::Implement, 2);
    assert!(
        second.contains("## The previous attempt failed validation"),
        "{second}"
    );
    assert!(
        second.contains("the widget test failed"),
        "the failed command is named"
    );
    assert!(
        s.pull_requests().await.is_empty(),
        "nothing was pushed or opened"
    );
    assert_eq!(s.git_pushes(), 0, "no push reached GitHub");
}
