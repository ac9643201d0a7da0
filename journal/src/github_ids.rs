//! GitHub's identities for the objects a run works on: an issue's number, a
//! pull request's number and a commit's SHA. Each is checked once, where it
//! enters (a webhook, an API answer, git's output, a stored row), so the
//! machine, the effects and the journal pass values that are already valid
//! and cannot mix an issue up with a pull request.
//!
//! The numbers are stored in Postgres as `BIGINT` (GitHub's numbers are
//! positive and far below `i64::MAX`; a larger one is refused at parse), the
//! SHA as `TEXT`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

/// A value that is not a valid GitHub identity of the named kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GithubIdError {
    #[error("{kind} must be a positive number no larger than {max}, got {got}")]
    Number {
        kind: &'static str,
        got: String,
        max: i64,
    },
    #[error("a commit SHA is 40 hexadecimal digits, got `{0}`")]
    Sha(String),
}

macro_rules! github_number {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            /// Checks the range: positive and storable as Postgres `BIGINT`.
            pub fn new(number: u64) -> Result<Self, GithubIdError> {
                if number == 0 || number > i64::MAX as u64 {
                    return Err(GithubIdError::Number {
                        kind: $kind,
                        got: number.to_string(),
                        max: i64::MAX,
                    });
                }
                Ok(Self(number))
            }

            /// A literal for tests, usable in constants; panics out of range.
            #[cfg(feature = "testing")]
            pub(crate) const fn literal(number: u64) -> Self {
                assert!(number > 0 && number <= i64::MAX as u64, "out of GitHub's range");
                Self(number)
            }

            pub fn get(self) -> u64 {
                self.0
            }

            /// The stored form. Lossless: [`Self::new`] keeps the value in range.
            pub fn to_i64(self) -> i64 {
                self.0 as i64
            }
        }

        impl TryFrom<u64> for $name {
            type Error = GithubIdError;
            fn try_from(number: u64) -> Result<Self, GithubIdError> {
                Self::new(number)
            }
        }

        impl TryFrom<i64> for $name {
            type Error = GithubIdError;
            fn try_from(number: i64) -> Result<Self, GithubIdError> {
                u64::try_from(number)
                    .map_err(|_| GithubIdError::Number {
                        kind: $kind,
                        got: number.to_string(),
                        max: i64::MAX,
                    })
                    .and_then(Self::new)
            }
        }

        impl FromStr for $name {
            type Err = GithubIdError;
            fn from_str(text: &str) -> Result<Self, GithubIdError> {
                let number = text.parse::<u64>().map_err(|_| GithubIdError::Number {
                    kind: $kind,
                    got: text.chars().take(40).collect(),
                    max: i64::MAX,
                })?;
                Self::new(number)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let number = u64::deserialize(deserializer)?;
                Self::new(number).map_err(serde::de::Error::custom)
            }
        }

        impl Type<Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                <i64 as Type<Postgres>>::type_info()
            }
        }

        impl Encode<'_, Postgres> for $name {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <i64 as Encode<'_, Postgres>>::encode_by_ref(&self.to_i64(), buf)
            }
        }

        impl<'r> Decode<'r, Postgres> for $name {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let stored = <i64 as Decode<'r, Postgres>>::decode(value)?;
                Ok(Self::try_from(stored)?)
            }
        }
    };
}

github_number!(
    /// An issue's number in its repository (`#12`).
    IssueNumber,
    "an issue number"
);
github_number!(
    /// A pull request's number in its repository. GitHub numbers issues and
    /// pull requests from one sequence, and a pull request is also an issue
    /// for the issues API (comments, labels): [`PullNumber::as_issue`].
    PullNumber,
    "a pull request number"
);

impl PullNumber {
    /// The same number as the issue GitHub keeps for every pull request.
    pub fn as_issue(self) -> IssueNumber {
        IssueNumber(self.0)
    }
}

/// A full commit SHA: 40 hexadecimal digits, kept in lower case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CommitSha(String);

impl CommitSha {
    pub fn parse(text: &str) -> Result<Self, GithubIdError> {
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(text.to_ascii_lowercase()))
        } else {
            Err(GithubIdError::Sha(text.chars().take(64).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first `digits` digits (all 40 at most), as people quote a commit.
    pub fn abbreviated(&self, digits: usize) -> &str {
        &self.0[..digits.min(self.0.len())]
    }
}

impl FromStr for CommitSha {
    type Err = GithubIdError;
    fn from_str(text: &str) -> Result<Self, GithubIdError> {
        Self::parse(text)
    }
}

impl fmt::Display for CommitSha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for CommitSha {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for CommitSha {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

impl PartialEq<str> for CommitSha {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for CommitSha {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<CommitSha> for String {
    fn eq(&self, other: &CommitSha) -> bool {
        *self == other.0
    }
}

impl PartialEq<CommitSha> for str {
    fn eq(&self, other: &CommitSha) -> bool {
        self == other.0
    }
}

impl PartialEq<&str> for CommitSha {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl<'de> Deserialize<'de> for CommitSha {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Type<Postgres> for CommitSha {
    fn type_info() -> PgTypeInfo {
        <String as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for CommitSha {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as Encode<'_, Postgres>>::encode_by_ref(&self.0.as_str(), buf)
    }
}

impl<'r> Decode<'r, Postgres> for CommitSha {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let stored = <&str as Decode<'r, Postgres>>::decode(value)?;
        Ok(Self::parse(stored)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_refuse_zero_negative_and_what_bigint_cannot_hold() {
        assert!(IssueNumber::new(0).is_err());
        assert!(IssueNumber::try_from(-3i64).is_err());
        assert!(PullNumber::new(i64::MAX as u64 + 1).is_err());
        assert_eq!(IssueNumber::new(12).map(IssueNumber::get), Ok(12));
        assert_eq!("7".parse::<PullNumber>().map(PullNumber::to_i64), Ok(7));
        assert!("7a".parse::<PullNumber>().is_err());
    }

    #[test]
    fn numbers_deserialize_only_in_range() {
        assert!(serde_json::from_str::<IssueNumber>("0").is_err());
        assert!(serde_json::from_str::<IssueNumber>("-1").is_err());
        let pull: PullNumber = serde_json::from_str("31").expect("a valid number");
        assert_eq!(pull.as_issue().get(), 31);
        assert_eq!(serde_json::to_string(&pull).ok().as_deref(), Some("31"));
    }

    #[test]
    fn sha_is_forty_hex_digits_kept_lower_case() {
        let upper = "ABCDEF0123456789ABCDEF0123456789ABCDEF01";
        let sha = CommitSha::parse(upper).expect("40 hex digits");
        assert_eq!(sha.as_str(), upper.to_ascii_lowercase());
        assert_eq!(sha.abbreviated(7), "abcdef0");
        assert_eq!(sha.abbreviated(99).len(), 40);
        assert!(CommitSha::parse("abc").is_err());
        assert!(CommitSha::parse(&"g".repeat(40)).is_err());
        assert!(serde_json::from_str::<CommitSha>("\"main\"").is_err());
    }
}
