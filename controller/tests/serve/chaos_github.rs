//! GitHub misbehaving at once, on the real `autoforge serve`: EPICs across
//! five repositories run while fakehub answers under its `combined` fault
//! profile (502s on writes, writes applied but answered 502 or cut off,
//! secondary limits every 50 requests, primary limits used up until a
//! reset, dropped and duplicated webhooks, latency spikes). Every run must
//! finish, every journalled effect be observed and present on GitHub
//! once, no marker identity appear on two objects of one thread, and no
//! request reach GitHub inside a window it closed.
//!
//! The quick size (CI) is one EPIC of two issues in each repository; the
//! full size (20 EPICs of 3 issues) is
//! `AUTOFORGE_CHAOS_GITHUB_SIZE=full cargo test -p autoforge --test serve -- chaos_github`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use autoforge_journal::{Effect, EffectKind, RunFilter, Stage};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::scenario::{Agents, Running, Scenario};
use crate::common::{NAME, OWNER};

/// How many repositories, EPICs per repository and children per EPIC.
#[derive(Debug, Clone, Copy)]
struct Size {
    repositories: usize,
    epics: usize,
    children: usize,
    /// How long every run may take to finish.
    patience: Duration,
}

fn size() -> Size {
    match std::env::var("AUTOFORGE_CHAOS_GITHUB_SIZE").as_deref() {
        Ok("full") => Size {
            repositories: 5,
            epics: 4,
            children: 3,
            patience: Duration::from_secs(1800),
        },
        _ => Size {
            repositories: 5,
            epics: 1,
            children: 2,
            patience: Duration::from_secs(600),
        },
    }
}

fn repository_names(size: Size) -> Vec<String> {
    let mut names = vec![NAME.to_owned()];
    names.extend((1..size.repositories).map(|i| format!("gadgets-{i}")));
    names
}

