//! A run from its trigger to REVIEW through the driver, with a scripted
//! well-behaved implementer (`tests/agents/phase_implement.sh good`), real
//! git (mirror, worktree, export, push to fakehub's git server), real
//! validation commands, Postgres and fakehub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod driver_support;

use std::time::Duration;

use autoforge::agents::profile::AgentCatalog;
use autoforge::agents::prompt::PromptSet;
use autoforge::config::AgentSettings;
use autoforge::driver::{AgentRuntime, GitRemote, RepositoryAccess, RunEnd};
use autoforge::github::PullRequest;
use autoforge::machine::RunState;
use autoforge::redact::Redactor;
use autoforge::validation::{ValidationCommand, ValidationLimits};
use autoforge::workspace::Workspaces;
use autoforge_journal::Stage;
use driver_support::{NAME, OWNER, World};
use serde_json::json;

fn implementer(issue_url: &str) -> AgentCatalog {
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let settings: AgentSettings = serde_json::from_value(json!({
        "profiles": {"scripted": {
            "command": [script, "good", issue_url],
            "idle_timeout_seconds": 60,
            "max_runtime_seconds": 120,
        }},
        "roles": {"implement": "scripted", "review": "scripted", "fix": "scripted", "update_epic": "scripted"}
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}

#[tokio::test]
async fn a_run_goes_from_the_trigger_through_validation_and_publishing_to_review() {
    let world = World::new(1).await;
    let state_dir = tempfile::tempdir().unwrap();
    let runtime = AgentRuntime {
        workspaces: Workspaces::open(state_dir.path()).unwrap(),
        catalog: implementer(&format!("https://github.com/{OWNER}/{NAME}/issues/1")),
        prompts: PromptSet::embedded(),
        validation_commands: vec![ValidationCommand::Shell("test -f feature.txt".into())],
        validation_limits: ValidationLimits {
            timeout: Duration::from_secs(60),
            kill_grace: Duration::from_secs(1),
            tail_bytes: 4096,
        },
        redactor: Redactor::new(),
        kill_grace: Duration::from_secs(1),
    };
    let access = RepositoryAccess {
        git: Some(GitRemote {
            url: world.hub.git_url(OWNER, NAME),
            credential: Some(world.token.clone()),
        }),
        ..world.access()
    };
    let driver = autoforge::driver::Driver::new(
        world.config("publisher"),
        world.db.journal().clone(),
        [access],
    )
    .with_agents(runtime);
    let run = world.start_run(1).await;

    let ended = driver.drive_due_runs(5).await.unwrap();

    assert_eq!(ended, vec![(run, RunEnd::Idle)]);
    assert_eq!(world.phase(run).await, "REVIEW");
    let state: RunState = serde_json::from_value(
        world
            .db
            .journal()
            .get_run(run)
            .await
            .unwrap()
            .unwrap()
            .state,
    )
    .unwrap();
    let journal = world.db.journal();
    let launches = journal.list_launches(run).await.unwrap();
    assert_eq!(launches.len(), 1, "{launches:?}");
    let validations = journal.list_validations(run, None).await.unwrap();
    assert_eq!(validations.len(), 1);
    let candidate = validations[0].sha.clone();
    for effect in journal.list_effects(run).await.unwrap() {
        assert_eq!(effect.stage, Stage::Observed, "{effect:?}");
    }

    // On GitHub: the branch at the validated candidate and one marked PR.
    let pulls: Vec<PullRequest> = world
        .api
        .pull_requests_by_head(&world.repo, OWNER, "autoforge/1")
        .await
        .unwrap();
    assert_eq!(pulls.len(), 1);
    let pr = &pulls[0];
    assert_eq!(pr.head.sha, candidate);
    assert_eq!(pr.base.ref_name, "main");
    assert!(pr.body.as_deref().unwrap().contains("ai-implementation"));
    assert_eq!(state.pr, Some(pr.number));
    assert_eq!(world.status_comments(1).await.len(), 1);
}
