//! The vocabulary every kind shares with [`super::drive`]: what a reconcile
//! read may conclude ([`Observation`]), how the one send ended ([`Sent`]),
//! and how the objects carrying an effect's identity marker are told apart
//! — ours, seen when the phase began, or foreign ([`Ownership`]).
//!
//! Kind files and `drive` both depend on this module and on nothing of each
//! other's beyond `drive` dispatching to the kinds.

use std::collections::HashSet;

use serde_json::Value;

use super::EffectError;
use super::markers::FoundMarker;
use crate::github::GitHubError;

/// What a reconcile read concluded about an effect's identity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Observation {
    /// The completion holds; the value is what the journal records.
    Present(Value),
    /// Nothing holds the identity and the precondition holds: send.
    Absent,
    /// Two of our objects share one identity.
    Duplicate(String, String),
    /// An object with our marker the journal did not write and the entry
    /// observation did not see.
    Foreign(String),
    /// The target no longer qualifies, or read-back contradicts the payload.
    Conflict(String),
    /// A defect (malformed marker, refused ref) an operator must fix.
    Blocked(String),
    /// The base the payload was computed on changed; re-plan from scratch.
    Rerequest(String),
}

/// A finding, or the verdict that ends a reconcile early.
pub(crate) type Verdict<T> = Result<T, Observation>;

/// How the one send ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sent {
    /// GitHub answered with success.
    Answered,
    /// Timeout, 5xx, dropped connection, rate limit: it may or may not
    /// have landed; only a reconcile can tell.
    Unknown(String),
    /// A definitive refusal (4xx other than rate limits, rejected lease).
    Refused(String),
}

impl Sent {
    pub(crate) fn from_result<T>(result: Result<T, GitHubError>) -> Sent {
        match result {
            Ok(_) => Sent::Answered,
            Err(error) if is_definitive_refusal(&error) => Sent::Refused(error.to_string()),
            Err(error) => Sent::Unknown(error.to_string()),
        }
    }
}

/// 4xx answers other than rate limits are GitHub's final word.
fn is_definitive_refusal(error: &GitHubError) -> bool {
    match error {
        GitHubError::Status {
            status, message, ..
        } => {
            let message = message.to_ascii_lowercase();
            let rate_limited = *status == 429 || (*status == 403 && message.contains("rate limit"));
            // A write in flight when the installation was suspended: GitHub
            // refused it for now, not for good. It stays attempted and is
            // reconciled once the installation is unsuspended.
            let suspended = *status == 403 && message.contains("installation has been suspended");
            (400..500).contains(status) && !rate_limited && !suspended
        }
        _ => false,
    }
}

/// A reconcile read that failed: nothing may be decided.
pub(crate) fn read_failed(error: GitHubError) -> EffectError {
    EffectError::Read(error)
}

/// One object found holding an effect's identity.
#[derive(Debug, Clone)]
pub(crate) struct Holder {
    /// `comment/123`, `issue/4`, `pull/5`.
    pub key: String,
    /// For messages: the object's URL.
    pub url: String,
    pub nonce: Option<String>,
}

impl Holder {
    pub(crate) fn new(key: String, url: &str, marker: &FoundMarker) -> Holder {
        Holder {
            key,
            url: url.to_owned(),
            nonce: marker.write_nonce().map(str::to_owned),
        }
    }
}

/// Who wrote an object that carries an identity marker.
pub(crate) struct Ownership {
    /// The `write` nonces of every effect the run journalled.
    own_writes: HashSet<String>,
    /// Objects (`comment/123`, …) the phase's entry observation saw.
    entry_seen: HashSet<String>,
}

impl Ownership {
    pub(crate) fn new(own_writes: HashSet<String>, entry_seen: HashSet<String>) -> Ownership {
        Ownership {
            own_writes,
            entry_seen,
        }
    }

    fn wrote(&self, holder: &Holder) -> bool {
        holder
            .nonce
            .as_ref()
            .is_some_and(|n| self.own_writes.contains(n))
    }

    /// Sorts the holders of one identity. `Ok(Some)` is our single object,
    /// `Ok(None)` means nobody holds it; anything else is the verdict.
    pub(crate) fn ours<'a>(&self, holders: &'a [Holder]) -> Verdict<Option<&'a Holder>> {
        if let Some(foreign) = holders
            .iter()
            .find(|h| !self.wrote(h) && !self.entry_seen.contains(&h.key))
        {
            return Err(Observation::Foreign(format!(
                "{} carries our marker but was not written by this run's journal \
                 (remove the object or its marker, then unblock)",
                foreign.url
            )));
        }
        match holders {
            [] => Ok(None),
            [one] if self.wrote(one) => Ok(Some(one)),
            [one] => Err(Observation::Conflict(format!(
                "{} already holds this identity (it existed when the phase began)",
                one.url
            ))),
            [a, b, ..] => Err(Observation::Duplicate(a.url.clone(), b.url.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(key: &str, nonce: Option<&str>) -> Holder {
        Holder {
            key: key.into(),
            url: format!("https://h/{key}"),
            nonce: nonce.map(str::to_owned),
        }
    }

    fn ownership() -> Ownership {
        Ownership::new(
            ["mine".to_owned(), "older".to_owned()].into(),
            ["comment/9".to_owned()].into(),
        )
    }

    #[test]
    fn our_single_object_is_found_and_nothing_is_absent() {
        let holders = [holder("comment/1", Some("mine"))];
        assert_eq!(
            ownership()
                .ours(&holders)
                .ok()
                .flatten()
                .map(|h| h.key.as_str()),
            Some("comment/1")
        );
        assert!(matches!(ownership().ours(&[]), Ok(None)));
    }

    #[test]
    fn an_unjournalled_marker_is_foreign_even_beside_ours() {
        let holders = [
            holder("comment/1", Some("mine")),
            holder("comment/2", Some("forged")),
        ];
        let verdict = ownership().ours(&holders).err();
        assert!(matches!(verdict, Some(Observation::Foreign(ref r)) if r.contains("comment/2")));
        let no_nonce = [holder("comment/3", None)];
        assert!(matches!(
            ownership().ours(&no_nonce),
            Err(Observation::Foreign(_))
        ));
    }

    #[test]
    fn two_known_holders_are_a_duplicate_naming_both() {
        let holders = [holder("comment/1", Some("mine")), holder("comment/9", None)];
        let verdict = ownership().ours(&holders).err();
        assert_eq!(
            verdict,
            Some(Observation::Duplicate(
                "https://h/comment/1".into(),
                "https://h/comment/9".into()
            ))
        );
    }

    #[test]
    fn an_object_seen_at_entry_is_a_conflict_not_adopted() {
        let holders = [holder("comment/9", None)];
        assert!(matches!(
            ownership().ours(&holders),
            Err(Observation::Conflict(_))
        ));
    }

    #[test]
    fn rate_limits_and_server_errors_are_not_refusals() {
        let status = |status: u16, message: &str| GitHubError::Status {
            method: "POST",
            path: "/x".into(),
            status,
            message: message.into(),
        };
        assert!(matches!(
            Sent::from_result::<()>(Err(status(422, "Validation Failed"))),
            Sent::Refused(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(404, "Not Found"))),
            Sent::Refused(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(502, "Bad Gateway"))),
            Sent::Unknown(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(429, "slow down"))),
            Sent::Unknown(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(403, "API rate limit exceeded"))),
            Sent::Unknown(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(403, "Resource not accessible"))),
            Sent::Refused(_)
        ));
        assert!(matches!(
            Sent::from_result::<()>(Err(status(403, "This installation has been suspended"))),
            Sent::Unknown(_)
        ));
    }
}
