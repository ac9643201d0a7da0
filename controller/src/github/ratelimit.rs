//! Per-installation rate-limit gate.
//!
//! Each response's `x-ratelimit-*` headers update the state of the scope it
//! was sent under (an installation, the App's JWT, or a personal token).
//! Before a request the gate says whether to go now or wait: after a
//! secondary limit (`retry-after`) or a primary limit hit, until the stated
//! time; when the budget runs low, reads wait for the reset so that the last
//! requests of the hour stay available for writes. All decisions are pure
//! functions of the state and the wall clock passed in.

use http::HeaderMap;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Whose budget a request spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RateScope {
    Installation(u64),
    App,
    Token,
}

impl RateScope {
    /// The scope as the rate-limit gauges label it: an installation by its
    /// id, else `app` or `token` (a fixed set, never free text).
    pub fn gauge_label(self) -> String {
        match self {
            Self::Installation(id) => id.to_string(),
            Self::App => "app".to_owned(),
            Self::Token => "token".to_owned(),
        }
    }
}

/// Reads yield to writes when the budget is nearly spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Read,
    Write,
}

/// What the last response told us about a scope's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimitState {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    /// When the primary budget refills.
    pub reset_at: Option<SystemTime>,
    /// Set by `retry-after` (secondary limits) or a 403/429 at zero budget.
    pub paused_until: Option<SystemTime>,
    /// The budget the headers named (`x-ratelimit-resource`), as one of
    /// GitHub's fixed resource names.
    pub resource: Option<&'static str>,
    /// When the last response of the scope arrived: the reading's age.
    pub observed_at: Option<SystemTime>,
}

/// GitHub's rate-limit resources; any other name reads `other`, so the
/// value is never free text from a response.
const RESOURCES: [&str; 10] = [
    "core",
    "search",
    "graphql",
    "integration_manifest",
    "source_import",
    "code_scanning_upload",
    "code_scanning_autofix",
    "actions_runner_registration",
    "scim",
    "code_search",
];

/// The gate's answer before a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Go,
    WaitUntil(SystemTime),
}

/// Fallback pause for a 403/429 rate-limit answer without usable headers.
const DEFAULT_SECONDARY_PAUSE: Duration = Duration::from_secs(60);

impl RateLimitState {
    /// Folds one response's headers into the state.
    pub fn observe(&mut self, status: u16, headers: &HeaderMap, now: SystemTime) {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
        };
        if let Some(limit) = number("x-ratelimit-limit") {
            self.limit = Some(limit);
        }
        if let Some(remaining) = number("x-ratelimit-remaining") {
            self.remaining = Some(remaining);
        }
        if let Some(reset) = number("x-ratelimit-reset") {
            self.reset_at = Some(UNIX_EPOCH + Duration::from_secs(reset));
        }
        if let Some(named) = headers
            .get("x-ratelimit-resource")
            .and_then(|value| value.to_str().ok())
        {
            let named = named.trim();
            self.resource = Some(
                RESOURCES
                    .into_iter()
                    .find(|r| *r == named)
                    .unwrap_or("other"),
            );
        }
        self.observed_at = Some(now);
        if !is_rate_limit_status(status) {
            return;
        }
        let retry_after = number("retry-after").map(|seconds| now + Duration::from_secs(seconds));
        let exhausted = self.remaining == Some(0);
        let until = match (retry_after, exhausted) {
            (Some(until), _) => Some(until),
            (None, true) => self.reset_at,
            // A 429 is always a limit; a bare 403 is only one if GitHub said so
            // through the headers above, otherwise it is a permission refusal.
            (None, false) if status == 429 => Some(now + DEFAULT_SECONDARY_PAUSE),
            (None, false) => None,
        };
        if let Some(until) = until {
            self.paused_until = Some(self.paused_until.map_or(until, |old| old.max(until)));
        }
    }

    /// Whether a request of `kind` may go now. `read_reserve` requests are
    /// kept back for writes at the end of each window.
    pub fn admit(&self, kind: RequestKind, read_reserve: u64, now: SystemTime) -> Admission {
        if let Some(until) = self.paused_until.filter(|until| *until > now) {
            return Admission::WaitUntil(until);
        }
        let floor = match kind {
            RequestKind::Read => read_reserve,
            RequestKind::Write => 0,
        };
        match (self.remaining, self.reset_at) {
            (Some(remaining), Some(reset)) if remaining <= floor && reset > now => {
                Admission::WaitUntil(reset)
            }
            _ => Admission::Go,
        }
    }

    /// True when a response status says "rate limited" (as opposed to an
    /// ordinary refusal), judging by the state it left behind.
    pub fn is_limited_response(&self, status: u16, now: SystemTime) -> bool {
        is_rate_limit_status(status)
            && (status == 429 || self.paused_until.is_some_and(|until| until > now))
    }
}

fn is_rate_limit_status(status: u16) -> bool {
    status == 403 || status == 429
}

/// Rate-limit states of all scopes, shared by every handle of one client.
#[derive(Debug, Default)]
pub struct RateGates {
    states: Mutex<HashMap<RateScope, RateLimitState>>,
}

