//! Agent profiles (how to launch one coding-agent CLI) and roles (which
//! profile runs which phase, the reviewer possibly changing with the round).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    pub profiles: BTreeMap<String, AgentProfile>,
    pub roles: AgentRoles,
}

/// How to launch one coding-agent CLI.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// argv prefix; never empty (schema and check enforce it).
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvChange>,
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_seconds: u64,
    #[serde(default = "default_max_runtime")]
    pub max_runtime_seconds: u64,
    #[serde(default)]
    pub usage_pattern: Option<UsagePattern>,
}

fn default_idle_timeout() -> u64 {
    600
}

fn default_max_runtime() -> u64 {
    3600
}

/// A change a profile makes to the agent's environment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawEnvChange")]
pub enum EnvChange {
    Set(String),
    /// TOML has no null, so `false` also means "remove".
    Remove,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEnvChange {
    Text(String),
    Flag(bool),
    Null,
}

impl TryFrom<RawEnvChange> for EnvChange {
    type Error = &'static str;

    fn try_from(raw: RawEnvChange) -> Result<Self, Self::Error> {
        match raw {
            RawEnvChange::Text(value) => Ok(EnvChange::Set(value)),
            RawEnvChange::Flag(false) | RawEnvChange::Null => Ok(EnvChange::Remove),
            RawEnvChange::Flag(true) => Err("an env value is a string, or false/null to remove"),
        }
    }
}

impl Serialize for EnvChange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EnvChange::Set(value) => serializer.serialize_str(value),
            EnvChange::Remove => serializer.serialize_none(),
        }
    }
}

/// A compiled `usage_pattern`: finds the token count in an agent's output.
#[derive(Debug, Clone)]
pub struct UsagePattern(Regex);

impl UsagePattern {
    /// Compiles `pattern`, which must have a capture named `tokens` or at
    /// least one capture group.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let regex = Regex::new(pattern).map_err(|error| error.to_string())?;
        if regex.captures_len() < 2 {
            return Err(
                "needs a capture group (named `tokens`, or the first group) for the token count"
                    .to_owned(),
            );
        }
        Ok(Self(regex))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Tokens reported by the last match in `output` (usage summaries come
    /// last). Digit separators `,` and `_` are ignored.
    pub fn tokens_in(&self, output: &str) -> Option<u64> {
        let captures = self.0.captures_iter(output).last()?;
        let text = captures
            .name("tokens")
            .or_else(|| captures.get(1))?
            .as_str();
        let digits: String = text.chars().filter(|c| !matches!(c, ',' | '_')).collect();
        digits.trim().parse().ok()
    }
}

impl<'de> Deserialize<'de> for UsagePattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(deserializer)?;
        Self::parse(&pattern).map_err(serde::de::Error::custom)
    }
}

impl Serialize for UsagePattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Which profile plays which role. Unset roles mean runs cannot reach that
/// phase; `config check` warns about them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentRoles {
    pub implement: Option<String>,
    pub fix: Option<String>,
    pub update_epic: Option<String>,
    pub review: Option<ReviewRole>,
}

/// The reviewer: the same profile every round, or one per round range.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ReviewRole {
    Always(String),
    ByRound(Vec<ReviewRoute>),
}

impl ReviewRole {
    /// The profile reviewing `round` (counted from 1).
    pub fn profile_for_round(&self, round: u32) -> Option<&str> {
        match self {
            ReviewRole::Always(profile) => Some(profile),
            ReviewRole::ByRound(routes) => routes
                .iter()
                .find(|route| route.rounds.contains(round))
                .map(|route| route.profile.as_str()),
        }
    }

