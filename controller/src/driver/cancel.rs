//! What observers tell a running driver between journal reads: "a run has
//! new events, look now", "this run was stopped, kill its agent" and "an
//! installation changed, rebuild the served repositories".
//!
//! The journal stays the record (the stop is a stored run event the machine
//! decides on); this registry only makes the driver act on it promptly. A
//! running launch holds a [`LaunchCancel`] for its run; [`RunNotifier::stop_run`]
//! cancels it, which kills the agent's process group. A stop that arrives
//! while no launch runs is remembered until the next launch of that run
//! starts (it starts already cancelled) or the run's task ends terminal: the
//! task reads the stored stop before it would launch again anyway, and the
//! memo closes the gap between that read and the launch.
//!
//! Within one process only: a replica that stores a stop for a run another
//! replica drives leaves the kill to that replica's next event read.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use autoforge_journal::RunId;
use tokio::sync::Notify;

use crate::agents::supervisor::CancelToken;

#[derive(Default)]
struct Registry {
    /// The token of the launch running for each run, with the number that
    /// tells its guard apart from a later launch's.
    running: HashMap<RunId, (u64, CancelToken)>,
    /// Runs stopped while no launch ran.
    stopped: HashSet<RunId>,
    next: u64,
}

/// Shared by the dispatcher (which signals) and the driver (which listens).
#[derive(Clone, Default)]
pub struct RunNotifier {
    registry: Arc<Mutex<Registry>>,
    wake: Arc<Notify>,
    repositories_changed: Arc<AtomicBool>,
}

impl RunNotifier {
    /// Whether intake saw an installation change since the last call.
    pub(crate) fn take_repositories_changed(&self) -> bool {
        self.repositories_changed.swap(false, Ordering::SeqCst)
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // The map holds no invariant a panicking holder could break.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stop (command or label removal) was stored for `run`: kill its
    /// running agent, or make its next launch start cancelled. Returns
    /// whether a running launch was cancelled.
    pub fn stop_run(&self, run: RunId) -> bool {
        let mut registry = self.registry();
        if let Some((_, token)) = registry.running.get(&run) {
            token.cancel();
            return true;
        }
        registry.stopped.insert(run);
        false
    }

    /// New events were stored: the driver looks for due runs now instead
    /// of at its next poll.
    pub fn wake_driver(&self) {
        self.wake.notify_one();
    }

    /// Completes at the next [`Self::wake_driver`] (or at once if one came
    /// since the last wait).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Registers the launch about to start for `run`; the returned guard
    /// holds its token and unregisters it when dropped.
    pub fn launch_started(&self, run: RunId) -> LaunchCancel {
        let mut registry = self.registry();
        registry.next += 1;
        let generation = registry.next;
        let token = CancelToken::new();
        if registry.stopped.remove(&run) {
            token.cancel();
        }
        registry.running.insert(run, (generation, token.clone()));
        LaunchCancel {
            notifier: self.clone(),
            run,
            generation,
            token,
        }
    }

    /// The run's task ended for good: forget a stop nobody will launch after.
    pub fn forget(&self, run: RunId) {
        self.registry().stopped.remove(&run);
    }
}

impl crate::intake::RunListener for RunNotifier {
    fn stop_run(&self, run: RunId) -> bool {
        RunNotifier::stop_run(self, run)
    }

    fn wake_driver(&self) {
        RunNotifier::wake_driver(self);
    }

    fn repositories_changed(&self) {
        self.repositories_changed.store(true, Ordering::SeqCst);
        RunNotifier::wake_driver(self);
    }
}

/// The cancellation of one running launch; unregisters itself on drop.
pub struct LaunchCancel {
    notifier: RunNotifier,
    run: RunId,
    generation: u64,
    token: CancelToken,
}

impl LaunchCancel {
    pub fn token(&self) -> &CancelToken {
        &self.token
    }
}

impl Drop for LaunchCancel {
    fn drop(&mut self) {
        let mut registry = self.notifier.registry();
        if registry
            .running
            .get(&self.run)
            .is_some_and(|(generation, _)| *generation == self.generation)
        {
            registry.running.remove(&self.run);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopping_a_run_cancels_its_running_launch_only() {
        let notifier = RunNotifier::default();
        let first = notifier.launch_started(RunId(1));
        let other = notifier.launch_started(RunId(2));
        assert!(notifier.stop_run(RunId(1)));
        assert!(first.token().is_cancelled());
        assert!(!other.token().is_cancelled());
    }

    #[test]
    fn a_stop_between_launches_cancels_the_next_launch_once() {
        let notifier = RunNotifier::default();
        assert!(!notifier.stop_run(RunId(3)));
        let next = notifier.launch_started(RunId(3));
        assert!(next.token().is_cancelled());
        drop(next);
        let after = notifier.launch_started(RunId(3));
        assert!(!after.token().is_cancelled());
    }

    #[test]
    fn a_finished_launch_no_longer_receives_stops_and_forget_clears_the_memo() {
        let notifier = RunNotifier::default();
        let launch = notifier.launch_started(RunId(4));
        let token = launch.token().clone();
        drop(launch);
        assert!(!notifier.stop_run(RunId(4)));
        assert!(!token.is_cancelled());
        notifier.forget(RunId(4));
        assert!(!notifier.launch_started(RunId(4)).token().is_cancelled());
    }

    #[tokio::test]
    async fn a_wake_before_the_wait_is_not_lost() {
        let notifier = RunNotifier::default();
        notifier.wake_driver();
        tokio::time::timeout(std::time::Duration::from_secs(5), notifier.woken())
            .await
            .expect("the stored wake completes the wait");
    }
}
