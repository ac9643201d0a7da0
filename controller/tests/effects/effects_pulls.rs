//! Push, pull-request and merge effects against fakehub's real git and a
//! real journal: compare-and-swap pushes that are never forced, the PR
//! opened once (also after an ambiguous write), adoption guarded by the
//! body digest, and merges counted only at the reviewed head.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use autoforge::effects::{DriveOutcome, EffectExecutor, PlanError, PushTransport, plan};
use autoforge::machine::EffectIntent;
use autoforge::workspace::{CommitSha, Workspaces};
use autoforge_journal::{EffectKind, NewEffect, Stage};
use common::{NAME, OWNER, World, ambiguous, payload_body};
use serde_json::json;

const BRANCH: &str = "autoforge/1";

struct Git {
    world: World,
    _state: tempfile::TempDir,
    mirror_path: std::path::PathBuf,
    main: String,
}

impl Git {
    async fn new() -> Git {
        let world = World::with_leased_run().await;
        assert_eq!(
            world.human_issue("Add widgets", "please").await,
            autoforge_journal::testing::issue(1)
        );
        let state = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::open(state.path()).unwrap();
        let mirror = workspaces
            .mirror(OWNER, NAME, &world.hub.git_url(OWNER, NAME))
            .await
            .unwrap();
        let main = ref_tip(&world, "heads/main").await.expect("main exists");
        mirror
            .fetch_shas(&[CommitSha::parse(&main).unwrap()], Some(&world.token))
            .await
            .unwrap();
        Git {
            mirror_path: mirror.path().to_owned(),
            world,
            _state: state,
            main,
        }
    }

    /// A new commit on top of `parent` adding one file.
    fn commit(&self, parent: &str, file: &str) -> String {
        let git = |args: &[&str], input: Option<&str>| -> String {
            use std::io::Write;
            let mut child = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(&self.mirror_path)
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            if let Some(input) = input {
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
            }
            drop(child.stdin.take());
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "git {args:?}");
            String::from_utf8(output.stdout).unwrap().trim().to_owned()
        };
        let blob = git(&["hash-object", "-w", "--stdin"], Some(file));
        let tree_listing = git(&["ls-tree", parent], None);
        let listing = format!("{tree_listing}\n100644 blob {blob}\t{file}.txt\n");
        let tree = git(&["mktree"], Some(&listing));
        git(&["commit-tree", &tree, "-p", parent, "-m", file], None)
    }

    async fn executor(&self) -> EffectExecutor {
        let workspaces = Workspaces::open(self._state.path()).unwrap();
        let mirror = workspaces
            .mirror(OWNER, NAME, &self.world.hub.git_url(OWNER, NAME))
            .await
            .unwrap();
        self.world.executor().with_push(PushTransport {
            mirror,
            url: self.world.hub.git_url(OWNER, NAME),
            credential: self.world.token.clone(),
            default_branch: "main".into(),
        })
    }

    fn push(&self, sha: &str, expected_old: Option<&str>) -> NewEffect {
        let intent = EffectIntent::Push {
            branch: BRANCH.into(),
            sha: autoforge_journal::testing::sha(sha),
            expected_old: expected_old.map(autoforge_journal::testing::sha),
        };
        self.world.plan(&intent, &BTreeMap::new())
    }

    async fn pushed(&mut self, sha: &str, expected_old: Option<&str>) {
        let [row] = self
            .world
            .journal(vec![self.push(sha, expected_old)])
            .await
            .try_into()
            .unwrap();
        let outcome = self.world.drive(&self.executor().await, row.id).await;
        assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    }
}

async fn ref_tip(world: &World, name: &str) -> Option<String> {
    let path = world.repo.api_path(&format!("/git/ref/{name}"));
    match world.api.get_json::<serde_json::Value>(&path).await {
        Ok(value) => Some(value["object"]["sha"].as_str().unwrap().to_owned()),
        Err(error) if error.is_not_found() => None,
        Err(error) => panic!("{error}"),
    }
}

fn create_pr() -> EffectIntent {
    EffectIntent::CreatePr {
        issue: autoforge_journal::testing::issue(1),
        branch: BRANCH.into(),
        base: "main".into(),
        title: "Add widgets".into(),
        body: "This adds widgets.".into(),
    }
}

