//! Merging as a repository's settings and rules demand: the merge methods
//! it allows (GitHub's 405 for the others), a ruleset requiring approving
//! reviews (`blocked` until a writer approves), the squash commit, and the
//! files listing capped at 3,000 like GitHub's, and a pull request behind
//! its base: merged unless branch protection requires it up to date.

use serde_json::{Value, json};

use crate::support::{World, clone, git, world};

/// alice opens PR #1 from `topic`, which adds `files` files; its head.
async fn open_pull(w: &World, files: usize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", "topic"]);
    for n in 0..files {
        std::fs::write(work.join(format!("f{n}.txt")), format!("{n}\n")).unwrap();
    }
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "files"]);
    git(&work, &["push", "-q", "origin", "topic"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let created = w
        .http
        .post(format!("{}/repos/alice/widgets/pulls", w.hub.base_url()))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "Add files", "head": "topic", "base": "main"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    head
}

async fn call(
    w: &World,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let response = w
        .http
        .request(method, format!("{}{path}", w.hub.base_url()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Pushes a commit touching another file straight to `main`, so PR #1's
/// head no longer contains the base tip.
fn move_main(w: &World) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    std::fs::write(work.join("elsewhere.txt"), "moved\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "move main"]);
    git(&work, &["push", "-q", "origin", "main"]);
}

/// The PR's `mergeable_state` once GitHub has computed it.
async fn merge_state(w: &World) -> String {
    for _ in 0..100 {
        let (_, pull) = call(
            w,
            &w.alice,
            reqwest::Method::GET,
            "/repos/alice/widgets/pulls/1",
            Value::Null,
        )
        .await;
        if !pull["mergeable"].is_null() {
            return pull["mergeable_state"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("mergeable stayed null");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repository_answer_carries_its_merge_settings_and_the_callers_permissions() {
    let w = world().await;
    let (_, repo) = call(
        &w,
        &w.bob,
        reqwest::Method::GET,
        "/repos/alice/widgets",
        Value::Null,
    )
    .await;
    for key in [
        "allow_squash_merge",
        "allow_merge_commit",
        "allow_rebase_merge",
        "allow_auto_merge",
        "delete_branch_on_merge",
        "allow_update_branch",
        "use_squash_pr_title_as_default",
    ] {
        assert!(repo[key].is_boolean(), "{key}: {repo}");
    }
    assert_eq!(
        repo["permissions"],
        json!({"admin": false, "maintain": false, "push": true, "triage": true, "pull": true})
    );
    assert!(repo.get("organization").is_none(), "a user's repository");
    let (status, changed) = call(
        &w,
        &w.alice,
        reqwest::Method::PATCH,
        "/repos/alice/widgets",
        json!({"allow_rebase_merge": false}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(changed["allow_rebase_merge"], false);
    assert_eq!(changed["permissions"]["admin"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallowed_method_is_refused_with_405_and_a_squash_makes_one_commit() {
    let w = world().await;
    let head = open_pull(&w, 2).await;
    merge_state(&w).await;
    let settings = fakehub::world::RepoSettings {
        allow_squash_merge: false,
        ..Default::default()
    };
    w.hub
        .set_merge_rules(
            "alice",
            "widgets",
            &fakehub::MergeRules {
                settings: Some(settings),
                ..Default::default()
            },
        )
        .unwrap();
    let squash = json!({"sha": head, "merge_method": "squash",
        "commit_title": "Add files (#1)", "commit_message": "Closes #9"});
    let path = "/repos/alice/widgets/pulls/1/merge";
    let (status, refused) = call(&w, &w.alice, reqwest::Method::PUT, path, squash.clone()).await;
    assert_eq!(status, 405);
    assert_eq!(
        refused["message"],
        "Squash merges are not allowed on this repository."
    );

    let (status, _) = call(
        &w,
        &w.alice,
        reqwest::Method::PATCH,
        "/repos/alice/widgets",
        json!({"allow_squash_merge": true}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, before) = call(
        &w,
        &w.alice,
        reqwest::Method::GET,
        "/repos/alice/widgets/git/ref/heads/main",
        Value::Null,
    )
    .await;
    let (status, merged) = call(&w, &w.alice, reqwest::Method::PUT, path, squash).await;
    assert_eq!(status, 200, "{merged}");
    let tip = merged["sha"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("after");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    assert_eq!(
        git(&work, &["rev-parse", "HEAD"]),
        tip,
        "main is the squash"
    );
    assert_eq!(
        git(&work, &["log", "-1", "--format=%B"]).trim_end(),
        "Add files (#1)\n\nCloses #9"
    );
    let parents = git(&work, &["log", "-1", "--format=%P"]);
    assert_eq!(
        parents.trim(),
        before["object"]["sha"].as_str().unwrap(),
        "one commit on the base"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_review_blocks_until_a_writer_approves() {
    let w = world().await;
    let head = open_pull(&w, 1).await;
    w.hub
        .set_merge_rules(
            "alice",
            "widgets",
            &fakehub::MergeRules {
                required_approving_reviews: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(merge_state(&w).await, "blocked");
    let (_, rules) = call(
        &w,
        &w.bob,
        reqwest::Method::GET,
        "/repos/alice/widgets/rules/branches/main",
        Value::Null,
    )
    .await;
    assert_eq!(rules[0]["type"], "pull_request");
    assert_eq!(rules[0]["parameters"]["required_approving_review_count"], 1);
    let path = "/repos/alice/widgets/pulls/1/merge";
    let (status, refused) = call(
        &w,
        &w.alice,
        reqwest::Method::PUT,
        path,
        json!({"sha": head}),
    )
    .await;
    assert_eq!(status, 405);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("approving review"),
        "{refused}"
    );

    let reviews = "/repos/alice/widgets/pulls/1/reviews";
    let (status, _) = call(
        &w,
        &w.alice,
        reqwest::Method::POST,
        reviews,
        json!({"event": "APPROVE"}),
    )
    .await;
    assert_eq!(status, 422, "the author cannot approve");
    let (status, review) = call(
        &w,
        &w.bob,
        reqwest::Method::POST,
        reviews,
        json!({"event": "APPROVE"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        (review["state"].as_str(), review["commit_id"].as_str()),
        (Some("APPROVED"), Some(head.as_str()))
    );
    assert_eq!(merge_state(&w).await, "clean");
    let (_, listed) = call(&w, &w.alice, reqwest::Method::GET, reviews, Value::Null).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let delivered = w.hub.deliveries();
    assert!(
        delivered
            .iter()
            .any(|d| d.event == "pull_request_review" && d.action.as_deref() == Some("submitted")),
        "the review is delivered"
    );
    let (status, _) = call(
        &w,
        &w.alice,
        reqwest::Method::PUT,
        path,
        json!({"sha": head}),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_listing_stops_at_3000_while_changed_files_counts_them_all() {
    let w = world().await;
    open_pull(&w, 3001).await;
    merge_state(&w).await;
    let (_, pull) = call(
        &w,
        &w.alice,
        reqwest::Method::GET,
        "/repos/alice/widgets/pulls/1",
        Value::Null,
    )
    .await;
    assert_eq!(pull["changed_files"], 3001);
    let mut listed = 0;
    for page in 1..=40 {
        let (_, files) = call(
            &w,
            &w.alice,
            reqwest::Method::GET,
            &format!("/repos/alice/widgets/pulls/1/files?per_page=100&page={page}"),
            Value::Null,
        )
        .await;
        listed += files.as_array().unwrap().len();
    }
    assert_eq!(listed, 3000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_behind_its_base_merges_unless_protection_requires_it_up_to_date() {
    for strict in [false, true] {
        let w = world().await;
        let head = open_pull(&w, 1).await;
        move_main(&w);
        w.hub
            .set_merge_rules(
                "alice",
                "widgets",
                &fakehub::MergeRules {
                    require_up_to_date: Some(strict),
                    ..Default::default()
                },
            )
            .unwrap();
        let (_, rules) = call(
            &w,
            &w.bob,
            reqwest::Method::GET,
            "/repos/alice/widgets/rules/branches/main",
            Value::Null,
        )
        .await;
        assert_eq!(rules, json!([]), "no rule names checks, so none is listed");
        let path = "/repos/alice/widgets/pulls/1/merge";
        let (status, answer) = call(
            &w,
            &w.alice,
            reqwest::Method::PUT,
            path,
            json!({"sha": head}),
        )
        .await;
        if strict {
            assert_eq!(status, 405, "{answer}");
            assert!(
                answer["message"]
                    .as_str()
                    .unwrap()
                    .contains("not up to date"),
                "{answer}"
            );
            assert_eq!(merge_state(&w).await, "behind");
        } else {
            assert_eq!(
                status, 200,
                "GitHub merges a pull request behind its base: {answer}"
            );
        }
    }
}
