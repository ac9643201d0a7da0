//! Every webhook fakehub emits carries, at the paths a consumer reads, the
//! keys and JSON types of GitHub's example payloads for that event/action.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::{WEBHOOK_SECRET, clone, fixtures, git, world};

/// Top-level objects a consumer reads, compared this many levels deep.
const DEPTH: usize = 3;

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `path → set of JSON types` over one payload, objects only (arrays are
/// compared by their type, not their items).
fn shape(
    v: &Value,
    prefix: &str,
    depth: usize,
    out: &mut BTreeMap<String, BTreeSet<&'static str>>,
) {
    let Value::Object(m) = v else { return };
    for (k, child) in m {
        let path = format!("{prefix}/{k}");
        out.entry(path.clone()).or_default().insert(kind(child));
        if depth > 1 {
            shape(child, &path, depth - 1, out);
        }
    }
}

/// Paths present in every example of `event.action`, with the union of their types.
fn expected(event: &str, action: Option<&str>) -> Option<BTreeMap<String, BTreeSet<&'static str>>> {
    let mut examples = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("webhooks")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let parts: Vec<&str> = name.split('.').collect();
        let matches = parts[0] == event
            && (action.is_none() && parts[1] == "event" || action == Some(parts[1]));
        if matches {
            examples.push(
                serde_json::from_slice::<Value>(
                    &std::fs::read(fixtures().join("webhooks").join(&name)).unwrap(),
                )
                .unwrap(),
            );
        }
    }
    if examples.is_empty() && action.is_some() {
        // No example for this action: compare with the event's other actions.
        return expected(event, None).or_else(|| expected_any_action(event));
    }
    if examples.is_empty() {
        return None;
    }
    let shapes: Vec<_> = examples
        .iter()
        .map(|e| {
            let mut s = BTreeMap::new();
            shape(e, "", DEPTH, &mut s);
            s
        })
        .collect();
    let mut common = shapes[0].clone();
    common.retain(|path, _| shapes.iter().all(|s| s.contains_key(path)));
    for (path, types) in &mut common {
        for s in &shapes {
            types.extend(s[path].iter().copied());
        }
    }
    Some(common)
}

