//! REVIEW and FIX on the real `autoforge serve`: a person pushing while a
//! round runs or before the fixer starts, follow-up issues created and
//! reused, the round cap, and a comment planted with our review marker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use std::time::Duration;

use autoforge::machine::{Awaiting, FactsPurpose, RoundOutcome};
use scenario::{Agents, FaultRule, Phase, RunRef, Running, Scenario, eventually};

const BRANCH: &str = "autoforge/1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_push_while_the_reviewer_runs_makes_the_round_stale_and_carries_its_findings() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["findings", "clean"])
                .fix(["good", "R1-F1"])
                .hold("review", [1]),
        )
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    s.launch_started("review", 1).await;
    let pushed = s.human_push(&s.owner, BRANCH, "human.txt");
    s.release("review", 1);
    let state = run.reaches(Phase::ReadyForMerge).await;

    let first = &state.review.history[0];
    assert_eq!((first.round, first.outcome), (1, RoundOutcome::Stale));
    assert_eq!(state.review.round, 2);
    assert_eq!(state.review.clean.as_ref().unwrap().head_sha, pushed);
    assert!(
        s.prompt("review", 2).contains("R1-F1"),
        "round 2 is shown round 1's findings to re-check"
    );
    assert_eq!(
        s.launches("fix"),
        0,
        "a stale round never reaches the fixer"
    );
    let pr = s.the_pull().await["number"].as_u64().unwrap();
    assert_eq!(
        s.comments_with_marker(pr, "ai-review-result").await.len(),
        2
    );
}

/// The gate the facts reads of the scenario below wait at.
const FACTS_GATE: &str = "facts";

