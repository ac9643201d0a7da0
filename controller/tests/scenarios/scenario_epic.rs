//! EPICs on the real `autoforge serve`: a three-issue EPIC driven to DONE
//! at two roadmap cadences, a person's edit of the EPIC body while the
//! updater runs, and a next-issue pick from another repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use autoforge_journal::EffectKind;
use std::time::Duration;

use scenario::{Agents, FaultKind, FaultRule, Marker, Phase, Role, Running, Scenario, eventually};

/// An updater that names the given picks one launch after another, then
/// reports the EPIC complete.
fn epic_agents<const N: usize>(picks: [&str; N]) -> Agents {
    let mut args = vec!["sequence", "{evidence}/epic-counter"];
    args.extend(picks);
    let agents = Agents::scripted().implement(["per_issue", "-"]);
    match args.as_slice() {
        [a, b] => agents.update_epic([a, b]),
        [a, b, c] => agents.update_epic([a, b, c]),
        [a, b, c, d] => agents.update_epic([a, b, c, d]),
        _ => unreachable!("at most two picks"),
    }
}

/// `full` or `again` per updater launch.
fn updater_log(s: &Running) -> String {
    std::fs::read_to_string(s.evidence_path("epic-counter.log")).unwrap_or_default()
}

/// Labels the EPIC and drives its three children to DONE; the number of
/// roadmap splices the run planned.
async fn three_issue_epic(every: u32) -> usize {
    let s = Scenario::new()
        .agents(epic_agents([
            "{hub}/octo/widgets/issues/3",
            "{hub}/octo/widgets/issues/4",
        ]))
        .merge_mode("auto")
        .roadmap_every(every)
        .start()
        .await;
    let (epic, children) = s.new_epic(3).await;
    assert_eq!(
        children,
        [
            s.issue(autoforge_journal::testing::issue(2)),
            s.issue(autoforge_journal::testing::issue(3)),
            s.issue(autoforge_journal::testing::issue(4))
        ]
    );
    s.operator_labels(epic).await;

    let run = s.run_of(children[0]).await;
    let state = run.reaches(Phase::Done).await;

    assert_eq!(
        state.issue,
        autoforge_journal::testing::issue(4),
        "the run ended on the last child"
    );
    let pulls = s.pull_requests().await;
    assert_eq!(pulls.len(), 3, "one PR per child: {pulls:?}");
    for pr in &pulls {
        pr.assert_merged_once().await;
    }
    assert_eq!(state.merged_prs.len(), 3);
    let progress = epic.comments_with(Marker::EpicProgress).await;
    assert_eq!(progress.len(), 3, "one progress comment per merge");
    assert_eq!(updater_log(&s), "full\nfull\nfull\n");
    let body = epic.body().await;
    assert!(
        body.starts_with("please"),
        "the person's text kept: {body:?}"
    );
    assert_eq!(body.matches("ai-controller-roadmap:start").count(), 1);
    assert!(body.contains("- step 3 of the EPIC is done"), "{body}");
    run.effect_count(EffectKind::SpliceEpicRoadmap).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epic_of_three_issues_with_roadmap_cadence_one_updates_the_roadmap_after_every_merge() {
    assert_eq!(three_issue_epic(1).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epic_of_three_issues_with_roadmap_cadence_two_updates_it_after_the_second_merge_and_at_the_end()
 {
    assert_eq!(three_issue_epic(2).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_edit_of_the_epic_body_while_the_updater_runs_re_requests_the_section_and_keeps_their_bytes()
 {
    let s = Scenario::new()
        .agents(epic_agents([]).hold(Role::UpdateEpic, [1]))
        .merge_mode("auto")
        .start()
        .await;
    let (epic, children) = s.new_epic(1).await;
    s.operator_labels(epic).await;
    let run = s.run_of(children[0]).await;

    s.launch_started(Role::UpdateEpic, 1).await;
    // The splice plans on the body it reads once the updater answered and
    // re-reads it just before writing; slowing issue reads opens a window
    // between the two for the person's edit.
    s.world.hub.set_faults(vec![
        FaultRule::on(
            "GET",
            "/repos/{owner}/{repo}/issues/{number}",
            FaultKind::Latency { ms: 5000 },
        )
        .times(4),
    ]);
    s.release(Role::UpdateEpic, 1);
    eventually(Duration::from_secs(60), "the splice planned", || async {
        (run.effect_count(EffectKind::SpliceEpicRoadmap).await > 0).then_some(())
    })
    .await;
    let edited = "please\n\nAlso: gadgets, written by a person mid-update.";
    epic.edit_body_as(&s.owner, edited).await;
    run.reaches(Phase::Done).await;

    assert_eq!(
        updater_log(&s),
        "full\nagain\n",
        "the section was asked again"
    );
    assert!(
        s.prompt(Role::UpdateEpic, 2)
            .contains("UPDATE_EPIC (asked again)"),
        "the second launch is a re-request"
    );
    let body = epic.body().await;
    assert!(
        body.starts_with(edited),
        "the person's bytes kept: {body:?}"
    );
    assert_eq!(body.matches("ai-controller-roadmap:start").count(), 1);
    assert_eq!(epic.comments_with(Marker::EpicProgress).await.len(), 1);
}

/// A pick of another repository is rejected like any ineligible pick: the
/// agent is asked once more, and a second such pick blocks the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_issue_from_another_repository_is_asked_again_and_a_second_such_pick_blocks() {
    let s = Scenario::new()
        .agents(epic_agents([
            "{hub}/octo/gadgets/issues/3",
            "{hub}/octo/gadgets/issues/3",
        ]))
        .merge_mode("auto")
        .start()
        .await;
    let (epic, children) = s.new_epic(2).await;
    s.operator_labels(epic).await;
    let run = s.run_of(children[0]).await;

    let state = run.reaches(Phase::Blocked).await;

    assert_eq!(
        updater_log(&s),
        "full\nagain\n",
        "{:?}",
        run.phase_history().await
    );
    let reason = state.blocked.expect("a blocked reason").reason;
    assert!(reason.contains("repository"), "{reason}");
    assert_eq!(
        state.issue, children[0].number,
        "no issue of another repository taken"
    );
    assert_eq!(epic.comments_with(Marker::EpicProgress).await.len(), 1);
}
