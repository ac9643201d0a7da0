//! Inline reviews on the real `autoforge serve`: each review round posts
//! one pull request review (event `COMMENT`) at the bound head, with an
//! inline comment at each finding whose location is a line of the diff and
//! the other findings in its body, which carries the `ai-inline-review`
//! marker. A restart posts no second review for a round. Fakehub refuses
//! a comment on a line outside the diff with GitHub's 422, so a wrong
//! placement fails the run here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use std::time::Duration;

use autoforge_journal::EffectKind;
use scenario::{Agents, Phase, Running, Scenario};
use serde_json::Value;

/// The reviews of pull request `number` as fakehub lists them.
async fn reviews(s: &Running, number: u64) -> Vec<Value> {
    s.get(&format!("/pulls/{number}/reviews"))
        .await
        .as_array()
        .cloned()
        .expect("a review listing")
}

/// The inline comments of review `id`.
async fn inline_comments(s: &Running, number: u64, id: &Value) -> Vec<Value> {
    s.get(&format!("/pulls/{number}/reviews/{id}/comments"))
        .await
        .as_array()
        .cloned()
        .expect("a comment listing")
}

/// `text` with every 40-digit SHA and the marker's nonce replaced, so a
/// snapshot pins the words, not one run's commits.
fn pinned(text: &str) -> String {
    let sha = regex::Regex::new("[0-9a-f]{40}").unwrap();
    let nonce = regex::Regex::new(r#""write":"[0-9a-f]{32}""#).unwrap();
    let run = regex::Regex::new(r#""run":[0-9]+"#).unwrap();
    let text = sha.replace_all(text, "<sha>");
    let text = nonce.replace_all(&text, r#""write":"<nonce>""#);
    run.replace_all(&text, r#""run":<run>"#).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_review_places_a_changed_line_inline_and_lists_the_rest_in_its_body() {
    let mut s = Scenario::new()
        .agents(
            Agents::scripted()
                .review(["inline", "clean"])
                .fix(["good", "R1-F1", "R1-F2"]),
        )
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = run.reaches(Phase::ReadyForMerge).await;
    let round_one_head = state.review.history[0].head_sha.to_string();
    let pr = s.pull().await.number.get();
    let run_id = run.id;

    let listed = reviews(&s, pr).await;
    assert_eq!(listed.len(), 2, "one review per round: {listed:?}");
    let first = &listed[0];
    assert_eq!(first["state"], "COMMENTED");
    assert_eq!(first["commit_id"], round_one_head.as_str());
    let body = first["body"].as_str().unwrap();
    assert!(body.contains("<!-- ai-inline-review: {"), "{body}");
    assert!(
        body.contains("R1-F2") && body.contains("`README.md:1`"),
        "the finding outside the diff is in the body: {body}"
    );
    assert!(!body.contains("R1-F1"), "the placed finding is not: {body}");
    let comments = inline_comments(&s, pr, &first["id"]).await;
    assert_eq!(comments.len(), 1, "{comments:?}");
    let comment = &comments[0];
    assert_eq!(
        (&comment["path"], &comment["line"], &comment["side"]),
        (
            &Value::from("feature.txt"),
            &Value::from(1),
            &Value::from("RIGHT")
        )
    );
    assert!(comment["start_line"].is_null());
    assert_eq!(comment["commit_id"], round_one_head.as_str());
    let clean = listed[1]["body"].as_str().unwrap();
    assert!(clean.contains("The round found nothing to fix."), "{clean}");
    assert!(inline_comments(&s, pr, &listed[1]["id"]).await.is_empty());
    insta::assert_snapshot!(
        "inline_review_round_with_findings",
        format!(
            "{}\n\n--- inline comment on {}:{} ---\n\n{}",
            pinned(body),
            comment["path"].as_str().unwrap(),
            comment["line"],
            comment["body"].as_str().unwrap()
        )
    );
    insta::assert_snapshot!("inline_review_clean_round", pinned(clean));

    // A restart recovers the run and re-reads GitHub: no review is
    // posted a second time.
    assert!(s.world.terminate().success());
    s.world.restart_serve(&[]).await;
    tokio::time::sleep(Duration::from_secs(3 * scenario::POLL_SECONDS)).await;
    let again = s.world.db.journal().list_effects(run_id).await.unwrap();
    let posted = again
        .iter()
        .filter(|e| e.kind == EffectKind::PostReview)
        .count();
    assert_eq!(posted, 2, "one post_review per round");
    assert_eq!(reviews(&s, pr).await.len(), 2, "no second review");
    let creates = s
        .world
        .hub
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with(&format!("/pulls/{pr}/reviews")))
        .count();
    assert_eq!(creates, 2, "each review was sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_review_spans_a_range_and_keeps_deleted_and_binary_files_in_its_body() {
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .implement(["inline_shapes", "{hub}/octo/widgets/issues/1"])
                .review(["inline_shapes", "clean"])
                .fix(["good", "R1-F1", "R1-F2", "R1-F3"]),
        )
        .start()
        .await;
    let issue = s.new_issue("a widget with a logo").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let pr = s.pull().await.number.get();

    let listed = reviews(&s, pr).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let comments = inline_comments(&s, pr, &listed[0]["id"]).await;
    assert_eq!(
        comments.len(),
        1,
        "only the range is on the diff: {comments:?}"
    );
    let range = &comments[0];
    assert_eq!(range["path"], "widget.txt");
    assert_eq!(
        (&range["start_line"], &range["line"]),
        (&Value::from(10), &Value::from(12))
    );
    assert_eq!(
        (&range["start_side"], &range["side"]),
        (&Value::from("RIGHT"), &Value::from("RIGHT"))
    );
    let body = listed[0]["body"].as_str().unwrap();
    for listed_there in ["R1-F2", "`README.md:1`", "R1-F3", "`logo.bin:1`"] {
        assert!(body.contains(listed_there), "{listed_there} in {body}");
    }
    assert!(!body.contains("R1-F1"), "{body}");
    assert!(body.contains("1 finding is shown on its line."), "{body}");
}
