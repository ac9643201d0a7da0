//! Launch rows in the journal.
//!
//! A [`LaunchRecorder`] follows one phase's launches as they happen (the
//! first launch and any correction relaunches): it writes the
//! `agent_launches` row when the process starts, refreshes it at every
//! heartbeat and ends it when the process ended, all under the run's
//! lease, so the dashboard, the status comment and the budgets see every
//! process, running or done, with its exit, duration, tokens and cost.
//!
//! A crash leaves the row of a running launch without an end; the next
//! task that takes the run ends it as `lost` ([`end_lost_launches`]).

use std::time::Duration;

use autoforge_journal::{
    Journal, JournalError, LaunchEnd, LaunchId, LaunchProgress, LaunchUsage, Lease, LostLaunch,
    NewLaunch,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::profile::{PriceTable, TokenUsage};
use super::supervisor::{Heartbeat, LaunchEvent, LaunchEvents, LaunchExit, LaunchRecord};
use crate::machine::AgentPhase;

/// Stores one finished launch of `phase` (the run's phase when it started);
/// `attempt` is 0 for the first launch of a phase entry and counts the
/// correction relaunches after it.
pub async fn record_finished_launch(
    journal: &Journal,
    lease: &Lease,
    phase: &str,
    attempt: u32,
    record: &LaunchRecord,
) -> Result<LaunchId, JournalError> {
    let launch = new_launch(
        phase,
        attempt,
        (&record.profile, record.role),
        &record.log_dir,
    );
    let id = journal.record_launch_started(lease, &launch).await?;
    finish(journal, lease, id, record).await?;
    Ok(id)
}

/// The final progress (usage, cost) and the end of launch `id`.
async fn finish(
    journal: &Journal,
    lease: &Lease,
    id: LaunchId,
    record: &LaunchRecord,
) -> Result<(), JournalError> {
    let progress = LaunchProgress {
        elapsed_ms: millis(record.duration),
        output_bytes: clamp(record.output_bytes),
        usage: launch_usage(record.tokens, record.usage, record.cost_micros),
    };
    journal.record_launch_progress(lease, id, &progress).await?;
    journal
        .record_launch_finished(lease, id, &launch_end(record))
        .await?;
    crate::metrics::launch_finished(
        record.role.role_name(),
        &record.profile,
        outcome_word(record.exit),
        record.duration,
        record.tokens,
    );
    Ok(())
}

fn new_launch(
    phase: &str,
    attempt: u32,
    (profile, role): (&str, AgentPhase),
    log_dir: &std::path::Path,
) -> NewLaunch {
    NewLaunch {
        phase: phase.to_owned(),
        role: role.role_name().to_owned(),
        profile: profile.to_owned(),
        attempt: i32::try_from(attempt).unwrap_or(i32::MAX),
        log_dir: log_dir.display().to_string(),
    }
}

/// The fixed word for how a launch ended (journal `outcome`, metrics label).
fn outcome_word(exit: LaunchExit) -> &'static str {
    match exit {
        LaunchExit::Exited(0) => "success",
        LaunchExit::Exited(_) => "exit-nonzero",
        LaunchExit::Signalled(_) => "signalled",
        LaunchExit::IdleTimeout => "idle-timeout",
        LaunchExit::WallTimeout => "wall-timeout",
        LaunchExit::Cancelled => "cancelled",
    }
}

