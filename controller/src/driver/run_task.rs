//! One leased run, driven until it has nothing to do.
//!
//! Order of work, repeated until idle:
//! 1. Recovery: every effect still `intended` or `attempted` is driven (in
//!    journal order) until it settles. One whose outcome stays unknown ends
//!    the task with a backoff; nothing new happens to the run before its
//!    writes are settled.
//! 2. The settled effects of the latest transition are reported to the
//!    machine (`EffectsObserved` when it waits for them, `EffectConflict`
//!    for a conflict) — unless the run already moved on.
//! 3. The oldest unconsumed run event is turned into a machine event and
//!    decided. The new state, its effect intents and the consumption of the
//!    run event commit in one transaction; the effects are then driven by
//!    step 1 of the next round.
//! 4. With no event queued, the driver does what the run waits for: an
//!    agent launch, a validation, or a fresh GitHub read (each at most once
//!    per task, so a wait the machine does not move past is re-checked
//!    later instead of spinning).
//!
//! Every journal write carries the lease; a `StaleLease` ends the task.

use std::collections::BTreeSet;
use std::sync::Arc;

mod observed;
pub(super) mod reads;
mod running;
mod signals;
mod transition;

use autoforge_journal::{Effect, IssueNumber, JournalError, Lease, RunId, Stage};
use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::error::DriverError;
use super::repositories::Lookup;
use super::retry::RetryVerdict;
use super::{RepositoryAccess, Shared};

use super::{agent_step, repo_settings};
#[cfg(feature = "crash-points")]
use crate::effects::crashpoint::{Point, crash_point};
use crate::effects::{DriveOutcome, EffectExecutor, PushTransport};
use crate::machine::{Awaiting, EffectReadBack, Event, RunState, unaccepted_text_in};
pub use observed::ObservedShapeError;
use observed::observed_for_machine;

/// How a task left its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// Nothing to do until a new event (or the idle re-check).
    Idle,
    /// GitHub's answer was inconclusive (mergeability still computing,
    /// checks running): look again after this pause, sooner than the idle
    /// re-check. The machine bounds how often.
    RecheckAfter(std::time::Duration),
    /// The run reached DONE, FAILED or STOPPED.
    Terminal,
    /// Shutdown was asked for; the run is due again at once.
    Yielded,
    /// Another worker owns the run now; nothing more was written.
    LostLease,
    /// A transient failure; the run is due again after a backoff.
    Backoff,
    /// A defect (unreadable state, refused plan…); recorded as an audit
    /// event, the run is looked at again after the idle re-check.
    Failed(String),
}

/// The run's state document as stored. Observers create runs with an empty
/// document; the driver fills it in when it feeds `Started`.
pub(super) fn stored_state(
    shared: &Shared,
    run: RunId,
    issue: IssueNumber,
    document: Value,
) -> Result<RunState, DriverError> {
    if document.as_object().is_some_and(serde_json::Map::is_empty) {
        return Ok(RunState::new(
            run.0.to_string(),
            issue,
            shared.config.settings.clone(),
        ));
    }
    serde_json::from_value(document).map_err(|e| DriverError::CorruptState {
        run,
        detail: e.to_string(),
    })
}

/// Drives the leased run until it is idle, terminal or must back off.
pub(super) async fn drive(
    shared: &Shared,
    lease: &Lease,
    shutdown: watch::Receiver<bool>,
) -> RunEnd {
    let outcome = match RunTask::load(shared, lease).await {
        Ok(mut task) => {
            let end = task.work(&shutdown).await;
            if matches!(end, Ok(RunEnd::Idle)) {
                let policy = shared.config.backstop();
                shared
                    .backstop
                    .pause_after(&policy, lease.run_id, task.moved);
            }
            end
        }
        Err(error) => Err(error),
    };
    match outcome {
        Ok(end) => {
            shared.retries.succeeded(lease.run_id);
            end
        }
        Err(DriverError::LostLease(_)) => RunEnd::LostLease,
        Err(DriverError::NotServed(repository)) => {
            // The map was just rebuilt from GitHub: the repository is no
            // longer served, so nothing of the run can be written.
            super::access_lost::stop_without_access(shared, lease, &repository).await
        }
        Err(DriverError::Suspended { repository, reason }) => {
            super::access_lost::wait_while_suspended(lease, &repository, &reason)
        }
        Err(error) if error.rate_limited_until().is_some() => {
            wait_for_budget(shared, lease, &error).await
        }
        Err(error) if error.is_transient() => {
            match shared.retries.failed(&shared.config.retry, lease.run_id) {
                RetryVerdict::After(delay) => {
                    tracing::info!(run = %lease.run_id, %error, ?delay, "transient failure; backing off");
                    pause(shared, lease, delay).await
                }
                RetryVerdict::GiveUp => give_up(shared, lease, &error).await,
            }
        }
        Err(error) => {
            tracing::error!(run = %lease.run_id, %error, "the run cannot proceed");
            let detail = json!({ "error": error.to_string() });
            let _ = shared
                .journal
                .record_audit_event(Some(lease.run_id), "driver_error", &detail)
                .await;
            RunEnd::Failed(error.to_string())
        }
    }
}

