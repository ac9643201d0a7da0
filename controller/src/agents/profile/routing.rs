//! Role routing (SPEC §13): which profile runs `plan`, `implement`, `fix`,
//! `update_epic`, and `review` by review round (e.g. round 1 on one vendor,
//! rounds 2–5 on another, 6+ on a third).
//!
//! Review round ranges are checked once, when the catalog is built from the
//! config: they start at round 1, neither overlap nor leave a gap, and reach
//! the review-round cap, so every round that can happen has exactly one
//! profile. A role left unset is legal (the config check warns); a run then
//! cannot enter that phase and the launch says so.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::LaunchProfile;
use crate::machine::AgentPhase;

/// `"1"`, `"2-5"` or `"6+"`: an inclusive range of review rounds counted
/// from 1; `end == None` means "and beyond".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundRange {
    pub start: u32,
    pub end: Option<u32>,
}

impl RoundRange {
    pub fn contains(&self, round: u32) -> bool {
        round >= self.start && self.end.is_none_or(|end| round <= end)
    }
}

impl fmt::Display for RoundRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            None => write!(f, "{}+", self.start),
            Some(end) if end == self.start => write!(f, "{end}"),
            Some(end) => write!(f, "{}-{end}", self.start),
        }
    }
}

impl FromStr for RoundRange {
    type Err = RoutingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || RoutingError::BadRange(text.to_owned());
        let number = |s: &str| -> Result<u32, RoutingError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            match s.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad()),
            }
        };
        let trimmed = text.trim();
        if let Some(start) = trimmed.strip_suffix('+') {
            return Ok(Self {
                start: number(start)?,
                end: None,
            });
        }
        if let Some((start, end)) = trimmed.split_once('-') {
            let (start, end) = (number(start)?, number(end)?);
            if end < start {
                return Err(bad());
            }
            return Ok(Self {
                start,
                end: Some(end),
            });
        }
        let only = number(trimmed)?;
        Ok(Self {
            start: only,
            end: Some(only),
        })
    }
}

impl<'de> Deserialize<'de> for RoundRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for RoundRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The reviewer as the config file names it: one profile for every round,
/// or one per round range.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ReviewRole {
    Always(String),
    ByRound(Vec<ReviewRoute>),
}

/// One entry of a by-round reviewer list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRoute {
    pub rounds: RoundRange,
    pub profile: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error("review round range `{0}` is not of the form `N`, `N-M` or `N+` with N ≥ 1")]
    BadRange(String),
    #[error("review round ranges must start at round 1; the first starts at {0}")]
    DoesNotStartAtOne(u32),
    #[error("review rounds {0} and {1} overlap")]
    Overlap(String, String),
    #[error("review round ranges leave rounds {0} uncovered")]
    Gap(String),
    #[error("no review profile is configured")]
    NoReviewProfile,
    #[error("role `{}`: profile `{profile}` is not defined", .role.role_name())]
    UnknownProfile { role: AgentPhase, profile: String },
}

/// Which profile serves each role; `None` for a role left unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRouting {
    /// The planner (SPEC §4 PLAN), set with [`RoleRouting::with_plan`].
    plan: Option<String>,
    implement: Option<String>,
    fix: Option<String>,
    update_epic: Option<String>,
    /// Sorted by start, contiguous from round 1 up to the round cap; empty
    /// when no reviewer is configured.
    review: Vec<(RoundRange, String)>,
}

impl RoleRouting {
    /// Checks the review ranges against `max_round` (the review-round cap).
    pub fn new(
        implement: Option<String>,
        fix: Option<String>,
        update_epic: Option<String>,
        review: Option<&ReviewRole>,
        max_round: u32,
    ) -> Result<Self, RoutingError> {
        let review = match review {
            None => Vec::new(),
            Some(ReviewRole::Always(profile)) => vec![(
                RoundRange {
                    start: 1,
                    end: None,
                },
                profile.clone(),
            )],
            Some(ReviewRole::ByRound(routes)) => check_ranges(routes, max_round)?,
        };
        Ok(Self {
            plan: None,
            implement,
            fix,
            update_epic,
            review,
        })
    }

    /// The same routing with `plan` as the planner's profile.
    pub fn with_plan(mut self, plan: Option<String>) -> Self {
        self.plan = plan;
        self
    }

