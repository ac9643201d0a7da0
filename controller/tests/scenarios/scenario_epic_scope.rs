//! The EPIC agent's next-issue pick on the real `autoforge serve`: an open
//! issue of the same repository that is none of the EPIC's own issues is
//! rejected and the agent asked again, told which issues are the EPIC's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Phase, Running, Scenario};

/// An EPIC #1 with children #2 and #3, and an open issue #4 outside it;
/// the updater names `picks` one launch after another, then reports the
/// EPIC complete.
async fn epic_with_an_outsider(
    picks: [&str; 2],
) -> (
    Running,
    Vec<autoforge_journal::IssueNumber>,
    autoforge_journal::IssueNumber,
) {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .implement(["per_issue", "-"])
                .update_epic(["sequence", "{evidence}/epic-counter", picks[0], picks[1]]),
        )
        .merge_mode("auto")
        .start()
        .await;
    let (epic, children) = s.open_epic(2).await;
    assert_eq!(
        (epic.get(), children.as_slice()),
        (
            1,
            [
                autoforge_journal::testing::issue(2),
                autoforge_journal::testing::issue(3)
            ]
            .as_slice()
        )
    );
    let outsider = s.open_issue("An unrelated open issue").await;
    assert_eq!(outsider, autoforge_journal::testing::issue(4));
    s.operator_labels(epic).await;
    (s, children, outsider)
}

fn updater_log(s: &Running) -> String {
    std::fs::read_to_string(s.evidence_path("epic-counter.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pick_outside_the_epic_is_asked_again_and_the_run_goes_on_with_the_epics_issue() {
    let (s, children, outsider) =
        epic_with_an_outsider(["{hub}/octo/widgets/issues/4", "{hub}/octo/widgets/issues/3"]).await;
    let run = s.run_of(children[0]).await;

    let state = run.reaches(Phase::Done).await;

    assert_eq!(
        updater_log(&s),
        "full\nagain\nfull\n",
        "{:?}",
        run.phases().await
    );
    let asked = s.prompt("update_epic", 2);
    assert!(
        asked.contains("#4 is not one of EPIC #1's issues; its issues are #2, #3"),
        "the agent is told why and which issues are the EPIC's: {asked}"
    );
    assert_eq!(state.issue, children[1], "the run went on with #3");
    assert_eq!(state.merged_prs.len(), 2);
    let pulls = s.pulls().await;
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert!(
        pulls
            .iter()
            .all(|p| p["head"]["ref"] != format!("autoforge/{outsider}").as_str()),
        "nothing was started on the outsider"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn picks_outside_the_epic_until_the_bound_block_the_run() {
    let (s, children, outsider) =
        epic_with_an_outsider(["{hub}/octo/widgets/issues/4", "{hub}/octo/widgets/issues/4"]).await;
    let run = s.run_of(children[0]).await;

    let state = run.reaches(Phase::Blocked).await;

    assert_eq!(updater_log(&s), "full\nagain\n");
    let reason = state.blocked.unwrap().reason;
    assert!(
        reason.contains(&format!("#{outsider} is not one of EPIC #1's issues")),
        "{reason}"
    );
    assert_eq!(state.issue, children[0], "the outsider was never taken");
    assert_eq!(s.pulls().await.len(), 1);
}
