//! Launch rows in the journal.
//!
//! The launch pipeline reports one [`LaunchRecord`] per agent process it
//! started (the first launch and any correction relaunches). The driver
//! stores each as an `agent_launches` row under the run's lease, so the
//! dashboard and the launch budget see every process that ran, with its
//! exit, duration and tokens.

use autoforge_journal::{Journal, JournalError, LaunchEnd, LaunchId, Lease, NewLaunch};

use super::supervisor::{LaunchExit, LaunchRecord};

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
    let id = journal
        .record_launch_started(
            lease,
            &NewLaunch {
                phase: phase.to_owned(),
                role: record.role.role_name().to_owned(),
                profile: record.profile.clone(),
                attempt: i32::try_from(attempt).unwrap_or(i32::MAX),
                log_dir: record.log_dir.display().to_string(),
            },
        )
        .await?;
    let end = launch_end(record);
    journal.record_launch_finished(lease, id, &end).await?;
    crate::metrics::launch_finished(
        record.role.role_name(),
        &record.profile,
        outcome_word(record.exit),
        record.duration,
        record.tokens,
    );
    Ok(id)
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
        duration_ms: i64::try_from(record.duration.as_millis()).unwrap_or(i64::MAX),
        tokens: record.tokens.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
        outcome: outcome.to_owned(),
    }
}