    /// The profile name for `role`; `round` matters only for reviews (round
    /// 0 is treated as round 1, a round past the cap as the last range).
    pub fn profile_for(&self, role: AgentPhase, round: u32) -> Option<&str> {
        match role {
            AgentPhase::Plan => self.plan.as_deref(),
            AgentPhase::Implement => self.implement.as_deref(),
            AgentPhase::Fix => self.fix.as_deref(),
            AgentPhase::UpdateEpic => self.update_epic.as_deref(),
            AgentPhase::Review => {
                let round = round.max(1);
                self.review
                    .iter()
                    .find(|(range, _)| range.contains(round))
                    .or(self.review.last())
                    .map(|(_, profile)| profile.as_str())
            }
        }
    }

    /// Every `(role, profile)` pair, for checking names against the profiles.
    fn references(&self) -> impl Iterator<Item = (AgentPhase, &str)> {
        [
            (AgentPhase::Plan, self.plan.as_deref()),
            (AgentPhase::Implement, self.implement.as_deref()),
            (AgentPhase::Fix, self.fix.as_deref()),
            (AgentPhase::UpdateEpic, self.update_epic.as_deref()),
        ]
        .into_iter()
        .filter_map(|(role, profile)| profile.map(|p| (role, p)))
        .chain(
            self.review
                .iter()
                .map(|(_, p)| (AgentPhase::Review, p.as_str())),
        )
    }
}

fn check_ranges(
    routes: &[ReviewRoute],
    max_round: u32,
) -> Result<Vec<(RoundRange, String)>, RoutingError> {
    let mut ranges: Vec<(RoundRange, String)> = routes
        .iter()
        .map(|route| (route.rounds, route.profile.clone()))
        .collect();
    ranges.sort_by_key(|(range, _)| range.start);
    let first = ranges.first().ok_or(RoutingError::NoReviewProfile)?.0;
    if first.start != 1 {
        return Err(RoutingError::DoesNotStartAtOne(first.start));
    }
    for pair in ranges.windows(2) {
        let (a, b) = (pair[0].0, pair[1].0);
        match a.end {
            None => return Err(RoutingError::Overlap(a.to_string(), b.to_string())),
            Some(end) if b.start <= end => {
                return Err(RoutingError::Overlap(a.to_string(), b.to_string()));
            }
            Some(end) if b.start > end + 1 => {
                let gap = RoundRange {
                    start: end + 1,
                    end: Some(b.start - 1),
                };
                return Err(RoutingError::Gap(gap.to_string()));
            }
            Some(_) => {}
        }
    }
    if let Some((last, _)) = ranges.last()
        && let Some(end) = last.end
        && end < max_round
    {
        let gap = RoundRange {
            start: end + 1,
            end: Some(max_round),
        };
        return Err(RoutingError::Gap(gap.to_string()));
    }
    Ok(ranges)
}

/// The checked profiles together with the routing that refers to them.
#[derive(Debug, Clone)]
pub struct AgentCatalog {
    profiles: BTreeMap<String, LaunchProfile>,
    routing: RoleRouting,
}

impl AgentCatalog {
    /// Refuses routing that names a profile that does not exist.
    pub fn new(
        profiles: BTreeMap<String, LaunchProfile>,
        routing: RoleRouting,
    ) -> Result<Self, RoutingError> {
        if let Some((role, profile)) = routing
            .references()
            .find(|(_, p)| !profiles.contains_key(*p))
        {
            return Err(RoutingError::UnknownProfile {
                role,
                profile: profile.to_owned(),
            });
        }
        Ok(Self { profiles, routing })
    }

    /// The profile that runs `role` in review round `round`, or `None` when
    /// the role is not configured.
    pub fn profile_for(&self, role: AgentPhase, round: u32) -> Option<&LaunchProfile> {
        self.profiles.get(self.routing.profile_for(role, round)?)
    }

    pub fn routing(&self) -> &RoleRouting {
        &self.routing
    }

