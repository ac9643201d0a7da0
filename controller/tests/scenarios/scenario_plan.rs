//! The PLAN phase on the real `autoforge serve` (SPEC §4 PLAN): a planner
//! writes a plan, the controller posts it on the issue (`ai-plan`, one
//! comment per version), and under `plan.mode = "approve"` the run waits
//! for an operator's `/autoforge approve [answers]` or `/autoforge replan
//! <notes>`; the implementer's prompt carries the plan and the answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::machine::Awaiting;

use crate::common::scenario;

use scenario::{Agents, Issue, Marker, Phase, Role, RunRef, RunState, Scenario, eventually};

/// A run that plans under `mode` with the scripted planner's `questions`.
async fn planning(mode: &'static str) -> scenario::Running {
    Scenario::new()
        .plan_mode(mode)
        .agents(Agents::scripted().plan(["questions"]))
        .start()
        .await
}

/// Waits until the run waits in PLAN for approval with `versions` plan
/// comments on the issue.
async fn waits_for_approval(run: &RunRef<'_>, issue: &Issue<'_>, versions: usize) -> RunState {
    // Until the run has started its state document is not yet one.
    run.reaches(Phase::Plan).await;
    let state = eventually(
        scenario::PATIENCE,
        "the run waiting for approval",
        || async {
            let state = run.state().await;
            (state.awaiting == Awaiting::PlanApproval && state.plan.version as usize == versions)
                .then_some(state)
        },
    )
    .await;
    assert_eq!(issue.comments_with(Marker::Plan).await.len(), versions);
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_approved_with_answers_reaches_the_implementers_prompt() {
    let s = planning("approve").await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = waits_for_approval(&run, &issue, 1).await;
    assert_eq!(state.phase, Phase::Plan);
    assert_eq!(
        s.launches(Role::Implement),
        0,
        "nothing is built before approval"
    );
    let plans = issue.comments_with(Marker::Plan).await;
    let comment = &plans[0].body;
    assert!(
        comment.contains("Implementation plan — version 1"),
        "{comment}"
    );
    assert!(comment.contains("`/autoforge approve`"), "{comment}");
    assert!(
        comment.contains("**Question 3.** Which runtime?"),
        "{comment}"
    );

    let approval = s
        .comment_as(
            &s.owner,
            issue,
            "/autoforge approve 1=howdy partner 3=use tokio",
        )
        .await;
    run.reaches(Phase::ReadyForMerge).await;

    let prompt = s.prompt(Role::Implement, 1);
    for text in [
        "## The plan to implement",
        "Plan version 1: add feature.txt with the feature.",
        "Write feature.txt (plan 1).",
        "Answer (the operator's answer): howdy partner",
        "Answer (default): no",
        "Answer (the operator's answer): use tokio",
        "the operator `octo` approved it",
    ] {
        assert!(
            prompt.contains(text),
            "the implementer is given {text:?}: {prompt}"
        );
    }
    let replies = issue.comments_with(Marker::Reply).await;
    let reply = replies
        .iter()
        .find(|r| r.body.contains(&approval.to_string()))
        .expect("the approval is answered");
    assert!(reply.body.contains("plan 1 approved"), "{}", reply.body);
    assert!(
        !reply.body.contains("howdy"),
        "answers are not echoed: {}",
        reply.body
    );
    let phases = run.phase_history().await;
    assert!(
        phases
            .windows(2)
            .any(|w| w == [Phase::Plan, Phase::Implement]),
        "{phases:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_replan_posts_a_second_plan_and_the_approval_uses_it() {
    let s = planning("approve").await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    waits_for_approval(&run, &issue, 1).await;

    s.comment_as(&s.owner, issue, "/autoforge replan keep the greeting short")
        .await;
    waits_for_approval(&run, &issue, 2).await;
    let second = s.prompt(Role::Plan, 2);
    assert!(second.contains("## Operator guidance"), "{second}");
    assert!(second.contains("keep the greeting short"), "{second}");
    assert!(!s.prompt(Role::Plan, 1).contains("Operator guidance"));
    let plans = issue.comments_with(Marker::Plan).await;
    assert!(plans[1].body.contains("version 2"), "{}", plans[1].body);

    s.comment_as(&s.owner, issue, "/autoforge approve").await;
    run.reaches(Phase::ReadyForMerge).await;
    let prompt = s.prompt(Role::Implement, 1);
    assert!(
        prompt.contains("Plan version 2: add feature.txt"),
        "{prompt}"
    );
    assert!(!prompt.contains("Plan version 1"), "{prompt}");
    assert!(prompt.contains("Answer (default): hello"), "{prompt}");
    assert_eq!(s.launches(Role::Plan), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_post_mode_implements_without_waiting_for_a_command() {
    let s = planning("post").await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;

    let plans = issue.comments_with(Marker::Plan).await;
    assert_eq!(plans.len(), 1);
    assert!(
        plans[0]
            .body
            .contains("The implementer starts from this plan now"),
        "{}",
        plans[0].body
    );
    assert!(
        !plans[0].body.contains("/autoforge approve"),
        "{}",
        plans[0].body
    );
    assert!(
        run.command_decisions().await.is_empty(),
        "no command was needed"
    );
    let prompt = s.prompt(Role::Implement, 1);
    assert!(
        prompt.contains("Plan version 1: add feature.txt"),
        "{prompt}"
    );
    assert!(
        prompt.contains("nobody was asked to approve it"),
        "{prompt}"
    );
    assert!(prompt.contains("Answer (default): hello"), "{prompt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_approve_by_a_non_operator_is_refused_and_changes_nothing() {
    let s = planning("approve").await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    waits_for_approval(&run, &issue, 1).await;
    let before = run.snapshot().await;
    let reader = s.person("rita", "read");

    let comment = s.comment_as(&reader, issue, "/autoforge approve 1=b").await;
    eventually(scenario::PATIENCE, "the refusal recorded", || {
        run.decision_on(comment)
    })
    .await;
    s.comment_delivery_processed(comment).await;
    let reply = eventually(scenario::PATIENCE, "the reply saying why", || async {
        let replies = issue.comments_with(Marker::Reply).await;
        replies
            .into_iter()
            .find(|r| r.body.contains(&comment.to_string()))
    })
    .await;

    run.assert_run_state_unchanged_since(&before).await;
    let decisions = run.command_decisions().await;
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(!decisions[0].accepted);
    assert!(reply.body.contains("approve"), "{}", reply.body);
    assert_eq!(s.launches(Role::Implement), 0, "nothing was implemented");
    assert_eq!(run.state().await.awaiting, Awaiting::PlanApproval);
}
