//! Role routing (SPEC §13): which profile runs `implement`, `fix`,
//! `update_epic`, and `review` by review round (e.g. round 1 on one vendor,
//! rounds 2–5 on another, 6+ on a third).
//!
//! Review round ranges are checked once at load time: they must start at
//! round 1, neither overlap nor leave a gap, and end with an open range
//! (`"N+"`), so every round has exactly one profile and lookup cannot fail.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::AgentProfile;

/// The agent phases a profile can serve.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Implement,
    Review,
    Fix,
    UpdateEpic,
}

impl Role {
    /// The config-file and journal spelling of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Implement => "implement",
            Self::Review => "review",
            Self::Fix => "fix",
            Self::UpdateEpic => "update_epic",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An inclusive range of review rounds; `end == None` means "and beyond".
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

    /// Parses `"1"`, `"2-5"` or `"6+"`; rounds count from 1.
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
        let text_trimmed = text.trim();
        let range = if let Some(start) = text_trimmed.strip_suffix('+') {
            Self {
                start: number(start)?,
                end: None,
            }
        } else if let Some((start, end)) = text_trimmed.split_once('-') {
            let (start, end) = (number(start)?, number(end)?);
            if end < start {
                return Err(bad());
            }
            Self {
                start,
                end: Some(end),
            }
        } else {
            let n = number(text_trimmed)?;
            Self {
                start: n,
                end: Some(n),
            }
        };
        Ok(range)
    }
}

/// How the config names the review profile(s), as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewRoutingSpec {
    /// One profile for every round.
    Single(String),
    /// `(rounds, profile)` pairs such as `("2-5", "codex")`, in any order.
    ByRounds(Vec<(String, String)>),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error("review round range `{0}` is not of the form `N`, `N-M` or `N+` with N ≥ 1")]
    BadRange(String),
    #[error("review round ranges must start at round 1; the first starts at {0}")]
    DoesNotStartAtOne(u32),
    #[error("review round ranges `{0}` and `{1}` overlap")]
    Overlap(String, String),
    #[error("review round ranges leave rounds {0} uncovered")]
    Gap(String),
    #[error("the last review round range `{0}` must be open-ended (`N+`)")]
    NotOpenEnded(String),
    #[error("no review profile is configured")]
    NoReviewProfile,
    #[error("role `{role}` names profile `{profile}`, which is not defined")]
    UnknownProfile { role: Role, profile: String },
}

/// Which profile serves each role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRouting {
    implement: String,
    fix: String,
    update_epic: String,
    /// Sorted by start, contiguous from round 1, last one open-ended.
    review: Vec<(RoundRange, String)>,
}

impl RoleRouting {
    pub fn new(
        implement: String,
        fix: String,
        update_epic: String,
        review: ReviewRoutingSpec,
    ) -> Result<Self, RoutingError> {
        let review = match review {
            ReviewRoutingSpec::Single(profile) => vec![(
                RoundRange {
                    start: 1,
                    end: None,
                },
                profile,
            )],
            ReviewRoutingSpec::ByRounds(pairs) => check_ranges(pairs)?,
        };
        Ok(Self {
            implement,
            fix,
            update_epic,
            review,
        })
    }

    /// The profile name for `role`; `round` matters only for reviews (round
    /// 0 is treated as round 1).
    pub fn profile_for(&self, role: Role, round: u32) -> &str {
        match role {
            Role::Implement => &self.implement,
            Role::Fix => &self.fix,
            Role::UpdateEpic => &self.update_epic,
            Role::Review => {
                let round = round.max(1);
                self.review
                    .iter()
                    .find(|(range, _)| range.contains(round))
                    // The ranges are contiguous from 1 and open-ended, so a
                    // miss is impossible; the last entry is the safe answer.
                    .or(self.review.last())
                    .map_or(self.implement.as_str(), |(_, p)| p.as_str())
            }
        }
    }

    /// Every `(role, profile)` pair, for checking names against the profiles.
    fn references(&self) -> impl Iterator<Item = (Role, &str)> {
        [
            (Role::Implement, self.implement.as_str()),
            (Role::Fix, self.fix.as_str()),
            (Role::UpdateEpic, self.update_epic.as_str()),
        ]
        .into_iter()
        .chain(self.review.iter().map(|(_, p)| (Role::Review, p.as_str())))
    }
}

