//! The status comment of an issue an EPIC's run has finished with, on the
//! real `autoforge serve`: once the run moves on to the next issue, the
//! finished issue's status says it was merged (and where the run went),
//! offering no commands, instead of still showing UPDATE_EPIC and
//! `/autoforge stop`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Marker, Phase, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_of_an_issue_the_epic_run_left_says_it_was_merged_with_no_commands() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .implement(["per_issue", "-"])
                .update_epic([
                    "sequence",
                    "{evidence}/epic-counter",
                    "{hub}/octo/widgets/issues/3",
                ]),
        )
        .merge_mode("auto")
        .start()
        .await;
    let (epic, children) = s.new_epic(2).await;
    s.operator_labels(epic).await;
    let run = s.run_of(children[0]).await;
    let state = run.reaches(Phase::Done).await;
    assert_eq!(state.issue, autoforge_journal::testing::issue(3));

    let first_pr = state.merged_prs[0];
    let left = children[0].comments_with(Marker::Status).await;
    assert_eq!(left.len(), 1, "{left:?}");
    let body = &left[0].body;
    assert!(
        body.contains(&format!("- Finished: merged in #{first_pr}")),
        "{body}"
    );
    assert!(body.contains("went on to #3"), "{body}");
    assert!(
        !body.contains("UPDATE_EPIC") && !body.contains("/autoforge"),
        "no phase of the run elsewhere and no commands: {body}"
    );

    let last = children[1].comments_with(Marker::Status).await;
    assert_eq!(last.len(), 1, "{last:?}");
    assert!(last[0].body.contains("**DONE**"), "{}", last[0].body);
}