async fn wait_mergeable(world: &World, pr: autoforge_journal::PullNumber) {
    for _ in 0..50 {
        let current = world.api.pull_request(&world.repo, pr).await.unwrap();
        if current.mergeable == Some(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("PR #{pr} never became mergeable");
}

#[tokio::test]
async fn a_push_creates_the_branch_at_the_exact_sha_and_a_repeat_is_observed_without_sending() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    assert_eq!(
        ref_tip(&git.world, &format!("heads/{BRANCH}")).await,
        Some(first.clone())
    );
    let [again] = git
        .world
        .journal(vec![git.push(&first, None)])
        .await
        .try_into()
        .unwrap();
    let outcome = git.world.drive(&git.executor().await, again.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    assert_eq!(git.world.row(again.id).await.attempts, 0, "never sent");
    let second = git.commit(&first, "two");
    git.pushed(&second, Some(&first)).await;
    assert_eq!(
        ref_tip(&git.world, &format!("heads/{BRANCH}")).await,
        Some(second)
    );
}

#[tokio::test]
async fn a_stale_expected_old_sha_is_a_conflict_and_the_branch_is_not_forced() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let other = git.commit(&git.main.clone(), "other");
    let [row] = git
        .world
        .journal(vec![git.push(&other, Some(&git.main.clone()))])
        .await
        .try_into()
        .unwrap();
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.contains(&first) && reason.contains("never forced"),
        "{reason}"
    );
    assert_eq!(git.world.row(row.id).await.attempts, 0);
    assert_eq!(
        ref_tip(&git.world, &format!("heads/{BRANCH}")).await,
        Some(first)
    );
}

#[tokio::test]
async fn a_push_that_would_not_fast_forward_is_refused_before_sending() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let sibling = git.commit(&git.main.clone(), "sibling");
    let [row] = git
        .world
        .journal(vec![git.push(&sibling, Some(&first))])
        .await
        .try_into()
        .unwrap();
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    let DriveOutcome::Conflict { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("fast-forward"), "{reason}");
    assert_eq!(
        ref_tip(&git.world, &format!("heads/{BRANCH}")).await,
        Some(first)
    );
}

#[tokio::test]
async fn the_default_branch_is_refused_by_plan_and_by_drive() {
    let mut git = Git::new().await;
    let commit = git.commit(&git.main.clone(), "one");
    let intent = EffectIntent::Push {
        branch: "main".into(),
        sha: autoforge_journal::testing::sha(&commit.clone()),
        expected_old: Some(autoforge_journal::testing::sha(&git.main.clone())),
    };
    let refused = plan(&intent, &git.world.plan_context(&BTreeMap::new()));
    assert!(matches!(refused, Err(PlanError::Refused(_))), "{refused:?}");
    // A row that reached the journal some other way is still refused.
    let crafted = NewEffect {
        kind: EffectKind::Push,
        identity: "refs/heads/main".into(),
        target: "refs/heads/main".into(),
        precondition: json!({}),
        payload: serde_json::to_vec(&json!({"sha": commit, "expected_old": git.main})).unwrap(),
        completion: json!({"sha": commit}),
    };
    let [row] = git.world.journal(vec![crafted]).await.try_into().unwrap();
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Blocked { ref reason } if reason.contains("default branch")),
        "{outcome:?}"
    );
    assert_eq!(
        ref_tip(&git.world, "heads/main").await,
        Some(git.main.clone())
    );
}

#[tokio::test]
async fn the_pr_is_opened_once_even_when_the_create_answer_is_lost() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let planned = git.world.plan(&create_pr(), &BTreeMap::new());
    let body = payload_body(&planned);
    let [row] = git.world.journal(vec![planned]).await.try_into().unwrap();
    git.world.fault(
        "POST",
        "/repos/{owner}/{repo}/pulls",
        ambiguous(false),
        Some(1),
    );
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    let DriveOutcome::Observed(observed) = outcome else {
        panic!("{outcome:?}");
    };
    let prs = git
        .world
        .api
        .pull_requests_by_head(&git.world.repo, OWNER, BRANCH)
        .await
        .unwrap();
    assert_eq!(prs.len(), 1);
    assert_eq!(prs[0].body.as_deref(), Some(body.as_str()));
    assert!(body.contains("Closes #1") && body.contains("<!-- ai-implementation: "));
    assert_eq!(observed["number"], json!(prs[0].number));
    assert_eq!(git.world.writes_to("POST", "/pulls"), 1);
}

