//! `autoforge demo`: the whole product in one command with no
//! configuration and no network. It starts fakehub in-process as GitHub,
//! the managed local Postgres under the state directory, and serve's
//! ingress, dispatcher, poller and driver; seeds a repository with a tiny
//! shell project and an EPIC of three issues; labels the EPIC as the
//! operator (a signed webhook reaches serve) and lets scripted agents carry
//! it to DONE with `merge.mode = "auto"`, printing a timeline as it goes.
//!
//! The demo changes nothing in how the controller works: it is a client of
//! fakehub like a person is, and it watches the journal like the dashboard
//! does. Its exit status says whether the EPIC reached DONE.

mod agents;
pub mod real_agents;
mod report;
pub mod settings;
mod timeline;
mod world;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use autoforge_journal::{IssueNumber, Run};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::config::{Config, ServerSettings};
use crate::database::OpenDatabase;
use crate::machine::Phase;
pub use agents::DemoAgents;
pub use report::{DemoReport, ReportedRun, RequestSummary};
pub use world::{DemoWorld, PersonApi, install_app, project_files};

/// How often the timeline reads the journal.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// How long serve may take to answer `/readyz` after it was started.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Where the database, worktrees and logs go; a fresh temporary
    /// directory when `None` (removed at the end unless `keep`).
    pub state_dir: Option<PathBuf>,
    pub report: Option<PathBuf>,
    /// Keep everything running after the end until Ctrl-C.
    pub keep: bool,
    pub timeout: Duration,
    /// An operator's config file whose `[agents]` replace the scripted ones.
    pub config: Option<PathBuf>,
    /// `--agents`: the shipped profiles of one real CLI (already checked
    /// by [`real_agents::agents_for`]) in place of the scripted ones.
    pub agents: Option<toml::Table>,
}

/// How the demo ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemoEnd {
    /// Every run reached DONE.
    Done,
    /// A run stopped short of DONE (BLOCKED, FAILED or STOPPED).
    Stopped { phase: Phase, reason: String },
    /// `--timeout` passed first; `phase` is where the run was.
    TimedOut { phase: String },
    /// SIGINT or SIGTERM arrived first.
    Interrupted,
}

impl DemoEnd {
    fn label(&self) -> &'static str {
        match self {
            DemoEnd::Done => "done",
            DemoEnd::Stopped { phase, .. } => match phase {
                Phase::Blocked => "blocked",
                Phase::Failed => "failed",
                _ => "stopped",
            },
            DemoEnd::TimedOut { .. } => "timeout",
            DemoEnd::Interrupted => "interrupted",
        }
    }
}

/// The issue a run works on: the machine state knows it as the run moves
/// through an EPIC; the journal column is the fallback.
pub fn working_issue(run: &Run) -> i64 {
    run.state["issue"]
        .as_i64()
        .filter(|issue| *issue > 0)
        .unwrap_or(run.current_issue.to_i64())
}

/// The EPIC a run belongs to, from the machine state's EPIC bookkeeping
/// or the journal.
pub fn working_epic(run: &Run) -> Option<i64> {
    run.state["epic"]["epic"]
        .as_i64()
        .or(run.epic.map(IssueNumber::to_i64))
}