/// The journal's view of how a launch ended.
pub fn launch_end(record: &LaunchRecord) -> LaunchEnd {
    let exit_status = match record.exit {
        LaunchExit::Exited(code) => Some(code),
        _ => None,
    };
    let outcome = outcome_word(record.exit);
    LaunchEnd {
        exit_status,
        duration_ms: millis(record.duration),
        tokens: record.tokens.map(clamp),
        outcome: outcome.to_owned(),
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reported tokens as the journal stores them.
fn launch_usage(
    tokens: Option<u64>,
    usage: Option<TokenUsage>,
    cost_micros: Option<u64>,
) -> LaunchUsage {
    LaunchUsage {
        tokens: tokens.map(clamp),
        input_tokens: usage.map(|u| clamp(u.input)),
        output_tokens: usage.map(|u| clamp(u.output)),
        cached_tokens: usage.map(|u| clamp(u.cached)),
        cost_micros: cost_micros.map(clamp),
    }
}

fn heartbeat_progress(beat: &Heartbeat, price: Option<PriceTable>) -> LaunchProgress {
    let cost = price.zip(beat.usage).map(|(p, u)| p.cost_micros(&u));
    LaunchProgress {
        elapsed_ms: millis(beat.elapsed),
        output_bytes: clamp(beat.output_bytes),
        usage: launch_usage(beat.tokens, beat.usage, cost),
    }
}

/// Ends the leased run's launches that a crash left without an end (see
/// [`Journal::end_lost_launches`]) and says so in the log, with where each
/// one's output is.
pub async fn end_lost_launches(
    journal: &Journal,
    lease: &Lease,
) -> Result<Vec<LostLaunch>, JournalError> {
    // Almost always there is none: a plain read first spares every task
    // load the lease-checked write.
    if journal.running_launch(lease.run_id).await?.is_none() {
        return Ok(Vec::new());
    }
    let lost = journal.end_lost_launches(lease).await?;
    for launch in &lost {
        tracing::warn!(
            run = %lease.run_id,
            launch = %launch.id,
            role = %launch.role,
            profile = %launch.profile,
            pid = ?launch.pid,
            log_dir = %launch.log_dir,
            "a launch of an earlier controller process has no end: recorded as lost"
        );
    }
    Ok(lost)
}

/// Journals one phase's launches while they run (see the module docs).
pub struct LaunchRecorder {
    events: LaunchEvents,
    task: JoinHandle<Result<Vec<LaunchId>, JournalError>>,
}

impl LaunchRecorder {
    /// Starts recording the launches of `phase` for the leased run, with a
    /// heartbeat every `every`.
    pub fn start(journal: Journal, lease: Lease, phase: String, every: Duration) -> Self {
        let (events, receiver) = LaunchEvents::channel(every);
        let task = tokio::spawn(record_events(journal, lease, phase, receiver));
        Self { events, task }
    }

    /// Where the phase's launches report.
    pub fn events(&self) -> &LaunchEvents {
        &self.events
    }

    /// Waits until every reported event is written; the launch rows in
    /// order, or the first journal error (a stale lease, say).
    pub async fn finish(self) -> Result<Vec<LaunchId>, JournalError> {
        drop(self.events);
        match self.task.await {
            Ok(result) => result,
            Err(joined) => Err(JournalError::InvalidInput(format!(
                "the launch recorder stopped: {joined}"
            ))),
        }
    }
}

/// The recorder's loop. After the first failed write it only drains the
/// channel: a lost lease means this process must stop writing.
async fn record_events(
    journal: Journal,
    lease: Lease,
    phase: String,
    mut receiver: mpsc::UnboundedReceiver<LaunchEvent>,
) -> Result<Vec<LaunchId>, JournalError> {
    let mut ids = Vec::new();
    let mut current: Option<(LaunchId, Option<PriceTable>)> = None;
    let mut failed = None;
    while let Some(event) = receiver.recv().await {
        if failed.is_some() {
            continue;
        }
        let attempt = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let step = match event {
            LaunchEvent::Started {
                profile,
                role,
                pid,
                log_dir,
                price,
            } => {
                let launch = new_launch(&phase, attempt, (&profile, role), &log_dir);
                let pid = i32::try_from(pid).unwrap_or(i32::MAX);
                journal
                    .record_launch_spawned(&lease, &launch, pid)
                    .await
                    .map(|id| current = Some((id, price)))
            }
            LaunchEvent::Progress(beat) => match current {
                Some((id, price)) => {
                    let progress = heartbeat_progress(&beat, price);
                    journal.record_launch_progress(&lease, id, &progress).await
                }
                None => Ok(()),
            },
            LaunchEvent::Finished(record) => match current.take() {
                Some((id, _)) => finish(&journal, &lease, id, &record)
                    .await
                    .map(|()| ids.push(id)),
                // Ended before its first heartbeat was seen.
                None => record_finished_launch(&journal, &lease, &phase, attempt, &record)
                    .await
                    .map(|id| ids.push(id)),
            },
        };
        if let Err(error) = step {
            failed = Some(error);
        }
    }
    match failed {
        Some(error) => Err(error),
        None => Ok(ids),
    }
}
