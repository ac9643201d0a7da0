//! Jittered exponential backoff for transient failures of a run's step
//! (GitHub 5xx or timeouts, an effect whose outcome is still unknown).
//!
//! The delay doubles per consecutive failure up to a cap, and a random
//! fraction of it is drawn so that replicas retrying after one outage do not
//! hit GitHub in lockstep. The count lives in the driver's memory: after a
//! restart a run gets a fresh budget, which only ever means a few more
//! reconcile reads, never a blind re-send (the executor reconciles first).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use autoforge_journal::RunId;
use rand::Rng;

/// How transient failures are retried before the machine is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRetryPolicy {
    /// Consecutive failures retried by backoff; the next one is handed to
    /// the machine as `TransientFailure`.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for StepRetryPolicy {
    fn default() -> Self {
        StepRetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(120),
        }
    }
}

impl StepRetryPolicy {
    /// The delay before retry number `attempt` (1-based): "equal jitter",
    /// half fixed and half random, so a delay never collapses to zero.
    pub fn delay(&self, attempt: u32) -> Duration {
        jittered(self.base_delay, self.max_delay, attempt)
    }
}

/// The pause before an automatic relaunch after a failed launch (a crash,
/// a non-zero exit such as a model API that answered "overloaded", a
/// timeout): `agents.relaunch_backoff_seconds` doubling per consecutive
/// failure up to `agents.relaunch_backoff_max_seconds`, jittered like a
/// step retry. The count is the machine's retry counter, which any
/// progress resets, so it survives a restart and starts afresh on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaunchBackoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for RelaunchBackoff {
    fn default() -> Self {
        RelaunchBackoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(300),
        }
    }
}

impl RelaunchBackoff {
    /// No pause at all (a zero base).
    pub const NONE: RelaunchBackoff = RelaunchBackoff {
        base: Duration::ZERO,
        max: Duration::ZERO,
    };

    /// The pause before relaunch number `retry` (1-based) of one episode.
    pub fn delay(&self, retry: u32) -> Duration {
        jittered(self.base, self.max, retry)
    }
}

/// "Equal jitter": the doubled delay capped, half of it fixed and half
/// drawn, so a delay never collapses to zero and never goes down from one
/// attempt to the next.
fn jittered(base: Duration, max: Duration, attempt: u32) -> Duration {
    let doubling = 2u32.saturating_pow(attempt.saturating_sub(1).min(20));
    let full = base.saturating_mul(doubling).min(max);
    let half = full / 2;
    let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
    let drawn = if jitter_ms == 0 {
        0
    } else {
        rand::rng().random_range(0..=jitter_ms)
    };
    half + Duration::from_millis(drawn)
}

/// What to do about one more transient failure of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryVerdict {
    /// Try again after this delay.
    After(Duration),
    /// The budget is spent: tell the machine.
    GiveUp,
}

/// Consecutive transient failures per run, in this process.
#[derive(Debug, Default)]
pub struct RetryBook {
    failures: Mutex<HashMap<RunId, u32>>,
}

impl RetryBook {
    /// Counts one failure of `run` and says whether to back off or give up.
    /// Giving up resets the count: the machine's retry bound takes over.
    pub fn failed(&self, policy: &StepRetryPolicy, run: RunId) -> RetryVerdict {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(run).or_insert(0);
        *count += 1;
        if *count > policy.max_retries {
            failures.remove(&run);
            RetryVerdict::GiveUp
        } else {
            RetryVerdict::After(policy.delay(*count))
        }
    }

    /// The run made progress: its next failure starts a new episode.
    pub fn succeeded(&self, run: RunId) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> StepRetryPolicy {
        StepRetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        }
    }

    #[test]
    fn delays_grow_stay_within_half_to_full_and_respect_the_cap() {
        let policy = policy();
        for _ in 0..200 {
            let first = policy.delay(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = policy.delay(3);
            assert!(third >= Duration::from_millis(175) && third <= Duration::from_millis(350));
            let late = policy.delay(30);
            assert!(late <= Duration::from_millis(350));
        }
    }

    #[test]
    fn relaunch_pauses_double_within_their_jitter_up_to_the_cap() {
        let backoff = RelaunchBackoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(30),
        };
        for _ in 0..200 {
            let first = backoff.delay(1);
            let second = backoff.delay(2);
            assert!(first >= Duration::from_millis(2_500) && first <= Duration::from_secs(5));
            assert!(second >= Duration::from_secs(5) && second <= Duration::from_secs(10));
            assert!(second >= first, "a later pause is never shorter");
            assert!(backoff.delay(9) <= Duration::from_secs(30));
            assert!(backoff.delay(9) >= Duration::from_secs(15));
        }
        assert_eq!(RelaunchBackoff::NONE.delay(3), Duration::ZERO);
    }

    #[test]
    fn a_run_backs_off_up_to_the_bound_then_gives_up_and_starts_afresh() {
        let book = RetryBook::default();
        let run = RunId(7);
        for _ in 0..3 {
            assert!(matches!(
                book.failed(&policy(), run),
                RetryVerdict::After(_)
            ));
        }
        assert_eq!(book.failed(&policy(), run), RetryVerdict::GiveUp);
        assert!(matches!(
            book.failed(&policy(), run),
            RetryVerdict::After(_)
        ));
    }

    #[test]
    fn progress_resets_the_count() {
        let book = RetryBook::default();
        let run = RunId(1);
        for _ in 0..3 {
            let _ = book.failed(&policy(), run);
        }
        book.succeeded(run);
        assert!(matches!(
            book.failed(&policy(), run),
            RetryVerdict::After(_)
        ));
    }
}