/// The longest a run sleeps for GitHub's budget: an hour is GitHub's
/// whole rate-limit window, so a later reset time can only be a wrong
/// header or clock.
const MAX_BUDGET_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// The installation's budget is spent (or held back for writes) beyond
/// what the client waits in-task: the run is due again when GitHub says
/// the budget refills. Waiting for GitHub is no failure of the run, so it
/// spends none of its retries, and until then its lease goes to runs that
/// can move.
async fn wait_for_budget(shared: &Shared, lease: &Lease, error: &DriverError) -> RunEnd {
    let until = error
        .rate_limited_until()
        .and_then(|until| until.duration_since(std::time::SystemTime::now()).ok())
        .unwrap_or_default()
        .min(MAX_BUDGET_WAIT);
    tracing::info!(run = %lease.run_id, %error, wait_s = until.as_secs(), "waiting for GitHub's rate-limit budget");
    pause(shared, lease, until).await
}

/// Makes the run due again after `delay` (the task ends with a backoff),
/// unless the lease is no longer ours.
async fn pause(shared: &Shared, lease: &Lease, delay: std::time::Duration) -> RunEnd {
    match shared
        .journal
        .schedule_wake(lease, Utc::now() + delay)
        .await
    {
        Ok(()) => RunEnd::Backoff,
        Err(_) => RunEnd::LostLease,
    }
}

/// The backoff budget is spent: the machine decides what a transient
/// failure means now (try again, bounded by its own counter, or park).
async fn give_up(shared: &Shared, lease: &Lease, error: &DriverError) -> RunEnd {
    let event = Event::TransientFailure {
        detail: error.to_string(),
    };
    let fed = match RunTask::load(shared, lease).await {
        Ok(mut task) => task.apply(event, None).await,
        Err(error) => Err(error),
    };
    if let Err(error) = fed {
        return match error {
            DriverError::LostLease(_) => RunEnd::LostLease,
            other => RunEnd::Failed(other.to_string()),
        };
    }
    // Whatever the machine decided, the step is tried again only after a
    // pause: a new backoff episode starts from the first delay.
    pause(shared, lease, shared.config.retry.delay(1)).await
}

/// Sets when the run is next due, according to how the task ended.
pub(super) async fn schedule_next(shared: &Shared, lease: &Lease, end: RunEnd) -> RunEnd {
    let wake = match &end {
        // An event stored while the task was finishing (its wake-up set to
        // now by the observer) must not be pushed back to the re-check.
        RunEnd::Idle if has_queued_event(shared, lease).await => Utc::now(),
        // Webhooks wake a waiting run; this is the backstop, its pause
        // growing while the re-checks change nothing.
        RunEnd::Idle => {
            let pause = shared.backstop.current(lease.run_id);
            Utc::now() + pause.unwrap_or(shared.config.idle_recheck)
        }
        RunEnd::Failed(_) => Utc::now() + shared.config.idle_recheck,
        RunEnd::RecheckAfter(pause) => Utc::now() + (*pause).min(shared.config.idle_recheck),
        RunEnd::LostLease | RunEnd::Terminal | RunEnd::Yielded | RunEnd::Backoff => return end,
    };
    match shared.journal.schedule_wake(lease, wake).await {
        Ok(()) => end,
        Err(JournalError::StaleLease { .. }) => RunEnd::LostLease,
        Err(error) => {
            // The run is merely looked at again sooner than planned.
            tracing::warn!(%error, run = %lease.run_id, "scheduling the next wake-up failed");
            end
        }
    }
}

