//! The driver's side of the world: drivers wired to its fakehub and
//! journal, scripted agent catalogs, and runs created the way the dispatcher
//! creates them: an empty state document plus a `Started` run event, in one
//! transaction.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoforge::agents::profile::AgentCatalog;
use autoforge::agents::prompt::PromptSet;
use autoforge::config::AgentSettings;
use autoforge::driver::{
    AgentRuntime, Driver, DriverConfig, GitCredential, GitRemote, RepositoryAccess, RunHooks,
    StepRetryPolicy,
};
use autoforge::github::{GitHubApi, IssueComment};
use autoforge::intake::RunSignal;
use autoforge::redact::Redactor;
use autoforge::validation::{ValidationCommand, ValidationLimits};
use autoforge::workspace::Workspaces;
use autoforge_journal::{EventSource, IssueNumber, NewRun, NewRunEvent, RunId};
use secrecy::SecretString;
use serde_json::{Value, json};

use super::git::agent_script;
use super::world::{NAME, OWNER, REPOSITORY, World};

impl World {
    pub fn config(&self, worker: &str) -> DriverConfig {
        DriverConfig {
            lease_ttl: Duration::from_secs(30),
            concurrency: 4,
            poll_interval: Duration::from_millis(20),
            idle_recheck: Duration::from_millis(50),
            retry: StepRetryPolicy {
                max_retries: 2,
                base_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(40),
            },
            ..DriverConfig::new(worker)
        }
    }

    pub fn access(&self) -> RepositoryAccess {
        RepositoryAccess {
            api: self.api.clone(),
            repo: self.repo.clone(),
            login: OWNER.into(),
            html_base: "https://github.com".into(),
            git: None,
        }
    }

    pub fn driver(&self, worker: &str) -> Driver {
        self.driver_with(self.config(worker))
    }

    /// A driver that runs agents and validation under `state_dir` and can push.
    pub fn publishing_driver(&self, worker: &str, state_dir: &std::path::Path) -> Driver {
        let access = git_access(
            self.api.clone(),
            self.hub.git_url(OWNER, NAME),
            self.token.clone(),
        );
        Driver::new(self.config(worker), self.db.journal().clone(), [access])
            .with_agents(agent_runtime(state_dir))
    }

    pub fn driver_with(&self, config: DriverConfig) -> Driver {
        Driver::new(config, self.db.journal().clone(), [self.access()])
    }

