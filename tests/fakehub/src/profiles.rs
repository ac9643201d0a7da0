//! Named fault profiles: GitHub's failure modes at the rates a busy
//! installation meets them, in GitHub's own shapes. A profile is a list of
//! rules that can say what a plain [`FaultRule`](crate::FaultRule) cannot:
//! "every write" (any method but GET) and "every Nth request". Profiles
//! compose (their rules add up) and draw from the hub's seeded RNG, so a
//! run under one seed makes the same decisions for the same requests.

use rand::Rng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::Handle;
use crate::faults::FaultKind;

/// Which traffic a profile rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Every REST request.
    Requests,
    /// REST requests that change something (POST, PATCH, PUT, DELETE).
    Writes,
    /// Webhook deliveries.
    Webhooks,
}

/// One rule of a profile.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileRule {
    pub target: Target,
    /// The faults it injects, in turn: the first firing injects the first,
    /// the next the second, and so on round.
    pub kinds: Vec<FaultKind>,
    /// Chance per matching request (absent: always).
    pub probability: Option<f64>,
    /// Fires on every `every`-th matching request only (absent: on each).
    pub every: Option<u32>,
    /// Matching requests seen so far.
    #[serde(skip)]
    seen: u64,
    /// Times fired so far.
    #[serde(skip)]
    fired: u64,
}

impl ProfileRule {
    fn new(target: Target, kinds: Vec<FaultKind>) -> ProfileRule {
        ProfileRule {
            target,
            kinds,
            probability: None,
            every: None,
            seen: 0,
            fired: 0,
        }
    }

    fn chance(self, probability: f64) -> ProfileRule {
        ProfileRule {
            probability: Some(probability),
            ..self
        }
    }

    fn every(self, n: u32) -> ProfileRule {
        ProfileRule {
            every: Some(n),
            ..self
        }
    }

    pub(crate) fn matches_request(&self, method: &str, _route: &str) -> bool {
        match self.target {
            Target::Requests => true,
            Target::Writes => !method.eq_ignore_ascii_case("GET"),
            Target::Webhooks => false,
        }
    }

    pub(crate) fn matches_webhook(&self) -> bool {
        self.target == Target::Webhooks
    }

    /// Counts one matching request and says which fault, if any, fires.
    pub(crate) fn fire(&mut self, rng: &mut StdRng) -> Option<FaultKind> {
        self.seen += 1;
        if let Some(every) = self.every
            && !self.seen.is_multiple_of(u64::from(every.max(1)))
        {
            return None;
        }
        if let Some(p) = self.probability
            && !rng.random_bool(p.clamp(0.0, 1.0))
        {
            return None;
        }
        let index = usize::try_from(self.fired).unwrap_or(0) % self.kinds.len().max(1);
        self.fired += 1;
        self.kinds.get(index).cloned()
    }
}

/// How long the rate-limit profiles close a window: short, so that a test
/// waits seconds rather than GitHub's minutes, yet long enough that a
/// client ignoring it is caught.
const RETRY_AFTER_SECONDS: u64 = 3;
const PRIMARY_RESET_SECONDS: u64 = 4;

/// The profiles by name, in the order `combined` stacks them.
pub const PROFILES: [&str; 6] = [
    "write_errors",
    "ambiguous_writes",
    "secondary_rate_limits",
    "primary_exhaustion",
    "webhook_loss",
    "latency_spikes",
];

/// The rules of the profile `name` (`combined` is all of [`PROFILES`]);
/// `None` for an unknown name.
pub fn profile(name: &str) -> Option<Vec<ProfileRule>> {
    use FaultKind::*;
    let rules = match name {
        // 5% of writes answered 502 without being applied.
        "write_errors" => {
            vec![ProfileRule::new(Target::Writes, vec![Status { status: 502 }]).chance(0.05)]
        }
        // 1% of writes applied, then answered 502, dropped, or left
        // hanging until the connection is cut.
        "ambiguous_writes" => vec![
            ProfileRule::new(
                Target::Writes,
                vec![
                    AmbiguousWrite { drop: false },
                    AmbiguousWrite { drop: true },
                    AmbiguousHang { ms: 2000 },
                ],
            )
            .chance(0.01),
        ],
        // Every 50th request refused by a secondary limit, 403 and 429 in
        // turn, each with `retry-after`.
        "secondary_rate_limits" => vec![
            ProfileRule::new(
                Target::Requests,
                vec![
                    SecondaryRateLimit {
                        retry_after: RETRY_AFTER_SECONDS,
                    },
                    TooManyRequests {
                        retry_after: RETRY_AFTER_SECONDS,
                    },
                ],
            )
            .every(50),
        ],
        // Every 300th request finds the caller's primary limit used up
        // until a reset a few seconds away.
        "primary_exhaustion" => vec![
            ProfileRule::new(
                Target::Requests,
                vec![PrimaryExhausted {
                    reset_seconds: PRIMARY_RESET_SECONDS,
                }],
            )
            .every(300),
        ],
        // 10% of deliveries never sent (failed, for redelivery), 5% sent twice.
        "webhook_loss" => vec![
            ProfileRule::new(Target::Webhooks, vec![WebhookDrop]).chance(0.10),
            ProfileRule::new(Target::Webhooks, vec![WebhookDuplicate]).chance(0.05),
        ],
        // 2% of requests answered 1.5 s late.
        "latency_spikes" => {
            vec![ProfileRule::new(Target::Requests, vec![Latency { ms: 1500 }]).chance(0.02)]
        }
        "combined" => return compose(&PROFILES),
        _ => return None,
    };
    Some(rules)
}