async fn has_queued_event(shared: &Shared, lease: &Lease) -> bool {
    shared
        .journal
        .next_run_events(lease.run_id, 1)
        .await
        .is_ok_and(|events| !events.is_empty())
}

/// Gives the run back (unless it was lost already).
pub(super) async fn release(shared: &Shared, lease: &Lease, end: RunEnd) -> RunEnd {
    if end == RunEnd::LostLease {
        return end;
    }
    match shared.journal.release_lease(lease).await {
        Ok(()) => end,
        Err(JournalError::StaleLease { .. }) => RunEnd::LostLease,
        Err(error) => {
            // The lease simply expires; the next holder recovers.
            tracing::warn!(%error, run = %lease.run_id, "releasing the lease failed");
            end
        }
    }
}

/// A wait performed in one phase and review round.
#[derive(Debug, Clone, PartialEq)]
struct PerformedWait {
    phase: crate::machine::Phase,
    round: u32,
    awaiting: Awaiting,
}

struct RunTask<'a> {
    shared: &'a Shared,
    lease: &'a Lease,
    access: Arc<RepositoryAccess>,
    version: i64,
    epic: Option<IssueNumber>,
    state: RunState,
    /// The version whose effect outcome was fed in this task: a refused
    /// report is not repeated in a loop.
    reported: Option<i64>,
    /// Waits already performed in this task (a read, a launch, a
    /// validation), with the phase and review round they were performed
    /// in. Meeting one again in the same phase and round means the machine
    /// did not move on — a read that changed nothing, an inconclusive
    /// merge check, a refused result — so the run waits for its next
    /// re-check instead of spinning. A new round (FIX → REVIEW N+1) or
    /// phase asks afresh at once.
    performed: Vec<PerformedWait>,
    /// Set when the machine just counted an inconclusive pre-merge read:
    /// how soon to read again once the task goes idle.
    recheck_after: Option<std::time::Duration>,
    /// Whether this task moved the run (a transition, a consumed run
    /// event): the backstop pause then starts over.
    moved: bool,
}