/// Waits (at most 30 s) until no write of `runs` is still `intended` or
/// `attempted`.
async fn wait_settled(journal: &autoforge_journal::Journal, runs: &[Run]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut pending = 0;
        for run in runs {
            pending += journal.pending_effects(run.id).await?.len();
        }
        if pending == 0 || Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Decides from the runs whether the demo is over.
pub fn judge(runs: &[Run]) -> Option<DemoEnd> {
    if runs.is_empty() {
        return None;
    }
    let phase_of = |run: &Run| run.phase.parse::<Phase>().ok();
    if let Some((run, phase)) = runs.iter().find_map(|run| match phase_of(run) {
        Some(phase @ (Phase::Blocked | Phase::Failed | Phase::Stopped)) => Some((run, phase)),
        _ => None,
    }) {
        return Some(DemoEnd::Stopped {
            phase,
            reason: stop_reason(&run.state)
                .unwrap_or_else(|| "the run state names no reason".to_owned()),
        });
    }
    runs.iter()
        .all(|run| phase_of(run) == Some(Phase::Done) && !run.active)
        .then_some(DemoEnd::Done)
}

/// Why a run stopped: the machine state's blocked reason or failure, else
/// the first `reason` or `message` text anywhere in it.
fn stop_reason(state: &Value) -> Option<String> {
    state["blocked"]["reason"]
        .as_str()
        .or_else(|| state["failure"].as_str())
        .map(str::to_owned)
        .or_else(|| find_reason(state))
}

fn find_reason(state: &Value) -> Option<String> {
    match state {
        Value::Object(map) => ["reason", "message"]
            .iter()
            .find_map(|key| map.get(*key).and_then(Value::as_str).map(str::to_owned))
            .or_else(|| map.values().find_map(find_reason)),
        Value::Array(items) => items.iter().find_map(find_reason),
        _ => None,
    }
}

/// The state directory: the caller's, or a temporary one.
enum StateDir {
    Given(PathBuf),
    Temporary(tempfile::TempDir),
}

impl StateDir {
    /// The directory is made private (0700, umask 077 from here on); the
    /// managed Postgres later lets only its own server account through.
    fn prepare(given: Option<&Path>) -> anyhow::Result<StateDir> {
        let restrict = |dir: &Path| {
            crate::workspace::restrict_state_dir(dir)
                .with_context(|| format!("cannot prepare {}", dir.display()))
        };
        match given {
            Some(dir) => {
                restrict(dir)?;
                // Its journal would hold runs against a fakehub that is gone.
                anyhow::ensure!(
                    !dir.join(settings::CONFIG_FILE).exists(),
                    "{} already holds an earlier demo; give an empty --state-dir",
                    dir.display()
                );
                Ok(StateDir::Given(dir.to_path_buf()))
            }
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("autoforge-demo-")
                    .tempdir()
                    .context("cannot create a temporary state directory")?;
                restrict(dir.path())?;
                Ok(StateDir::Temporary(dir))
            }
        }
    }

    fn path(&self) -> &Path {
        match self {
            StateDir::Given(dir) => dir,
            StateDir::Temporary(dir) => dir.path(),
        }
    }

    /// Removes a temporary directory unless it is to be kept.
    fn finish(self, keep: bool) {
        if let StateDir::Temporary(dir) = self {
            if keep {
                let kept = dir.keep();
                println!("state kept in {}", kept.display());
            } else if let Err(error) = dir.close() {
                tracing::warn!(%error, "cannot remove the temporary state directory");
            }
        }
    }
}

/// SIGINT and SIGTERM, listened to from the start so that an interrupted
/// demo still stops the controller, fakehub and its Postgres cleanly
/// instead of dying with a database server left running.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> anyhow::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Runs the demo to its end; `Ok` carries how it ended, `Err` means the
/// demo itself could not run.
pub async fn run(options: &DemoOptions) -> anyhow::Result<DemoEnd> {
    let started = Instant::now();
    let mut signals = StopSignals::listen()?;
    // Read the operator's file first: a typo should fail before anything starts.
    let operator_agents = options
        .config
        .as_deref()
        .map(settings::operator_agents)
        .transpose()?;
    let state = StateDir::prepare(options.state_dir.as_deref())?;
    let hub = fakehub::start(fakehub::Config::default())
        .await
        .context("cannot start fakehub")?;
    // Both listeners on free loopback ports: several demos (and a real
    // serve on the default ports) can run side by side.
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let listeners = crate::serve::Listeners::bind(&ServerSettings {
        listen: loopback,
        admin_listen: loopback,
    })
    .await
    .context("cannot bind local ports for the controller")?;
    let serve_url = format!("http://{}", listeners.webhook.local_addr()?);
    let admin_url = format!("http://{}", listeners.admin.local_addr()?);
    let secret = SecretString::from(format!("demo-{}", uuid::Uuid::new_v4().simple()));
    let world = world::seed(&hub, &format!("{serve_url}/webhook"), &secret).await?;
    let key_file = state.path().join("app.pem");
    write_private(&key_file, world.app_private_key.expose_secret())?;
    let agents = match operator_agents.or_else(|| options.agents.clone()) {
        Some(agents) => agents,
        None => DemoAgents::install(&state.path().join("demo-agents"))?
            .agents_table(&world.children[..1], &world.children),
    };
    let (config, config_file) = settings::load_demo_config(&settings::DemoSettings {
        state_dir: state.path(),
        api_url: hub.base_url(),
        app_id: world.app_id,
        private_key_file: &key_file,
        webhook_secret: &secret,
        agents,
    })?;
    // Before anything else starts: serve would refuse anyway, but its
    // reason would be lost in the demo's "stopped during start-up".
    crate::sandbox::startup_check(config.settings.agents.sandbox).await?;
    let timeline = timeline::Timeline::new(started);
    announce(&timeline, &hub, &world, state.path(), &config_file);
    let database =
        OpenDatabase::open(&config.database, config.settings.database.max_connections).await?;
    let demo = Demo {
        options,
        started,
        hub: &hub,
        world: &world,
        state: state.path(),
        serve_url: &serve_url,
        admin_url: &admin_url,
    };
    let outcome = demo
        .drive(
            Arc::new(config),
            &database,
            secret,
            listeners,
            timeline,
            &mut signals,
        )
        .await;
    database.shutdown().await;
    if let Err(error) = hub.stop().await {
        tracing::warn!(error = %format!("{error:#}"), "fakehub did not stop cleanly");
    }
    state.finish(options.keep);
    outcome
}

