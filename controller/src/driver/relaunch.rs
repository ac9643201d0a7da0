//! The pause before an automatic relaunch after a failed launch.
//!
//! A model API that answers "overloaded" or cuts its stream makes a CLI
//! exit non-zero within seconds; relaunching at once only meets the same
//! overload. So before a launch the machine asked for as a retry (its
//! retry counter is above zero), the driver records a `relaunch_backoff`
//! audit event (which launch, which retry, the pause, until when, and how
//! the launch before it ended) and gives the run back until then instead
//! of sleeping: no lease, lock or transaction is held while it waits, and
//! any run event (an `/autoforge stop`, a local `autoforge stop`) wakes it
//! and is decided first. The record is the journal's answer to "why is
//! nothing running": the dashboard's timeline shows it, and a driver that
//! takes the run over honours the same deadline.

use std::time::Duration;

use autoforge_journal::{AuditEvent, Lease};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Shared;
use super::error::DriverError;
use crate::machine::{LaunchRequest, RunState};

/// The audit kind of a recorded relaunch pause.
pub const RELAUNCH_BACKOFF: &str = "relaunch_backoff";

/// How long the run must still wait before `launch` starts, recording the
/// pause the first time it is asked; `None` to launch now.
pub(super) async fn pause_before(
    shared: &Shared,
    lease: &Lease,
    state: &RunState,
    launch: &LaunchRequest,
) -> Result<Option<Duration>, DriverError> {
    let retry = state.counters.retries;
    let backoff = shared
        .agents
        .as_ref()
        .map(|runtime| runtime.relaunch_backoff)
        .unwrap_or(super::retry::RelaunchBackoff::NONE);
    if retry == 0 || backoff.base.is_zero() {
        return Ok(None);
    }
    let journal = &shared.journal;
    let recorded = journal.list_audit_events(lease.run_id).await?;
    let until = match recorded_until(&recorded, launch.id) {
        Some(until) => until,
        None => {
            let delay = backoff.delay(retry);
            let until = Utc::now() + delay;
            let after = journal
                .list_launches(lease.run_id)
                .await?
                .pop()
                .and_then(|last| last.outcome.map(|outcome| (last.id, outcome)));
            let detail = json!({
                "launch": launch.id,
                "retry": retry,
                "delay_ms": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "until": until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "after_launch": after.as_ref().map(|(id, _)| id.0),
                "after_outcome": after.map(|(_, outcome)| outcome),
            });
            journal
                .record_audit_event(Some(lease.run_id), RELAUNCH_BACKOFF, &detail)
                .await?;
            tracing::info!(run = %lease.run_id, launch = launch.id, retry, ?delay,
                "a failed launch is relaunched after a pause");
            until
        }
    };
    Ok((until - Utc::now()).to_std().ok().filter(|d| !d.is_zero()))
}

/// The deadline already recorded for `launch`, if any.
fn recorded_until(events: &[AuditEvent], launch: u32) -> Option<DateTime<Utc>> {
    events
        .iter()
        .rev()
        .filter(|event| event.kind == RELAUNCH_BACKOFF)
        .find(|event| event.detail.get("launch").and_then(Value::as_u64) == Some(launch.into()))
        .and_then(|event| event.detail.get("until").and_then(Value::as_str))
        .and_then(|until| DateTime::parse_from_rfc3339(until).ok())
        .map(|until| until.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoforge_journal::RunId;

    fn event(kind: &str, detail: Value) -> AuditEvent {
        AuditEvent {
            id: 1,
            run_id: Some(RunId(1)),
            kind: kind.to_owned(),
            detail,
            recorded_at: Utc::now(),
        }
    }

    #[test]
    fn the_deadline_recorded_for_a_launch_is_found_and_no_other() {
        let events = [
            event(
                RELAUNCH_BACKOFF,
                json!({"launch": 2, "until": "2026-01-01T00:00:05.000Z"}),
            ),
            event("transition", json!({"launch": 3})),
        ];
        let until = recorded_until(&events, 2).expect("recorded");
        assert_eq!(until.to_rfc3339(), "2026-01-01T00:00:05+00:00");
        assert_eq!(recorded_until(&events, 3), None);
    }
}
