//! Merging on the real `autoforge serve`: a person's merge noticed under
//! `merge.mode = "never"`, and the pre-merge gate refusing a failing
//! check, a draft and a protected path a person changed (SPEC §10).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Phase, Role, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_merge_mode_never_a_persons_merge_is_noticed_and_the_run_is_done() {
    let s = Scenario::new().merge_mode("never").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;
    let pr = s.pull_numbered(state.pr.unwrap());
    assert_eq!(pr.merge_requests(), 0, "never: the controller waits");

    pr.merge_as(&s.owner).await;
    let state = run.reaches(Phase::Done).await;

    assert_eq!(
        state.merged_prs,
        vec![pr.number],
        "the person's merge is counted"
    );
    assert_eq!(pr.merge_requests(), 1, "only the person's merge request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_makes_the_merge_gate_refuse_and_the_run_blocks() {
    let s = Scenario::new().merge_mode("on-command").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;
    let pr = s.pull_numbered(state.pr.unwrap());
    s.add_check(
        state.review.clean.unwrap().head_sha.as_str(),
        "ci",
        "failure",
    );

    s.comment_as(&s.owner, issue, "/autoforge merge").await;
    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("check"), "{reason}");
    assert_eq!(pr.merge_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_pull_request_makes_the_merge_gate_refuse_and_the_run_blocks() {
    let s = Scenario::new().merge_mode("on-command").start().await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let pr = s.pull_numbered(run.reaches(Phase::ReadyForMerge).await.pr.unwrap());
    pr.set_draft(true);

    s.comment_as(&s.owner, issue, "/autoforge merge").await;
    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("draft"), "{reason}");
    assert_eq!(pr.merge_requests(), 0);
}

/// The controller never pushes a protected change itself (see
/// `scenario_protected`); the gate still refuses one a person pushed onto
/// the pull request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_file_a_person_pushed_to_the_pull_request_makes_the_merge_gate_refuse() {
    let s = Scenario::new()
        .agents(Agents::scripted().hold(Role::Review, [1]))
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.new_issue("a widget with CI").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    s.launch_started(Role::Review, 1).await;
    s.human_push(&s.owner, "autoforge/1", ".github/workflows/x.yml");
    s.release(Role::Review, 1);

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("pre-merge gate"), "{reason}");
    assert!(reason.contains("protected"), "{reason}");
    assert_eq!(
        state.review.round, 2,
        "refused at the gate, after a clean review of the person's head"
    );
    assert_eq!(s.pull_numbered(state.pr.unwrap()).merge_requests(), 0);
}