/// The timeline's first lines: where the world is and where its state went.
fn announce(
    timeline: &timeline::Timeline,
    hub: &fakehub::Handle,
    world: &world::DemoWorld,
    state: &Path,
    config_file: &Path,
) {
    let issues: Vec<String> = world.children.iter().map(|n| format!("#{n}")).collect();
    timeline.say(&format!(
        "fakehub at {}, repository {}, EPIC #{} with issues {}",
        hub.base_url(),
        world.full_name,
        world.epic,
        issues.join(", ")
    ));
    timeline.say(&format!(
        "state in {} (config {})",
        state.display(),
        config_file.display()
    ));
}

/// What one demo works with once everything is set up.
struct Demo<'a> {
    options: &'a DemoOptions,
    started: Instant,
    hub: &'a fakehub::Handle,
    world: &'a DemoWorld,
    state: &'a Path,
    /// The webhook listener.
    serve_url: &'a str,
    /// The admin listener: dashboard and metrics.
    admin_url: &'a str,
}

impl Demo<'_> {
    async fn drive(
        &self,
        config: Arc<Config>,
        database: &OpenDatabase,
        secret: SecretString,
        listeners: crate::serve::Listeners,
        mut timeline: timeline::Timeline,
        signals: &mut StopSignals,
    ) -> anyhow::Result<DemoEnd> {
        let journal = database.journal.clone();
        journal
            .migrate()
            .await
            .context("applying the database migrations failed")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = {
            let config = Arc::clone(&config);
            let journal = journal.clone();
            tokio::spawn(async move {
                crate::serve::serve_on(&config, journal, secret, listeners, async {
                    let _ignored = stopped.await;
                })
                .await
            })
        };
        // Dropping the watch mid-poll is harmless: it only reads.
        let end = tokio::select! {
            end = self.watch(&config, &journal, &serve, &mut timeline) => end,
            () = signals.recv() => Ok(DemoEnd::Interrupted),
        };
        let end = match end {
            Ok(end) => end,
            Err(error) => {
                let _ignored = stop.send(());
                let _ignored = serve.await;
                return Err(error);
            }
        };
        let wall_seconds = self.started.elapsed().as_secs_f64();
        let report = report::build(
            &journal,
            self.hub,
            &format!("{}[bot]", world::APP_SLUG),
            end.label(),
            wall_seconds,
        )
        .await?;
        print_summary(&end, &report);
        if let Some(path) = &self.options.report {
            let text = serde_json::to_string_pretty(&report).context("cannot render the report")?;
            std::fs::write(path, text)
                .with_context(|| format!("cannot write the report to {}", path.display()))?;
            println!("report written to {}", path.display());
        }
        if self.options.keep && end != DemoEnd::Interrupted {
            self.keep_running(signals).await?;
        }
        let _ignored = stop.send(());
        match serve.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = %format!("{error:#}"), "serve ended with an error")
            }
            Err(error) => tracing::warn!(%error, "the serve task failed"),
        }
        Ok(end)
    }

    /// Waits for serve, labels the EPIC and follows the runs to their end.
    async fn watch(
        &self,
        config: &Config,
        journal: &autoforge_journal::Journal,
        serve: &tokio::task::JoinHandle<anyhow::Result<()>>,
        timeline: &mut timeline::Timeline,
    ) -> anyhow::Result<DemoEnd> {
        self.wait_ready(serve).await?;
        timeline.say(&format!(
            "controller ready: webhook at {}, dashboard at {}/",
            self.serve_url, self.admin_url
        ));
        world::label_epic(self.hub, self.world, &config.settings.labels.trigger).await?;
        timeline.say(&format!(
            "{} labelled EPIC #{} `{}`",
            world::OPERATOR,
            self.world.epic,
            config.settings.labels.trigger
        ));
        let deadline = Instant::now() + self.options.timeout;
        loop {
            let runs = timeline.poll(journal).await?;
            if let Some(end) = judge(&runs) {
                // The terminal transition's own writes (the final status
                // comment) are driven just after it commits: report them
                // settled, not half-way.
                wait_settled(journal, &runs).await?;
                timeline.poll(journal).await?;
                return Ok(end);
            }
            anyhow::ensure!(!serve.is_finished(), "the controller stopped unexpectedly");
            if Instant::now() >= deadline {
                let phase = runs
                    .first()
                    .map_or_else(|| "no run started".to_owned(), |run| run.phase.clone());
                return Ok(DemoEnd::TimedOut { phase });
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    async fn wait_ready(
        &self,
        serve: &tokio::task::JoinHandle<anyhow::Result<()>>,
    ) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let ready = http
                .get(format!("{}/readyz", self.serve_url))
                .send()
                .await
                .is_ok_and(|response| response.status().is_success());
            if ready {
                return Ok(());
            }
            anyhow::ensure!(
                !serve.is_finished(),
                "the controller stopped during start-up (run with -v for its log)"
            );
            anyhow::ensure!(
                Instant::now() < deadline,
                "the controller did not become ready within {} s",
                READY_WITHIN.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `--keep`: everything stays up for exploration until Ctrl-C.
    async fn keep_running(&self, signals: &mut StopSignals) -> anyhow::Result<()> {
        let token_file = self.state.join("operator-token");
        write_private(&token_file, self.world.operator_token.expose_secret())?;
        println!();
        println!("still running (--keep); press Ctrl-C to stop:");
        println!("  fakehub (GitHub API)  {}", self.hub.base_url());
        println!(
            "  repository            {}",
            self.hub.git_url(world::OPERATOR, world::REPOSITORY)
        );
        println!("  webhook               {}/webhook", self.serve_url);
        println!("  dashboard             {}/", self.admin_url);
        println!("  metrics               {}/metrics", self.admin_url);
        println!("  state directory       {}", self.state.display());
        println!(
            "  operator token        in {} (curl -H \"Authorization: token $(cat FILE)\" …)",
            token_file.display()
        );
        signals.recv().await;
        Ok(())
    }
}

fn print_summary(end: &DemoEnd, report: &DemoReport) {
    println!();
    match end {
        DemoEnd::Done => println!("EPIC DONE"),
        DemoEnd::Stopped { phase, reason } => println!("the run stopped in {phase}: {reason}"),
        DemoEnd::TimedOut { phase } => println!("timed out with the run in {phase}"),
        DemoEnd::Interrupted => println!("interrupted; stopping"),
    }
    for run in &report.runs {
        println!(
            "  run {} on {} (EPIC {}): {} on #{}",
            run.id,
            run.repository,
            run.epic
                .map_or_else(|| "none".to_owned(), |n| format!("#{n}")),
            run.phase,
            run.issue
        );
    }
    let effects: Vec<String> = report
        .effects
        .iter()
        .map(|(kind, stages)| {
            let stages: Vec<String> = stages.iter().map(|(s, n)| format!("{n} {s}")).collect();
            format!("{kind} {}", stages.join("/"))
        })
        .collect();
    println!("  effects: {}", effects.join(", "));
    println!(
        "  GitHub requests: {} ({} reads, {} writes); by the controller {} reads, {} writes",
        report.github_requests.total,
        report.github_requests.reads,
        report.github_requests.writes,
        report.github_requests.by_controller.reads,
        report.github_requests.by_controller.writes
    );
    println!(
        "  follow-up issues created: {}",
        report
            .issues_created_by_controller
            .iter()
            .map(|n| format!("#{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("  duplicated objects: {}", report.duplicates);
    println!("  wall time: {:.1}s", report.wall_seconds);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn run(phase: &str, active: bool, state: Value) -> Run {
        let now = chrono::Utc::now();
        Run {
            id: autoforge_journal::RunId(1),
            repository: "o/r".into(),
            epic: Some(autoforge_journal::testing::issue(4)),
            current_issue: autoforge_journal::testing::issue(1),
            phase: phase.into(),
            active,
            state,
            version: 1,
            lease_owner: None,
            lease_expires_at: None,
            fencing_token: 1,
            wake_at: now,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn no_run_yet_or_a_run_in_progress_is_not_an_end() {
        assert_eq!(judge(&[]), None);
        assert_eq!(judge(&[run("REVIEW", true, json!({}))]), None);
    }

    #[test]
    fn every_run_done_and_inactive_is_the_end_of_the_demo() {
        assert_eq!(judge(&[run("DONE", false, json!({}))]), Some(DemoEnd::Done));
        assert_eq!(judge(&[run("DONE", true, json!({}))]), None);
    }

    #[test]
    fn a_state_dir_that_held_an_earlier_demo_is_refused_and_a_fresh_one_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh");
        let state = StateDir::prepare(Some(&fresh)).unwrap();
        assert_eq!(state.path(), fresh);
        std::fs::write(fresh.join(settings::CONFIG_FILE), "").unwrap();
        let error = StateDir::prepare(Some(&fresh)).err().expect("refused");
        assert!(error.to_string().contains("earlier demo"), "{error}");
    }

    #[test]
    fn a_temporary_state_dir_is_private_and_removed_unless_kept() {
        use std::os::unix::fs::PermissionsExt;
        let state = StateDir::prepare(None).unwrap();
        let path = state.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        state.finish(false);
        assert!(!path.exists());
        let kept = StateDir::prepare(None).unwrap();
        let path = kept.path().to_path_buf();
        kept.finish(true);
        assert!(path.is_dir());
        std::fs::remove_dir_all(path).unwrap();
    }

    #[test]
    fn the_working_issue_comes_from_the_machine_state_when_it_names_one() {
        let state = json!({"issue": 2, "epic": {"epic": 7, "merges_since_roadmap": 0}});
        assert_eq!(working_issue(&run("REVIEW", true, state.clone())), 2);
        assert_eq!(working_epic(&run("REVIEW", true, state)), Some(7));
        assert_eq!(
            working_epic(&run("REVIEW", true, json!({"epic": null}))),
            Some(4)
        );
        assert_eq!(
            working_issue(&run("INITIALIZING", true, json!({"issue": 0}))),
            1
        );
    }

    #[test]
    fn a_failed_run_names_its_failure() {
        let state = json!({"failure": "the implementer gave up", "review": {"reason": "other"}});
        assert_eq!(
            judge(&[run("FAILED", false, state)]),
            Some(DemoEnd::Stopped {
                phase: Phase::Failed,
                reason: "the implementer gave up".into()
            })
        );
    }

    #[test]
    fn a_blocked_run_ends_the_demo_with_the_reason_from_its_state() {
        let state = json!({"phase": "BLOCKED", "blocked": {"from": "REVIEW", "reason": "two PRs on the branch"}});
        assert_eq!(
            judge(&[run("DONE", false, json!({})), run("BLOCKED", true, state)]),
            Some(DemoEnd::Stopped {
                phase: Phase::Blocked,
                reason: "two PRs on the branch".into()
            })
        );
        assert_eq!(
            DemoEnd::Stopped {
                phase: Phase::Failed,
                reason: String::new()
            }
            .label(),
            "failed"
        );
    }
}