impl<'a> RunTask<'a> {
    async fn load(shared: &'a Shared, lease: &'a Lease) -> Result<RunTask<'a>, DriverError> {
        let run_id = lease.run_id;
        let run = shared
            .journal
            .get_run(run_id)
            .await?
            .ok_or(DriverError::MissingRun(run_id))?;
        let access = match shared.repositories.lookup(&run.repository).await {
            Ok(Lookup::Served(access)) => access,
            Ok(Lookup::Suspended(suspension)) => {
                return Err(DriverError::Suspended {
                    repository: run.repository.clone(),
                    reason: suspension.reason(),
                });
            }
            Ok(Lookup::NotServed) if shared.repositories.refreshes() => {
                return Err(DriverError::NotServed(run.repository.clone()));
            }
            Ok(Lookup::NotServed) => return Err(DriverError::NoAccess(run.repository.clone())),
            Err(error) => {
                tracing::warn!(%error, "refreshing the served repositories failed");
                return Err(DriverError::NoAccess(run.repository.clone()));
            }
        };
        let state = stored_state(shared, run_id, run.current_issue, run.state)?;
        // Before anything is relaunched: a launch a crash cut short is lost.
        crate::agents::journal::end_lost_launches(&shared.journal, lease).await?;
        let recorded_pr = shared.journal.run_pull_request(run_id).await?;
        let pr = state.pr;
        if recorded_pr != pr {
            // A crash between a transition and the column's update.
            shared.journal.set_run_pull_request(run_id, pr).await?;
        }
        Ok(RunTask {
            shared,
            lease,
            access,
            version: run.version,
            epic: run.epic,
            state,
            reported: None,
            performed: Vec::new(),
            recheck_after: None,
            moved: false,
        })
    }

    async fn work(&mut self, shutdown: &watch::Receiver<bool>) -> Result<RunEnd, DriverError> {
        loop {
            if *shutdown.borrow() {
                return Ok(RunEnd::Yielded);
            }
            // Checked before every step, so that an installation suspended
            // while an agent ran gets none of the writes its result asks for
            // (GitHub would refuse them) until it is unsuspended.
            self.ensure_not_suspended()?;
            self.settle_effects().await?;
            if self.reported != Some(self.version)
                && let Some(event) = self.effects_report().await?
            {
                self.reported = Some(self.version);
                self.apply(event, None).await?;
                continue;
            }
            if self.state.phase.is_terminal() {
                return Ok(RunEnd::Terminal);
            }
            let next = self
                .shared
                .journal
                .next_run_events(self.lease.run_id, 1)
                .await?;
            if let Some(event) = next.into_iter().next() {
                self.handle_run_event(event).await?;
                self.moved = true;
                // Whatever the event said (a command, a merge, finished
                // checks), GitHub may look different now: the awaited read
                // is worth doing again in this task.
                self.forget_reads();
                continue;
            }
            match self.awaited_step().await? {
                // A read showing an issue text the run never accepted would
                // block it, as an edit by someone unknown. If run events
                // were stored while the read was made, the edit's own
                // webhook may be among them, saying an operator made it:
                // those go first, then the read is made again.
                Some(Event::GitHubObserved { facts })
                    if unaccepted_text_in(&self.state, &facts)
                        && !self
                            .shared
                            .journal
                            .next_run_events(self.lease.run_id, 1)
                            .await?
                            .is_empty() =>
                {
                    self.forget_reads();
                }
                Some(event) => self.apply(event, None).await?,
                None => {
                    return Ok(match self.recheck_after {
                        Some(pause) => RunEnd::RecheckAfter(pause),
                        None => RunEnd::Idle,
                    });
                }
            }
        }
    }

    /// `Err(Suspended)` once the map knows the repository's installation
    /// is suspended.
    fn ensure_not_suspended(&self) -> Result<(), DriverError> {
        let repository = self.access.repo.to_string();
        match self.shared.repositories.suspension_of(&repository) {
            Some(suspension) => Err(DriverError::Suspended {
                repository,
                reason: suspension.reason(),
            }),
            None => Ok(()),
        }
    }

    /// Lets the awaited GitHub reads be made again in this task. Launches
    /// and validations are never redone this way.
    fn forget_reads(&mut self) {
        self.performed.retain(|done| {
            !matches!(
                done.awaiting,
                Awaiting::Facts { .. } | Awaiting::MergeOutcome | Awaiting::NextIssueCheck { .. }
            )
        });
    }

    /// Performs what the run waits for (SPEC table in `machine`), if this
    /// driver can: the event it produced, or `None` to go idle.
    async fn awaited_step(&mut self) -> Result<Option<Event>, DriverError> {
        let awaiting = self.state.awaiting.clone();
        let wait = PerformedWait {
            phase: self.state.phase,
            round: self.state.review.round,
            awaiting: awaiting.clone(),
        };
        if self.performed.contains(&wait) {
            return Ok(None);
        }
        let agents_ready = self.shared.agents.is_some() && self.access.git.is_some();
        let event = match &awaiting {
            Awaiting::Agent { launch } if agents_ready => {
                // A relaunch after a failure waits with the run given back.
                if let Some(pause) =
                    super::relaunch::pause_before(self.shared, self.lease, &self.state, launch)
                        .await?
                {
                    self.recheck_after = Some(pause);
                    return Ok(None);
                }
                self.performed.push(wait.clone());
                self.launch_showing_progress(launch).await?
            }
            Awaiting::Validation { sha } if agents_ready => {
                self.performed.push(wait.clone());
                let commands = self
                    .shared
                    .agents
                    .as_ref()
                    .map(|runtime| repo_settings::validation_commands(&self.state, runtime))
                    .unwrap_or_default();
                let base =
                    self.state
                        .base_sha
                        .as_ref()
                        .ok_or_else(|| DriverError::CorruptState {
                            run: self.lease.run_id,
                            detail: "a validation is awaited but the run has no base commit"
                                .to_owned(),
                        })?;
                let candidate = (base, sha);
                agent_step::validate(self.shared, self.lease, &self.access, candidate, &commands)
                    .await?
            }
            Awaiting::Facts { .. } | Awaiting::MergeOutcome | Awaiting::NextIssueCheck { .. } => {
                self.performed.push(wait.clone());
                match self.read_event(&awaiting).await? {
                    Some(event) => event,
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(event))
    }

    /// The executor for this run's repository; it can push when the
    /// driver has a workspace and the repository a git remote.
    async fn executor(&self) -> Result<EffectExecutor, DriverError> {
        let executor = EffectExecutor::new(
            self.shared.journal.clone(),
            self.access.api.clone(),
            self.access.repo.clone(),
            self.access.login.clone(),
        );
        let (Some(runtime), Some(remote)) = (&self.shared.agents, &self.access.git) else {
            return Ok(executor);
        };
        let Some(credential) = remote.credential.current().await? else {
            return Ok(executor);
        };
        let mirror = runtime
            .workspaces
            .mirror(
                self.access.repo.owner(),
                self.access.repo.name(),
                &remote.url,
            )
            .await
            .map_err(|e| DriverError::Workspace(e.to_string()))?;
        Ok(executor.with_push(PushTransport {
            mirror,
            url: remote.url.clone(),
            credential,
            default_branch: self.state.base_branch.clone(),
        }))
    }

    /// Step 1: drive every unsettled effect, oldest transition first. After
    /// a conflict the rest of that transition's effects are left alone:
    /// they were planned on the assumption that it would land.
    async fn settle_effects(&self) -> Result<(), DriverError> {
        let journal = &self.shared.journal;
        let pending = journal.pending_effects(self.lease.run_id).await?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut conflicted: BTreeSet<i64> = journal
            .list_effects(self.lease.run_id)
            .await?
            .iter()
            .filter(|e| e.stage == Stage::Conflict)
            .map(|e| e.phase_entry)
            .collect();
        let executor = self.executor().await?;
        for effect in pending {
            if conflicted.contains(&effect.phase_entry) {
                continue;
            }
            match executor.drive(self.lease, &effect).await? {
                DriveOutcome::Observed(_) => {
                    let latency = (chrono::Utc::now() - effect.created_at).to_std();
                    crate::metrics::effect_observed(effect.kind, latency.unwrap_or_default());
                }
                DriveOutcome::StillAttempted => return Err(DriverError::Unsettled),
                DriveOutcome::Conflict { .. }
                | DriveOutcome::Blocked { .. }
                | DriveOutcome::Rerequest { .. } => {
                    conflicted.insert(effect.phase_entry);
                }
            }
        }
        Ok(())
    }

    /// Step 2: what the machine must hear about the latest transition's
    /// effects, once they settled.
    async fn effects_report(&self) -> Result<Option<Event>, DriverError> {
        if self.state.phase.is_terminal() {
            return Ok(None);
        }
        let effects: Vec<Effect> = self
            .shared
            .journal
            .list_effects(self.lease.run_id)
            .await?
            .into_iter()
            .filter(|e| e.phase_entry == self.version)
            .collect();
        if let Some(conflict) = effects.iter().find(|e| e.stage == Stage::Conflict) {
            let reason = conflict.reason.clone().unwrap_or_default();
            if reason.starts_with("re-request") {
                return Ok(Some(Event::EffectsObserved {
                    observed: vec![EffectReadBack::RoadmapVoided],
                }));
            }
            return Ok(Some(Event::EffectConflict {
                identity: conflict.identity.clone(),
                reason,
            }));
        }
        let all_observed = effects.iter().all(|e| e.stage == Stage::Observed);
        #[cfg(feature = "crash-points")]
        if all_observed {
            // The crash window between the last read-back and whatever the
            // run does next, whether or not the machine waits for these.
            for effect in &effects {
                crash_point(
                    Point::AfterObservedBeforeTransition,
                    effect.kind,
                    &effect.identity,
                );
            }
        }
        if !matches!(self.state.awaiting, Awaiting::Effects { .. }) || !all_observed {
            return Ok(None);
        }
        let mut observed = Vec::new();
        for effect in &effects {
            let value = effect.observed.clone().unwrap_or(Value::Null);
            if let Some(item) = observed_for_machine(effect, &value)? {
                observed.push(item);
            }
        }
        Ok(Some(Event::EffectsObserved { observed }))
    }

    /// Consumes a run event the machine has nothing to decide on, leaving
    /// an audit record so nothing disappears silently.
    async fn acknowledge(&self, id: i64, kind: &str, detail: Value) -> Result<(), DriverError> {
        let mut tx = self.shared.journal.begin().await?;
        tx.consume_run_event_with(self.lease, id).await?;
        tx.record_audit_event(Some(self.lease.run_id), kind, &detail)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
