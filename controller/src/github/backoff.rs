//! Retry schedule for reads: bounded attempts with "full jitter" exponential
//! backoff, so that many pollers hitting one GitHub outage spread out instead
//! of retrying in lockstep. Writes never use this (the effect executor owns
//! their semantics: an unknown outcome is reconciled, never re-sent blind).

use std::time::Duration;

/// How reads are retried after 5xx answers, timeouts and transport errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Total tries including the first; 1 disables retries.
    pub max_attempts: u32,
    /// Upper bound of the first delay.
    pub base_delay: Duration,
    /// No delay exceeds this.
    pub max_delay: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

impl BackoffPolicy {
    /// The delay before retry number `retry` (1 for the first retry), given a
    /// uniform random `jitter` in `[0, 1)`. `None` once attempts are spent.
    pub fn delay_before_retry(&self, retry: u32, jitter: f64) -> Option<Duration> {
        if retry == 0 || retry >= self.max_attempts {
            return None;
        }
        let exponent = (retry - 1).min(31);
        let ceiling = self
            .base_delay
            .saturating_mul(1_u32 << exponent)
            .min(self.max_delay);
        Some(ceiling.mul_f64(jitter.clamp(0.0, 1.0)))
    }

    /// Like [`Self::delay_before_retry`] with a fresh random jitter.
    pub fn random_delay_before_retry(&self, retry: u32) -> Option<Duration> {
        self.delay_before_retry(retry, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_per_retry_until_the_cap() {
        let policy = BackoffPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(3),
        };
        let ceilings: Vec<_> = (1..10)
            .map(|retry| policy.delay_before_retry(retry, 1.0).expect("within bound"))
            .collect();
        assert_eq!(
            ceilings[..4],
            [
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3)
            ]
        );
        assert!(ceilings.iter().all(|d| *d <= Duration::from_secs(3)));
    }

    #[test]
    fn jitter_scales_the_delay_down_to_zero() {
        let policy = BackoffPolicy::default();
        assert_eq!(policy.delay_before_retry(1, 0.0), Some(Duration::ZERO));
        assert_eq!(
            policy.delay_before_retry(2, 0.5),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn attempts_are_bounded() {
        let policy = BackoffPolicy::default();
        assert!(policy.delay_before_retry(3, 0.5).is_some());
        assert_eq!(policy.delay_before_retry(4, 0.5), None);
        let no_retries = BackoffPolicy {
            max_attempts: 1,
            ..BackoffPolicy::default()
        };
        assert_eq!(no_retries.delay_before_retry(1, 0.5), None);
    }

    #[test]
    fn random_delays_stay_under_the_ceiling() {
        let policy = BackoffPolicy::default();
        for _ in 0..100 {
            let delay = policy.random_delay_before_retry(2).expect("within bound");
            assert!(delay <= Duration::from_secs(1), "{delay:?}");
        }
    }
}