impl RateGates {
    pub fn observe(
        &self,
        scope: RateScope,
        status: u16,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> RateLimitState {
        let mut states = self.lock();
        let state = states.entry(scope).or_default();
        state.observe(status, headers, now);
        *state
    }

    pub fn admit(
        &self,
        scope: RateScope,
        kind: RequestKind,
        read_reserve: u64,
        now: SystemTime,
    ) -> Admission {
        self.lock()
            .get(&scope)
            .map_or(Admission::Go, |state| state.admit(kind, read_reserve, now))
    }

    /// One scope's last known state (empty if it never answered).
    pub fn state(&self, scope: RateScope) -> RateLimitState {
        self.lock().get(&scope).copied().unwrap_or_default()
    }

    /// Every scope's last known state, for the `/metrics` gauges.
    pub fn snapshot(&self) -> Vec<(RateScope, RateLimitState)> {
        let mut all: Vec<_> = self.lock().iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_by_key(|(scope, _)| *scope);
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RateScope, RateLimitState>> {
        // The map holds plain numbers; a panic elsewhere cannot leave it torn.
        self.states
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    fn budget(remaining: &str, reset: &str) -> HeaderMap {
        headers(&[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", remaining),
            ("x-ratelimit-reset", reset),
        ])
    }

    #[test]
    fn ordinary_responses_record_the_budget_and_let_requests_go() {
        let mut state = RateLimitState::default();
        state.observe(200, &budget("4999", "2000"), at(1000));
        assert_eq!(state.limit, Some(5000));
        assert_eq!(state.remaining, Some(4999));
        assert_eq!(state.reset_at, Some(at(2000)));
        assert_eq!(state.observed_at, Some(at(1000)));
        assert_eq!(state.resource, None, "no resource header");
        assert_eq!(state.admit(RequestKind::Read, 50, at(1000)), Admission::Go);
    }

    #[test]
    fn the_resource_is_one_of_githubs_names_or_other() {
        let mut state = RateLimitState::default();
        state.observe(200, &headers(&[("x-ratelimit-resource", "search")]), at(1));
        assert_eq!(state.resource, Some("search"));
        state.observe(200, &headers(&[("x-ratelimit-resource", "<b>x")]), at(2));
        assert_eq!(state.resource, Some("other"));
        assert_eq!(state.observed_at, Some(at(2)));
    }

    #[test]
    fn low_budget_holds_reads_until_reset_but_lets_writes_through() {
        let mut state = RateLimitState::default();
        state.observe(200, &budget("10", "2000"), at(1000));
        assert_eq!(
            state.admit(RequestKind::Read, 50, at(1000)),
            Admission::WaitUntil(at(2000))
        );
        assert_eq!(state.admit(RequestKind::Write, 50, at(1000)), Admission::Go);
        assert_eq!(state.admit(RequestKind::Read, 50, at(2001)), Admission::Go);
    }

    #[test]
    fn exhausted_budget_holds_writes_too() {
        let mut state = RateLimitState::default();
        state.observe(403, &budget("0", "2000"), at(1000));
        assert_eq!(
            state.admit(RequestKind::Write, 0, at(1000)),
            Admission::WaitUntil(at(2000))
        );
        assert!(state.is_limited_response(403, at(1000)));
    }

    #[test]
    fn retry_after_pauses_the_scope_even_with_budget_left() {
        let mut state = RateLimitState::default();
        let mut secondary = budget("4000", "5000");
        secondary.insert("retry-after", HeaderValue::from_static("30"));
        state.observe(403, &secondary, at(1000));
        assert_eq!(
            state.admit(RequestKind::Write, 0, at(1010)),
            Admission::WaitUntil(at(1030))
        );
        assert_eq!(state.admit(RequestKind::Write, 0, at(1030)), Admission::Go);
    }

    #[test]
    fn plain_forbidden_is_not_a_rate_limit() {
        let mut state = RateLimitState::default();
        state.observe(403, &budget("4000", "5000"), at(1000));
        assert_eq!(state.paused_until, None);
        assert!(!state.is_limited_response(403, at(1000)));
    }

    #[test]
    fn too_many_requests_without_headers_pauses_for_a_minute() {
        let mut state = RateLimitState::default();
        state.observe(429, &HeaderMap::new(), at(1000));
        assert_eq!(state.paused_until, Some(at(1060)));
        assert!(state.is_limited_response(429, at(1000)));
    }

    #[test]
    fn a_later_shorter_pause_does_not_shorten_an_earlier_one() {
        let mut state = RateLimitState::default();
        state.observe(429, &headers(&[("retry-after", "120")]), at(1000));
        state.observe(429, &headers(&[("retry-after", "5")]), at(1001));
        assert_eq!(state.paused_until, Some(at(1120)));
    }

    #[test]
    fn garbage_headers_are_ignored() {
        let mut state = RateLimitState::default();
        state.observe(200, &budget("lots", "soon"), at(1000));
        assert_eq!(state.remaining, None);
        assert_eq!(state.admit(RequestKind::Read, 50, at(1000)), Admission::Go);
    }

    #[test]
    fn gates_keep_scopes_apart() {
        let gates = RateGates::default();
        gates.observe(
            RateScope::Installation(1),
            403,
            &budget("0", "2000"),
            at(1000),
        );
        assert_eq!(
            gates.admit(RateScope::Installation(1), RequestKind::Read, 0, at(1000)),
            Admission::WaitUntil(at(2000))
        );
        assert_eq!(
            gates.admit(RateScope::Installation(2), RequestKind::Read, 0, at(1000)),
            Admission::Go
        );
        assert_eq!(gates.snapshot().len(), 1);
    }
}