/// The rules of several profiles together; `None` if a name is unknown.
pub fn compose<S: AsRef<str>>(names: &[S]) -> Option<Vec<ProfileRule>> {
    let mut rules = Vec::new();
    for name in names {
        rules.extend(profile(name.as_ref())?);
    }
    Some(rules)
}

/// A profile name fakehub does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown fault profile {0:?}; known: {known}, combined", known = PROFILES.join(", "))]
pub struct UnknownProfile(pub String);

impl Handle {
    /// Puts the named profiles in force (replacing earlier ones; the plain
    /// rules of [`Handle::set_faults`] stay). `[]` ends them.
    pub fn set_fault_profiles(&self, names: &[&str]) -> Result<(), UnknownProfile> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        set_profiles(&self.shared, names)
    }
}

pub(crate) fn set_profiles(
    shared: &crate::Shared,
    names: Vec<String>,
) -> Result<(), UnknownProfile> {
    let mut rules = Vec::new();
    for name in &names {
        rules.extend(profile(name).ok_or_else(|| UnknownProfile(name.clone()))?);
    }
    shared.faults().set_profiles(names, rules);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::faults::Faults;

    fn faults_with(names: &[&str], seed: u64) -> Faults {
        let mut faults = Faults::new(seed);
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let rules = compose(&names).unwrap();
        faults.set_profiles(names, rules);
        faults
    }

    #[test]
    fn secondary_limits_fire_on_every_fiftieth_request_as_403_then_429() {
        let mut faults = faults_with(&["secondary_rate_limits"], 1);
        let fired: Vec<(usize, FaultKind)> = (1..=150)
            .filter_map(|i| faults.for_request("GET", "/x").pop().map(|k| (i, k)))
            .collect();
        assert_eq!(
            fired,
            vec![
                (50, FaultKind::SecondaryRateLimit { retry_after: 3 }),
                (100, FaultKind::TooManyRequests { retry_after: 3 }),
                (150, FaultKind::SecondaryRateLimit { retry_after: 3 }),
            ]
        );
    }

    #[test]
    fn write_errors_touch_writes_only_at_about_their_rate() {
        let mut faults = faults_with(&["write_errors"], 7);
        assert!((0..1000).all(|_| faults.for_request("GET", "/x").is_empty()));
        let fired = (0..4000)
            .filter(|_| !faults.for_request("POST", "/x").is_empty())
            .count();
        assert!((120..280).contains(&fired), "about 5% of 4000: {fired}");
    }

    #[test]
    fn webhook_loss_drops_and_duplicates_deliveries_not_requests() {
        let mut faults = faults_with(&["webhook_loss"], 3);
        assert!((0..500).all(|_| faults.for_request("POST", "/x").is_empty()));
        let mut drops = 0;
        let mut duplicates = 0;
        for _ in 0..2000 {
            for kind in faults.for_webhook("issues") {
                match kind {
                    FaultKind::WebhookDrop => drops += 1,
                    FaultKind::WebhookDuplicate => duplicates += 1,
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert!((140..260).contains(&drops), "about 10%: {drops}");
        assert!((60..140).contains(&duplicates), "about 5%: {duplicates}");
    }

    #[test]
    fn combined_is_every_profile_and_one_seed_decides_the_same_way() {
        let decide = |seed| {
            let mut faults = faults_with(&["combined"], seed);
            (0..3000)
                .map(|i| faults.for_request(if i % 3 == 0 { "POST" } else { "GET" }, "/x"))
                .collect::<Vec<_>>()
        };
        assert_eq!(decide(11), decide(11));
        assert_ne!(decide(11), decide(12));
        let all: Vec<FaultKind> = decide(11).into_iter().flatten().collect();
        for wanted in [
            |k: &FaultKind| matches!(k, FaultKind::Status { status: 502 }),
            |k: &FaultKind| matches!(k, FaultKind::SecondaryRateLimit { .. }),
            |k: &FaultKind| matches!(k, FaultKind::TooManyRequests { .. }),
            |k: &FaultKind| matches!(k, FaultKind::PrimaryExhausted { .. }),
            |k: &FaultKind| matches!(k, FaultKind::Latency { .. }),
        ] {
            assert!(all.iter().any(wanted), "{all:?}");
        }
        assert_eq!(
            compose(&["combined"]).unwrap().len(),
            compose(&PROFILES).unwrap().len()
        );
        assert!(profile("nope").is_none());
    }
}
