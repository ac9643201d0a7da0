//! The run driver (ARCHITECTURE "How data flows"): leases runs, feeds their
//! events to the pure [`crate::machine`], commits every transition together
//! with its effect intents, and drives those effects through the
//! [`crate::effects`] executor.
//!
//! [`Driver::run`] is the worker loop: it leases due runs up to a
//! concurrency bound and drives each in its own task while a timer renews
//! the lease. A task that loses its lease (another worker took the run over
//! after an expiry) stops at once: the journal refuses its writes, and it
//! sends nothing more to GitHub. Each task recovers first — effects left
//! `intended` or `attempted` by a crashed predecessor are reconciled and
//! settled before any new event is looked at (see [`run_task`]).
//!
//! How `serve` starts it: `driver::driver_from_config(&config, &access,
//! journal)` (one [`RepositoryAccess`] per watched repository and a worker
//! id unique per process), then `tokio::spawn(driver.run(loops_stopped))`
//! next to the dispatcher and the poller; flip the `watch` to `true` on
//! SIGTERM and await the handle.
//!
//! Merging: the pre-merge gate reads the clean review comment back by the
//! id and bytes the journal recorded ([`clean_review`]); `auto` merges when
//! the gate passes, `on-command` after `/autoforge merge`, `never` notices a
//! human's merge on the next facts read (a run event such as a closed PR
//! re-arms that read at once).
//!
//! FIX and UPDATE_EPIC launches are driven too: follow-up issues, marker
//! appends and the roadmap splice are planned on bodies read just before
//! their transition commits. A run started on an EPIC begins with its
//! first open child and continues, issue after issue, through the EPIC
//! agent's verified picks until the agent reports the EPIC complete.
//!
//! Launches and validation need [`Driver::with_agents`] and a
//! [`GitRemote`] for the repository.
//!
//! Observers in the same process hold [`Driver::notifier`]: storing a run
//! event wakes the loop at once instead of at its next poll, and storing a
//! stop (command or label removal) cancels the run's running launch, which
//! kills the agent's process group. A run's repository settings
//! (`.github/autoforge.toml`) are read once at its start and frozen
//! (see the `repo_settings` module).

mod access_lost;
mod agent_step;
pub mod backstop;
mod cancel;
pub mod clean_review;
mod epic_scope;
mod error;
mod launch_context;
mod launch_epic;
mod launch_fix;
mod launch_implement;
mod launch_plan;
mod launch_review;
mod launch_sections;
mod relaunch;
mod repo_settings;
mod repositories;
pub mod retry;
mod run_task;
mod setup;

use std::sync::Arc;
use std::time::Duration;

use autoforge_journal::{Journal, JournalError, Lease, RunId};
use repositories::RepositoryMap;

/// How often the driver rebuilds its map of served repositories when no
/// installation webhook asked it to.
const REFRESH_EVERY: Duration = Duration::from_secs(300);
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

use crate::github::{GitHubApi, RepoName};
use crate::machine::RunSettings;
pub use agent_step::{AgentRuntime, GitCredential, GitRemote};
pub use cancel::{LaunchCancel, RunNotifier};
pub use error::DriverError;
pub use relaunch::RELAUNCH_BACKOFF;
pub use retry::{RelaunchBackoff, RetryBook, RetryVerdict, StepRetryPolicy};
pub use run_task::{ObservedShapeError, RunEnd};
pub(crate) use setup::controller_redactor;
pub use setup::driver_from_config;

/// How a driver process behaves.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The lease owner name; unique per process (host name + pid, say).
    pub worker_id: String,
    pub lease_ttl: Duration,
    /// Runs driven at the same time by this process.
    pub concurrency: usize,
    /// How often the loop looks for due runs when none is free.
    pub poll_interval: Duration,
    /// When a run with nothing to do is first looked at again without a
    /// webhook (the backstop's first pause, see [`backstop`]).
    pub idle_recheck: Duration,
    /// The backstop's longest pause: it doubles up to this while the
    /// re-checks change nothing. At or below `idle_recheck` (the default
    /// here; `serve` sets `poll.backstop_max_seconds`) it never grows.
    pub idle_recheck_max: Duration,
    pub retry: StepRetryPolicy,
    /// Frozen into a run's state when it starts.
    pub settings: RunSettings,
    /// Path prefixes (`merge.protected_paths`) a candidate must not change
    /// to be pushed, and whose change a PR's facts report to the merge gate.
    pub protected_paths: Vec<String>,
    /// The label that makes an issue an EPIC (`labels.epic`).
    pub epic_label: String,
}

impl DriverConfig {
    /// The backstop re-check of a waiting run.
    pub fn backstop(&self) -> backstop::BackstopPolicy {
        backstop::BackstopPolicy {
            first: self.idle_recheck,
            max: self.idle_recheck_max,
        }
    }

