//! When a waiting run re-reads GitHub although no webhook asked it to.
//!
//! A run that waits (parked for a human merge, BLOCKED, checks running) is
//! woken first by the deliveries that concern it; this re-check is only the
//! backstop for a lost webhook. Its pause starts at the poll interval and
//! doubles each time a re-check changed nothing, up to a cap; any change
//! (a transition, a consumed run event) starts it over. Every re-read is
//! conditional, so a longer pause saves requests and wake-ups rather than
//! rate limit. The decision is pure; [`BackstopBook`] keeps each run's
//! last pause in memory (after a restart a run starts from the first pause).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use autoforge_journal::RunId;

/// The first and the longest pause of the backstop re-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackstopPolicy {
    pub first: Duration,
    pub max: Duration,
}

impl BackstopPolicy {
    /// The pause after a re-check: the first one when the run just changed
    /// (or never waited), twice the previous one, capped, when it did not.
    pub fn next(&self, previous: Option<Duration>, changed: bool) -> Duration {
        let cap = self.max.max(self.first);
        match previous {
            Some(previous) if !changed => previous.saturating_mul(2).clamp(self.first, cap),
            _ => self.first.min(cap),
        }
    }
}

/// Each run's last backstop pause, in this process.
#[derive(Debug, Default)]
pub struct BackstopBook {
    pauses: Mutex<HashMap<RunId, Duration>>,
}

impl BackstopBook {
    /// Records how the run's task ended (`changed`: it moved the run) and
    /// returns the pause before its next unprompted re-check.
    pub fn pause_after(&self, policy: &BackstopPolicy, run: RunId, changed: bool) -> Duration {
        let mut pauses = self
            .pauses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pause = policy.next(pauses.get(&run).copied(), changed);
        pauses.insert(run, pause);
        pause
    }

    /// The pause last recorded for the run, if it waited in this process.
    pub fn current(&self, run: RunId) -> Option<Duration> {
        self.pauses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&run)
            .copied()
    }

    /// Forgets a run that ended.
    pub fn forget(&self, run: RunId) {
        self.pauses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: BackstopPolicy = BackstopPolicy {
        first: Duration::from_secs(60),
        max: Duration::from_secs(900),
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_first_wait_pauses_for_the_poll_interval() {
        assert_eq!(POLICY.next(None, false), secs(60));
        assert_eq!(POLICY.next(None, true), secs(60));
    }

    #[test]
    fn quiet_rechecks_double_the_pause_up_to_the_cap() {
        let mut pause = None;
        let mut seen = Vec::new();
        for _ in 0..7 {
            let next = POLICY.next(pause, false);
            seen.push(next.as_secs());
            pause = Some(next);
        }
        assert_eq!(seen, [60, 120, 240, 480, 900, 900, 900]);
    }

    #[test]
    fn any_change_starts_the_pause_over() {
        assert_eq!(POLICY.next(Some(secs(480)), true), secs(60));
    }

    #[test]
    fn a_cap_below_the_first_pause_keeps_the_first_pause() {
        let policy = BackstopPolicy {
            first: secs(60),
            max: secs(10),
        };
        assert_eq!(policy.next(None, false), secs(60));
        assert_eq!(policy.next(Some(secs(60)), false), secs(60));
    }

    #[test]
    fn the_book_keeps_each_runs_pause_apart_and_forgets_ended_runs() {
        let book = BackstopBook::default();
        let (a, b) = (RunId(1), RunId(2));
        assert_eq!(book.pause_after(&POLICY, a, false), secs(60));
        assert_eq!(book.pause_after(&POLICY, a, false), secs(120));
        assert_eq!(book.pause_after(&POLICY, b, false), secs(60));
        assert_eq!(book.pause_after(&POLICY, a, true), secs(60));
        book.pause_after(&POLICY, a, false);
        book.forget(a);
        assert_eq!(book.pause_after(&POLICY, a, false), secs(60));
    }
}