/// Creates the repositories beyond the first and gives the installation
/// all of them.
async fn add_repositories(s: &Running, names: &[String]) {
    for name in names.iter().filter(|n| n.as_str() != NAME) {
        s.world
            .hub
            .create_repo(&fakehub::RepoSpec {
                owner: OWNER.into(),
                name: name.clone(),
                default_branch: "main".into(),
                private: true,
                files: BTreeMap::from([("README.md".to_owned(), "hello\n".to_owned())]),
                required_checks: vec![],
            })
            .await
            .expect("create a repository");
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    s.world.set_installation_repositories(&names);
}

/// Opens the EPICs of one repository, each followed by its children as
/// sub-issues (so a child is the EPIC's number plus its place); the EPICs'
/// numbers.
async fn open_epics(s: &Running, repo: &str, size: Size) -> Vec<u64> {
    let mut epics = Vec::new();
    for e in 0..size.epics {
        let epic = open_issue(s, repo, &format!("EPIC {e}")).await;
        for c in 1..=size.children {
            let child = open_issue(s, repo, &format!("EPIC {e} part {c}")).await;
            assert_eq!(
                child["number"].as_u64(),
                epic["number"].as_u64().map(|n| n + c as u64)
            );
            rest(
                s,
                Method::POST,
                &format!("/repos/{OWNER}/{repo}/issues/{}/sub_issues", epic["number"]),
                json!({ "sub_issue_id": child["id"] }),
            )
            .await;
        }
        epics.push(epic["number"].as_u64().expect("an issue number"));
    }
    epics
}

async fn open_issue(s: &Running, repo: &str, title: &str) -> Value {
    rest(
        s,
        Method::POST,
        &format!("/repos/{OWNER}/{repo}/issues"),
        json!({"title": title, "body": "please"}),
    )
    .await
}

/// The operator labels an EPIC while fakehub injects faults: like a person
/// at the API, the test tries again when GitHub answers an error (adding a
/// label twice is harmless, so a write applied but answered 502 is too).
async fn label_amid_faults(s: &Running, repo: &str, epic: u64) {
    let path = format!("/repos/{OWNER}/{repo}/issues/{epic}/labels");
    for _ in 0..50 {
        let (status, text) = s
            .world
            .try_rest_as(
                &s.owner,
                Method::POST,
                &path,
                json!({"labels": ["autoforge"]}),
            )
            .await;
        if status.is_success() {
            return;
        }
        let transient = status.is_server_error()
            || status == reqwest::StatusCode::FORBIDDEN
            || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
        assert!(transient, "{path}: {status} {text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{path}: still refused after 50 tries");
}

async fn rest(s: &Running, method: Method, path: &str, body: Value) -> Value {
    s.world.rest_as(&s.owner, method, path, body).await
}

/// Every listed page of `path` (`per_page=100`), as the owner.
async fn list(s: &Running, path: &str) -> Vec<Value> {
    let mut all = Vec::new();
    for page in 1.. {
        let separator = if path.contains('?') { '&' } else { '?' };
        let got = rest(
            s,
            Method::GET,
            &format!("{path}{separator}per_page=100&page={page}"),
            Value::Null,
        )
        .await;
        let items = got.as_array().cloned().unwrap_or_default();
        let done = items.len() < 100;
        all.extend(items);
        if done {
            break;
        }
    }
    all
}

/// Waits until `expected` runs exist, every one DONE with every effect
/// observed; panics with what is unfinished after `patience`.
async fn all_runs_done(s: &Running, expected: usize, patience: Duration) {
    let journal = s.world.db.journal();
    let deadline = Instant::now() + patience;
    loop {
        let runs = journal.list_runs(RunFilter::All, 1000).await.unwrap();
        let mut unfinished = Vec::new();
        for run in &runs {
            let effects = journal.list_effects(run.id).await.unwrap();
            let open: Vec<String> = effects
                .iter()
                .filter(|e| e.stage != Stage::Observed)
                .map(|e| format!("{:?} {} {:?} {:?}", e.kind, e.identity, e.stage, e.reason))
                .collect();
            if run.phase != "DONE" || !open.is_empty() {
                unfinished.push(format!(
                    "{} #{} {} failure {:?} blocked {:?}; unsettled {open:?}",
                    run.repository,
                    run.current_issue,
                    run.phase,
                    run.state["failure"],
                    run.state["blocked"]
                ));
            }
        }
        if runs.len() == expected && unfinished.is_empty() {
            return;
        }
        // A blocked or failed run waits for an operator: it will not
        // finish, so waiting out the patience would only hide the failure.
        let stuck = runs
            .iter()
            .any(|run| matches!(run.phase.as_str(), "BLOCKED" | "FAILED" | "STOPPED"));
        assert!(
            Instant::now() < deadline && !stuck,
            "{} of {expected} runs exist; unfinished: {unfinished:#?}",
            runs.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The marker texts (`<!-- ai-…: … -->`, `<!-- autoforge-… -->`) in `text`.
fn markers(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        let after = &rest[start..];
        let Some(end) = after.find("-->") else { break };
        let marker = &after[..end + 3];
        let inner = marker.trim_start_matches("<!--").trim_start();
        if inner.starts_with("ai-") || inner.starts_with("autoforge-") {
            found.push(marker.to_owned());
        }
        rest = &after[end + 3..];
    }
    found
}

/// What fakehub holds on one thread (an issue or a PR): its body and
/// every comment and review, each with its text.
async fn thread_objects(s: &Running, repo: &str, thread: &Value) -> Vec<(String, String)> {
    let number = thread["number"].as_u64().expect("a number");
    let mut objects = vec![(
        format!("body of #{number}"),
        thread["body"].as_str().unwrap_or_default().to_owned(),
    )];
    for comment in list(
        s,
        &format!("/repos/{OWNER}/{repo}/issues/{number}/comments"),
    )
    .await
    {
        objects.push((
            format!("comment {} on #{number}", comment["id"]),
            comment["body"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    if thread.get("pull_request").is_some() {
        for review in list(s, &format!("/repos/{OWNER}/{repo}/pulls/{number}/reviews")).await {
            objects.push((
                format!("review {} on #{number}", review["id"]),
                review["body"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    objects
}

/// No marker on two objects of one thread, and every comment the journal
/// planned (its last write per identity) present exactly once.
async fn every_object_once(s: &Running, repos: &[String]) -> usize {
    let journal = s.world.db.journal();
    let runs = journal.list_runs(RunFilter::All, 1000).await.unwrap();
    let mut planned: BTreeMap<(String, String, String), Effect> = BTreeMap::new();
    for run in &runs {
        for effect in journal.list_effects(run.id).await.unwrap() {
            if matches!(
                effect.kind,
                EffectKind::PostComment | EffectKind::EditStatusComment
            ) {
                let key = (
                    run.repository.clone(),
                    effect.target.clone(),
                    effect.identity.clone(),
                );
                planned.insert(key, effect);
            }
        }
    }
    let mut objects = 0;
    let mut bodies: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for repo in repos {
        for thread in list(s, &format!("/repos/{OWNER}/{repo}/issues?state=all")).await {
            let number = thread["number"].as_u64().expect("a number");
            let found = thread_objects(s, repo, &thread).await;
            let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (what, text) in &found {
                for marker in markers(text).into_iter().collect::<BTreeSet<_>>() {
                    seen.entry(marker).or_default().push(what.clone());
                }
            }
            for (marker, holders) in seen {
                assert_eq!(holders.len(), 1, "{repo}: {marker} on {holders:?}");
            }
            objects += found.len();
            for target in [format!("issue/{number}"), format!("pull/{number}")] {
                let texts = found.iter().map(|(_, text)| text.clone()).collect();
                bodies.insert((format!("{OWNER}/{repo}"), target), texts);
            }
        }
    }
    for ((repository, target, identity), effect) in &planned {
        let payload: Value = serde_json::from_slice(&effect.payload).expect("a JSON payload");
        let body = payload["body"].as_str().expect("a comment body");
        let texts = bodies
            .get(&(repository.clone(), target.clone()))
            .unwrap_or_else(|| panic!("{repository} {target} is on GitHub"));
        let copies = texts.iter().filter(|t| t.as_str() == body).count();
        assert_eq!(
            copies, 1,
            "{repository} {target} {identity}: planned comment once"
        );
    }
    objects
}

/// Each child got one pull request, merged by exactly one successful merge.
async fn one_merged_pr_per_child(s: &Running, repos: &[String], size: Size) {
    let merges: Vec<fakehub::world::RequestRecord> = s
        .world
        .hub
        .requests()
        .into_iter()
        // An ambiguous write merges although GitHub answers 502.
        .filter(|r| r.method == "PUT" && r.path.ends_with("/merge") && r.effective_status() == 200)
        .collect();
    for repo in repos {
        let pulls = list(s, &format!("/repos/{OWNER}/{repo}/pulls?state=all")).await;
        assert_eq!(
            pulls.len(),
            size.epics * size.children,
            "{repo}: {pulls:#?}"
        );
        let heads: BTreeSet<&str> = pulls
            .iter()
            .map(|p| p["head"]["ref"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(heads.len(), pulls.len(), "{repo}: one PR per branch");
        for pr in &pulls {
            assert!(
                !pr["merged_at"].is_null(),
                "{repo}: merged {}",
                pr["number"]
            );
            let path = format!("/repos/{OWNER}/{repo}/pulls/{}/merge", pr["number"]);
            let count = merges.iter().filter(|r| r.path == path).count();
            assert_eq!(count, 1, "{path}: merged once");
        }
    }
}

/// How often each injected fault shows in fakehub's request log and
/// delivery record, to prove the profile was in force.
fn injected(s: &Running) -> BTreeMap<&'static str, usize> {
    let requests = s.world.hub.requests();
    let deliveries = s.world.hub.deliveries();
    let count = |status: u16| requests.iter().filter(|r| r.status == status).count();
    BTreeMap::from([
        ("requests", requests.len()),
        ("502", count(502)),
        ("403", count(403)),
        ("429", count(429)),
        (
            "webhooks dropped",
            deliveries
                .iter()
                .filter(|d| d.status_code == 0 && !d.redelivery)
                .count(),
        ),
        ("deliveries", deliveries.len()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_github_epics_across_five_repositories_finish_once_under_every_fault() {
    let size = size();
    let started = Instant::now();
    let s = Scenario::new()
        .agents(
            Agents::scripted()
                .implement(["per_issue", "-"])
                .update_epic(["following", &size.children.to_string()]),
        )
        .merge_mode("auto")
        .start()
        .await;
    let repos = repository_names(size);
    add_repositories(&s, &repos).await;
    let mut epics = Vec::new();
    for repo in &repos {
        for epic in open_epics(&s, repo, size).await {
            epics.push((repo.clone(), epic));
        }
    }
    s.world
        .hub
        .set_fault_profiles(&["combined"])
        .expect("the combined profile");
    for (repo, epic) in &epics {
        label_amid_faults(&s, repo, *epic).await;
    }
    all_runs_done(&s, epics.len(), size.patience).await;
    let elapsed = started.elapsed();
    // Nothing the test reads from now on may meet a fault.
    s.world.hub.set_fault_profiles(&[]).unwrap();

    let closed = s.world.hub.closed_window_requests();
    assert!(
        closed.is_empty(),
        "requests inside closed windows: {closed:#?}"
    );
    assert!(
        s.world.hub.closed_windows() > 0,
        "the profile closed windows"
    );
    let objects = every_object_once(&s, &repos).await;
    one_merged_pr_per_child(&s, &repos, size).await;
    let faults = injected(&s);
    for fault in ["502", "403", "429", "webhooks dropped"] {
        assert!(faults[fault] > 0, "no {fault} was injected: {faults:?}");
    }
    eprintln!(
        "chaos_github {size:?}: {} runs done in {:.0} s, {objects} objects checked, {} windows closed, 0 requests inside; injected {faults:?}",
        epics.len(),
        elapsed.as_secs_f64(),
        s.world.hub.closed_windows(),
    );
}
