//! Merging as the repository's settings and rules demand, on the real
//! `autoforge serve` against fakehub (SPEC §10): the method is one the
//! repository allows (squash first, titled after the PR and closing the
//! issue), a chosen method it does not allow blocks with that reason, and
//! so does GitHub's 405 for it; required checks still running and a
//! required approving review are waits shown in the status comment, lifted
//! by the check finishing and by a writer's approval; a pull request whose
//! files GitHub cannot list in full is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use base64::Engine;
use fakehub::MergeRules;
use fakehub::world::RepoSettings;
use reqwest::Method;
use serde_json::json;

use crate::common::scenario;

use scenario::{
    Agents, FaultKind, FaultRule, Marker, OWNER, PATIENCE, Phase, REPO, Running, Scenario,
};

const MERGE_ROUTE: &str = "/repos/{owner}/{repo}/pulls/{number}/merge";

fn set_rules(s: &Running, rules: MergeRules) {
    s.world
        .hub
        .set_merge_rules(OWNER, REPO, &rules)
        .expect("fakehub sets the merge rules");
}

fn settings_without(method: &str) -> RepoSettings {
    let mut settings = RepoSettings::default();
    match method {
        "squash" => settings.allow_squash_merge = false,
        "rebase" => settings.allow_rebase_merge = false,
        _ => settings.allow_merge_commit = false,
    }
    settings
}

/// The run's status comment on issue 1.
async fn status_comment(s: &Running) -> String {
    let found = s
        .issue(autoforge_journal::testing::issue(1))
        .comments_with(Marker::Status)
        .await;
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].body.clone()
}

/// Waits until the status comment (once it exists) contains `text`.
async fn status_shows(s: &Running, text: &str) -> String {
    scenario::eventually(
        PATIENCE,
        &format!("the status comment showing {text:?}"),
        || async {
            let found = s
                .issue(autoforge_journal::testing::issue(1))
                .comments_with(Marker::Status)
                .await;
            found
                .into_iter()
                .map(|c| c.body)
                .find(|body| body.contains(text))
        },
    )
    .await
}