    pub fn new(worker_id: impl Into<String>) -> Self {
        DriverConfig {
            worker_id: worker_id.into(),
            lease_ttl: Duration::from_secs(60),
            concurrency: 8,
            poll_interval: Duration::from_secs(1),
            idle_recheck: Duration::from_secs(30),
            idle_recheck_max: Duration::ZERO,
            retry: StepRetryPolicy::default(),
            settings: RunSettings::default(),
            protected_paths: vec![".github/workflows/".to_owned()],
            epic_label: "epic".to_owned(),
        }
    }
}

/// What the driver needs to act on one repository.
#[derive(Clone)]
pub struct RepositoryAccess {
    pub api: GitHubApi,
    pub repo: RepoName,
    /// The login the controller writes as.
    pub login: String,
    /// `https://github.com` or the GHES host (URLs inside markers).
    pub html_base: String,
    /// Needed for agent launches, validation and pushes.
    pub git: Option<GitRemote>,
}

/// Notified when a task starts and stops driving a run; lets tests see how
/// many tasks drive one run at a time. Compiled only for tests.
#[cfg(feature = "test-hooks")]
pub trait RunHooks: Send + Sync {
    fn entered(&self, run: RunId);
    fn left(&self, run: RunId);
}

pub(crate) struct Shared {
    pub(crate) config: DriverConfig,
    pub(crate) journal: Journal,
    pub(crate) repositories: RepositoryMap,
    pub(crate) retries: RetryBook,
    pub(crate) backstop: backstop::BackstopBook,
    pub(crate) agents: Option<AgentRuntime>,
    /// Stops and wake-ups from the observers of this process.
    pub(crate) notifier: RunNotifier,
    #[cfg(feature = "test-hooks")]
    hooks: Option<Arc<dyn RunHooks>>,
}

/// The run driver of one process. Cheap to clone.
#[derive(Clone)]
pub struct Driver {
    shared: Arc<Shared>,
}

impl Driver {
    /// A driver for a fixed set of repositories.
    pub fn new(
        config: DriverConfig,
        journal: Journal,
        repositories: impl IntoIterator<Item = RepositoryAccess>,
    ) -> Driver {
        Self::over(config, journal, RepositoryMap::fixed(repositories))
    }

    pub(super) fn over(
        config: DriverConfig,
        journal: Journal,
        repositories: RepositoryMap,
    ) -> Driver {
        Driver {
            shared: Arc::new(Shared {
                config,
                journal,
                repositories,
                retries: RetryBook::default(),
                backstop: backstop::BackstopBook::default(),
                agents: None,
                notifier: RunNotifier::default(),
                #[cfg(feature = "test-hooks")]
                hooks: None,
            }),
        }
    }

