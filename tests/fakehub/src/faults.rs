//! Injected faults: latency, error statuses, rate limits, ambiguous writes,
//! requests held at a named gate until the test releases them, and webhook
//! drop/duplicate/delay. Decisions come from one seeded RNG so a run under
//! `--seed N` is reproducible.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::faults_windows::ClosedWindows;
use crate::profiles::ProfileRule;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FaultKind {
    /// Sleep before answering.
    Latency { ms: u64 },
    /// Wait at the gate `gate` until the control API releases it; the
    /// request is then served with the world as it is at that moment.
    /// Unlike latency this does not depend on timing: a test knows the
    /// request is held ([`Gates::waiting`]) and chooses when it goes on.
    Hold { gate: String },
    /// Answer with this status (500, 502, 503…) without running the handler.
    Status { status: u16 },
    /// 403 with `retry-after`, GitHub's secondary rate limit.
    SecondaryRateLimit {
        #[serde(default = "default_retry_after")]
        retry_after: u64,
    },
    /// Use up the caller's primary rate limit before answering.
    ExhaustPrimary,
    /// Apply the write, then answer 502 (`drop: false`) or drop the connection.
    AmbiguousWrite {
        #[serde(default)]
        drop: bool,
    },
    /// Record the delivery as failed without sending it.
    WebhookDrop,
    /// Send the same delivery (same GUID) twice.
    WebhookDuplicate,
    /// Send the delivery late.
    WebhookDelay { ms: u64 },
    /// `429 Too Many Requests` with `retry-after`: GitHub's other answer
    /// to a secondary rate limit.
    TooManyRequests {
        #[serde(default = "default_retry_after")]
        retry_after: u64,
    },
    /// The caller's primary limit is used up until `reset_seconds` from
    /// now (`x-ratelimit-remaining: 0`, `x-ratelimit-reset` then).
    PrimaryExhausted { reset_seconds: u64 },
    /// Apply the write, keep the answer back `ms`, then drop the
    /// connection: the client times out on a write that landed.
    AmbiguousHang { ms: u64 },
}

fn default_retry_after() -> u64 {
    60
}

impl FaultKind {
    pub(crate) fn is_webhook(&self) -> bool {
        matches!(
            self,
            FaultKind::WebhookDrop | FaultKind::WebhookDuplicate | FaultKind::WebhookDelay { .. }
        )
    }
}

/// One rule: which requests (or webhook events) it matches and how often.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultRule {
    /// HTTP method to match; absent matches all.
    #[serde(default)]
    pub method: Option<String>,
    /// Route template (`/repos/{owner}/{repo}/issues`) or, for webhook
    /// faults, the event name; absent matches all.
    #[serde(default)]
    pub route: Option<String>,
    #[serde(flatten)]
    pub kind: FaultKind,
    /// Chance per match (default 1.0).
    #[serde(default)]
    pub probability: Option<f64>,
    /// How many times the rule may still fire; absent is unlimited.
    #[serde(default)]
    pub count: Option<u32>,
}

impl FaultRule {
    /// `kind` on every `method` request to the route template `route`
    /// (`/repos/{owner}/{repo}/issues/{number}`), without limit.
    pub fn on(method: &str, route: &str, kind: FaultKind) -> FaultRule {
        FaultRule {
            method: Some(method.to_owned()),
            route: Some(route.to_owned()),
            kind,
            probability: None,
            count: None,
        }
    }

    /// `kind` (a webhook fault) on every delivery of the event `event`.
    pub fn on_webhook(event: &str, kind: FaultKind) -> FaultRule {
        FaultRule {
            method: None,
            route: Some(event.to_owned()),
            kind,
            probability: None,
            count: None,
        }
    }

    /// Every `method` request to `route` waits at `gate` until released
    /// (see [`Gates::release`]); requests arriving after a release wait for
    /// the next one, until the rule is removed.
    pub fn hold(method: &str, route: &str, gate: &str) -> FaultRule {
        FaultRule::on(
            method,
            route,
            FaultKind::Hold {
                gate: gate.to_owned(),
            },
        )
    }

    /// Every webhook delivery, of any event, is recorded as failed and
    /// never sent.
    pub fn drop_all_webhooks() -> FaultRule {
        FaultRule {
            method: None,
            route: None,
            kind: FaultKind::WebhookDrop,
            probability: None,
            count: None,
        }
    }

    /// The rule fires `count` times, then retires.
    pub fn times(self, count: u32) -> FaultRule {
        FaultRule {
            count: Some(count),
            ..self
        }
    }

    /// The rule fires on a match with chance `probability` (0.0 to 1.0).
    pub fn with_probability(self, probability: f64) -> FaultRule {
        FaultRule {
            probability: Some(probability),
            ..self
        }
    }
}

