//! Human rounds and operator guidance on the real `autoforge serve`: an
//! operator's `/autoforge fix <notes>` or review requesting changes becomes
//! findings `H<n>-F<k>` the fixer resolves and the next reviewer is shown;
//! an unblock reason reaches the next launch (SPEC §8a, §2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use scenario::{Agents, Marker, Phase, Role, Scenario, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_round_fix_command_at_ready_for_merge_is_resolved_and_shown_to_the_next_reviewer() {
    let s = Scenario::new()
        .agents(Agents::scripted().fix(["good", "H1-F1"]))
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let pr = s.pull().await;

    let asked = s
        .comment_as(&s.owner, pr, "/autoforge fix call the flag --dry-run")
        .await;
    eventually(scenario::PATIENCE, "the second review", || async {
        (s.launches(Role::Review) == 2).then_some(())
    })
    .await;
    let state = run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Fix), 1);
    let fix = s.prompt(Role::Fix, 1);
    assert!(fix.contains("H1-F1"), "{fix}");
    assert!(fix.contains("call the flag --dry-run"), "{fix}");
    let review = s.prompt(Role::Review, 2);
    assert!(
        review.contains("H1-F1") && review.contains("call the flag --dry-run"),
        "round 2 sees the human finding: {review}"
    );
    assert!(
        review.contains("\"finding_id\":\"H1-F1\""),
        "with its resolution: {review}"
    );
    assert_eq!(state.review.human_rounds, 1);
    let replies = pr.comments_with(Marker::Reply).await;
    let reply = replies
        .iter()
        .find(|r| r.body.contains(&asked.to_string()))
        .expect("the fix command is answered");
    assert!(reply.body.contains("H1-F1"), "{}", reply.body);
    let phases = run.phase_history().await;
    assert!(
        phases
            .windows(2)
            .any(|w| w == [Phase::ReadyForMerge, Phase::Fix]),
        "{phases:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_round_unblock_reason_reaches_the_next_launchs_prompt_as_operator_guidance() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["blocked", "{hub}/octo/widgets/issues/1"]))
        .start()
        .await;
    let issue = s.new_issue("two incompatible wishes").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::Blocked).await;

    s.comment_as(
        &s.owner,
        issue,
        "/autoforge unblock keep the second wish and drop the first",
    )
    .await;
    eventually(scenario::PATIENCE, "the relaunch", || async {
        (s.launches(Role::Implement) == 2).then_some(())
    })
    .await;

    let prompt = s.prompt(Role::Implement, 2);
    assert!(prompt.contains("## Operator guidance"), "{prompt}");
    assert!(
        prompt.contains("keep the second wish and drop the first"),
        "{prompt}"
    );
    assert!(
        !s.prompt(Role::Implement, 1).contains("Operator guidance"),
        "the first launch had none"
    );
    let state = run.reaches(Phase::Blocked).await;
    assert_eq!(state.operator_guidance, None, "used once, then dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_round_changes_requested_with_two_inline_comments_is_fixed_and_seen_by_round_two() {
    let s = Scenario::new()
        .agents(Agents::scripted().fix(["good", "H1-F1", "H1-F2", "H1-F3"]))
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let pr = s.pull().await;

    let review = s
        .review_as(
            &s.owner,
            pr,
            "REQUEST_CHANGES",
            "Two things before this can go in.",
            &[
                ("feature.txt", 1, "spell out the unit of the timeout"),
                ("feature.txt", 1, "log the retry count"),
            ],
        )
        .await;
    s.review_delivery_processed(review).await;
    eventually(scenario::PATIENCE, "the second review", || async {
        (s.launches(Role::Review) == 2).then_some(())
    })
    .await;
    let state = run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches(Role::Fix), 1, "one human round, one fixer");
    let fix = s.prompt(Role::Fix, 1);
    for text in [
        "H1-F1",
        "H1-F2",
        "H1-F3",
        "feature.txt:1",
        "spell out the unit of the timeout",
        "log the retry count",
        "Two things before this can go in.",
    ] {
        assert!(fix.contains(text), "the fixer is given {text:?}: {fix}");
    }
    let round_two = s.prompt(Role::Review, 2);
    for text in [
        "spell out the unit of the timeout",
        "log the retry count",
        "\"finding_id\":\"H1-F2\"",
    ] {
        assert!(
            round_two.contains(text),
            "round 2 sees {text:?}: {round_two}"
        );
    }
    assert_eq!(state.review.human_rounds, 1);
    assert_eq!(state.review.human_sources, [format!("review-{review}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_round_a_non_operators_review_changes_nothing() {
    let s = Scenario::new()
        .agents(Agents::scripted().fix(["good", "H1-F1"]))
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let before = run.snapshot().await;
    let pr = s.pull().await;
    let reader = s.person("rita", "read");

    let review = s
        .review_as(
            &reader,
            pr,
            "REQUEST_CHANGES",
            "Rewrite it in another language.",
            &[("feature.txt", 1, "delete this file")],
        )
        .await;
    s.review_delivery_processed(review).await;
    let journal = s.world.db.journal();
    let decided = eventually(scenario::PATIENCE, "the review's decision", || async {
        let events = journal.list_audit_events(run.id).await.unwrap();
        events
            .into_iter()
            .find(|e| e.kind == "human_review_decided")
    })
    .await;

    assert_eq!(decided.detail["accepted"], false, "{decided:?}");
    assert_eq!(decided.detail["actor"], "rita");
    run.assert_run_state_unchanged_since(&before).await;
    assert_eq!(s.launches(Role::Fix), 0);
    assert_eq!(run.state().await.phase, Phase::ReadyForMerge);
}