    /// Every profile name this role refers to.
    pub fn profiles(&self) -> Vec<&str> {
        match self {
            ReviewRole::Always(profile) => vec![profile.as_str()],
            ReviewRole::ByRound(routes) => {
                routes.iter().map(|route| route.profile.as_str()).collect()
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRoute {
    pub rounds: RoundRange,
    pub profile: String,
}

/// `"1"`, `"2-5"` or `"6+"`: an inclusive range of review rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundRange {
    pub first: u32,
    /// `None` for an open range (`"6+"`).
    pub last: Option<u32>,
}

impl RoundRange {
    pub fn contains(&self, round: u32) -> bool {
        round >= self.first && self.last.is_none_or(|last| round <= last)
    }

    pub fn overlaps(&self, other: &RoundRange) -> bool {
        let ends_before =
            |a: &RoundRange, b: &RoundRange| a.last.is_some_and(|last| last < b.first);
        !ends_before(self, other) && !ends_before(other, self)
    }
}

impl FromStr for RoundRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let round = |part: &str| -> Result<u32, String> {
            match part.parse::<u32>() {
                Ok(0) | Err(_) => Err(format!(
                    "`{text}` is not a round range like \"1\", \"2-5\" or \"6+\""
                )),
                Ok(round) => Ok(round),
            }
        };
        let range = if let Some(first) = text.strip_suffix('+') {
            RoundRange {
                first: round(first)?,
                last: None,
            }
        } else if let Some((first, last)) = text.split_once('-') {
            RoundRange {
                first: round(first)?,
                last: Some(round(last)?),
            }
        } else {
            let only = round(text)?;
            RoundRange {
                first: only,
                last: Some(only),
            }
        };
        if range.last.is_some_and(|last| last < range.first) {
            return Err(format!("`{text}` ends before it starts"));
        }
        Ok(range)
    }
}

impl fmt::Display for RoundRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.last {
            None => write!(f, "{}+", self.first),
            Some(last) if last == self.first => write!(f, "{last}"),
            Some(last) => write!(f, "{}-{last}", self.first),
        }
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

/// Rounds in `1..=max_round` that no range covers, and pairs of ranges that
/// overlap, as human-readable findings.
pub(crate) fn review_coverage_findings(ranges: &[RoundRange], max_round: u32) -> Vec<String> {
    let mut findings = Vec::new();
    for (index, range) in ranges.iter().enumerate() {
        for other in &ranges[index + 1..] {
            if range.overlaps(other) {
                findings.push(format!("rounds {range} and {other} overlap"));
            }
        }
    }
    let uncovered: Vec<u32> = (1..=max_round)
        .filter(|round| !ranges.iter().any(|range| range.contains(*round)))
        .collect();
    if let (Some(first), Some(last)) = (uncovered.first(), uncovered.last()) {
        findings.push(format!(
            "no reviewer for round(s) {first}..={last} of limits.review_rounds = {max_round} ({} uncovered)",
            uncovered.len()
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn range(text: &str) -> RoundRange {
        text.parse().expect("valid range")
    }

    #[test]
    fn round_ranges_parse_single_closed_and_open_forms() {
        assert_eq!(
            range("1"),
            RoundRange {
                first: 1,
                last: Some(1)
            }
        );
        assert_eq!(
            range("2-5"),
            RoundRange {
                first: 2,
                last: Some(5)
            }
        );
        assert_eq!(
            range("6+"),
            RoundRange {
                first: 6,
                last: None
            }
        );
        assert_eq!(range("2-5").to_string(), "2-5");
        assert_eq!(range("6+").to_string(), "6+");
        assert_eq!(range("3").to_string(), "3");
    }

    #[test]
    fn reversed_or_zero_round_ranges_are_refused() {
        assert!("5-2".parse::<RoundRange>().is_err());
        assert!("0".parse::<RoundRange>().is_err());
        assert!("0+".parse::<RoundRange>().is_err());
        assert!("x".parse::<RoundRange>().is_err());
    }

    #[test]
    fn overlapping_ranges_are_found() {
        let findings = review_coverage_findings(&[range("1-3"), range("3+")], 8);
        assert_eq!(findings, vec!["rounds 1-3 and 3+ overlap".to_owned()]);
        assert!(review_coverage_findings(&[range("2+"), range("5")], 8)[0].contains("overlap"));
    }

    #[test]
    fn gaps_below_the_round_limit_are_found() {
        let findings = review_coverage_findings(&[range("1"), range("4+")], 8);
        assert_eq!(findings.len(), 1);
        assert!(findings[0].contains("2..=3"), "{findings:?}");
        assert!(review_coverage_findings(&[range("1"), range("2-5"), range("6+")], 8).is_empty());
        assert!(review_coverage_findings(&[range("1-8")], 8).is_empty());
    }

    #[test]
    fn reviewer_is_picked_by_round() {
        let role: ReviewRole = serde_json::from_value(json!([
            {"rounds": "1", "profile": "a"},
            {"rounds": "2-5", "profile": "b"},
            {"rounds": "6+", "profile": "c"}
        ]))
        .expect("valid");
        let picks: Vec<_> = [1, 2, 5, 6, 20]
            .iter()
            .map(|r| role.profile_for_round(*r))
            .collect();
        assert_eq!(
            picks,
            vec![Some("a"), Some("b"), Some("b"), Some("c"), Some("c")]
        );
        let single: ReviewRole = serde_json::from_value(json!("solo")).expect("valid");
        assert_eq!(single.profile_for_round(7), Some("solo"));
    }

    #[test]
    fn usage_pattern_reads_the_last_reported_count() {
        let pattern = UsagePattern::parse(r"tokens used: (?<tokens>[\d,]+)").expect("compiles");
        let output = "tokens used: 10\nmore work\ntokens used: 12,345\n";
        assert_eq!(pattern.tokens_in(output), Some(12_345));
        let unnamed = UsagePattern::parse(r"total=(\d+)").expect("compiles");
        assert_eq!(unnamed.tokens_in("total=77"), Some(77));
        assert_eq!(unnamed.tokens_in("nothing here"), None);
    }

    #[test]
    fn usage_pattern_without_a_capture_or_with_bad_syntax_is_refused() {
        assert!(
            UsagePattern::parse(r"tokens: \d+")
                .expect_err("refused")
                .contains("capture group")
        );
        assert!(UsagePattern::parse(r"(unclosed").is_err());
    }

    #[test]
    fn profile_env_sets_with_strings_and_removes_with_false_or_null() {
        let profile: AgentProfile = serde_json::from_value(json!({
            "command": ["claude", "-p"],
            "env": {"MODEL": "big", "NOISE": false, "OTHER": null}
        }))
        .expect("valid");
        assert_eq!(profile.env["MODEL"], EnvChange::Set("big".to_owned()));
        assert_eq!(profile.env["NOISE"], EnvChange::Remove);
        assert_eq!(profile.env["OTHER"], EnvChange::Remove);
        assert_eq!(profile.idle_timeout_seconds, 600);
        assert_eq!(profile.max_runtime_seconds, 3600);
    }
}
