//! A later run of the same issue finds the pull request an earlier run
//! opened, by the `ai-implementation` marker naming the issue's URL, on the
//! real `autoforge serve`: after stop and relabel, and after an unblock
//! with no pull request bound. Neither run adopts its own PR or gets stuck.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Phase, RunRef, Running, Scenario};

const ISSUE_URL: &str = "{hub}/octo/widgets/issues/1";

/// A first run driven to READY_FOR_MERGE and stopped, then the trigger
/// label removed and added again; the PR and the second run. The second
/// run's implementer adds a commit of its own (`per_issue`), so its review
/// binds a new head.
async fn stopped_and_relabelled(
    s: &Running,
    issue: autoforge_journal::IssueNumber,
) -> (autoforge_journal::PullNumber, RunRef<'_>) {
    s.operator_labels(issue).await;
    let first = s.run_of(issue).await;
    let pr = first.reaches(Phase::ReadyForMerge).await.pr.unwrap();
    s.comment_as(&s.owner, issue, "/autoforge stop").await;
    first.reaches(Phase::Stopped).await;
    s.operator_unlabels(issue).await;
    // The removal is settled before the label comes back, so that it can
    // only ever concern the stopped run.
    s.issue_delivery_processed(issue, "unlabeled").await;
    s.operator_labels(issue).await;
    (pr, s.run_after(issue, first.id).await)
}

/// The one PR of the scenario still carries exactly one implementation
/// marker: nothing adopted it a second time.
async fn assert_one_marked_pr(s: &Running, pr: autoforge_journal::PullNumber) {
    let pull = s.the_pull().await;
    assert_eq!(pull["number"], pr.get());
    let body = pull["body"].as_str().unwrap();
    assert_eq!(body.matches("<!-- ai-implementation").count(), 1, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_stop_and_relabel_the_new_run_resumes_with_the_runs_own_pull_request() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement([
            "by_launch",
            ISSUE_URL,
            "{evidence}/implement.count",
            "good",
            "per_issue",
        ]))
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    let (pr, second) = stopped_and_relabelled(&s, issue).await;

    let state = second.reaches(Phase::ReadyForMerge).await;

    assert_eq!(state.pr, Some(pr), "the earlier run's PR is the run's own");
    assert_one_marked_pr(&s, pr).await;
    assert_eq!(s.launches("review"), 2, "one clean review per run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_with_no_pull_request_bound_finds_the_runs_own_pull_request() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement([
            "by_launch",
            ISSUE_URL,
            "{evidence}/implement.count",
            "good",
            "blocked",
            "per_issue",
        ]))
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    let (pr, second) = stopped_and_relabelled(&s, issue).await;
    let blocked = second.reaches(Phase::Blocked).await;
    assert_eq!(blocked.pr, None, "blocked before any PR was bound");

    s.comment_as(&s.owner, issue, "/autoforge unblock try again")
        .await;
    let state = second.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches("implement"), 3);
    assert_eq!(state.pr, Some(pr), "the earlier run's PR is the run's own");
    assert_one_marked_pr(&s, pr).await;
}