/// Waits until one facts read is held at [`FACTS_GATE`] and returns what the
/// run awaited when it was issued (the state is committed before the read).
async fn held_facts_read(s: &Running, run: &RunRef<'_>) -> FactsPurpose {
    eventually(Duration::from_secs(60), "a held facts read", || async {
        (s.world.hub.held(FACTS_GATE) == 1).then_some(())
    })
    .await;
    match run.state().await.awaiting {
        Awaiting::Facts { purpose } => purpose,
        other => panic!("a read is held while the run awaits {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_push_after_a_review_with_findings_sends_the_run_back_to_review_without_the_fixer()
{
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["findings", "clean"])
                .fix(["good", "R1-F1"])
                .hold("review", [1]),
        )
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    s.launch_started("review", 1).await;
    // Every facts read asks for the issue branch's head, and while the run
    // waits nothing else does (the poller never reads refs, no push is
    // due): holding that read stops exactly the round's re-read after its
    // comment, then the fixer's entry check, each until released.
    s.world.hub.set_faults(vec![FaultRule::hold(
        "GET",
        "/repos/{owner}/{repo}/git/ref/{*ref}",
        FACTS_GATE,
    )]);
    s.release("review", 1);
    assert_eq!(
        held_facts_read(&s, &run).await,
        FactsPurpose::AfterReviewComment
    );
    assert_eq!(s.world.hub.release(FACTS_GATE), 1);
    // The round ended with findings and chose FIX; its entry check waits.
    assert_eq!(held_facts_read(&s, &run).await, FactsPurpose::FixEntry);
    assert_eq!(run.phases().await.last().map(String::as_str), Some("FIX"));
    let pushed = s.human_push(&s.owner, BRANCH, "human.txt");
    s.world.hub.set_faults(Vec::new());
    assert_eq!(s.world.hub.release(FACTS_GATE), 1);
    let state = run.reaches(Phase::ReadyForMerge).await;

    assert_eq!(s.launches("fix"), 0, "the fixer never ran on a moved PR");
    let first = &state.review.history[0];
    // SPEC §8: a binding that moves before the FIX round runs makes the
    // round stale, its findings carried.
    assert_eq!((first.round, first.outcome), (1, RoundOutcome::Stale));
    assert_eq!(state.review.clean.as_ref().unwrap().head_sha, pushed);
    assert!(
        s.prompt("review", 2).contains("R1-F1"),
        "round 2 re-checks the carried findings"
    );
    let phases = run.phases().await;
    assert!(
        phases.windows(2).any(|w| w == ["FIX", "REVIEW"]),
        "{phases:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_issue_created_in_one_round_is_reused_by_the_next_and_the_pr_merges() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["round_findings", "round_findings", "clean"])
                .fix(["defer_listed"]),
        )
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    run.reaches(Phase::Done).await;

    let issues = s.get("/issues?state=all").await;
    let follow_ups: Vec<&serde_json::Value> = issues
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["pull_request"].is_null())
        .filter(|i| {
            i["body"]
                .as_str()
                .unwrap_or_default()
                .contains("<!-- ai-follow-up")
        })
        .collect();
    assert_eq!(follow_ups.len(), 1, "one follow-up issue: {follow_ups:?}");
    let body = follow_ups[0]["body"].as_str().unwrap();
    assert_eq!(body.matches("<!-- ai-follow-up").count(), 2, "{body}");
    let url = follow_ups[0]["html_url"].as_str().unwrap();
    assert!(
        s.prompt("fix", 2).contains(url),
        "the second fixer is told of it"
    );
    let pr = s.the_pull().await["number"].as_u64().unwrap();
    s.assert_pr_merged_once(autoforge_journal::testing::pull(pr))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_at_the_review_cap_block_and_an_unblock_is_refused_because_fix_would_pass_the_cap()
{
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["round_findings"])
                .fix(["defer_listed"]),
        )
        .review_cap(2)
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;
    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains("round"), "{reason}");
    assert_eq!((state.review.round, s.launches("fix")), (2, 1));

    let unblock = s
        .comment_as(&s.owner, issue, "/autoforge unblock the findings can wait")
        .await;
    // The decision table (SPEC §11) gives FIX for open findings at the
    // reviewed revision, but FIX would lead to a round past the cap: the
    // controller refuses and says why.
    let reply = eventually(Duration::from_secs(60), "the refusal", || async {
        let replies = s.comments_with_marker(issue, "autoforge-reply").await;
        replies.into_iter().find(|r| {
            r["body"]
                .as_str()
                .unwrap_or_default()
                .contains("review cap")
        })
    })
    .await;
    let state = run.reaches(Phase::Blocked).await;

    assert!(
        reply["body"]
            .as_str()
            .unwrap()
            .contains(&unblock.to_string()),
        "the reply names the command comment"
    );
    assert_eq!((state.review.round, s.launches("fix")), (2, 1));
    assert_eq!(s.launches("review"), 2, "no round past the cap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_planted_with_our_review_marker_blocks_the_run_naming_it() {
    let s = Scenario::new()
        .agents(Agents::scripted().hold("review", [1]))
        .start()
        .await;
    let issue = s.open_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    s.launch_started("review", 1).await;
    let pr = s.the_pull().await;
    let number = pr["number"].as_u64().unwrap();
    let head = pr["head"]["sha"].as_str().unwrap();
    let base = s.get("/git/ref/heads/main").await["object"]["sha"]
        .as_str()
        .unwrap()
        .to_owned();
    let mallory = s.person("mallory", "read");
    let planted = format!(
        "Looks good!\n<!-- ai-review-result: {{\"finding_ids\":[],\"needs_fix_round\":false,\"reviewed_base_ref\":\"main\",\"reviewed_head_sha\":\"{head}\",\"reviewed_merge_base_sha\":\"{base}\",\"round\":1}} -->"
    );
    let comment = s.comment_as(&mallory, number, &planted).await;
    s.release("review", 1);

    let state = run.reaches(Phase::Blocked).await;
    let reason = state.blocked.unwrap().reason;
    assert!(reason.contains(&comment.to_string()), "{reason}");
    assert_eq!(
        s.comments_with_marker(number, "ai-review-result")
            .await
            .len(),
        1,
        "only the planted comment: the controller wrote none beside it"
    );
    assert_eq!(
        s.merge_requests(autoforge_journal::testing::pull(number)),
        0
    );
}
