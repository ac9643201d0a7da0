//! End-to-end behaviours: octocrab unchanged (PAT and App flow), git over
//! HTTP with tokens, pagination, ETags, auth errors, mergeability, faults,
//! snapshots and the binary.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::time::Duration;

use fakehub::FaultRule;
use serde_json::{Value, json};

use crate::support::{clone, git, try_clone, world};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octocrab_works_unchanged_with_a_personal_token_and_the_app_flow() {
    let w = world().await;
    let pat = octocrab::Octocrab::builder()
        .base_uri(w.hub.base_url())
        .unwrap()
        .personal_token(w.alice.clone())
        .build()
        .unwrap();
    let issue = pat
        .issues("alice", "widgets")
        .create("From octocrab")
        .body("typed")
        .send()
        .await
        .unwrap();
    assert_eq!((issue.number, issue.user.login.as_str()), (1, "alice"));
    let fetched = pat.issues("alice", "widgets").get(1).await.unwrap();
    assert_eq!(fetched.title, "From octocrab");

    let key = jsonwebtoken::EncodingKey::from_rsa_pem(w.app_key.as_bytes()).unwrap();
    let app = octocrab::Octocrab::builder()
        .base_uri(w.hub.base_url())
        .unwrap()
        .app(w.app_id.into(), key)
        .build()
        .unwrap();
    let installs = app.apps().installations().send().await.unwrap();
    assert_eq!(installs.items.len(), 1);
    let inst = app.installation(w.installation_id.into()).unwrap();
    let comment = inst
        .issues("alice", "widgets")
        .create_comment(1, "hello from the app")
        .await
        .unwrap();
    assert_eq!(comment.user.login, "autoforge[bot]");
    let pr_list = inst.pulls("alice", "widgets").list().send().await.unwrap();
    assert!(pr_list.items.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_clone_and_push_use_tokens_and_the_refs_api_follows() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let inst = w.installation_token().await;
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &inst, &work);
    assert!(work.join("src/lib.rs").exists());
    std::fs::write(work.join("b.txt"), "b\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "add b"]);
    git(
        &work,
        &["push", "-q", "origin", "HEAD:refs/heads/bot-branch"],
    );
    let head = git(&work, &["rev-parse", "HEAD"]);
    let r: Value = w
        .http
        .get(format!(
            "{}/repos/alice/widgets/git/ref/heads/bot-branch",
            w.hub.base_url()
        ))
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["object"]["sha"].as_str(), Some(head.as_str()));
    let push = w.wait_for_hook(|h| h.event() == "push").await.json();
    assert_eq!(push["head_commit"]["id"].as_str(), Some(head.as_str()));
    assert_eq!(
        push["commits"][0]["added"],
        json!(["b.txt"]),
        "a new branch lists the commits not on the default branch"
    );
    git(&work, &["commit", "-q", "--amend", "-m", "add b, amended"]);
    git(
        &work,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            "HEAD:refs/heads/bot-branch",
        ],
    );
    let forced = w
        .wait_for_hook(|h| h.event() == "push" && h.json()["forced"] == true)
        .await
        .json();
    assert_eq!(forced["before"].as_str(), Some(head.as_str()));
    assert_eq!(
        (
            push["ref"].as_str(),
            push["after"].as_str(),
            push["pusher"]["name"].as_str()
        ),
        (
            Some("refs/heads/bot-branch"),
            Some(head.as_str()),
            Some("autoforge[bot]")
        )
    );

    // No credential: git gets a challenge and, with no helper, fails. A
    // stranger's token cannot see the private repository at all.
    let anon = std::process::Command::new("git")
        .args([
            "clone",
            "-q",
            &w.hub.git_url("alice", "widgets"),
            dir.path().join("anon").to_str().unwrap(),
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(!anon.status.success());
    let dir2 = tempfile::tempdir().unwrap();
    assert!(
        !try_clone(&w.hub, "alice", "widgets", &w.carol, &dir2.path().join("c")),
        "carol has no access to the private repository"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_walks_every_page_through_link_headers() {
    let w = world().await;
    for n in 0..75 {
        let s = w
            .http
            .post(format!("{}/repos/alice/widgets/issues", w.hub.base_url()))
            .bearer_auth(&w.alice)
            .json(&json!({"title": format!("issue {n}")}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(s, 201);
    }
    let mut url = Some(format!(
        "{}/repos/alice/widgets/issues?per_page=30",
        w.hub.base_url()
    ));
    let mut numbers = BTreeSet::new();
    let mut pages = 0;
    while let Some(u) = url {
        let resp = w.http.get(&u).bearer_auth(&w.alice).send().await.unwrap();
        let link = resp
            .headers()
            .get("link")
            .map(|l| l.to_str().unwrap().to_string());
        let items: Vec<Value> = resp.json().await.unwrap();
        assert!(items.len() <= 30);
        numbers.extend(items.iter().map(|i| i["number"].as_u64().unwrap()));
        pages += 1;
        url = link.and_then(|l| {
            l.split(", ")
                .find(|p| p.ends_with("rel=\"next\""))
                .map(|p| p[1..p.find('>').unwrap()].to_string())
        });
        if pages == 1 {
            // per_page is capped at 100 as on GitHub.
            let big: Vec<Value> = w
                .http
                .get(format!(
                    "{}/repos/alice/widgets/issues?per_page=500",
                    w.hub.base_url()
                ))
                .bearer_auth(&w.alice)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(big.len(), 75);
        }
    }
    assert_eq!((pages, numbers.len()), (3, 75));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_get_answers_304_without_spending_rate_limit() {
    let w = world().await;
    let url = format!("{}/repos/alice/widgets", w.hub.base_url());
    let first = w.http.get(&url).bearer_auth(&w.alice).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let remaining: u64 = first.headers()["x-ratelimit-remaining"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let second = w
        .http
        .get(&url)
        .bearer_auth(&w.alice)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 304);
    assert_eq!(
        second.headers()["x-ratelimit-remaining"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        remaining
    );
    w.http
        .post(format!("{url}/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "change"}))
        .send()
        .await
        .unwrap();
    let third = w
        .http
        .get(&url)
        .bearer_auth(&w.alice)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(
        third.status(),
        200,
        "the open-issue count changed, so the ETag did too"
    );
    let log = w.hub.requests();
    assert!(
        log.iter()
            .any(|r| r.status == 304 && r.conditional_hit && r.route == "/repos/{owner}/{repo}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_decide_between_401_403_and_404() {
    let w = world().await;
    let base = w.hub.base_url();
    let get = |path: &str, token: &str| {
        w.http
            .get(format!("{base}{path}"))
            .bearer_auth(token)
            .send()
    };
    let bogus = get("/repos/alice/widgets", "ghp_bogus").await.unwrap();
    assert_eq!(
        (
            bogus.status().as_u16(),
            bogus.headers()["x-ratelimit-limit"].to_str().unwrap()
        ),
        (401, "60")
    );
    assert!(bogus.headers().contains_key("x-github-request-id"));
    assert_eq!(
        get("/repos/alice/widgets", &w.carol)
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        w.http
            .get(format!("{base}/repos/alice/widgets"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(get("/app", &w.alice).await.unwrap().status(), 401);
    w.hub
        .set_collaborator("alice", "widgets", "carol", "read")
        .unwrap();
    let label = w
        .http
        .post(format!("{base}/repos/alice/widgets/labels"))
        .bearer_auth(&w.carol)
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(label.status(), 403);
    w.hub
        .create_repo(&fakehub::RepoSpec {
            owner: "alice".into(),
            name: "other".into(),
            default_branch: "main".into(),
            private: true,
            files: Default::default(),
            required_checks: vec![],
        })
        .await
        .unwrap();
    let inst = w.installation_token().await;
    assert_eq!(
        get("/repos/alice/other", &inst).await.unwrap().status(),
        404,
        "installation tokens see only installed repositories"
    );
    assert_eq!(
        get("/repos/alice/widgets", &inst).await.unwrap().status(),
        200
    );
    let now = chrono::Utc::now().timestamp();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(w.app_key.as_bytes()).unwrap();
    let stale = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &json!({"iss": w.app_id, "iat": now - 1200, "exp": now - 600}),
        &key,
    )
    .unwrap();
    assert_eq!(get("/app", &stale).await.unwrap().status(), 401);

    assert_eq!(
        get("/repos/alice/widgets", &w.jwt())
            .await
            .unwrap()
            .status(),
        403,
        "an App JWT is not an installation token"
    );

    // An installation token carries only its app's permissions.
    let reader = w
        .hub
        .create_app(&fakehub::NewApp {
            slug: "reader".into(),
            owner: None,
            webhook_url: None,
            webhook_secret: None,
            permissions: [("issues".to_string(), "read".to_string())].into(),
            events: vec![],
        })
        .await
        .unwrap();
    let reader_install = w
        .hub
        .install(
            reader.id,
            &fakehub::NewInstallation {
                account: "alice".into(),
                repositories: vec!["widgets".into()],
            },
        )
        .unwrap();
    use secrecy::ExposeSecret;
    let rkey =
        jsonwebtoken::EncodingKey::from_rsa_pem(reader.private_key_pem.expose_secret().as_bytes())
            .unwrap();
    let rjwt = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &json!({"iss": reader.id, "iat": now - 30, "exp": now + 500}),
        &rkey,
    )
    .unwrap();
    let minted: Value = w
        .http
        .post(format!(
            "{base}/app/installations/{reader_install}/access_tokens"
        ))
        .bearer_auth(&rjwt)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rtoken = minted["token"].as_str().unwrap().to_string();
    assert!(rtoken.starts_with("ghs_"));
    assert_eq!(
        get("/repos/alice/widgets/issues", &rtoken)
            .await
            .unwrap()
            .status(),
        200
    );
    let write = w
        .http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&rtoken)
        .json(&json!({"title": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 403, "issues:read cannot open issues");
    let other_app = w
        .http
        .post(format!(
            "{base}/app/installations/{}/access_tokens",
            w.installation_id
        ))
        .bearer_auth(&rjwt)
        .send()
        .await
        .unwrap();
    assert_eq!(
        other_app.status(),
        404,
        "an app cannot mint tokens for another app's installation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_make_a_pull_dirty_and_unmergeable_and_a_moved_base_makes_it_behind_if_required()
{
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    for (branch, text) in [("left", "left\n"), ("right", "right\n"), ("side", "side\n")] {
        git(&work, &["checkout", "-q", "-B", branch, "origin/main"]);
        let file = if branch == "side" {
            "side.txt"
        } else {
            "README.md"
        };
        std::fs::write(work.join(file), text).unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", branch]);
        git(&work, &["push", "-q", "origin", branch]);
    }
    let base = w.hub.base_url();
    let open = |head: &str| {
        w.http
            .post(format!("{base}/repos/alice/widgets/pulls"))
            .bearer_auth(&w.alice)
            .json(&json!({"title": head, "head": head, "base": "main"}))
            .send()
    };
    for head in ["left", "right", "side"] {
        assert_eq!(open(head).await.unwrap().status(), 201);
    }
    let (http, alice) = (&w.http, &w.alice);
    let pull = |n: u64| async move {
        for _ in 0..100 {
            let v: Value = http
                .get(format!("{base}/repos/alice/widgets/pulls/{n}"))
                .bearer_auth(alice)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if !v["mergeable"].is_null() {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("mergeable stayed null");
    };
    let left = pull(1).await;
    let merged = w
        .http
        .put(format!("{base}/repos/alice/widgets/pulls/1/merge"))
        .bearer_auth(&w.alice)
        .json(&json!({"sha": left["head"]["sha"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(merged.status(), 200);
    let right = pull(2).await;
    assert_eq!(
        (
            right["mergeable"].as_bool(),
            right["mergeable_state"].as_str()
        ),
        (Some(false), Some("dirty"))
    );
    let refused = w
        .http
        .put(format!("{base}/repos/alice/widgets/pulls/2/merge"))
        .bearer_auth(&w.alice)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 405);
    // GitHub calls a pull request behind its base `behind` only where
    // branch protection requires it up to date; elsewhere it is `clean`.
    let side = pull(3).await;
    assert_eq!(side["mergeable_state"].as_str(), Some("clean"));
    w.hub
        .set_merge_rules(
            "alice",
            "widgets",
            &fakehub::MergeRules {
                require_up_to_date: Some(true),
                ..Default::default()
            },
        )
        .unwrap();
    let side = pull(3).await;
    assert_eq!(side["mergeable_state"].as_str(), Some("behind"));
    git(&work, &["fetch", "-q", "origin"]);
    let main_log = git(&work, &["log", "--format=%P", "-1", "origin/main"]);
    assert_eq!(
        main_log.split_whitespace().count(),
        2,
        "a merge commit has two parents"
    );
}

/// Each injected fault fires on its route the number of times it was told
/// to. A secondary rate limit also closes the caller's window for its
/// `retry-after`: a request sent inside it is refused the same way and
/// counted, and once the window has opened the caller is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_fire_as_configured() {
    let w = world().await;
    let base = w.hub.base_url();
    let rules: Vec<FaultRule> = serde_json::from_value(json!([
        {"type": "status", "status": 502, "method": "GET", "route": "/user", "count": 1},
        {"type": "secondary_rate_limit", "retry_after": 1, "route": "/rate_limit", "count": 1},
        {"type": "ambiguous_write", "route": "/repos/{owner}/{repo}/issues", "method": "POST", "count": 1},
    ]))
    .unwrap();
    let set = w
        .http
        .post(format!("{base}/_fakehub/faults"))
        .json(&json!({"rules": rules}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let get = |path: &str| {
        w.http
            .get(format!("{base}{path}"))
            .bearer_auth(&w.alice)
            .send()
    };
    assert_eq!(get("/user").await.unwrap().status(), 502);
    assert_eq!(get("/user").await.unwrap().status(), 200);
    let limited = get("/rate_limit").await.unwrap();
    assert_eq!(
        (
            limited.status().as_u16(),
            limited.headers()["retry-after"].to_str().unwrap()
        ),
        (403, "1")
    );
    assert_eq!(w.hub.closed_windows(), 1);

    // Past the grace fakehub gives a request already on its way, but still
    // inside the one-second window: refused like the fault, and counted.
    tokio::time::sleep(Duration::from_millis(
        u64::try_from(fakehub::faults_windows::IN_FLIGHT_GRACE_MS).unwrap() + 50,
    ))
    .await;
    let inside = get("/user").await.unwrap();
    assert_eq!(inside.status().as_u16(), 403);
    assert!(inside.headers().contains_key("retry-after"));
    let counted = w.hub.closed_window_requests();
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!(
        (counted[0].method.as_str(), counted[0].path.as_str()),
        ("GET", "/user")
    );

    // Waiting out what was left of the window (fakehub said how long):
    // the caller is served again and the next fault on the list fires.
    let left = u64::try_from(counted[0].ms_before_open).unwrap();
    tokio::time::sleep(Duration::from_millis(left + 50)).await;
    assert_eq!(get("/user").await.unwrap().status(), 200);
    let ambiguous = w
        .http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "maybe"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ambiguous.status(), 502);
    let issues: Vec<Value> = get("/repos/alice/widgets/issues")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(issues.len(), 1, "the ambiguous write was applied");
    assert_eq!(
        w.hub.closed_window_requests().len(),
        1,
        "nothing after the window opened is counted inside it"
    );

    w.hub.set_faults(serde_json::from_value(json!([{"type": "ambiguous_write", "drop": true, "method": "POST", "count": 1}, {"type": "exhaust_primary", "route": "/repos/{owner}/{repo}", "count": 1}])).unwrap());
    let dropped = w
        .http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "dropped"}))
        .send()
        .await;
    let body_failed = match dropped {
        Err(_) => true,
        Ok(r) => r.bytes().await.is_err(),
    };
    assert!(body_failed, "the connection is dropped after the write");
    let exhausted = get("/repos/alice/widgets").await.unwrap();
    assert_eq!(
        (
            exhausted.status().as_u16(),
            exhausted.headers()["x-ratelimit-remaining"]
                .to_str()
                .unwrap()
        ),
        (403, "0")
    );
    // Alice's limit is spent; Bob's is his own and sees both writes.
    let issues: Vec<Value> = w
        .http
        .get(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(issues.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_snapshot_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let cfg = fakehub::Config {
        state_file: Some(state.clone()),
        ..Default::default()
    };
    let hub = fakehub::start(cfg.clone()).await.unwrap();
    let user = hub
        .create_user("dora", fakehub::world::UserKind::User)
        .unwrap();
    hub.create_repo(&fakehub::RepoSpec {
        owner: "dora".into(),
        name: "keep".into(),
        default_branch: "main".into(),
        private: true,
        files: [("a".to_string(), "a\n".to_string())].into(),
        required_checks: vec![],
    })
    .await
    .unwrap();
    hub.stop().await.unwrap();
    let hub = fakehub::start(cfg).await.unwrap();
    use secrecy::ExposeSecret;
    let resp = reqwest::Client::new()
        .get(format!("{}/repos/dora/keep/contents/a", hub.base_url()))
        .bearer_auth(user.token.expose_secret())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[test]
fn the_binary_prints_its_base_url_first_and_serves() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fakehub"))
        .args(["serve", "--addr", "127.0.0.1:0", "--seed", "3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        reqwest::get(format!("{url}/_fakehub/state"))
            .await
            .unwrap()
            .status()
    });
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_faults_drop_and_duplicate_and_a_redelivery_recovers_the_drop() {
    let w = world().await;
    let base = w.hub.base_url();
    w.hub.set_faults(serde_json::from_value(json!([{"type": "webhook_drop", "route": "issues", "count": 1}, {"type": "webhook_duplicate", "route": "issue_comment", "count": 1}])).unwrap());
    w.http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "quiet"}))
        .send()
        .await
        .unwrap();
    w.http
        .post(format!("{base}/repos/alice/widgets/issues/1/comments"))
        .bearer_auth(&w.alice)
        .json(&json!({"body": "twice"}))
        .send()
        .await
        .unwrap();
    w.wait_for_hook(|r| r.event() == "issue_comment").await;
    let mut copies = 0;
    for _ in 0..100 {
        copies = w
            .received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.event() == "issue_comment")
            .count();
        if copies == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(copies, 2, "a duplicated delivery arrives twice");
    let guids: BTreeSet<String> = w
        .received
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.event() == "issue_comment")
        .map(|r| r.headers["x-github-delivery"].to_str().unwrap().to_string())
        .collect();
    assert_eq!(guids.len(), 1, "both copies carry the same delivery GUID");
    assert!(
        !w.received
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.event() == "issues"),
        "the dropped delivery never arrived"
    );

    let jwt = w.jwt();
    let list: Vec<Value> = w
        .http
        .get(format!("{base}/app/hook/deliveries"))
        .bearer_auth(&jwt)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let dropped = list.iter().find(|d| d["event"] == "issues").unwrap();
    assert_eq!(dropped["status_code"], 0);
    let resp = w
        .http
        .post(format!(
            "{base}/app/hook/deliveries/{}/attempts",
            dropped["id"]
        ))
        .bearer_auth(&jwt)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let redelivered = w.wait_for_hook(|r| r.event() == "issues").await;
    assert_eq!(
        redelivered.headers["x-github-delivery"].to_str().unwrap(),
        dropped["guid"].as_str().unwrap()
    );
    for _ in 0..100 {
        let list: Vec<Value> = w
            .http
            .get(format!("{base}/app/hook/deliveries"))
            .bearer_auth(&jwt)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if list
            .iter()
            .any(|d| d["redelivery"] == true && d["status_code"] == 200)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the redelivery was never recorded as delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_checks_block_a_merge_until_they_pass_and_statuses_combine() {
    let w = world().await;
    let files = [("a.txt".to_string(), "a\n".to_string())].into();
    w.hub
        .create_repo(&fakehub::RepoSpec {
            owner: "alice".into(),
            name: "guarded".into(),
            default_branch: "main".into(),
            private: true,
            files,
            required_checks: vec!["ci".into()],
        })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "guarded", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", "topic"]);
    std::fs::write(work.join("b.txt"), "b\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "b"]);
    git(&work, &["push", "-q", "origin", "topic"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let base = w.hub.base_url();
    let created = w
        .http
        .post(format!("{base}/repos/alice/guarded/pulls"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "b", "head": "topic", "base": "main"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let state = || async {
        for _ in 0..100 {
            let v: Value = w
                .http
                .get(format!("{base}/repos/alice/guarded/pulls/1"))
                .bearer_auth(&w.alice)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if !v["mergeable"].is_null() {
                return v["mergeable_state"].as_str().unwrap().to_string();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("mergeable stayed null");
    };
    assert_eq!(state().await, "blocked");
    let merge = || {
        w.http
            .put(format!("{base}/repos/alice/guarded/pulls/1/merge"))
            .bearer_auth(&w.alice)
            .json(&json!({"sha": head}))
            .send()
    };
    assert_eq!(merge().await.unwrap().status(), 405);

    let status = |state: &str| fakehub::StatusSpec {
        owner: "alice".into(),
        repo: "guarded".into(),
        sha: head.clone(),
        context: "lint".into(),
        state: state.into(),
        description: None,
        target_url: None,
    };
    w.hub.add_status(&status("failure")).unwrap();
    let combined: Value = w
        .http
        .get(format!("{base}/repos/alice/guarded/commits/{head}/status"))
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (combined["state"].as_str(), combined["total_count"].as_u64()),
        (Some("failure"), Some(1))
    );
    w.hub
        .add_check(&fakehub::CheckSpec {
            owner: "alice".into(),
            repo: "guarded".into(),
            sha: head.clone(),
            name: "ci".into(),
            status: Some("completed".into()),
            conclusion: Some("success".into()),
        })
        .unwrap();
    assert_eq!(
        state().await,
        "unstable",
        "the required check passed; a non-required status still fails"
    );
    w.hub.add_status(&status("success")).unwrap();
    assert_eq!(state().await, "clean");
    assert_eq!(merge().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latency_fault_delays_the_answer_by_at_least_its_duration() {
    let w = world().await;
    w.hub.set_faults(
        serde_json::from_value(
            json!([{"type": "latency", "ms": 150, "route": "/rate_limit", "count": 1}]),
        )
        .unwrap(),
    );
    let resp = w
        .http
        .get(format!("{}/rate_limit", w.hub.base_url()))
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let record = w
        .hub
        .requests()
        .into_iter()
        .find(|r| r.route == "/rate_limit")
        .unwrap();
    assert!(
        record.duration_ms >= 150.0,
        "recorded {} ms",
        record.duration_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_rate_limit_is_per_token_and_configurable() {
    let hub = fakehub::start(fakehub::Config {
        rate_limit: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    use secrecy::ExposeSecret;
    let a = hub
        .create_user("ann", fakehub::world::UserKind::User)
        .unwrap()
        .token
        .expose_secret()
        .to_string();
    let b = hub
        .create_user("ben", fakehub::world::UserKind::User)
        .unwrap()
        .token
        .expose_secret()
        .to_string();
    let http = reqwest::Client::new();
    let get = |t: &str| {
        http.get(format!("{}/user", hub.base_url()))
            .bearer_auth(t.to_string())
            .send()
    };
    for left in [2, 1, 0] {
        let r = get(&a).await.unwrap();
        assert_eq!(
            (
                r.status().as_u16(),
                r.headers()["x-ratelimit-remaining"]
                    .to_str()
                    .unwrap()
                    .to_string()
            ),
            (200, left.to_string())
        );
    }
    let refused = get(&a).await.unwrap();
    assert_eq!(
        (
            refused.status().as_u16(),
            refused.headers()["x-ratelimit-limit"].to_str().unwrap()
        ),
        (403, "3")
    );
    assert_eq!(
        get(&b).await.unwrap().status(),
        200,
        "another token has its own window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebase_merge_replays_each_commit_onto_the_base_keeping_authors() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    clone(&w.hub, "alice", "widgets", &w.alice, &work);
    git(&work, &["checkout", "-q", "-b", "two"]);
    for (file, text) in [("x.txt", "x\n"), ("y.txt", "y\n")] {
        std::fs::write(work.join(file), text).unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", &format!("add {file}")]);
    }
    git(&work, &["push", "-q", "origin", "two"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    let base = w.hub.base_url();
    let pr = w
        .http
        .post(format!("{base}/repos/alice/widgets/pulls"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "two", "head": "two", "base": "main"}))
        .send()
        .await
        .unwrap();
    assert_eq!(pr.status(), 201);
    let mut merged = None;
    for _ in 0..100 {
        let r = w
            .http
            .put(format!("{base}/repos/alice/widgets/pulls/1/merge"))
            .bearer_auth(&w.alice)
            .json(&json!({"sha": head, "merge_method": "rebase"}))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            merged = Some(r.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let merged = merged.expect("the rebase merge succeeded");
    git(&work, &["fetch", "-q", "origin"]);
    let tip = git(&work, &["rev-parse", "origin/main"]);
    assert_eq!(merged["sha"].as_str(), Some(tip.as_str()));
    assert_ne!(tip, head, "rebased commits are new commits");
    assert_eq!(
        git(&work, &["rev-parse", "origin/main^{tree}"]),
        git(&work, &["rev-parse", "two^{tree}"])
    );
    let log = git(&work, &["log", "--format=%s|%an|%P", "-2", "origin/main"]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0].starts_with("add y.txt|alice|") && lines[1].starts_with("add x.txt|alice|"),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.split('|').nth(2).unwrap().split_whitespace().count() == 1),
        "linear history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_control_api_sets_up_a_world_that_the_rest_api_serves() {
    let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
    let base = hub.base_url().to_string();
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}/_fakehub{path}"))
            .json(&body)
            .send()
    };
    let user: Value = post("/users", json!({"login": "olga", "type": "User"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = user["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("ghp_"));
    assert_eq!(
        post("/users", json!({"login": "olga"}))
            .await
            .unwrap()
            .status(),
        422
    );
    assert_eq!(
        post("/users", json!({"login": "kit", "type": "User"}))
            .await
            .unwrap()
            .status(),
        201
    );
    let repo = post(
        "/repos",
        json!({"owner": "olga", "name": "site", "files": {"index.html": "<h1>hi</h1>\n"}}),
    )
    .await
    .unwrap();
    assert_eq!(repo.status(), 201);
    let collab = http
        .put(format!("{base}/_fakehub/repos/olga/site/collaborators/kit"))
        .json(&json!({"permission": "triage"}))
        .send()
        .await
        .unwrap();
    assert_eq!(collab.status(), 204);
    let app: Value = post(
        "/apps",
        json!({"slug": "ci-bot", "permissions": {"checks": "write"}}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(
        app["private_key_pem"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
    let inst = post(
        &format!("/apps/{}/installations", app["id"]),
        json!({"account": "olga", "repositories": ["site"]}),
    )
    .await
    .unwrap();
    assert_eq!(inst.status(), 201);
    let inst_id = inst.json::<Value>().await.unwrap()["id"].as_u64().unwrap();
    let repos = http
        .put(format!(
            "{base}/_fakehub/installations/{inst_id}/repositories"
        ))
        .json(&json!({"repositories": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(repos.status(), 204);
    let main: Value = http
        .get(format!("{base}/repos/olga/site/git/ref/heads/main"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sha = main["object"]["sha"].as_str().unwrap();
    assert_eq!(post("/checks", json!({"owner": "olga", "repo": "site", "sha": sha, "name": "ci", "conclusion": "success"})).await.unwrap().status(), 201);
    assert_eq!(post("/statuses", json!({"owner": "olga", "repo": "site", "sha": sha, "context": "lint", "state": "success"})).await.unwrap().status(), 201);
    assert_eq!(post("/statuses", json!({"owner": "olga", "repo": "site", "sha": sha, "context": "lint", "state": "bogus"})).await.unwrap().status(), 422);
    let status: Value = http
        .get(format!("{base}/repos/olga/site/commits/main/status"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["state"], "success");
    let perm: Value = http
        .get(format!(
            "{base}/repos/olga/site/collaborators/kit/permission"
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (perm["permission"].as_str(), perm["role_name"].as_str()),
        (Some("read"), Some("triage"))
    );
    let requests: Vec<Value> = http
        .get(format!("{base}/_fakehub/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = requests.last().unwrap();
    assert_eq!(
        (
            last["method"].as_str(),
            last["route"].as_str(),
            last["token_kind"].as_str()
        ),
        (
            Some("GET"),
            Some("/repos/{owner}/{repo}/collaborators/{username}/permission"),
            Some("personal")
        )
    );
    let state: Value = http
        .get(format!("{base}/_fakehub/state"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        state["users"].as_object().unwrap().len(),
        3,
        "olga, kit and ci-bot[bot]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_read_waits_for_its_release_through_the_control_api_and_sees_the_world_then() {
    let w = world().await;
    let base = w.hub.base_url().to_owned();
    let created = w
        .http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "before"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let number = created.json::<Value>().await.unwrap()["number"].clone();
    let issue = format!("{base}/repos/alice/widgets/issues/{number}");
    let route = "/repos/{owner}/{repo}/issues/{number}";
    let set = w
        .http
        .post(format!("{base}/_fakehub/faults"))
        .json(&json!({"rules": [FaultRule::hold("GET", route, "me")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let read = tokio::spawn({
        let (http, token, issue) = (w.http.clone(), w.alice.clone(), issue.clone());
        async move {
            let answer = http.get(issue).bearer_auth(token).send().await.unwrap();
            answer.json::<Value>().await.unwrap()
        }
    });
    let held = || async {
        w.http
            .get(format!("{base}/_fakehub/holds/me"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["waiting"]
            .as_u64()
            .unwrap()
    };
    while held().await == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A change made while the read is held is what the read answers.
    let renamed = w
        .http
        .patch(&issue)
        .bearer_auth(&w.alice)
        .json(&json!({"title": "after"}))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);
    assert!(!read.is_finished(), "the read waits for its release");
    let released = w
        .http
        .post(format!("{base}/_fakehub/holds/me/release"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(released["released"], 1);
    assert_eq!(read.await.unwrap()["title"], "after");
    assert_eq!(held().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_client_goes_away_still_lands_and_is_logged() {
    let w = world().await;
    let base = w.hub.base_url().to_owned();
    let created = w
        .http
        .post(format!("{base}/repos/alice/widgets/issues"))
        .bearer_auth(&w.alice)
        .json(&json!({"title": "before"}))
        .send()
        .await
        .unwrap();
    let number = created.json::<Value>().await.unwrap()["number"].clone();
    let issue = format!("{base}/repos/alice/widgets/issues/{number}");
    let route = "/repos/{owner}/{repo}/issues/{number}";
    w.hub
        .set_faults(vec![FaultRule::hold("PATCH", route, "gone")]);
    // The client sends its write, then goes away (as a controller killed
    // mid-request does) while GitHub is still working on it.
    let write = tokio::spawn({
        let (http, token, issue) = (w.http.clone(), w.alice.clone(), issue.clone());
        async move {
            http.patch(issue)
                .bearer_auth(token)
                .json(&json!({"title": "after"}))
                .send()
                .await
        }
    });
    while w.hub.held("gone") == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    write.abort();
    assert!(write.await.unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        w.hub.release("gone"),
        1,
        "the write still waits to be served"
    );
    w.hub.set_faults(vec![]);
    let mut logged = None;
    for _ in 0..100 {
        logged = w
            .hub
            .requests()
            .into_iter()
            .find(|r| r.method == "PATCH" && r.route == route);
        if logged.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(logged.map(|r| r.status), Some(200), "the write is logged");
    let read = w
        .http
        .get(&issue)
        .bearer_auth(&w.alice)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(read["title"], "after", "the write landed");
}