    /// Creates a run for `issue` with its `Started` event, as the
    /// dispatcher does when the trigger label is added.
    pub async fn start_run(&self, issue: IssueNumber) -> RunId {
        let mut tx = self.db.journal().begin().await.unwrap();
        let run_id = tx
            .start_run(&NewRun {
                repository: REPOSITORY.into(),
                epic: None,
                issue,
                phase: "INITIALIZING".into(),
                state: json!({}),
            })
            .await
            .unwrap();
        tx.insert_run_event(&NewRunEvent {
            run_id,
            dedupe_key: format!("labeled:{issue}"),
            source: EventSource::Webhook,
            event: RunSignal::Started {
                issue,
                labeled_by: OWNER.into(),
            }
            .to_json(),
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
        run_id
    }

    /// Enqueues `signal` for `run`.
    pub async fn signal(&self, run: RunId, key: &str, signal: RunSignal) {
        let mut tx = self.db.journal().begin().await.unwrap();
        tx.insert_run_event(&NewRunEvent {
            run_id: run,
            dedupe_key: key.into(),
            source: EventSource::Webhook,
            event: signal.to_json(),
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    pub async fn phase(&self, run: RunId) -> String {
        self.db.journal().get_run(run).await.unwrap().unwrap().phase
    }

    pub async fn unconsumed_events(&self, run: RunId) -> usize {
        self.db
            .journal()
            .next_run_events(run, 100)
            .await
            .unwrap()
            .len()
    }

    /// The controller's status comments on `issue` (marker `autoforge-status`).
    pub async fn status_comments(&self, issue: IssueNumber) -> Vec<IssueComment> {
        self.api
            .issue_comments(&self.repo, issue)
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.body.contains("autoforge-status"))
            .collect()
    }

    /// Comments on `issue` carrying `marker`.
    pub async fn comments_with(&self, issue: IssueNumber, marker: &str) -> usize {
        self.api
            .issue_comments(&self.repo, issue)
            .await
            .unwrap()
            .iter()
            .filter(|c| c.body.contains(marker))
            .count()
    }

    /// Reactions on the issue comment `comment`.
    pub async fn reactions_on(&self, comment: u64) -> usize {
        self.api
            .get_all::<Value>(
                &self
                    .repo
                    .api_path(&format!("/issues/comments/{comment}/reactions")),
            )
            .await
            .unwrap()
            .len()
    }

    /// Posts `/autoforge <verb>` on `issue` as a human and enqueues the
    /// accepted command for `run`, as the dispatcher does. Returns the
    /// comment id.
    pub async fn command(&self, run: RunId, issue: IssueNumber, verb: &str) -> u64 {
        let comment = autoforge::github::writes::create_comment(
            &self.api,
            &self.repo,
            issue,
            &format!("/autoforge {verb}"),
        )
        .await
        .unwrap()
        .id;
        self.signal(
            run,
            &format!("comment:{comment}"),
            RunSignal::Command {
                verb: verb.into(),
                argument: None,
                comment_id: comment,
                actor: OWNER.into(),
                on_issue: issue,
            },
        )
        .await;
        comment
    }
}

/// A scripted IMPLEMENT agent (`tests/agents/phase_implement.sh`) in `mode`
/// serving every role.
pub fn implementer(mode: &str) -> AgentCatalog {
    catalog(
        json!({"scripted": implement_profile(mode)}),
        "scripted",
        "scripted",
    )
}

/// The well-behaved implementer plus a scripted reviewer
/// (`tests/agents/phase_review.sh MODE 1`) for the first round.
pub fn implementer_and_reviewer(review_mode: &str) -> AgentCatalog {
    let reviewer = agent_script("phase_review.sh");
    catalog(
        json!({
            "implementer": implement_profile("good"),
            "reviewer": {
                "command": [reviewer, review_mode, "1"],
                "idle_timeout_seconds": 60,
                "max_runtime_seconds": 120,
            },
        }),
        "implementer",
        "reviewer",
    )
}

fn implement_profile(mode: &str) -> Value {
    let script = agent_script("phase_implement.sh");
    let issue_url = format!("https://github.com/{REPOSITORY}/issues/1");
    json!({
        "command": [script, mode, issue_url],
        "idle_timeout_seconds": 60,
        "max_runtime_seconds": 120,
    })
}

fn catalog(profiles: Value, implement: &str, review: &str) -> AgentCatalog {
    let settings: AgentSettings = serde_json::from_value(json!({
        "profiles": profiles,
        "roles": {"implement": implement, "review": review, "fix": implement, "update_epic": implement}
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}

/// Launches and validation under `state_dir`, with the well-behaved
/// implementer, a reviewer that finds nothing, and one validation command
/// that needs the implementer's file.
pub fn agent_runtime(state_dir: &std::path::Path) -> AgentRuntime {
    AgentRuntime {
        workspaces: Workspaces::open(state_dir).unwrap(),
        catalog: implementer_and_reviewer("clean"),
        prompts: PromptSet::embedded(),
        validation_commands: vec![ValidationCommand::Shell("test -f feature.txt".into())],
        validation_limits: ValidationLimits {
            timeout: Duration::from_secs(60),
            kill_grace: Duration::from_secs(1),
            tail_bytes: 4096,
            sandbox: autoforge::sandbox::SandboxPolicy::isolated(
                autoforge::sandbox::SandboxMode::Bubblewrap,
            ),
        },
        redactor: Redactor::new(),
        kill_grace: Duration::from_secs(1),
        heartbeat_every: Duration::from_secs(1),
        relaunch_backoff: autoforge::driver::RelaunchBackoff::NONE,
        status_refresh_every: Duration::from_secs(60),
        operator_policy: Default::default(),
    }
}

/// Repository access that can also fetch and push over git.
pub fn git_access(api: GitHubApi, git_url: String, token: SecretString) -> RepositoryAccess {
    RepositoryAccess {
        api,
        repo: REPOSITORY.parse().unwrap(),
        login: OWNER.into(),
        html_base: "https://github.com".into(),
        git: Some(GitRemote {
            url: git_url,
            credential: GitCredential::Fixed(token),
        }),
    }
}

/// Counts, per run, how many tasks are inside it right now, and remembers
/// the highest count ever seen.
#[derive(Default)]
pub struct OverlapProbe {
    inside: Mutex<HashMap<RunId, Arc<AtomicI32>>>,
    pub highest: AtomicI32,
    pub entries: AtomicI32,
}

impl OverlapProbe {
    fn counter(&self, run: RunId) -> Arc<AtomicI32> {
        Arc::clone(self.inside.lock().unwrap().entry(run).or_default())
    }
}

impl RunHooks for OverlapProbe {
    fn entered(&self, run: RunId) {
        let now = self.counter(run).fetch_add(1, Ordering::SeqCst) + 1;
        self.highest.fetch_max(now, Ordering::SeqCst);
        self.entries.fetch_add(1, Ordering::SeqCst);
    }

    fn left(&self, run: RunId) {
        self.counter(run).fetch_sub(1, Ordering::SeqCst);
    }
}

impl World {
    /// The run's state document.
    pub async fn state(&self, run: RunId) -> autoforge::machine::RunState {
        let row = self.db.journal().get_run(run).await.unwrap().unwrap();
        serde_json::from_value(row.state).unwrap()
    }

    /// Drives due runs again and again until `run` is in one of `phases`
    /// (a run waiting for mergeability or a re-check is due again only
    /// after its wake-up time). Panics after `limit` with the phase seen.
    pub async fn drive_until(&self, driver: &Driver, run: RunId, phases: &[&str], limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            driver.drive_due_runs(5).await.unwrap();
            let phase = self.phase(run).await;
            if phases.contains(&phase.as_str()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {run} is still in {phase}, not in {phases:?}: {:?}",
                self.state(run).await.blocked
            );
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }

    /// A driver like [`World::publishing_driver`] whose runs use `mode`.
    pub fn merging_driver(
        &self,
        worker: &str,
        state_dir: &std::path::Path,
        mode: autoforge::machine::MergeMode,
    ) -> Driver {
        let mut config = self.config(worker);
        config.settings.merge_mode = mode;
        let access = git_access(
            self.api.clone(),
            self.hub.git_url(OWNER, NAME),
            self.token.clone(),
        );
        Driver::new(config, self.db.journal().clone(), [access])
            .with_agents(agent_runtime(state_dir))
    }
}

/// A script of `tests/agents/` as a profile: `args` follow the script.
pub fn script_profile(script: &str, args: &[&str]) -> Value {
    let mut command = vec![agent_script(script)];
    command.extend(args.iter().map(|a| (*a).to_owned()));
    json!({
        "command": command,
        "idle_timeout_seconds": 60,
        "max_runtime_seconds": 120,
    })
}

/// The whole loop scripted: the well-behaved implementer, a round-1
/// reviewer in `first_review` mode, a clean reviewer from round 2 on, the
/// fixer `phase_fix.sh FIX_MODE R1-F1` and the EPIC agent
/// `phase_update_epic.sh EPIC_MODE`.
pub fn loop_catalog(first_review: &str, fix_mode: &str, epic_mode: &str) -> AgentCatalog {
    let settings: AgentSettings = serde_json::from_value(json!({
        "profiles": {
            "implementer": implement_profile("good"),
            "first_reviewer": script_profile("phase_review.sh", &[first_review, "1"]),
            "later_reviewer": script_profile("phase_review.sh", &["clean", "2"]),
            "fixer": script_profile("phase_fix.sh", &[fix_mode, "R1-F1"]),
            "epic": script_profile("phase_update_epic.sh", &[epic_mode]),
        },
        "roles": {
            "implement": "implementer",
            "review": [
                {"rounds": "1", "profile": "first_reviewer"},
                {"rounds": "2+", "profile": "later_reviewer"},
            ],
            "fix": "fixer",
            "update_epic": "epic",
        }
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}

impl World {
    /// A driver whose runs use `mode` and the agents of `catalog`.
    pub fn loop_driver(
        &self,
        worker: &str,
        state_dir: &std::path::Path,
        mode: autoforge::machine::MergeMode,
        catalog: AgentCatalog,
    ) -> Driver {
        let mut config = self.config(worker);
        config.settings.merge_mode = mode;
        let access = git_access(
            self.api.clone(),
            self.hub.git_url(OWNER, NAME),
            self.token.clone(),
        );
        let mut runtime = agent_runtime(state_dir);
        runtime.catalog = catalog;
        Driver::new(config, self.db.journal().clone(), [access]).with_agents(runtime)
    }
}

/// Agents for an EPIC: `phase_implement.sh per_issue` for every child, a
/// clean reviewer, and `phase_update_epic.sh sequence COUNTER NEXT...`
/// picking `next` in order, then reporting the EPIC complete.
pub fn epic_catalog(counter: &std::path::Path, next: &[&str]) -> AgentCatalog {
    let mut epic_args = vec!["sequence", counter.to_str().unwrap()];
    epic_args.extend_from_slice(next);
    let mut epic = script_profile("phase_update_epic.sh", &epic_args);
    // The counter sits outside the worktree: bound into the sandbox.
    epic["sandbox"] = json!({"read_write": [counter.parent().unwrap()]});
    let settings: AgentSettings = serde_json::from_value(json!({
        "profiles": {
            "implementer": script_profile("phase_implement.sh", &["per_issue", "-"]),
            "reviewer": script_profile("phase_review.sh", &["clean", "1"]),
            "epic": epic,
        },
        "roles": {
            "implement": "implementer",
            "review": "reviewer",
            "fix": "implementer",
            "update_epic": "epic",
        }
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}

impl World {
    /// Makes `child` a sub-issue of `parent` through the REST API.
    pub async fn add_sub_issue(&self, parent: IssueNumber, child: IssueNumber) {
        let id = self.api.issue(&self.repo, child).await.unwrap().id;
        let path = format!("/repos/{REPOSITORY}/issues/{parent}/sub_issues");
        self.rest(reqwest::Method::POST, &path, json!({ "sub_issue_id": id }))
            .await;
    }

    /// Closes `issue` as a person would.
    pub async fn close_issue(&self, issue: IssueNumber) {
        let path = format!("/repos/{REPOSITORY}/issues/{issue}");
        self.rest(reqwest::Method::PATCH, &path, json!({ "state": "closed" }))
            .await;
    }

    /// One REST call as the repository owner; it must succeed.
    async fn rest(&self, method: reqwest::Method, path: &str, body: Value) {
        self.rest_as(&self.owner(), method, path, body).await;
    }
}

/// Two review rounds with a finding each (texts naming their round), a
/// clean third round, and the fixer `phase_fix.sh defer_listed`: round 1's
/// finding gets a new follow-up issue, round 2's is deferred to it.
pub fn deferring_catalog() -> AgentCatalog {
    let settings: AgentSettings = serde_json::from_value(json!({
        "profiles": {
            "implementer": implement_profile("good"),
            "r1": script_profile("phase_review.sh", &["round_findings", "1"]),
            "r2": script_profile("phase_review.sh", &["round_findings", "2"]),
            "r3": script_profile("phase_review.sh", &["clean", "3"]),
            "fixer": script_profile("phase_fix.sh", &["defer_listed"]),
        },
        "roles": {
            "implement": "implementer",
            "review": [
                {"rounds": "1", "profile": "r1"},
                {"rounds": "2", "profile": "r2"},
                {"rounds": "3+", "profile": "r3"},
            ],
            "fix": "fixer",
            "update_epic": "implementer",
        }
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}