fn check_ranges(pairs: Vec<(String, String)>) -> Result<Vec<(RoundRange, String)>, RoutingError> {
    let mut ranges = pairs
        .into_iter()
        .map(|(rounds, profile)| Ok((rounds.parse::<RoundRange>()?, profile)))
        .collect::<Result<Vec<_>, RoutingError>>()?;
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
        && last.end.is_some()
    {
        return Err(RoutingError::NotOpenEnded(last.to_string()));
    }
    Ok(ranges)
}

/// The checked profiles together with the routing that refers to them.
#[derive(Debug, Clone)]
pub struct AgentCatalog {
    profiles: BTreeMap<String, AgentProfile>,
    routing: RoleRouting,
}

impl AgentCatalog {
    /// Refuses routing that names a profile that does not exist.
    pub fn new(
        profiles: BTreeMap<String, AgentProfile>,
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

    /// The profile that runs `role` in review round `round`.
    pub fn profile_for(&self, role: Role, round: u32) -> Option<&AgentProfile> {
        self.profiles.get(self.routing.profile_for(role, round))
    }

    pub fn routing(&self) -> &RoleRouting {
        &self.routing
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::agents::profile::ProfileSpec;

    fn by_rounds(pairs: &[(&str, &str)]) -> Result<RoleRouting, RoutingError> {
        RoleRouting::new(
            "impl".into(),
            "fixer".into(),
            "epic".into(),
            ReviewRoutingSpec::ByRounds(
                pairs
                    .iter()
                    .map(|(r, p)| ((*r).to_owned(), (*p).to_owned()))
                    .collect(),
            ),
        )
    }

    #[test]
    fn round_ranges_parse_single_closed_and_open_forms() {
        assert_eq!(
            "1".parse(),
            Ok(RoundRange {
                start: 1,
                end: Some(1)
            })
        );
        assert_eq!(
            " 2-5 ".parse(),
            Ok(RoundRange {
                start: 2,
                end: Some(5)
            })
        );
        assert_eq!(
            "6+".parse(),
            Ok(RoundRange {
                start: 6,
                end: None
            })
        );
        for bad in ["", "0", "5-2", "a", "1-", "-3", "+", "1+2", "2--3"] {
            assert!(bad.parse::<RoundRange>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reviews_route_by_round_in_any_declared_order() {
        let r = by_rounds(&[("6+", "c"), ("1", "a"), ("2-5", "b")]).unwrap();
        assert_eq!(r.profile_for(Role::Review, 0), "a");
        assert_eq!(r.profile_for(Role::Review, 1), "a");
        assert_eq!(r.profile_for(Role::Review, 2), "b");
        assert_eq!(r.profile_for(Role::Review, 5), "b");
        assert_eq!(r.profile_for(Role::Review, 6), "c");
        assert_eq!(r.profile_for(Role::Review, 600), "c");
        assert_eq!(r.profile_for(Role::Implement, 3), "impl");
        assert_eq!(r.profile_for(Role::Fix, 3), "fixer");
        assert_eq!(r.profile_for(Role::UpdateEpic, 3), "epic");
    }

    #[test]
    fn overlapping_gapped_late_or_closed_ranges_are_refused() {
        assert_eq!(
            by_rounds(&[("1-3", "a"), ("3+", "b")]),
            Err(RoutingError::Overlap("1-3".into(), "3+".into()))
        );
        assert_eq!(
            by_rounds(&[("1", "a"), ("4+", "b")]),
            Err(RoutingError::Gap("2-3".into()))
        );
        assert_eq!(
            by_rounds(&[("2+", "a")]),
            Err(RoutingError::DoesNotStartAtOne(2))
        );
        assert_eq!(
            by_rounds(&[("1", "a"), ("2-5", "b")]),
            Err(RoutingError::NotOpenEnded("2-5".into()))
        );
        assert_eq!(by_rounds(&[]), Err(RoutingError::NoReviewProfile));
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
                    AgentProfile::from_spec(n, spec.clone()).unwrap(),
                )
            })
            .collect();
        let ok = by_rounds(&[("1+", "a")]).unwrap();
        let catalog = AgentCatalog::new(profiles.clone(), ok).unwrap();
        assert_eq!(catalog.profile_for(Role::Review, 4).unwrap().name, "a");

        let missing = by_rounds(&[("1", "a"), ("2+", "ghost")]).unwrap();
        assert_eq!(
            AgentCatalog::new(profiles, missing).err(),
            Some(RoutingError::UnknownProfile {
                role: Role::Review,
                profile: "ghost".into()
            })
        );
    }
}