    pub fn profiles(&self) -> &BTreeMap<String, LaunchProfile> {
        &self.profiles
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::agents::profile::ProfileSpec;

    fn review(pairs: &[(&str, &str)]) -> ReviewRole {
        ReviewRole::ByRound(
            pairs
                .iter()
                .map(|(r, p)| ReviewRoute {
                    rounds: r.parse().expect("valid range"),
                    profile: (*p).to_owned(),
                })
                .collect(),
        )
    }

    fn by_rounds(pairs: &[(&str, &str)]) -> Result<RoleRouting, RoutingError> {
        RoleRouting::new(
            Some("impl".into()),
            Some("fixer".into()),
            Some("epic".into()),
            Some(&review(pairs)),
            8,
        )
    }

    #[test]
    fn round_ranges_parse_single_closed_and_open_forms() {
        let parsed = |t: &str| t.parse::<RoundRange>();
        assert_eq!(
            parsed("1"),
            Ok(RoundRange {
                start: 1,
                end: Some(1)
            })
        );
        assert_eq!(
            parsed(" 2-5 "),
            Ok(RoundRange {
                start: 2,
                end: Some(5)
            })
        );
        assert_eq!(
            parsed("6+"),
            Ok(RoundRange {
                start: 6,
                end: None
            })
        );
        for (text, shown) in [("2-5", "2-5"), ("6+", "6+"), ("3", "3"), ("4-4", "4")] {
            assert_eq!(parsed(text).unwrap().to_string(), shown);
        }
        for bad in [
            "", "0", "0+", "5-2", "a", "x", "1-", "-3", "+", "1+2", "2--3",
        ] {
            assert!(parsed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn round_ranges_round_trip_through_serde_and_refuse_bad_text() {
        let range: RoundRange = serde_json::from_str("\"2-5\"").unwrap();
        assert_eq!(serde_json::to_string(&range).unwrap(), "\"2-5\"");
        assert!(serde_json::from_str::<RoundRange>("\"5-2\"").is_err());
    }

    #[test]
    fn reviews_route_by_round_in_any_declared_order() {
        let r = by_rounds(&[("6+", "c"), ("1", "a"), ("2-5", "b")]).unwrap();
        let picks: Vec<_> = [0, 1, 2, 5, 6, 600]
            .into_iter()
            .map(|round| r.profile_for(AgentPhase::Review, round))
            .collect();
        assert_eq!(
            picks,
            [
                Some("a"),
                Some("a"),
                Some("b"),
                Some("b"),
                Some("c"),
                Some("c")
            ]
        );
        assert_eq!(r.profile_for(AgentPhase::Implement, 3), Some("impl"));
        assert_eq!(r.profile_for(AgentPhase::Fix, 3), Some("fixer"));
        assert_eq!(r.profile_for(AgentPhase::UpdateEpic, 3), Some("epic"));
    }

    #[test]
    fn a_single_reviewer_serves_every_round_and_unset_roles_have_none() {
        let solo = ReviewRole::Always("solo".into());
        let r = RoleRouting::new(None, None, None, Some(&solo), 8).unwrap();
        assert_eq!(r.profile_for(AgentPhase::Review, 7), Some("solo"));
        assert_eq!(r.profile_for(AgentPhase::Implement, 1), None);
        let none = RoleRouting::new(None, None, None, None, 8).unwrap();
        assert_eq!(none.profile_for(AgentPhase::Review, 1), None);
    }

    #[test]
    fn overlapping_gapped_late_or_short_ranges_are_refused() {
        assert_eq!(
            by_rounds(&[("1-3", "a"), ("3+", "b")]),
            Err(RoutingError::Overlap("1-3".into(), "3+".into()))
        );
        assert_eq!(
            by_rounds(&[("2+", "a"), ("5", "b")]),
            Err(RoutingError::DoesNotStartAtOne(2))
        );
        assert_eq!(
            by_rounds(&[("1", "a"), ("4+", "b")]),
            Err(RoutingError::Gap("2-3".into()))
        );
        assert_eq!(
            by_rounds(&[("1", "a"), ("2-5", "b")]),
            Err(RoutingError::Gap("6-8".into()))
        );
        assert_eq!(by_rounds(&[]), Err(RoutingError::NoReviewProfile));
    }

    #[test]
    fn a_closed_last_range_reaching_the_round_cap_is_enough() {
        assert!(by_rounds(&[("1-8", "a")]).is_ok());
        assert!(by_rounds(&[("1", "a"), ("2-5", "b"), ("6+", "c")]).is_ok());
    }

    #[test]
    fn catalog_refuses_routing_to_an_undefined_profile() {
        let spec = ProfileSpec {
            command: vec!["agent".into()],
            idle_timeout_seconds: 1,
            max_runtime_seconds: 1,
            ..ProfileSpec::default()
        };
        let profiles: BTreeMap<_, _> = ["impl", "fixer", "epic", "a"]
            .into_iter()
            .map(|n| {
                (
                    n.to_owned(),
                    LaunchProfile::from_spec(n, spec.clone()).unwrap(),
                )
            })
            .collect();
        let ok = by_rounds(&[("1+", "a")]).unwrap();
        let catalog = AgentCatalog::new(profiles.clone(), ok).unwrap();
        assert_eq!(
            catalog.profile_for(AgentPhase::Review, 4).unwrap().name,
            "a"
        );

        let missing = by_rounds(&[("1", "a"), ("2+", "ghost")]).unwrap();
        assert_eq!(
            AgentCatalog::new(profiles, missing).err(),
            Some(RoutingError::UnknownProfile {
                role: AgentPhase::Review,
                profile: "ghost".into()
            })
        );
    }
}