#[tokio::test]
async fn an_unmarked_human_pr_is_adopted_keeping_its_body_bytes() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let human_body = "My own description\r\nwith CRLF  \n";
    let new = autoforge::github::writes::NewPullRequest {
        title: "human PR",
        body: human_body,
        head: BRANCH,
        base: "main",
        draft: false,
    };
    let pr = autoforge::github::writes::create_pull_request(&git.world.api, &git.world.repo, &new)
        .await
        .unwrap()
        .number;
    // Opening a second PR instead would duplicate it: that is a conflict.
    let [create] = git
        .world
        .journal(vec![git.world.plan(&create_pr(), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let outcome = git.world.drive(&git.executor().await, create.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Conflict { ref reason } if reason.contains("adopted")),
        "{outcome:?}"
    );

    let bodies = BTreeMap::from([(pr.as_issue(), human_body.to_owned())]);
    let planned = git.world.plan(
        &EffectIntent::AdoptPr {
            pr,
            issue: autoforge_journal::testing::issue(1),
        },
        &bodies,
    );
    let wanted = payload_body(&planned);
    let [adopt] = git.world.journal(vec![planned]).await.try_into().unwrap();
    let outcome = git.world.drive(&git.executor().await, adopt.id).await;
    assert!(matches!(outcome, DriveOutcome::Observed(_)), "{outcome:?}");
    let now = git
        .world
        .api
        .pull_request(&git.world.repo, pr)
        .await
        .unwrap();
    let body = now.body.unwrap();
    assert_eq!(body, wanted);
    assert!(
        body.starts_with(human_body),
        "the human's bytes are untouched"
    );
}

#[tokio::test]
async fn an_adoption_planned_on_a_body_that_changed_since_is_a_conflict() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let new = autoforge::github::writes::NewPullRequest {
        title: "human PR",
        body: "v1",
        head: BRANCH,
        base: "main",
        draft: false,
    };
    let pr = autoforge::github::writes::create_pull_request(&git.world.api, &git.world.repo, &new)
        .await
        .unwrap()
        .number;
    let bodies = BTreeMap::from([(pr.as_issue(), "v1".to_owned())]);
    let [adopt] = git
        .world
        .journal(vec![git.world.plan(
            &EffectIntent::AdoptPr {
                pr,
                issue: autoforge_journal::testing::issue(1),
            },
            &bodies,
        )])
        .await
        .try_into()
        .unwrap();
    let update = autoforge::github::writes::PullRequestUpdate {
        body: Some("v2 written by the human"),
        ..Default::default()
    };
    autoforge::github::writes::update_pull_request(&git.world.api, &git.world.repo, pr, &update)
        .await
        .unwrap();
    let before = git.world.writes_to("PATCH", "/pulls/{number}");
    let outcome = git.world.drive(&git.executor().await, adopt.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Conflict { ref reason } if reason.contains("changed")),
        "{outcome:?}"
    );
    assert_eq!(git.world.writes_to("PATCH", "/pulls/{number}"), before);
    let body = git
        .world
        .api
        .pull_request(&git.world.repo, pr)
        .await
        .unwrap()
        .body;
    assert_eq!(body.as_deref(), Some("v2 written by the human"));
}

#[tokio::test]
async fn a_merge_is_sent_with_the_reviewed_sha_and_counted_once() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let [create] = git
        .world
        .journal(vec![git.world.plan(&create_pr(), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let DriveOutcome::Observed(opened) = git.world.drive(&git.executor().await, create.id).await
    else {
        panic!("PR not opened");
    };
    let pr = autoforge_journal::testing::pull(opened["number"].as_u64().unwrap());
    wait_mergeable(&git.world, pr).await;
    let merge = EffectIntent::MergePr {
        pr,
        sha: autoforge_journal::testing::sha(&first.clone()),
        base_ref: "main".into(),
        method: autoforge::machine::MergeMethod::Merge,
        pr_title: "Add it".into(),
        issue: autoforge_journal::testing::issue(1),
    };
    let [row] = git
        .world
        .journal(vec![git.world.plan(&merge, &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    git.world.fault(
        "PUT",
        "/repos/{owner}/{repo}/pulls/{number}/merge",
        ambiguous(true),
        Some(1),
    );
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    let DriveOutcome::Observed(observed) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(observed["merged_head_sha"], json!(first));
    assert!(
        observed["merge_commit_sha"]
            .as_str()
            .is_some_and(|s| s.len() == 40)
    );
    assert_eq!(git.world.writes_to("PUT", "/merge"), 1);
    assert_eq!(git.world.row(row.id).await.stage, Stage::Observed);
}

#[tokio::test]
async fn a_merge_planned_on_a_head_that_moved_is_a_conflict_without_a_send() {
    let mut git = Git::new().await;
    let first = git.commit(&git.main.clone(), "one");
    git.pushed(&first, None).await;
    let [create] = git
        .world
        .journal(vec![git.world.plan(&create_pr(), &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let DriveOutcome::Observed(opened) = git.world.drive(&git.executor().await, create.id).await
    else {
        panic!("PR not opened");
    };
    let pr = autoforge_journal::testing::pull(opened["number"].as_u64().unwrap());
    let merge = EffectIntent::MergePr {
        pr,
        sha: autoforge_journal::testing::sha(&first.clone()),
        base_ref: "main".into(),
        method: autoforge::machine::MergeMethod::Merge,
        pr_title: "Add it".into(),
        issue: autoforge_journal::testing::issue(1),
    };
    let [row] = git
        .world
        .journal(vec![git.world.plan(&merge, &BTreeMap::new())])
        .await
        .try_into()
        .unwrap();
    let second = git.commit(&first, "two");
    git.pushed(&second, Some(&first)).await;
    let outcome = git.world.drive(&git.executor().await, row.id).await;
    assert!(
        matches!(outcome, DriveOutcome::Conflict { ref reason } if reason.contains("moved")),
        "{outcome:?}"
    );
    assert_eq!(git.world.writes_to("PUT", "/merge"), 0);
}