    /// Installs hooks; call before the driver is cloned or started.
    #[cfg(feature = "test-hooks")]
    pub fn with_hooks(mut self, hooks: Arc<dyn RunHooks>) -> Driver {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.hooks = Some(hooks);
        }
        self
    }

    /// Enables agent launches and validation; call before the driver is
    /// cloned or started.
    pub fn with_agents(mut self, runtime: AgentRuntime) -> Driver {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.agents = Some(runtime);
        }
        self
    }

    /// The handle observers use to wake this driver and stop a run's agent.
    pub fn notifier(&self) -> RunNotifier {
        self.shared.notifier.clone()
    }

    /// The worker loop; returns once `shutdown` turns true and every task
    /// finished the step in hand.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let config = &self.shared.config;
        let permits = Arc::new(Semaphore::new(config.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        let mut last_refresh = tokio::time::Instant::now();
        while !*shutdown.borrow() {
            // Before leasing: runs of a repository just removed are made
            // due here and stopped in this same pass.
            self.refresh_repositories_if_due(&mut last_refresh).await;
            self.kill_agents_of_locally_stopped_runs().await;
            while let Ok(permit) = Arc::clone(&permits).try_acquire_owned() {
                match self
                    .shared
                    .journal
                    .acquire_lease(&config.worker_id, config.lease_ttl)
                    .await
                {
                    Ok(Some(lease)) => {
                        let driver = self.clone();
                        let stop = shutdown.clone();
                        tasks.spawn(async move {
                            let _permit = permit;
                            driver.drive_leased(lease, stop).await
                        });
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%error, "leasing a run failed; trying again later");
                        break;
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(config.poll_interval) => {}
                () = self.shared.notifier.woken() => {}
                changed = shutdown.changed() => {
                    // A dropped sender can never say "stop" any more; treat
                    // it as the request rather than spin on the closed channel.
                    if changed.is_err() {
                        break;
                    }
                }
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => log_join(joined),
            }
        }
        while let Some(joined) = tasks.join_next().await {
            log_join(joined);
        }
    }

    /// A stop given with `autoforge stop` reaches the journal, not this
    /// process's notifier: look for one and kill the run's agent now, as a
    /// stop comment's dispatcher does. The run task then decides the stop.
    async fn kill_agents_of_locally_stopped_runs(&self) {
        match self.shared.journal.runs_with_queued_stop().await {
            Ok(runs) => {
                for run in runs {
                    self.shared.notifier.stop_run(run);
                }
            }
            Err(error) => tracing::warn!(%error, "cannot look for queued local stops"),
        }
    }

    /// Rebuilds the served repositories when intake saw an installation
    /// change, and every [`REFRESH_EVERY`] as a backstop for a lost
    /// webhook. Runs of a removed repository stop when next driven.
    async fn refresh_repositories_if_due(&self, last: &mut tokio::time::Instant) {
        let asked = self.shared.notifier.take_repositories_changed();
        if !asked && last.elapsed() < REFRESH_EVERY {
            return;
        }
        *last = tokio::time::Instant::now();
        match self.shared.repositories.refresh().await {
            Some(Ok(changed)) => access_lost::after_refresh(&self.shared, &changed).await,
            Some(Err(error)) => tracing::warn!(%error, "refreshing the served repositories failed"),
            None => {}
        }
    }

    /// Leases every due run (one at a time, up to `limit`) and drives each
    /// until it has nothing to do, each run at most once per call. For
    /// tests and one-shot tools; returns how each run ended.
    pub async fn drive_due_runs(&self, limit: usize) -> Result<Vec<(RunId, RunEnd)>, JournalError> {
        let (_keep, stop) = watch::channel(false);
        let mut ended: Vec<(RunId, RunEnd)> = Vec::new();
        let config = &self.shared.config;
        while ended.len() < limit {
            let Some(lease) = self
                .shared
                .journal
                .acquire_lease(&config.worker_id, config.lease_ttl)
                .await?
            else {
                break;
            };
            let run = lease.run_id;
            if ended.iter().any(|(driven, _)| *driven == run) {
                // Due again already (a short backoff or re-check): that is
                // the next call's business.
                self.shared.journal.release_lease(&lease).await?;
                break;
            }
            ended.push((run, self.drive_leased(lease, stop.clone()).await));
        }
        Ok(ended)
    }

    /// Drives one leased run until it has nothing to do, renewing the lease
    /// meanwhile, then hands the run back with its next wake-up time.
    pub async fn drive_leased(&self, lease: Lease, shutdown: watch::Receiver<bool>) -> RunEnd {
        let run = lease.run_id;
        #[cfg(feature = "test-hooks")]
        if let Some(hooks) = &self.shared.hooks {
            hooks.entered(run);
        }
        let (lost_tx, lost_rx) = oneshot::channel();
        let renewer = tokio::spawn(renew_until_lost(
            self.shared.journal.clone(),
            lease.clone(),
            self.shared.config.lease_ttl,
            lost_tx,
        ));
        // Every log line of the run's task carries the run it is about.
        let span = tracing::info_span!("run", run = %run, fencing_token = lease.fencing_token);
        let driven =
            tracing::Instrument::instrument(run_task::drive(&self.shared, &lease, shutdown), span);
        let ended = tokio::select! {
            ended = driven => ended,
            // Dropping the work mid-step is a crash as far as the journal is
            // concerned, and the journal is built for crashes; continuing
            // would only produce writes it refuses.
            _ = lost_rx => RunEnd::LostLease,
        };
        renewer.abort();
        if ended == RunEnd::Terminal {
            self.shared.notifier.forget(run);
            self.shared.backstop.forget(run);
        }
        let ended = run_task::schedule_next(&self.shared, &lease, ended).await;
        // Reported before the release: once released, another task may
        // enter the run, and the two must not look like they overlapped.
        #[cfg(feature = "test-hooks")]
        if let Some(hooks) = &self.shared.hooks {
            hooks.left(run);
        }
        run_task::release(&self.shared, &lease, ended).await
    }
}

fn log_join(joined: Result<RunEnd, tokio::task::JoinError>) {
    if let Err(error) = joined {
        tracing::error!(%error, "a run task panicked; its lease expires and another task recovers the run");
    }
}

/// Renews `lease` every third of its TTL; reports when another worker owns
/// the run (a renewal refused as stale).
async fn renew_until_lost(
    journal: Journal,
    lease: Lease,
    ttl: Duration,
    lost: oneshot::Sender<()>,
) {
    let mut ticks = tokio::time::interval((ttl / 3).max(Duration::from_millis(10)));
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match journal.renew_lease(&lease, ttl).await {
            Ok(_) => {}
            Err(JournalError::StaleLease { .. }) => {
                let _ = lost.send(());
                return;
            }
            Err(error) => tracing::warn!(%error, run = %lease.run_id, "renewing the lease failed"),
        }
    }
}
