//! Protected paths before the push, on the real `autoforge serve`: a
//! candidate that changes `merge.protected_paths` is never pushed (pushing
//! to a branch can already start `on: push` workflows), whether the agent
//! wrote the change or the branch already held it, in IMPLEMENT and in FIX;
//! an unblock asks the agent again, told why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::testing;
use scenario::{Agents, Marker, Phase, Role, Running, Scenario};

const ISSUE_URL: &str = "{hub}/octo/widgets/issues/1";
const BRANCH: &str = "autoforge/1";

/// The run's status comment on issue 1.
async fn status_comment(s: &Running) -> String {
    let found = s
        .issue(testing::issue(1))
        .comments_with(Marker::Status)
        .await;
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].body.clone()
}

/// Nothing of the candidate reached GitHub: no git push, no branch, no PR.
fn assert_nothing_published(s: &Running, pushes_before: usize) {
    assert_eq!(
        s.pushes_to(BRANCH),
        pushes_before,
        "no push reached fakehub"
    );
    assert_eq!(s.world.writes_to("POST", "/pulls"), 0, "no PR was opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_implementer_adding_a_workflow_blocks_the_run_before_anything_is_pushed() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["workflow", ISSUE_URL]))
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.new_issue("a widget with CI").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("`.github/workflows/x.yml`"), "{reason}");
    assert!(reason.contains("not pushed"), "{reason}");
    assert_nothing_published(&s, 0);
    assert_eq!(s.branch_head(BRANCH), None, "the branch was never created");
    assert!(s.pull_requests().await.is_empty());
    assert_eq!(state.pr, None);
    let status = status_comment(&s).await;
    assert!(status.contains("**BLOCKED**"), "{status}");
    assert!(
        status.contains("changes protected paths") && status.contains(".github/workflows/x.yml"),
        "the status comment names the path: {status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_work_on_the_branch_that_changed_a_workflow_keeps_the_candidate_from_being_pushed()
{
    let s = Scenario::new().merge_mode("auto").start().await;
    let issue = s.new_issue("a widget").await;
    let earlier = s.human_branch(&s.owner, BRANCH, ".github/workflows/x.yml");
    let pushes = s.pushes_to(BRANCH);
    assert_eq!(pushes, 1, "the person's push is recorded");
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(
        reason.contains("`.github/workflows/x.yml`"),
        "the branch's own commit counts: {reason}"
    );
    assert_eq!(
        s.launches(Role::Implement),
        1,
        "the agent wrote only feature.txt"
    );
    assert_nothing_published(&s, pushes);
    assert_eq!(
        s.branch_head(BRANCH).as_deref(),
        Some(earlier.as_str()),
        "the branch stays where the person left it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unblock_asks_the_implementer_again_and_only_the_clean_candidate_is_pushed() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["workflow_until_told", ISSUE_URL]))
        .start()
        .await;
    let issue = s.new_issue("a widget with CI").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;
    assert_nothing_published(&s, 0);

    s.comment_as(&s.owner, issue, "/autoforge unblock no workflow changes")
        .await;
    let state = run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Implement), 2);
    let told = s.prompt(Role::Implement, 2);
    assert!(
        told.contains("changes protected paths") && told.contains(".github/workflows/x.yml"),
        "the second launch is told why the first commit was dropped: {told}"
    );
    assert_eq!(s.pushes_to(BRANCH), 1, "one push: the clean candidate");
    let pr = s.pull_numbered(state.pr.unwrap());
    assert_eq!(
        pr.changed_files().await,
        ["feature.txt"],
        "no workflow reached the branch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_adding_a_workflow_blocks_and_the_pull_request_stays_at_the_reviewed_head() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["findings", "clean"])
                .fix(["workflow", "R1-F1"]),
        )
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.as_ref().unwrap().reason.clone();
    assert!(reason.contains("`.github/workflows/x.yml`"), "{reason}");
    assert_eq!(state.blocked.unwrap().from, Phase::Fix);
    assert_eq!(s.launches(Role::Fix), 1);
    assert_eq!(s.pushes_to(BRANCH), 1, "only the implementer's push");
    let reviewed = state.review.binding.unwrap().head_sha;
    assert_eq!(
        s.pull().await.head_sha().await,
        reviewed.as_str(),
        "the fix was not pushed"
    );
    assert_eq!(s.branch_head(BRANCH).as_deref(), Some(reviewed.as_str()));
}
