//! Injected faults: latency, error statuses, rate limits, ambiguous writes
//! and webhook drop/duplicate/delay. Decisions come from one seeded RNG so a
//! run under `--seed N` is reproducible.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FaultKind {
    /// Sleep before answering.
    Latency { ms: u64 },
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
}

fn default_retry_after() -> u64 {
    60
}

impl FaultKind {
    fn is_webhook(&self) -> bool {
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
    rng: StdRng,
}

impl Faults {
    pub fn new(seed: u64) -> Self {
        Faults {
            rules: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub fn set(&mut self, rules: Vec<FaultRule>) {
        self.rules = rules;
    }

    pub fn rules(&self) -> &[FaultRule] {
        &self.rules
    }

    /// Faults firing for an HTTP request.
    pub fn for_request(&mut self, method: &str, route: &str) -> Vec<FaultKind> {
        self.fire(|rule| {
            !rule.kind.is_webhook()
                && rule
                    .method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                && rule.route.as_deref().is_none_or(|r| r == route)
        })
    }

    /// Faults firing for one webhook delivery of `event`.
    pub fn for_webhook(&mut self, event: &str) -> Vec<FaultKind> {
        self.fire(|rule| rule.kind.is_webhook() && rule.route.as_deref().is_none_or(|r| r == event))
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
    }
}
