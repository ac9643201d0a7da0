//! Keeps the journal's rate-limit readings current while `serve` runs: the
//! GitHub client's last known budget per scope is written to
//! `rate_limit_readings` (one row per budget owner and resource) at most
//! once per [`EVERY`], and only for the budgets a response changed since
//! the last write, so a busy controller costs the journal a few upserts a
//! minute. `autoforge status`, a separate process, reads them back.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use autoforge_journal::{Journal, RateLimitReading};
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::github::{GitHubClient, RateLimitState, RateScope};

/// The shortest time between two writes of the readings.
pub const EVERY: Duration = Duration::from_secs(10);

/// Writes the readings every [`EVERY`] until `stop` turns true, then once
/// more so the last answers before shutdown are kept.
pub async fn run(
    journal: Journal,
    client: GitHubClient,
    worker: String,
    mut stop: watch::Receiver<bool>,
) {
    let mut written: HashMap<RateScope, SystemTime> = HashMap::new();
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = ticker.tick() => false,
            _ = stop.changed() => true,
        };
        let fresh = changed_since(&client.rate_limits(), &mut written, &worker);
        if !fresh.is_empty()
            && let Err(error) = journal.record_rate_limits(&fresh).await
        {
            // Only `autoforge status` is left with an older reading.
            tracing::warn!(%error, "recording the rate-limit readings failed");
            written.clear();
        }
        if stopping || *stop.borrow() {
            return;
        }
    }
}

/// The readings of the scopes a response updated since the last write.
fn changed_since(
    states: &[(RateScope, RateLimitState)],
    written: &mut HashMap<RateScope, SystemTime>,
    worker: &str,
) -> Vec<RateLimitReading> {
    let mut fresh = Vec::new();
    for (scope, state) in states {
        let Some(observed) = state.observed_at else {
            continue;
        };
        if state.limit.is_none() && state.remaining.is_none() {
            continue;
        }
        if written.get(scope) == Some(&observed) {
            continue;
        }
        written.insert(*scope, observed);
        fresh.push(reading(*scope, state, observed, worker));
    }
    fresh
}

fn reading(
    scope: RateScope,
    state: &RateLimitState,
    observed: SystemTime,
    worker: &str,
) -> RateLimitReading {
    let time = |t: SystemTime| DateTime::<Utc>::from(t);
    let count = |n: Option<u64>| n.and_then(|n| i64::try_from(n).ok());
    RateLimitReading {
        owner: scope.gauge_label(),
        resource: state.resource.unwrap_or("core").to_owned(),
        limit_total: count(state.limit),
        remaining: count(state.remaining),
        reset_at: state.reset_at.map(time),
        paused_until: state.paused_until.map(time),
        observed_at: time(observed),
        recorded_by: worker.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn state(remaining: u64, observed: u64) -> RateLimitState {
        RateLimitState {
            limit: Some(5000),
            remaining: Some(remaining),
            reset_at: Some(UNIX_EPOCH + Duration::from_secs(9000)),
            paused_until: None,
            resource: Some("core"),
            observed_at: Some(UNIX_EPOCH + Duration::from_secs(observed)),
        }
    }

    #[test]
    fn only_budgets_a_response_changed_are_written_again() {
        let mut written = HashMap::new();
        let states = [
            (RateScope::Installation(7), state(4990, 100)),
            (RateScope::App, state(4999, 100)),
            (RateScope::Token, RateLimitState::default()),
        ];
        let first = changed_since(&states, &mut written, "w");
        let owners: Vec<&str> = first.iter().map(|r| r.owner.as_str()).collect();
        assert_eq!(owners, ["7", "app"], "a scope never answered is left out");
        assert_eq!(first[0].remaining, Some(4990));
        assert_eq!(first[0].resource, "core");
        assert!(changed_since(&states, &mut written, "w").is_empty());
        let later = [(RateScope::Installation(7), state(4980, 130))];
        let again = changed_since(&later, &mut written, "w");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].remaining, Some(4980));
    }
}
