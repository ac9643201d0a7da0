//! A launch shown on the status comment while it runs: the task runs the
//! launch and, every `agents.status_refresh_seconds`, feeds the machine a
//! `LaunchRunning` event from the heartbeat its journal row last recorded,
//! commits the decision (an edit of the status comment, when what it shows
//! changed) and drives that edit, all while the launch goes on. A refresh
//! that fails is logged and never ends the launch; an edit left unsettled
//! is driven with the rest after the launch.

use std::sync::Arc;
use std::time::Duration;

use autoforge_journal::{EffectKind, Stage};

use super::RunTask;
use crate::driver::agent_step;
use crate::driver::error::DriverError;
use crate::effects::EffectExecutor;
use crate::machine::{Event, LaunchRequest};

impl RunTask<'_> {
    /// Runs `launch` (see [`agent_step::run_launch`]), showing it on the
    /// status comment as it runs; the event it ended with.
    pub(super) async fn launch_showing_progress(
        &mut self,
        launch: &LaunchRequest,
    ) -> Result<Event, DriverError> {
        let (shared, lease) = (self.shared, self.lease);
        let access = Arc::clone(&self.access);
        let state = self.state.clone();
        let every = shared
            .agents
            .as_ref()
            .map_or(Duration::from_secs(60), |runtime| {
                runtime.status_refresh_every
            });
        let launching = agent_step::run_launch(shared, lease, &access, &state, launch);
        tokio::pin!(launching);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = &mut launching => return event,
                _ = ticker.tick() => {}
            }
            // The launch is polled on while the refresh runs; a refresh is
            // finished, not dropped, when the launch ends meanwhile.
            let refresh = self.show_running(launch.id);
            tokio::pin!(refresh);
            let ended = tokio::select! {
                shown = &mut refresh => { log_failure(shown); None }
                event = &mut launching => Some(event),
            };
            if let Some(event) = ended {
                log_failure(refresh.await);
                return event;
            }
        }
    }

    /// Feeds the latest heartbeat of the running launch to the machine and
    /// sends the status comment edit it asks for.
    async fn show_running(&mut self, launch: u32) -> Result<(), DriverError> {
        let journal = &self.shared.journal;
        let Some(row) = journal.running_launch(self.lease.run_id).await? else {
            return Ok(());
        };
        let count = |value: Option<i64>| value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
        let event = Event::LaunchRunning {
            launch,
            profile: row.profile,
            elapsed_seconds: count(row.elapsed_ms) / 1000,
            output_bytes: count(row.output_bytes),
        };
        self.apply(event, None).await?;
        // Only the status edit is driven here, without the push transport:
        // everything else waits for the launch's end as before.
        let executor = EffectExecutor::new(
            journal.clone(),
            self.access.api.clone(),
            self.access.repo.clone(),
            self.access.login.clone(),
        );
        for effect in journal.pending_effects(self.lease.run_id).await? {
            if effect.kind == EffectKind::EditStatusComment && effect.stage != Stage::Conflict {
                executor.drive(self.lease, &effect).await?;
            }
        }
        Ok(())
    }
}

fn log_failure(shown: Result<(), DriverError>) {
    if let Err(error) = shown {
        tracing::warn!(%error, "showing the running launch on the status comment failed");
    }
}