/// All examples of an event, whatever their action.
fn expected_any_action(event: &str) -> Option<BTreeMap<String, BTreeSet<&'static str>>> {
    let names: BTreeSet<String> = std::fs::read_dir(fixtures().join("webhooks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.split('.').next() == Some(event))
        .map(|n| n.split('.').nth(1).unwrap().to_string())
        .collect();
    let mut merged: Option<BTreeMap<String, BTreeSet<&'static str>>> = None;
    for action in names {
        let Some(shape) = expected(event, Some(&action)) else {
            continue;
        };
        merged = Some(match merged {
            None => shape,
            Some(mut m) => {
                m.retain(|k, _| shape.contains_key(k));
                for (k, t) in &mut m {
                    t.extend(shape[k].iter().copied());
                }
                m
            }
        });
    }
    merged
}

fn drift(event: &str, payload: &Value) -> Vec<String> {
    let action = payload.get("action").and_then(Value::as_str);
    let Some(expected) = expected(event, action) else {
        return vec![format!(
            "{event}.{action:?}: no GitHub example to compare with"
        )];
    };
    let mut ours = BTreeMap::new();
    shape(payload, "", DEPTH, &mut ours);
    let mut problems = Vec::new();
    for (path, types) in expected {
        // Permission maps list whatever the example app was granted.
        if path.contains("/permissions/") {
            continue;
        }
        // A path under a value that is null in our payload (and may be null on GitHub) is absent legitimately.
        let parent_null = path.rsplit_once('/').is_some_and(|(parent, _)| {
            !parent.is_empty() && ours.get(parent).is_some_and(|t| t.contains("null"))
        });
        match ours.get(&path) {
            None if parent_null => {}
            None => problems.push(format!("{event}.{}: missing {path}", action.unwrap_or("-"))),
            Some(t) => {
                // Examples show optional fields populated, so our `null` is
                // accepted where the key exists; any other type must match.
                let ok = t.iter().all(|k| {
                    *k == "null"
                        || types.contains(k)
                        || (*k == "integer" && types.contains("number"))
                        || (types.len() == 1 && types.contains("null"))
                });
                if !ok {
                    problems.push(format!(
                        "{event}.{}: {path} is {t:?}, GitHub sends {types:?}",
                        action.unwrap_or("-")
                    ));
                }
            }
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emitted_webhooks_match_githubs_example_payloads() {
    let w = world().await;
    let base = w.hub.base_url().to_string();
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(&w.alice)
            .json(&body)
            .send()
    };
    post("/repos/alice/widgets/labels", json!({"name": "autoforge"}))
        .await
        .unwrap();
    post(
        "/repos/alice/widgets/issues",
        json!({"title": "one", "labels": ["autoforge"]}),
    )
    .await
    .unwrap();
    post(
        "/repos/alice/widgets/issues/1/comments",
        json!({"body": "hello"}),
    )
    .await
    .unwrap();
    post(
        "/repos/alice/widgets/issues/1/labels",
        json!({"labels": ["extra"]}),
    )
    .await
    .unwrap();
    http.delete(format!("{base}/repos/alice/widgets/issues/1/labels/extra"))
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap();
    http.patch(format!("{base}/repos/alice/widgets/issues/1"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "one!", "state": "closed"}))
        .send()
        .await
        .unwrap();
    http.patch(format!("{base}/repos/alice/widgets/issues/1"))
        .bearer_auth(&w.alice)
        .json(&json!({"state": "open"}))
        .send()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.join("new.txt"), "new\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "add new"]);
    git(&work, &["push", "-q", "origin", "feature"]);
    let pr: Value = post(
        "/repos/alice/widgets/pulls",
        json!({"title": "feature", "head": "feature", "base": "main"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    std::fs::write(work.join("new.txt"), "newer\n").unwrap();
    git(&work, &["commit", "-q", "-am", "change new"]);
    git(&work, &["push", "-q", "origin", "feature"]);
    let sync = w
        .wait_for_hook(|r| r.event() == "pull_request" && r.json()["action"] == "synchronize")
        .await;
    assert_eq!(
        sync.json()["pull_request"]["head"]["sha"].as_str(),
        Some(git(&work, &["rev-parse", "HEAD"]).as_str())
    );
    let inst = w.installation_token().await;
    let head = git(&work, &["rev-parse", "HEAD"]);
    http.post(format!("{base}/repos/alice/widgets/check-runs"))
        .bearer_auth(&inst)
        .json(&json!({"name": "ci", "head_sha": head, "conclusion": "success"}))
        .send()
        .await
        .unwrap();
    http.post(format!(
        "{base}/repos/alice/widgets/issues/{}/comments",
        pr["number"]
    ))
    .bearer_auth(&inst)
    .json(&json!({"body": "bot here"}))
    .send()
    .await
    .unwrap();
    w.wait_for_hook(|r| r.event() == "check_suite").await;
    let patch = |path: String, body: Value| {
        http.patch(format!("{base}{path}"))
            .bearer_auth(&w.alice)
            .json(&body)
            .send()
    };
    let n = pr["number"].as_u64().unwrap();
    patch(
        "/repos/alice/widgets/issues/1".into(),
        json!({"assignees": ["bob"]}),
    )
    .await
    .unwrap();
    patch(
        "/repos/alice/widgets/issues/1".into(),
        json!({"assignees": []}),
    )
    .await
    .unwrap();
    patch(
        format!("/repos/alice/widgets/pulls/{n}"),
        json!({"title": "feature, renamed"}),
    )
    .await
    .unwrap();
    patch(
        format!("/repos/alice/widgets/pulls/{n}"),
        json!({"state": "closed"}),
    )
    .await
    .unwrap();
    patch(
        format!("/repos/alice/widgets/pulls/{n}"),
        json!({"state": "open"}),
    )
    .await
    .unwrap();
    let comment: Value = post(
        "/repos/alice/widgets/issues/1/comments",
        json!({"body": "to edit"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let cpath = format!("/repos/alice/widgets/issues/comments/{}", comment["id"]);
    patch(cpath.clone(), json!({"body": "edited"}))
        .await
        .unwrap();
    http.delete(format!("{base}{cpath}"))
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap();
    w.hub
        .create_repo(&fakehub::RepoSpec {
            owner: "alice".into(),
            name: "gadgets".into(),
            default_branch: "main".into(),
            private: true,
            files: Default::default(),
            required_checks: vec![],
        })
        .await
        .unwrap();
    w.hub
        .set_installation_repos(w.installation_id, &["widgets".into(), "gadgets".into()])
        .unwrap();
    w.hub
        .set_installation_repos(w.installation_id, &["widgets".into()])
        .unwrap();
    w.hub
        .suspend_installation(w.installation_id, Some("bob"))
        .unwrap();
    w.hub.unsuspend_installation(w.installation_id).unwrap();
    w.wait_for_hook(|r| {
        r.event() == "issue_comment" && r.json()["sender"]["login"] == "autoforge[bot]"
    })
    .await;

    let wanted = [
        "ping.-",
        "installation_repositories.added",
        "installation_repositories.removed",
        "installation.created",
        "installation.suspend",
        "installation.unsuspend",
        "label.created",
        "issues.opened",
        "issues.labeled",
        "issues.unlabeled",
        "issues.edited",
        "issues.closed",
        "issues.reopened",
        "issue_comment.created",
        "push.-",
        "pull_request.opened",
        "pull_request.synchronize",
        "check_run.created",
        "check_run.completed",
        "check_suite.completed",
        "issues.assigned",
        "issues.unassigned",
        "pull_request.edited",
        "pull_request.closed",
        "pull_request.reopened",
        "issue_comment.edited",
        "issue_comment.deleted",
    ];
    let name = |r: &crate::support::Received| {
        format!(
            "{}.{}",
            r.event(),
            r.json()
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("-")
        )
    };
    // Deliveries are asynchronous: wait until every expected kind arrived.
    for _ in 0..200 {
        let seen: BTreeSet<String> = w.received.lock().unwrap().iter().map(name).collect();
        if wanted.iter().all(|k| seen.contains(*k)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let received = w.received.lock().unwrap().clone();
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for r in &received {
        let payload = r.json();
        let event = r.event();
        seen.insert(name(r));
        assert!(
            r.headers
                .get("x-github-delivery")
                .is_some_and(|v| uuid::Uuid::parse_str(v.to_str().unwrap()).is_ok())
        );
        assert!(r.headers.get("x-github-hook-id").is_some());
        assert!(
            r.headers
                .get("user-agent")
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("GitHub-Hookshot/")
        );
        let sig = r
            .headers
            .get("x-hub-signature-256")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(
            sig,
            expected_signature(&r.body),
            "signature of a {event} delivery"
        );
        problems.extend(drift(&event, &payload));
        // Consumers built on octocrab parse the payload into its typed model.
        if let Err(e) = octocrab::models::webhook_events::WebhookEvent::try_from_header_and_body(
            &event, &r.body,
        ) {
            problems.push(format!("{}: octocrab cannot parse it: {e}", name(r)));
        }
    }
    for wanted in wanted {
        assert!(
            seen.contains(wanted),
            "no {wanted} webhook was emitted; saw {seen:?}"
        );
    }
    assert!(
        problems.is_empty(),
        "webhook payloads drift from GitHub's examples:\n{}",
        problems.join("\n")
    );
}

/// HMAC-SHA256 of the body with the app's secret, computed independently.
fn expected_signature(body: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}
