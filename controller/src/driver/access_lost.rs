//! A run whose repository is no longer served (removed from the App's
//! installation, the installation suspended or deleted, or no longer in
//! `github.repositories`): the machine stops it, and since the controller
//! can no longer write there, the transition is committed with no effect
//! and the reason goes to the journal, never to GitHub.

use autoforge_journal::Lease;
use serde_json::json;

use super::Shared;
use super::run_task::{RunEnd, stored_state};
use crate::machine::{Event, decide};

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
