//! Each CLI's read-only reviewer profile, with a model that asks for writes
//! anyway (a file through the write tool, a change and a commit through the
//! shell): the CLI refuses them, the worktree fingerprint shows nothing
//! moved, so the clean review is accepted, and the pull request holds the
//! implementer's commit only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::scenario::{Agents, Marker, Phase, Scenario};
use crate::profiles::{self, ANTHROPIC_KEY, OPENAI_KEY, OPENROUTER_KEY};
use crate::scripts;

const PATIENCE: Duration = Duration::from_secs(300);

/// The worktree of issue #1 as the review prompt's context folder locates
/// it (the state directory is the part before `/launches/`).
const WORKTREE_FILE: &str = "{{state}}/worktrees/octo/widgets/1/intruder.txt";

async fn reviewer_refuses_writes(reviewer: &str, write_path: &str) {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    server.load(scripts::implement(1)).expect("loads");
    server
        .load(scripts::intruding_review(write_path, 2))
        .expect("loads");
    let roles = format!("implement = \"claude\"\nreview = \"{reviewer}\"\n");
    let agents = profiles::example_agents_routed(server.base_url(), &installed, Some(&roles));
    let s = Scenario::new()
        .agents(Agents::given_toml(agents))
        .merge_mode("auto")
        .env("PATH", &profiles::path_with(&installed))
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OPENROUTER_API_KEY", OPENROUTER_KEY)
        .start()
        .await;
    let issue = s.new_issue("a feature file").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches_within(Phase::Done, PATIENCE).await;

    assert_eq!(
        run.phase_history().await,
        [
            Phase::Implement,
            Phase::Review,
            Phase::ReadyForMerge,
            Phase::Merge,
            Phase::Done
        ],
        "{reviewer}: the review was accepted, so nothing moved"
    );
    let pr = s.pull().await;
    let files = s.get(&format!("/pulls/{}/files", pr.number)).await;
    let names: Vec<&str> = files
        .as_array()
        .expect("a file list")
        .iter()
        .map(|f| f["filename"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["feature.txt"], "{reviewer}");
    // A reviewer that cannot read the code reviews nothing: the file's
    // content, as the CLI's read tool returned it, is in the review.
    let reviews = pr.comments_with(Marker::ReviewResult).await;
    assert!(
        reviews
            .iter()
            .any(|c| c.body.contains("Read feature.txt: feature")),
        "{reviewer} read the worktree: {:?}",
        reviews.iter().map(|c| &c.body).collect::<Vec<_>>()
    );
    let commits = s.get(&format!("/pulls/{}/commits", pr.number)).await;
    assert_eq!(commits.as_array().map(Vec::len), Some(1), "{reviewer}");
    // The model did ask for both writes, and came back after the refusals.
    let steps: Vec<Option<usize>> = server
        .requests()
        .into_iter()
        .filter(|r| r.script.as_deref() == Some("review-1"))
        .map(|r| r.step)
        .collect();
    for step in [0, 1, 2] {
        assert!(
            steps.contains(&Some(step)),
            "{reviewer} reached step {step}: {steps:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_reviewer_cannot_write_and_its_review_counts() {
    reviewer_refuses_writes("claude-review", WORKTREE_FILE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_reviewer_cannot_write_and_its_review_counts() {
    reviewer_refuses_writes("codex-review", "intruder.txt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_opencode_reviewer_cannot_write_and_its_review_counts() {
    reviewer_refuses_writes("opencode-review", WORKTREE_FILE).await;
}
