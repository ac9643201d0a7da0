//! How a run task commits a decision: the machine decides the event, the
//! intents are planned into journal rows, and the new state, the rows, the
//! run event's consumption and the run row's scope commit in one
//! transaction before anything is sent.

use std::collections::BTreeMap;

use autoforge_journal::{IssueNumber, JournalError, JournalTx, NewEffect};
use serde_json::json;

use super::RunTask;
use crate::driver::error::DriverError;
#[cfg(feature = "crash-points")]
use crate::effects::crashpoint::{Point, crash_point};
use crate::effects::{PlanContext, ReviewDiffs, plan};
use crate::machine::{EffectIntent, Event, RunState, decide};

impl RunTask<'_> {
    /// Decides `event` and commits the outcome: state, effect intents and
    /// (if the event came from the queue) its consumption, atomically.
    pub(super) async fn apply(
        &mut self,
        event: Event,
        consumed: Option<i64>,
    ) -> Result<(), DriverError> {
        match self.try_apply(&event, consumed).await {
            Err(DriverError::Journal(JournalError::ActiveRunExists { scope, .. })) => {
                // The issue (or EPIC) this run would move to is another
                // active run's: nothing of the transition was committed;
                // the run blocks and says which.
                let conflict = Event::EffectConflict {
                    identity: format!("run-scope:{scope}"),
                    reason: format!("{scope} already has another active run"),
                };
                self.try_apply(&conflict, consumed).await
            }
            other => other,
        }
    }

    async fn try_apply(&mut self, event: &Event, consumed: Option<i64>) -> Result<(), DriverError> {
        let event = event.clone();
        let decision = decide(&self.state, &event)?;
        let (checks, before) = (
            decision.next.counters.merge_checks,
            self.state.counters.merge_checks,
        );
        if checks > before {
            // 2 s, 4 s, 6 s…: GitHub computes mergeability within seconds;
            // running checks are capped at the idle re-check interval.
            self.recheck_after = Some(std::time::Duration::from_secs(2 * u64::from(checks)));
        } else if checks < before {
            // The gate was left (merged, moved, blocked): nothing to hurry.
            self.recheck_after = None;
        }
        let bodies = self.bodies_for(&decision.effects).await?;
        let diffs = self.diffs_for(&decision.effects).await?;
        let planned = self.plan_all(&decision.next, &decision.effects, &bodies, &diffs)?;
        let changed = decision.next != self.state || !planned.is_empty();
        self.moved |= changed;
        let mut tx: JournalTx = self.shared.journal.begin().await?;
        let mut version = self.version;
        if changed {
            let document =
                serde_json::to_value(&decision.next).map_err(|e| DriverError::CorruptState {
                    run: self.lease.run_id,
                    detail: e.to_string(),
                })?;
            (version, _) = tx
                .commit_transition(
                    self.lease,
                    self.version,
                    decision.next.phase.as_str(),
                    &document,
                    &planned,
                )
                .await?;
            self.move_scope(&mut tx, &decision.next).await?;
        }
        if let Some(id) = consumed {
            tx.consume_run_event_with(self.lease, id).await?;
        }
        if let Some(refusal) = &decision.refusal {
            let detail = json!({ "event": event.name(), "refusal": refusal });
            tx.record_audit_event(Some(self.lease.run_id), "event_refused", &detail)
                .await?;
        }
        tx.commit().await?;
        #[cfg(feature = "crash-points")]
        for effect in &planned {
            crash_point(Point::AfterIntentCommit, effect.kind, &effect.identity);
        }
        if changed {
            tracing::info!(run = %self.lease.run_id, event = event.name(),
                from = %self.state.phase, to = %decision.next.phase, effects = planned.len(),
                "transition committed");
        }
        if decision.next.pr != self.state.pr {
            // Commands on the PR's thread find the run by this column.
            self.shared
                .journal
                .set_run_pull_request(self.lease.run_id, decision.next.pr)
                .await?;
        }
        self.version = version;
        self.state = decision.next;
        Ok(())
    }

    /// Keeps the run row's issue and EPIC (what commands, the one-run-per-
    /// issue rule and the dashboard go by) with the state's, in the
    /// transition's transaction.
    async fn move_scope(&self, tx: &mut JournalTx, next: &RunState) -> Result<(), DriverError> {
        let epic_of = |s: &RunState| s.epic.as_ref().map(|e| e.epic);
        let moved = next.issue != self.state.issue || epic_of(next) != epic_of(&self.state);
        if !moved {
            return Ok(());
        }
        tx.set_scope(self.lease, next.issue, epic_of(next)).await?;
        Ok(())
    }

    fn plan_all(
        &self,
        next: &RunState,
        intents: &[EffectIntent],
        bodies: &BTreeMap<IssueNumber, String>,
        diffs: &ReviewDiffs,
    ) -> Result<Vec<NewEffect>, DriverError> {
        let context = PlanContext {
            run_id: self.lease.run_id,
            repo: &self.access.repo,
            html_base: &self.access.html_base,
            default_branch: &next.base_branch,
            bodies,
            diffs,
        };
        Ok(intents
            .iter()
            .map(|intent| plan(intent, &context))
            .collect::<Result<_, _>>()?)
    }
}
