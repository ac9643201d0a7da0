//! Reading an agent's token usage from its output with the profile's
//! `usage_pattern` (SPEC §13). One parser serves the config check (which
//! compiles the pattern to report a bad one at its key) and the supervisor
//! (which reads the count after a launch).

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A compiled `usage_pattern`: a regex with a capture named `tokens`, or at
/// least one capture group, that finds the token count in an agent's output.
#[derive(Clone)]
pub struct UsagePattern(Regex);

impl fmt::Debug for UsagePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("UsagePattern")
            .field(&self.0.as_str())
            .finish()
    }
}

impl UsagePattern {
    /// Compiles `pattern`. A pattern without a capture group is refused:
    /// the whole match of a line like `tokens: 12` is not a number.
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
    /// last): the group `tokens`, else the first group. Digits may be
    /// grouped by `,`, `_`, `'`, `.` or spaces; anything else in the capture
    /// means "unknown" rather than a guessed number.
    pub fn tokens_in(&self, output: &str) -> Option<u64> {
        let captures = self.0.captures_iter(output).last()?;
        let text = captures
            .name("tokens")
            .or_else(|| captures.get(1))?
            .as_str()
            .trim();
        let grouped_digits = text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | '_' | '\'' | '.' | ' '));
        if !grouped_digits {
            return None;
        }
        let digits: String = text.chars().filter(char::is_ascii_digit).collect();
        digits.parse().ok()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_last_reported_count_wins_and_separators_are_ignored() {
        let pattern = UsagePattern::parse(r"tokens used: (?<tokens>[\d,]+)").expect("compiles");
        let output = "tokens used: 10\nmore work\ntokens used: 12,345\n";
        assert_eq!(pattern.tokens_in(output), Some(12_345));
        let unnamed = UsagePattern::parse(r"tokens used:\s*([0-9][0-9,]*)").expect("compiles");
        assert_eq!(
            unnamed.tokens_in("tokens used: 12\n...\ntokens used: 1,234,567\n"),
            Some(1_234_567)
        );
        assert_eq!(unnamed.tokens_in("no usage here"), None);
    }

    #[test]
    fn a_capture_that_is_not_a_grouped_number_means_unknown() {
        let pattern = UsagePattern::parse(r"total=(?<tokens>\S+)").unwrap();
        assert_eq!(pattern.tokens_in("total=9_001"), Some(9001));
        assert_eq!(pattern.tokens_in("total=1'000"), Some(1000));
        assert_eq!(pattern.tokens_in("total=lots"), None);
        assert_eq!(pattern.tokens_in("total=12k"), None);
    }

    #[test]
    fn a_pattern_without_a_capture_or_with_bad_syntax_is_refused() {
        assert!(
            UsagePattern::parse(r"tokens: \d+")
                .expect_err("refused")
                .contains("capture group")
        );
        assert!(UsagePattern::parse(r"(unclosed").is_err());
    }
}