/// The active rules and the seeded RNG that decides probabilistic ones.
#[derive(Debug)]
pub struct Faults {
    rules: Vec<FaultRule>,
    /// Rules of the named profiles in force (see [`crate::profiles`]).
    profile_rules: Vec<ProfileRule>,
    /// The names of those profiles, as set.
    profile_names: Vec<String>,
    rng: StdRng,
    /// The rate-limit windows the faults closed, and the requests sent
    /// inside them.
    pub windows: ClosedWindows,
}

impl Faults {
    pub fn new(seed: u64) -> Self {
        Faults {
            rules: Vec::new(),
            profile_rules: Vec::new(),
            profile_names: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
            windows: ClosedWindows::default(),
        }
    }

    /// Replaces the profile rules (the plain rules stay).
    pub fn set_profiles(&mut self, names: Vec<String>, rules: Vec<ProfileRule>) {
        self.profile_names = names;
        self.profile_rules = rules;
    }

    /// The names of the profiles in force.
    pub fn profiles(&self) -> &[String] {
        &self.profile_names
    }

    pub fn set(&mut self, rules: Vec<FaultRule>) {
        self.rules = rules;
    }

    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }

    /// Faults firing for an HTTP request.
    pub fn for_request(&mut self, method: &str, route: &str) -> Vec<FaultKind> {
        let mut fired = self.fire_profiles(|rule| rule.matches_request(method, route));
        fired.extend(self.fire(|rule| {
            !rule.kind.is_webhook()
                && rule
                    .method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                && rule.route.as_deref().is_none_or(|r| r == route)
        }));
        fired
    }

    /// Faults firing for one webhook delivery of `event`.
    pub fn for_webhook(&mut self, event: &str) -> Vec<FaultKind> {
        let mut fired = self.fire_profiles(ProfileRule::matches_webhook);
        fired.extend(self.fire(|rule| {
            rule.kind.is_webhook() && rule.route.as_deref().is_none_or(|r| r == event)
        }));
        fired
    }

    fn fire_profiles(&mut self, matches: impl Fn(&ProfileRule) -> bool) -> Vec<FaultKind> {
        let rng = &mut self.rng;
        self.profile_rules
            .iter_mut()
            .filter(|rule| matches(rule))
            .filter_map(|rule| rule.fire(rng))
            .collect()
    }

    fn fire(&mut self, matches: impl Fn(&FaultRule) -> bool) -> Vec<FaultKind> {
        let mut fired = Vec::new();
        for rule in &mut self.rules {
            if !matches(rule) || rule.count == Some(0) {
                continue;
            }
            let p = rule.probability.unwrap_or(1.0);
            if p < 1.0 && !self.rng.random_bool(p.clamp(0.0, 1.0)) {
                continue;
            }
            if let Some(c) = rule.count.as_mut() {
                *c -= 1;
            }
            fired.push(rule.kind.clone());
        }
        self.rules.retain(|r| r.count != Some(0));
        fired
    }
}

/// The gates that [`FaultKind::Hold`] requests wait at, by name.
#[derive(Debug, Default)]
pub struct Gates {
    gates: Mutex<HashMap<String, Gate>>,
}

#[derive(Debug)]
struct Gate {
    /// Requests waiting now; a release counts its requests out at once, so
    /// a test that releases and then waits for the next held request never
    /// mistakes one on its way out for it.
    waiting: usize,
    /// Bumped by every release; a waiter goes on at the first bump after
    /// it arrived.
    releases: watch::Sender<u64>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            waiting: 0,
            releases: watch::Sender::new(0),
        }
    }
}

/// Counts a waiter out if its wait ends before a release: the client gave
/// up on the request and the server dropped it.
struct Waiting<'a> {
    gates: &'a Gates,
    name: &'a str,
    /// The release count when the request arrived.
    arrived: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(gate) = self.gates.lock().get_mut(self.name)
            && *gate.releases.borrow() == self.arrived
        {
            gate.waiting = gate.waiting.saturating_sub(1);
        }
    }
}

impl Gates {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Gate>> {
        self.gates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits at `name` until the next [`Self::release`] of it.
    pub async fn wait(&self, name: &str) {
        let (mut released, arrived) = {
            let mut gates = self.lock();
            let gate = gates.entry(name.to_owned()).or_insert_with(Gate::new);
            gate.waiting += 1;
            let released = gate.releases.subscribe();
            let arrived = *released.borrow();
            (released, arrived)
        };
        let _counted = Waiting {
            gates: self,
            name,
            arrived,
        };
        // The sender lives in the map, which never drops a gate, so this
        // returns only on a release.
        let _ = released.changed().await;
    }

