//! Shared harness of the driver tests: a fakehub with one user and one
//! repository holding a few issues, a fresh journal database, and drivers
//! wired to both. Runs are created the way the dispatcher creates them: an
//! empty state document plus a `Started` run event, in one transaction.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoforge::agents::profile::AgentCatalog;
use autoforge::agents::prompt::PromptSet;
use autoforge::config::AgentSettings;
use autoforge::driver::{
    AgentRuntime, Driver, DriverConfig, GitCredential, GitRemote, RepositoryAccess, RetryPolicy,
    RunHooks,
};
use autoforge::github::{
    ClientOptions, GitHubApi, GitHubAuth, GitHubClient, IssueComment, RepoName,
    RetryPolicy as HttpRetry,
};
use autoforge::redact::Redactor;
use autoforge::serve::RunSignal;
use autoforge::validation::{ValidationCommand, ValidationLimits};
use autoforge::workspace::Workspaces;
use autoforge_journal::testing::TestDatabase;
use autoforge_journal::{EventSource, NewRun, NewRunEvent, RunId};
use fakehub::RepoSpec;
use fakehub::world::UserKind;
use secrecy::SecretString;
use serde_json::{Value, json};

pub const OWNER: &str = "alice";
pub const NAME: &str = "widgets";
pub const REPOSITORY: &str = "alice/widgets";

pub struct World {
    pub hub: fakehub::Handle,
    pub db: TestDatabase,
    pub api: GitHubApi,
    pub repo: RepoName,
    pub token: SecretString,
}

impl World {
    /// A world with `issues` open issues, numbered from 1.
    pub async fn new(issues: u64) -> World {
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let alice = hub.create_user(OWNER, UserKind::User).unwrap();
        let files = BTreeMap::from([("README.md".to_owned(), "hello\n".to_owned())]);
        hub.create_repo(&RepoSpec {
            owner: OWNER.into(),
            name: NAME.into(),
            default_branch: "main".into(),
            private: true,
            files,
            required_checks: vec![],
        })
        .await
        .unwrap();
        let options = ClientOptions {
            retry: HttpRetry {
                max_attempts: 2,
                base_delay: Duration::from_millis(5),
                max_delay: Duration::from_millis(10),
            },
            request_timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        };
        let api = GitHubClient::with_options(
            hub.base_url(),
            GitHubAuth::Token(alice.token.clone()),
            options,
        )
        .unwrap()
        .installation(0)
        .unwrap();
        let repo: RepoName = REPOSITORY.parse().unwrap();
        for number in 1..=issues {
            let created = autoforge::github::writes::create_issue(
                &api,
                &repo,
                &format!("Issue {number}"),
                "please do it",
                &[],
            )
            .await
            .unwrap();
            assert_eq!(created.number, number);
        }
        World {
            hub,
            db: TestDatabase::fresh().await,
            api,
            repo,
            token: alice.token.clone(),
        }
    }

    pub fn config(&self, worker: &str) -> DriverConfig {
        DriverConfig {
            lease_ttl: Duration::from_secs(30),
            concurrency: 4,
            poll_interval: Duration::from_millis(20),
            idle_recheck: Duration::from_millis(50),
            retry: RetryPolicy {
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
            merge_method: "merge".into(),
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
    pub async fn start_run(&self, issue: u64) -> RunId {
        let mut tx = self.db.journal().begin().await.unwrap();
        let run_id = tx
            .start_run(&NewRun {
                repository: REPOSITORY.into(),
                epic: None,
                issue: i64::try_from(issue).unwrap(),
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
    pub async fn status_comments(&self, issue: u64) -> Vec<IssueComment> {
        self.api
            .issue_comments(&self.repo, issue)
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.body.contains("autoforge-status"))
            .collect()
    }

    /// Comments on `issue` carrying `marker`.
    pub async fn comments_with(&self, issue: u64, marker: &str) -> usize {
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
    pub async fn command(&self, run: RunId, issue: u64, verb: &str) -> u64 {
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

    /// Answered API writes (anything but GET), the control API excluded.
    pub fn all_writes(&self) -> usize {
        self.hub
            .requests()
            .iter()
            .filter(|r| r.method != "GET" && !r.path.starts_with("/_fakehub"))
            .count()
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
    let reviewer = format!(
        "{}/../tests/agents/phase_review.sh",
        env!("CARGO_MANIFEST_DIR")
    );
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
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
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
            sandbox: autoforge::sandbox::SandboxMode::Bubblewrap,
        },
        redactor: Redactor::new(),
        kill_grace: Duration::from_secs(1),
    }
}

/// Repository access that can also fetch and push over git.
pub fn git_access(api: GitHubApi, git_url: String, token: SecretString) -> RepositoryAccess {
    RepositoryAccess {
        api,
        repo: REPOSITORY.parse().unwrap(),
        login: OWNER.into(),
        html_base: "https://github.com".into(),
        merge_method: "merge".into(),
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

    /// A completed check run named `name` on `sha` with `conclusion`.
    pub fn add_check(&self, sha: &str, name: &str, conclusion: &str) {
        self.hub
            .add_check(&fakehub::control::CheckSpec {
                owner: OWNER.into(),
                repo: NAME.into(),
                sha: sha.into(),
                name: name.into(),
                status: Some("completed".into()),
                conclusion: Some(conclusion.into()),
            })
            .unwrap();
    }

    /// Answered `PUT …/merge` requests on pull request `pr`.
    pub fn merge_requests(&self, pr: u64) -> usize {
        let path = format!("/repos/{REPOSITORY}/pulls/{pr}/merge");
        self.hub
            .requests()
            .iter()
            .filter(|r| r.method == "PUT" && r.path == path)
            .count()
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
    let path = format!("{}/../tests/agents/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut command = vec![path];
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
    pub async fn add_sub_issue(&self, parent: u64, child: u64) {
        let id = self.api.issue(&self.repo, child).await.unwrap().id;
        let path = format!("/repos/{REPOSITORY}/issues/{parent}/sub_issues");
        self.rest(reqwest::Method::POST, &path, json!({ "sub_issue_id": id }))
            .await;
    }

    /// Closes `issue` as a person would.
    pub async fn close_issue(&self, issue: u64) {
        let path = format!("/repos/{REPOSITORY}/issues/{issue}");
        self.rest(reqwest::Method::PATCH, &path, json!({ "state": "closed" }))
            .await;
    }

    /// One REST call as the repository owner; it must succeed.
    async fn rest(&self, method: reqwest::Method, path: &str, body: Value) {
        use secrecy::ExposeSecret;
        let url = format!("{}{path}", self.hub.base_url().trim_end_matches('/'));
        let answer = reqwest::Client::new()
            .request(method, url)
            .header(
                "authorization",
                format!("token {}", self.token.expose_secret()),
            )
            .header("user-agent", "autoforge-tests")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
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
