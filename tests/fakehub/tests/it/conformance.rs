//! Every operation of the OpenAPI subset, called over HTTP, with each
//! response body validated against GitHub's schema for that status.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{World, clone, git, spec, world};

const R: &str = "/repos/{owner}/{repo}";

fn t(suffix: &str) -> String {
    format!("{R}{suffix}")
}

/// Push a branch `name` with one commit changing `file` to `content`.
fn push_branch(w: &World, name: &str, file: &str, content: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", name]);
    std::fs::write(work.join(file), content).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", &format!("change {file}")]);
    git(&work, &["push", "-q", "origin", name]);
    git(&work, &["rev-parse", "HEAD"])
}

async fn wait_mergeable(w: &World, number: u64) -> Value {
    for _ in 0..100 {
        let (_, pr) = w
            .call(
                "GET",
                &t("/pulls/{pull_number}"),
                &format!("/repos/alice/widgets/pulls/{number}"),
                &w.alice,
                None,
            )
            .await;
        if !pr["mergeable"].is_null() {
            return pr;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("mergeability never became known");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_with_githubs_documented_shape() {
    let w = world().await;
    let a = w.alice.clone();
    let p = "/repos/alice/widgets";

    // Repository and labels.
    assert_eq!(w.call("GET", R, p, &a, None).await.0, 200);
    assert_eq!(
        w.call("PATCH", R, p, &a, Some(json!({"default_branch": "main"})))
            .await
            .0,
        200
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/labels"),
            &format!("{p}/labels"),
            &a,
            Some(json!({"name": "autoforge", "color": "b60205"}))
        )
        .await
        .0,
        201
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/labels"),
            &format!("{p}/labels"),
            &a,
            Some(json!({"name": "autoforge"}))
        )
        .await
        .0,
        422
    );
    assert_eq!(
        w.call("GET", &t("/labels"), &format!("{p}/labels"), &a, None)
            .await
            .0,
        200
    );

    // Issues.
    let (s, issue) = w
        .call(
            "POST",
            &t("/issues"),
            &format!("{p}/issues"),
            &a,
            Some(json!({"title": "Add a widget", "body": "Please.", "labels": ["autoforge"]})),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(issue["number"], 1);
    let (s, epic) = w
        .call(
            "POST",
            &t("/issues"),
            &format!("{p}/issues"),
            &a,
            Some(json!({"title": "EPIC"})),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(
        w.call(
            "POST",
            &t("/issues"),
            &format!("{p}/issues"),
            &a,
            Some(json!({"body": "no title"}))
        )
        .await
        .0,
        422
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues"),
            &format!("{p}/issues?state=all"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}"),
            &format!("{p}/issues/1"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}"),
            &format!("{p}/issues/99"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    let (s, edited) = w
        .call(
            "PATCH",
            &t("/issues/{issue_number}"),
            &format!("{p}/issues/1"),
            &a,
            Some(json!({"title": "Add two widgets"})),
        )
        .await;
    assert_eq!(
        (s, edited["title"].as_str()),
        (200, Some("Add two widgets"))
    );

    // Comments and reactions.
    let (s, comment) = w
        .call(
            "POST",
            &t("/issues/{issue_number}/comments"),
            &format!("{p}/issues/1/comments"),
            &w.bob,
            Some(json!({"body": "/autoforge status"})),
        )
        .await;
    assert_eq!(s, 201);
    let cid = comment["id"].as_u64().unwrap();
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}/comments"),
            &format!("{p}/issues/1/comments"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/comments/{comment_id}"),
            &format!("{p}/issues/comments/{cid}"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/comments/{comment_id}"),
            &format!("{p}/issues/comments/424242"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        w.call(
            "PATCH",
            &t("/issues/comments/{comment_id}"),
            &format!("{p}/issues/comments/{cid}"),
            &w.bob,
            Some(json!({"body": "/autoforge stop"}))
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "PATCH",
            &t("/issues/comments/{comment_id}"),
            &format!("{p}/issues/comments/{cid}"),
            &w.bob,
            Some(json!({}))
        )
        .await
        .0,
        422
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/comments/{comment_id}/reactions"),
            &format!("{p}/issues/comments/{cid}/reactions"),
            &a,
            Some(json!({"content": "eyes"}))
        )
        .await
        .0,
        201
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/comments/{comment_id}/reactions"),
            &format!("{p}/issues/comments/{cid}/reactions"),
            &a,
            Some(json!({"content": "eyes"}))
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/comments/{comment_id}/reactions"),
            &format!("{p}/issues/comments/{cid}/reactions"),
            &a,
            Some(json!({"content": "wave"}))
        )
        .await
        .0,
        422
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/comments/{comment_id}/reactions"),
            &format!("{p}/issues/comments/{cid}/reactions"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/{issue_number}/reactions"),
            &format!("{p}/issues/1/reactions"),
            &a,
            Some(json!({"content": "rocket"}))
        )
        .await
        .0,
        201
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}/reactions"),
            &format!("{p}/issues/1/reactions"),
            &a,
            None
        )
        .await
        .0,
        200
    );

    // Labels on an issue.
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/{issue_number}/labels"),
            &format!("{p}/issues/1/labels"),
            &a,
            Some(json!({"labels": ["bug"]}))
        )
        .await
        .0,
        200
    );
    let (s, labels) = w
        .call(
            "PUT",
            &t("/issues/{issue_number}/labels"),
            &format!("{p}/issues/1/labels"),
            &a,
            Some(json!({"labels": ["autoforge", "epic"]})),
        )
        .await;
    assert_eq!((s, labels.as_array().map(Vec::len)), (200, Some(2)));
    assert_eq!(
        w.call(
            "DELETE",
            &t("/issues/{issue_number}/labels/{name}"),
            &format!("{p}/issues/1/labels/epic"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "DELETE",
            &t("/issues/{issue_number}/labels/{name}"),
            &format!("{p}/issues/1/labels/epic"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        w.call(
            "DELETE",
            &t("/issues/{issue_number}/labels"),
            &format!("{p}/issues/2/labels"),
            &a,
            None
        )
        .await
        .0,
        204
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}/labels"),
            &format!("{p}/issues/1/labels"),
            &a,
            None
        )
        .await
        .0,
        200
    );
    let (s, events) = w
        .call(
            "GET",
            &t("/issues/{issue_number}/events"),
            &format!("{p}/issues/1/events"),
            &a,
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "labeled" && e["actor"]["login"] == "alice")
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}/timeline"),
            &format!("{p}/issues/1/timeline"),
            &a,
            None
        )
        .await
        .0,
        200
    );

    // Sub-issues.
    let (s, _) = w
        .call(
            "POST",
            &t("/issues/{issue_number}/sub_issues"),
            &format!("{p}/issues/2/sub_issues"),
            &a,
            Some(json!({"sub_issue_id": issue["id"]})),
        )
        .await;
    assert_eq!(s, 201);
    assert_eq!(
        w.call(
            "POST",
            &t("/issues/{issue_number}/sub_issues"),
            &format!("{p}/issues/2/sub_issues"),
            &a,
            Some(json!({"sub_issue_id": issue["id"]}))
        )
        .await
        .0,
        422
    );
    let (s, subs) = w
        .call(
            "GET",
            &t("/issues/{issue_number}/sub_issues"),
            &format!("{p}/issues/2/sub_issues"),
            &a,
            None,
        )
        .await;
    assert_eq!((s, subs[0]["number"].as_u64()), (200, Some(1)));
    let (s, parent) = w
        .call(
            "GET",
            &t("/issues/{issue_number}/parent"),
            &format!("{p}/issues/1/parent"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (s, parent["number"].as_u64()),
        (200, epic["number"].as_u64())
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/issues/{issue_number}/parent"),
            &format!("{p}/issues/2/parent"),
            &a,
            None
        )
        .await
        .0,
        404
    );

    // Contents, refs, branches, permission.
    let (s, file) = w
        .call(
            "GET",
            &t("/contents/{path}"),
            &format!("{p}/contents/README.md"),
            &a,
            None,
        )
        .await;
    assert_eq!((s, file["encoding"].as_str()), (200, Some("base64")));
    assert_eq!(
        w.call(
            "GET",
            &t("/contents/{path}"),
            &format!("{p}/contents/nope.md"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    let (s, dir) = w
        .call(
            "GET",
            &t("/contents/{path}"),
            &format!("{p}/contents/src"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (s, dir[0]["name"].as_str(), dir[0]["type"].as_str()),
        (200, Some("lib.rs"), Some("file"))
    );
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (s, put) = w
        .call(
            "PUT",
            &t("/contents/{path}"),
            &format!("{p}/contents/docs/new.md"),
            &a,
            Some(json!({"message": "add docs", "content": b64("hello\n")})),
        )
        .await;
    assert_eq!(s, 201);
    let blob = put["content"]["sha"].as_str().unwrap().to_string();
    assert_eq!(w.call("PUT", &t("/contents/{path}"), &format!("{p}/contents/docs/new.md"), &a, Some(json!({"message": "stale", "content": b64("x"), "sha": "0000000000000000000000000000000000000000"}))).await.0, 409);
    let (s, put) = w
        .call(
            "PUT",
            &t("/contents/{path}"),
            &format!("{p}/contents/docs/new.md"),
            &a,
            Some(json!({"message": "edit docs", "content": b64("hello again\n"), "sha": blob})),
        )
        .await;
    assert_eq!(s, 200);
    let blob = put["content"]["sha"].as_str().unwrap().to_string();
    assert_eq!(
        w.call(
            "DELETE",
            &t("/contents/{path}"),
            &format!("{p}/contents/docs/new.md"),
            &a,
            Some(json!({"message": "drop docs", "sha": blob}))
        )
        .await
        .0,
        200
    );
    let (s, main_ref) = w
        .call(
            "GET",
            &t("/git/ref/{ref}"),
            &format!("{p}/git/ref/heads/main"),
            &a,
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        w.call(
            "GET",
            &t("/git/ref/{ref}"),
            &format!("{p}/git/ref/heads/nope"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    let (s, branch) = w
        .call(
            "GET",
            &t("/branches/{branch}"),
            &format!("{p}/branches/main"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (s, &branch["commit"]["sha"]),
        (200, &main_ref["object"]["sha"])
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/branches/{branch}"),
            &format!("{p}/branches/nope"),
            &a,
            None
        )
        .await
        .0,
        404
    );
    let (s, perm) = w
        .call(
            "GET",
            &t("/collaborators/{username}/permission"),
            &format!("{p}/collaborators/bob/permission"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (s, perm["permission"].as_str(), perm["role_name"].as_str()),
        (200, Some("write"), Some("write"))
    );
    let (_, perm) = w
        .call(
            "GET",
            &t("/collaborators/{username}/permission"),
            &format!("{p}/collaborators/carol/permission"),
            &a,
            None,
        )
        .await;
    assert_eq!(perm["permission"], "none");
    assert_eq!(
        w.call(
            "GET",
            &t("/collaborators/{username}/permission"),
            &format!("{p}/collaborators/nobody/permission"),
            &a,
            None
        )
        .await
        .0,
        404
    );

    // Pull requests.
    let head = push_branch(
        &w,
        "autoforge/1",
        "src/lib.rs",
        "pub fn one() -> u32 { 1 }\npub fn two() -> u32 { 2 }\n",
    );
    let (s, pr) = w.call("POST", &t("/pulls"), &format!("{p}/pulls"), &a, Some(json!({"title": "Two widgets", "head": "autoforge/1", "base": "main", "body": "Closes #1"}))).await;
    assert_eq!(s, 201, "{pr}");
    assert_eq!(
        (pr["number"].as_u64(), pr["head"]["sha"].as_str()),
        (Some(3), Some(head.as_str()))
    );
    assert_eq!(
        w.call(
            "POST",
            &t("/pulls"),
            &format!("{p}/pulls"),
            &a,
            Some(json!({"title": "again", "head": "autoforge/1", "base": "main"}))
        )
        .await
        .0,
        422
    );
    let (s, list) = w
        .call(
            "GET",
            &t("/pulls"),
            &format!("{p}/pulls?head=alice:autoforge/1&base=main&state=open"),
            &a,
            None,
        )
        .await;
    assert_eq!((s, list.as_array().map(Vec::len)), (200, Some(1)));
    assert_eq!(
        w.call(
            "PATCH",
            &t("/pulls/{pull_number}"),
            &format!("{p}/pulls/3"),
            &a,
            Some(json!({"title": "Two widgets, please"}))
        )
        .await
        .0,
        200
    );
    let (s, files) = w
        .call(
            "GET",
            &t("/pulls/{pull_number}/files"),
            &format!("{p}/pulls/3/files"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (
            s,
            files[0]["filename"].as_str(),
            files[0]["additions"].as_u64()
        ),
        (200, Some("src/lib.rs"), Some(1))
    );
    let (s, commits) = w
        .call(
            "GET",
            &t("/pulls/{pull_number}/commits"),
            &format!("{p}/pulls/3/commits"),
            &a,
            None,
        )
        .await;
    assert_eq!((s, commits[0]["sha"].as_str()), (200, Some(head.as_str())));
    let (s, cmp) = w
        .call(
            "GET",
            &t("/compare/{basehead}"),
            &format!("{p}/compare/main...autoforge/1"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (s, cmp["status"].as_str(), cmp["ahead_by"].as_u64()),
        (200, Some("ahead"), Some(1))
    );
    assert_eq!(cmp["merge_base_commit"]["sha"], main_ref["object"]["sha"]);
    assert_eq!(
        w.call(
            "GET",
            &t("/pulls/{pull_number}/merge"),
            &format!("{p}/pulls/3/merge"),
            &a,
            None
        )
        .await
        .0,
        404
    );

    // Checks and statuses (check runs are written by the app).
    let inst = w.installation_token().await;
    let (s, run) = w
        .call(
            "POST",
            &t("/check-runs"),
            &format!("{p}/check-runs"),
            &inst,
            Some(json!({"name": "ci", "head_sha": head, "status": "in_progress"})),
        )
        .await;
    assert_eq!(s, 201);
    let run_id = run["id"].as_u64().unwrap();
    assert_eq!(
        w.call(
            "GET",
            &t("/check-runs/{check_run_id}"),
            &format!("{p}/check-runs/{run_id}"),
            &inst,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "PATCH",
            &t("/check-runs/{check_run_id}"),
            &format!("{p}/check-runs/{run_id}"),
            &inst,
            Some(
                json!({"conclusion": "success", "output": {"title": "ok", "summary": "all green"}})
            )
        )
        .await
        .0,
        200
    );
    let (s, runs) = w
        .call(
            "GET",
            &t("/commits/{ref}/check-runs"),
            &format!("{p}/commits/autoforge%2F1/check-runs"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (
            s,
            runs["total_count"].as_u64(),
            runs["check_runs"][0]["conclusion"].as_str()
        ),
        (200, Some(1), Some("success"))
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/commits/{ref}/status"),
            &format!("{p}/commits/{head}/status"),
            &a,
            None
        )
        .await
        .0,
        200
    );

    // Merge: wrong sha → 409, then a real merge.
    let pr = wait_mergeable(&w, 3).await;
    assert_eq!(
        (pr["mergeable"].as_bool(), pr["mergeable_state"].as_str()),
        (Some(true), Some("clean"))
    );
    let wrong = "1111111111111111111111111111111111111111";
    assert_eq!(
        w.call(
            "PUT",
            &t("/pulls/{pull_number}/merge"),
            &format!("{p}/pulls/3/merge"),
            &a,
            Some(json!({"sha": wrong}))
        )
        .await
        .0,
        409
    );
    let (s, merged) = w
        .call(
            "PUT",
            &t("/pulls/{pull_number}/merge"),
            &format!("{p}/pulls/3/merge"),
            &a,
            Some(json!({"sha": head, "merge_method": "squash"})),
        )
        .await;
    assert_eq!((s, merged["merged"].as_bool()), (200, Some(true)));
    assert_eq!(
        w.call(
            "PUT",
            &t("/pulls/{pull_number}/merge"),
            &format!("{p}/pulls/3/merge"),
            &a,
            Some(json!({"sha": head}))
        )
        .await
        .0,
        405
    );
    assert_eq!(
        w.call(
            "GET",
            &t("/pulls/{pull_number}/merge"),
            &format!("{p}/pulls/3/merge"),
            &a,
            None
        )
        .await
        .0,
        204
    );
    let (_, pr) = w
        .call(
            "GET",
            &t("/pulls/{pull_number}"),
            &format!("{p}/pulls/3"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (pr["merged"].as_bool(), pr["merge_commit_sha"].as_str()),
        (Some(true), merged["sha"].as_str())
    );
    let (_, closed) = w
        .call(
            "GET",
            &t("/issues/{issue_number}"),
            &format!("{p}/issues/1"),
            &a,
            None,
        )
        .await;
    assert_eq!(
        (closed["state"].as_str(), closed["state_reason"].as_str()),
        (Some("closed"), Some("completed")),
        "Closes #1 closes the issue on merge"
    );

    // The App surface.
    let jwt = w.jwt();
    let (s, app) = w.call("GET", "/app", "/app", &jwt, None).await;
    assert_eq!((s, app["slug"].as_str()), (200, Some("autoforge")));
    assert_eq!(
        w.call(
            "GET",
            "/app/installations",
            "/app/installations",
            &jwt,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        w.call(
            "POST",
            "/app/installations/{installation_id}/access_tokens",
            "/app/installations/999999/access_tokens",
            &jwt,
            None
        )
        .await
        .0,
        404
    );
    let (s, repos) = w
        .call(
            "GET",
            "/installation/repositories",
            "/installation/repositories",
            &inst,
            None,
        )
        .await;
    assert_eq!((s, repos["total_count"].as_u64()), (200, Some(1)));
    w.wait_for_hook(|r| r.event() == "pull_request").await;
    let (s, deliveries) = w
        .call(
            "GET",
            "/app/hook/deliveries",
            "/app/hook/deliveries",
            &jwt,
            None,
        )
        .await;
    assert_eq!(s, 200);
    let first = deliveries.as_array().unwrap().last().unwrap()["id"]
        .as_u64()
        .unwrap();
    assert_eq!(
        w.call(
            "POST",
            "/app/hook/deliveries/{delivery_id}/attempts",
            &format!("/app/hook/deliveries/{first}/attempts"),
            &jwt,
            None
        )
        .await
        .0,
        202
    );

    // Account and limits.
    assert_eq!(
        w.call("GET", "/rate_limit", "/rate_limit", &a, None)
            .await
            .0,
        200
    );
    let (s, me) = w.call("GET", "/user", "/user", &a, None).await;
    assert_eq!((s, me["login"].as_str()), (200, Some("alice")));
    assert_eq!(
        w.call(
            "GET",
            "/user",
            "/user",
            "ghp_notarealtoken000000000000000000000000",
            None
        )
        .await
        .0,
        401
    );
    assert_eq!(w.call("GET", "/user", "/user", &inst, None).await.0, 403);
    assert_eq!(
        w.call("PATCH", "/user", "/user", &a, Some(json!({"bio": "hi"})))
            .await
            .0,
        200
    );

    // Deletions last.
    assert_eq!(
        w.call(
            "DELETE",
            &t("/issues/comments/{comment_id}"),
            &format!("{p}/issues/comments/{cid}"),
            &w.bob,
            None
        )
        .await
        .0,
        204
    );
    w.hub
        .create_repo(&fakehub::RepoSpec {
            owner: "alice".into(),
            name: "scratch".into(),
            default_branch: "main".into(),
            private: true,
            files: Default::default(),
            required_checks: vec![],
        })
        .await
        .unwrap();
    assert_eq!(
        w.call("DELETE", R, "/repos/alice/scratch", &w.bob, None)
            .await
            .0,
        404
    );
    assert_eq!(
        w.call("DELETE", R, "/repos/alice/scratch", &a, None)
            .await
            .0,
        204
    );

    w.assert_no_schema_failures();
    let mut all = BTreeSet::new();
    for (path, ops) in spec()["paths"].as_object().unwrap() {
        for method in ops
            .as_object()
            .unwrap()
            .keys()
            .filter(|m| ["get", "post", "put", "patch", "delete"].contains(&m.as_str()))
        {
            all.insert((method.to_ascii_uppercase(), path.clone()));
        }
    }
    let covered = w.covered.lock().unwrap().clone();
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "operations never exercised: {missing:?}"
    );
}