/// The message and parents of the default branch's head, read with git.
fn main_head_commit(s: &Running) -> (String, Vec<String>) {
    let checkout = tempfile::tempdir().unwrap();
    let dir = checkout.path();
    let url = s.world.hub.git_url(OWNER, REPO);
    let header = format!("http.extraHeader=Authorization: token {}", s.owner.token);
    git(dir, &["-c", &header, "clone", "-q", &url, "."]);
    let message = git(dir, &["log", "-1", "--format=%B"]);
    let parents = git(dir, &["log", "-1", "--format=%P"]);
    (
        message.trim_end().to_owned(),
        parents.split_whitespace().map(str::to_owned).collect(),
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_chosen_method_the_pull_request_is_squashed_titled_after_it_and_closing_the_issue()
 {
    let s = Scenario::new().merge_mode("auto").start().await;
    let issue = s.new_issue("a widget").await;
    let base_before = s.branch_head("main").unwrap();
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Done).await;

    let pr = s.pull().await;
    pr.assert_merged_once().await;
    let title = s.get(&format!("/pulls/{}", pr.number)).await["title"]
        .as_str()
        .unwrap()
        .to_owned();
    let (message, parents) = main_head_commit(&s);
    assert_eq!(
        message,
        format!("{title} (#{})\n\nCloses #{}", pr.number, issue.number)
    );
    assert_eq!(parents, [base_before], "one commit on the base: a squash");
    assert_eq!(state.merged_prs.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_the_repositorys_file_chooses_but_its_settings_forbid_blocks_naming_both() {
    let s = Scenario::new()
        .merge_mode("auto")
        .merge_method("merge")
        .start()
        .await;
    let file = base64::engine::general_purpose::STANDARD.encode("[merge]\nmethod = \"rebase\"\n");
    s.world
        .rest_as(
            &s.owner,
            Method::PUT,
            &format!("/repos/{OWNER}/{REPO}/contents/.github/autoforge.toml"),
            json!({"message": "merge by rebase", "content": file}),
        )
        .await;
    set_rules(
        &s,
        MergeRules {
            settings: Some(settings_without("rebase")),
            ..MergeRules::default()
        },
    );
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(
        reason.contains(".github/autoforge.toml")
            && reason.contains("`rebase`")
            && reason.contains("`allow_rebase_merge`"),
        "the file's choice wins over merge.method and is named: {reason}"
    );
    assert_eq!(s.pull().await.merge_requests(), 0, "nothing was sent");
    let status = status_comment(&s).await;
    assert!(
        status.contains("allow_rebase_merge") && status.contains("/autoforge unblock"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_405_for_a_method_turned_off_after_the_gate_is_a_block_saying_so() {
    let s = Scenario::new()
        .merge_mode("auto")
        .faults(vec![FaultRule {
            count: Some(1),
            ..FaultRule::on(
                "PUT",
                MERGE_ROUTE,
                FaultKind::Hold {
                    gate: "merge".into(),
                },
            )
        }])
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    scenario::eventually(PATIENCE, "the merge request held", || async {
        (s.world.hub.held("merge") > 0).then_some(())
    })
    .await;
    set_rules(
        &s,
        MergeRules {
            settings: Some(settings_without("squash")),
            ..MergeRules::default()
        },
    );
    s.world.hub.release("merge");

    // Not `reaches`: the MERGE entry's own status edit stays unsent after
    // the merge's conflict, by design; the block's edit is what shows.
    let status = status_shows(&s, "squash merge method is not allowed").await;
    assert!(
        status.contains("**BLOCKED**") && status.contains("/autoforge unblock"),
        "{status}"
    );
    let reason = run.state().await.blocked.unwrap().reason;
    assert!(reason.contains("allow_squash_merge"), "{reason}");
    assert!(!s.pull().await.is_merged().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_while_a_required_check_runs_is_a_wait_that_ends_in_the_merge() {
    let s = Scenario::new()
        .agents(Agents::scripted().hold("review", [1]))
        .merge_mode("auto")
        .start()
        .await;
    set_rules(
        &s,
        MergeRules {
            required_checks: Some(vec!["ci".into()]),
            ..MergeRules::default()
        },
    );
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    s.launch_started("review", 1).await;
    let head = s.pull().await.head_sha().await;
    let check = |status: &str, conclusion: Option<&str>| fakehub::control::CheckSpec {
        owner: OWNER.into(),
        repo: REPO.into(),
        sha: head.clone(),
        name: "ci".into(),
        status: Some(status.into()),
        conclusion: conclusion.map(Into::into),
    };
    s.world.hub.add_check(&check("in_progress", None)).unwrap();
    s.release("review", 1);

    let status = status_shows(&s, "Waiting: required checks are still running").await;
    assert!(status.contains("**READY_FOR_MERGE**"), "{status}");
    assert_eq!(
        run.state().await.phase,
        Phase::ReadyForMerge,
        "a wait, not a block"
    );
    s.world
        .hub
        .add_check(&check("completed", Some("success")))
        .unwrap();

    run.reaches(Phase::Done).await;
    s.pull().await.assert_merged_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_review_waits_visibly_until_a_writer_approves_then_merges() {
    let s = Scenario::new().merge_mode("auto").start().await;
    set_rules(
        &s,
        MergeRules {
            required_approving_reviews: Some(1),
            ..MergeRules::default()
        },
    );
    let reviewer = s.person("reviewer", "write");
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;

    status_shows(
        &s,
        "Waiting: waiting for an approving review (0 of 1 required)",
    )
    .await;
    let pr = s.pull().await;
    assert_eq!(pr.merge_requests(), 0);
    assert_eq!(run.state().await.phase, Phase::ReadyForMerge);
    s.world
        .rest_as(
            &reviewer,
            Method::POST,
            &format!("/repos/{OWNER}/{REPO}/pulls/{}/reviews", pr.number),
            json!({"event": "APPROVE"}),
        )
        .await;

    run.reaches(Phase::Done).await;
    pr.assert_merged_once().await;
}

/// A person pushes `count` files onto the PR branch while the review is
/// held: more than GitHub lists.
fn push_many_files(s: &Running, branch: &str, count: usize) {
    let files: Vec<(String, String)> = (0..count)
        .map(|n| (format!("data/{n}.txt"), format!("{n}\n")))
        .collect();
    s.human_commit(&s.owner, branch, &files, "data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_changed_files_than_github_lists_makes_the_gate_refuse() {
    let s = Scenario::new()
        .agents(Agents::scripted().hold("review", [1]))
        .merge_mode("auto")
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    s.launch_started("review", 1).await;
    push_many_files(&s, "autoforge/1", 3001);
    s.release("review", 1);

    let state = run.reaches(Phase::Blocked).await;

    let reason = state.blocked.unwrap().reason;
    assert!(
        reason.contains("pre-merge gate") && reason.contains("protected-path"),
        "{reason}"
    );
    assert_eq!(s.pull().await.merge_requests(), 0);
}