    /// How many requests wait at `name` now.
    pub fn waiting(&self, name: &str) -> usize {
        self.lock().get(name).map_or(0, |gate| gate.waiting)
    }

    /// Lets every request waiting at `name` go on and returns how many
    /// there were; later requests wait for the next release.
    pub fn release(&self, name: &str) -> usize {
        let mut gates = self.lock();
        let gate = gates.entry(name.to_owned()).or_insert_with(Gate::new);
        gate.releases.send_modify(|count| *count += 1);
        std::mem::take(&mut gate.waiting)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rule(json: &str) -> FaultRule {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn counted_rule_fires_exactly_count_times_on_its_route_only() {
        let mut f = Faults::new(1);
        f.set(vec![rule(
            r#"{"type":"status","status":502,"route":"/user","count":2}"#,
        )]);
        assert!(f.for_request("GET", "/rate_limit").is_empty());
        assert_eq!(
            f.for_request("GET", "/user"),
            vec![FaultKind::Status { status: 502 }]
        );
        assert_eq!(f.for_request("GET", "/user").len(), 1);
        assert!(f.for_request("GET", "/user").is_empty());
        assert!(f.rules().is_empty());
    }

    #[test]
    fn same_seed_gives_the_same_probabilistic_decisions() {
        let decide = |seed| {
            let mut f = Faults::new(seed);
            f.set(vec![rule(
                r#"{"type":"status","status":503,"probability":0.5}"#,
            )]);
            (0..64)
                .map(|_| f.for_request("GET", "/x").len())
                .collect::<Vec<_>>()
        };
        assert_eq!(decide(7), decide(7));
        assert_ne!(decide(7), decide(8));
        let fired: usize = decide(7).iter().sum();
        assert!(
            (10..54).contains(&fired),
            "about half of 64 should fire, got {fired}"
        );
    }

    #[test]
    fn webhook_rules_do_not_fire_for_http_requests() {
        let mut f = Faults::new(1);
        f.set(vec![rule(r#"{"type":"webhook_drop","route":"issues"}"#)]);
        assert!(f.for_request("POST", "issues").is_empty());
        assert_eq!(f.for_webhook("issues"), vec![FaultKind::WebhookDrop]);
        assert!(f.for_webhook("push").is_empty());
    }

    #[test]
    fn constructed_rules_match_what_their_names_say() {
        let mut f = Faults::new(1);
        f.set(vec![
            FaultRule::on("GET", "/user", FaultKind::Status { status: 503 }).times(1),
            FaultRule::drop_all_webhooks(),
        ]);
        assert!(f.for_request("POST", "/user").is_empty());
        assert_eq!(
            f.for_request("get", "/user"),
            vec![FaultKind::Status { status: 503 }]
        );
        assert!(f.for_request("GET", "/user").is_empty());
        assert_eq!(f.for_webhook("push"), vec![FaultKind::WebhookDrop]);
        assert_eq!(f.for_webhook("issues"), vec![FaultKind::WebhookDrop]);
        let mut one = Faults::new(1);
        one.set(vec![FaultRule::on_webhook(
            "issues",
            FaultKind::WebhookDuplicate,
        )]);
        assert!(one.for_webhook("push").is_empty());
        assert_eq!(one.for_webhook("issues"), vec![FaultKind::WebhookDuplicate]);
        let mut held = Faults::new(1);
        held.set(vec![FaultRule::hold("GET", "/user", "g")]);
        assert!(held.for_request("POST", "/user").is_empty());
        assert_eq!(
            held.for_request("GET", "/user"),
            vec![FaultKind::Hold {
                gate: "g".to_owned()
            }]
        );
    }

    #[tokio::test]
    async fn a_held_request_waits_until_released_and_later_ones_wait_again() {
        let gates = std::sync::Arc::new(Gates::default());
        let first = tokio::spawn({
            let gates = gates.clone();
            async move { gates.wait("read").await }
        });
        while gates.waiting("read") == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!first.is_finished(), "held until released");
        assert_eq!(gates.waiting("other"), 0);
        assert_eq!(gates.release("read"), 1);
        assert_eq!(
            gates.waiting("read"),
            0,
            "counted out by the release itself"
        );
        first.await.unwrap();
        assert_eq!(gates.waiting("read"), 0);

        let second = tokio::spawn({
            let gates = gates.clone();
            async move { gates.wait("read").await }
        });
        while gates.waiting("read") == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !second.is_finished(),
            "an earlier release does not let it pass"
        );
        second.abort();
        let _ = second.await;
        assert_eq!(gates.waiting("read"), 0, "a dropped waiter is counted out");
    }
}
