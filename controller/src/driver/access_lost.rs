//! A run whose repository is no longer served (removed from the App's
//! installation, the installation deleted, or no longer in
//! `github.repositories`): the machine stops it, and since the controller
//! can no longer write there, the transition is committed with no effect
//! and the reason goes to the journal, never to GitHub.
//!
//! A suspended installation is different: the App is paused, not gone.
//! Its runs keep their state and wait (each gets a journal record saying
//! why) and resume where they were once the installation is unsuspended.

use autoforge_journal::{Lease, RunFilter};
use serde_json::json;

use super::Shared;
use super::repositories::Refreshed;
use super::run_task::{RunEnd, stored_state};
use crate::intake::Suspension;
use crate::machine::{Event, decide};

/// How many active runs a suspension or unsuspension records itself on.
const MAX_RUNS_RECORDED: i64 = 1000;

/// After the map of served repositories was rebuilt: runs of removed
/// repositories are made due (they stop), those of added or unsuspended
/// ones too (they go on at once), and every suspension and unsuspension
/// is recorded, for the installation and for each of its active runs.
pub(super) async fn after_refresh(shared: &Shared, changed: &Refreshed) {
    for suspension in &changed.suspended {
        tracing::warn!(
            installation = suspension.installation_id,
            owner = %suspension.owner,
            "installation suspended; its runs wait until it is unsuspended"
        );
        record_on_runs(shared, suspension, "installation_suspended").await;
    }
    for suspension in &changed.unsuspended {
        tracing::info!(
            installation = suspension.installation_id,
            owner = %suspension.owner,
            "installation unsuspended; its runs resume"
        );
        record_on_runs(shared, suspension, "installation_unsuspended").await;
    }
    let due = changed
        .removed
        .iter()
        .chain(&changed.added)
        .chain(&changed.paused);
    for repository in due {
        if let Err(error) = shared.journal.wake_runs_of(repository).await {
            tracing::warn!(%error, %repository, "cannot make its runs due");
        }
    }
}

/// One `kind` record for the installation and one per active run of it.
async fn record_on_runs(shared: &Shared, suspension: &Suspension, kind: &str) {
    let detail = json!({
        "installation": suspension.installation_id,
        "owner": suspension.owner,
        "suspended_at": suspension.since,
        "suspended_by": suspension.by,
    });
    let runs = match shared
        .journal
        .list_runs(RunFilter::Active, MAX_RUNS_RECORDED)
        .await
    {
        Ok(runs) => runs,
        Err(error) => {
            tracing::warn!(%error, "cannot list the active runs");
            Vec::new()
        }
    };
    let mut run_ids = vec![None];
    run_ids.extend(
        runs.iter()
            .filter(|run| suspension.covers(&run.repository))
            .map(|run| Some(run.id)),
    );
    for run in run_ids {
        let mut detail = detail.clone();
        if run.is_some() && kind == "installation_suspended" {
            detail["reason"] = json!(suspension.reason());
        }
        if let Err(error) = shared.journal.record_audit_event(run, kind, &detail).await {
            tracing::warn!(%error, kind, "cannot record the installation change");
        }
    }
}

/// The run's installation is suspended: the run is left exactly as it is
/// (no transition, no write) and looked at again at its idle re-check; the
/// unsuspension makes it due at once.
pub(super) fn wait_while_suspended(lease: &Lease, repository: &str, reason: &str) -> RunEnd {
    tracing::info!(run = %lease.run_id, %repository, reason, "run waits for its installation");
    RunEnd::Idle
}

/// Feeds `RepositoryAccessLost` and commits the stop. Anything unexpected
/// (an unreadable state, a lost lease) leaves the run as it was, for the
/// next attempt.
pub(super) async fn stop_without_access(
    shared: &Shared,
    lease: &Lease,
    repository: &str,
) -> RunEnd {
    match try_stop(shared, lease, repository).await {
        Ok(end) => end,
        Err(error) => {
            tracing::error!(run = %lease.run_id, %error, "cannot stop a run whose repository is gone");
            RunEnd::Failed(error.to_string())
        }
    }
}

async fn try_stop(shared: &Shared, lease: &Lease, repository: &str) -> anyhow::Result<RunEnd> {
    let Some(run) = shared.journal.get_run(lease.run_id).await? else {
        anyhow::bail!("run {} is gone", lease.run_id);
    };
    let state = stored_state(shared, lease.run_id, run.current_issue, run.state)?;
    let reason = format!(
        "{repository} is no longer served by this controller (removed from its installation or configuration)"
    );
    let decision = decide(
        &state,
        &Event::RepositoryAccessLost {
            reason: reason.clone(),
        },
    )?;
    anyhow::ensure!(
        decision.effects.is_empty(),
        "the machine asked for writes to a repository it cannot reach"
    );
    let mut tx = shared.journal.begin().await?;
    let document = serde_json::to_value(&decision.next)?;
    tx.commit_transition(
        lease,
        run.version,
        decision.next.phase.as_str(),
        &document,
        &[],
    )
    .await?;
    let detail = json!({ "repository": repository, "reason": reason });
    tx.record_audit_event(Some(lease.run_id), "repository_access_lost", &detail)
        .await?;
    tx.commit().await?;
    tracing::warn!(run = %lease.run_id, %repository, "repository no longer served; run stopped");
    Ok(RunEnd::Terminal)
}
