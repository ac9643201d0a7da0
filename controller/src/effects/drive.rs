//! `drive`: one step of the write-ahead protocol for one effect (SPEC §6
//! rule 2), and the pieces every kind shares — what a reconcile may
//! conclude, how a send's answer is classified, and how objects carrying
//! our markers are told apart (ours / seen at entry / foreign).

use std::collections::HashSet;

use autoforge_journal::{Effect, EffectKind, Journal, Lease, MAX_ATTEMPTS, Stage};
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

#[cfg(feature = "crash-points")]
use super::crashpoint::{Point, crash_point};
use super::markers::FoundMarker;
use super::{EffectError, comments, epic, issues, labels, merge, pulls, push, reactions};
use crate::github::{GitHubApi, GitHubError, RepoName};
use crate::workspace::Mirror;

/// How a drive ended.
#[derive(Debug, Clone, PartialEq)]
pub enum DriveOutcome {
    /// Read-back shows the write; the journal says `observed` with this value.
    Observed(Value),
    /// Sent with an unknown outcome and not visible yet (or not sent because
    /// GitHub could not be asked); the next drive reconciles first.
    StillAttempted,
    /// A definitive refusal, a read-back mismatch, or two objects with one
    /// identity. Recorded as `conflict`.
    Conflict { reason: String },
    /// Something an operator must look at: a foreign object carrying our
    /// marker, an unreadable marker, or the attempt budget spent. Recorded
    /// as `conflict`; the run goes `BLOCKED` with this reason.
    Blocked { reason: String },
    /// The roadmap splice's base changed outside the managed section: the
    /// section must be requested from the agent again. Recorded as
    /// `conflict` (this effect is finished; a new one will be planned).
    Rerequest { reason: String },
}

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
            let rate_limited = *status == 429
                || (*status == 403 && message.to_ascii_lowercase().contains("rate limit"));
            (400..500).contains(status) && !rate_limited
        }
        _ => false,
    }
}

/// How the executor pushes: the mirror holding the candidate commits, the
/// repository's git URL (no credentials in it) and the token, which only
/// ever travels in the git process's environment.
pub struct PushTransport {
    pub mirror: Mirror,
    pub url: String,
    pub credential: SecretString,
    pub default_branch: String,
}

/// Drives journalled effects of one repository.
pub struct EffectExecutor {
    pub(crate) journal: Journal,
    pub(crate) api: GitHubApi,
    pub(crate) repo: RepoName,
    /// The login the controller acts as (reactions are recognised by it).
    pub(crate) login: String,
    pub(crate) push: Option<PushTransport>,
    /// Objects (`comment/123`, `issue/4`, `pull/5`) the entry observation
    /// of the current phase saw: not written by this journal, not foreign.
    pub(crate) entry_seen: HashSet<String>,
}

/// Who wrote an object that carries an identity marker.
pub(crate) struct Ownership {
    own_writes: HashSet<String>,
    entry_seen: HashSet<String>,
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

impl Ownership {
    /// Sorts the holders of one identity. `Ok(Some)` is our single object,
    /// `Ok(None)` means nobody holds it; anything else is the verdict.
    pub(crate) fn ours<'a>(
        &self,
        holders: &'a [Holder],
    ) -> Result<Option<&'a Holder>, Observation> {
        if let Some(foreign) = holders.iter().find(|h| {
            !h.nonce
                .as_ref()
                .is_some_and(|n| self.own_writes.contains(n))
                && !self.entry_seen.contains(&h.key)
        }) {
            return Err(Observation::Foreign(format!(
                "{} carries our marker but was not written by this run's journal \
                 (remove the object or its marker, then unblock)",
                foreign.url
            )));
        }
        match holders {
            [] => Ok(None),
            [one]
                if one
                    .nonce
                    .as_ref()
                    .is_some_and(|n| self.own_writes.contains(n)) =>
            {
                Ok(Some(one))
            }
            [one] => Err(Observation::Conflict(format!(
                "{} already holds this identity (it existed when the phase began)",
                one.url
            ))),
            [a, b, ..] => Err(Observation::Duplicate(a.url.clone(), b.url.clone())),
        }
    }
}

impl EffectExecutor {
    pub fn new(journal: Journal, api: GitHubApi, repo: RepoName, login: String) -> Self {
        EffectExecutor {
            journal,
            api,
            repo,
            login,
            push: None,
            entry_seen: HashSet::new(),
        }
    }

    /// Enables `push` effects.
    pub fn with_push(mut self, transport: PushTransport) -> Self {
        self.push = Some(transport);
        self
    }

    /// Objects the current phase's entry observation saw (see the field).
    pub fn with_entry_seen(mut self, objects: impl IntoIterator<Item = String>) -> Self {
        self.entry_seen = objects.into_iter().collect();
        self
    }

    /// One step of SPEC §6 rule 2 for `effect` (a row of
    /// `pending_effects`). At most one write is sent per call.
    pub async fn drive(&self, lease: &Lease, effect: &Effect) -> Result<DriveOutcome, EffectError> {
        let outcome = self.drive_step(lease, effect).await;
        crate::metrics::effect_driven(effect.kind, &outcome);
        outcome
    }

    async fn drive_step(
        &self,
        lease: &Lease,
        effect: &Effect,
    ) -> Result<DriveOutcome, EffectError> {
        if !matches!(effect.stage, Stage::Intended | Stage::Attempted) {
            return Err(EffectError::AlreadyFinal {
                id: effect.id.0,
                stage: effect.stage.to_string(),
            });
        }
        let ownership = self.ownership(effect).await?;
        let first = self.reconcile(effect, &ownership).await?;
        if first != Observation::Absent {
            return self.settle(lease, effect, first).await;
        }
        if effect.attempts >= MAX_ATTEMPTS {
            let reason = format!(
                "{} was sent {} times without a visible result; perform it by hand \
                 (target {}, identity {}) or remove whatever prevents it, then unblock",
                effect.kind, effect.attempts, effect.target, effect.identity
            );
            self.journal
                .mark_conflict(lease, effect.id, &reason)
                .await?;
            return Ok(DriveOutcome::Blocked { reason });
        }
        self.journal.mark_attempted(lease, effect.id).await?;
        #[cfg(feature = "crash-points")]
        crash_point(
            Point::AfterAttemptedBeforeSend,
            effect.kind,
            &effect.identity,
        );
        let sent = self.send(effect).await?;
        #[cfg(feature = "crash-points")]
        crash_point(
            Point::AfterSendBeforeReadBack,
            effect.kind,
            &effect.identity,
        );
        // Reconcile even after a refusal: a 422 "already exists" may be the
        // answer to our own earlier send that landed.
        let after = self.reconcile(effect, &ownership).await?;
        match (after, sent) {
            (Observation::Absent, Sent::Refused(reason)) => {
                let reason = format!("GitHub refused the {}: {reason}", effect.kind);
                self.journal
                    .mark_conflict(lease, effect.id, &reason)
                    .await?;
                Ok(DriveOutcome::Conflict { reason })
            }
            (Observation::Absent, sent) => {
                tracing::warn!(effect = %effect.id, kind = %effect.kind, ?sent, "write not visible after sending; stays attempted");
                Ok(DriveOutcome::StillAttempted)
            }
            (other, _) => self.settle(lease, effect, other).await,
        }
    }

    /// Records a verdict other than `Absent`.
    async fn settle(
        &self,
        lease: &Lease,
        effect: &Effect,
        observation: Observation,
    ) -> Result<DriveOutcome, EffectError> {
        let (outcome, reason) = match observation {
            Observation::Present(value) => {
                #[cfg(feature = "crash-points")]
                crash_point(
                    Point::AfterReadBackBeforeObserved,
                    effect.kind,
                    &effect.identity,
                );
                self.journal.mark_observed(lease, effect.id, &value).await?;
                return Ok(DriveOutcome::Observed(value));
            }
            Observation::Absent => return Ok(DriveOutcome::StillAttempted),
            Observation::Duplicate(a, b) => {
                let reason = format!("two objects hold one identity: {a} and {b}");
                (
                    DriveOutcome::Conflict {
                        reason: reason.clone(),
                    },
                    reason,
                )
            }
            Observation::Conflict(reason) => (
                DriveOutcome::Conflict {
                    reason: reason.clone(),
                },
                reason,
            ),
            Observation::Foreign(reason) | Observation::Blocked(reason) => (
                DriveOutcome::Blocked {
                    reason: reason.clone(),
                },
                reason,
            ),
            Observation::Rerequest(reason) => {
                let recorded = format!("re-request: {reason}");
                (DriveOutcome::Rerequest { reason }, recorded)
            }
        };
        self.journal
            .mark_conflict(lease, effect.id, &reason)
            .await?;
        Ok(outcome)
    }

    /// The nonces of every effect this run journalled (any stage): markers
    /// carrying one of them were written by this journal.
    async fn ownership(&self, effect: &Effect) -> Result<Ownership, EffectError> {
        let own_writes = self
            .journal
            .list_effects(effect.run_id)
            .await?
            .iter()
            .filter_map(|e| {
                e.completion
                    .get("write")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect();
        Ok(Ownership {
            own_writes,
            entry_seen: self.entry_seen.clone(),
        })
    }

    /// The kind's reconcile, with one shared rule: a target GitHub answers
    /// 404 for (deleted, transferred, or no longer visible to us) is a
    /// definitive conflict for an operator, not a read to retry forever.
    async fn reconcile(
        &self,
        effect: &Effect,
        ownership: &Ownership,
    ) -> Result<Observation, EffectError> {
        match self.reconcile_kind(effect, ownership).await {
            Err(EffectError::Read(error)) if error.is_not_found() => {
                Ok(Observation::Conflict(format!(
                    "GitHub answers 404 for the target {} of this {} (deleted, transferred \
                     or not visible to the controller): {error}",
                    effect.target, effect.kind
                )))
            }
            other => other,
        }
    }

    async fn reconcile_kind(
        &self,
        effect: &Effect,
        ownership: &Ownership,
    ) -> Result<Observation, EffectError> {
        match effect.kind {
            EffectKind::PostComment => comments::reconcile_post(self, effect, ownership).await,
            EffectKind::EditStatusComment => {
                comments::reconcile_status(self, effect, ownership).await
            }
            EffectKind::CreateIssue => issues::reconcile_create(self, effect, ownership).await,
            EffectKind::AppendIssueMarkers => {
                issues::reconcile_append(self, effect, ownership).await
            }
            EffectKind::CreatePr => pulls::reconcile_create(self, effect, ownership).await,
            EffectKind::AdoptPr => pulls::reconcile_adopt(self, effect, ownership).await,
            EffectKind::SpliceEpicRoadmap => epic::reconcile(self, effect).await,
            EffectKind::AddReaction => reactions::reconcile(self, effect).await,
            EffectKind::SetLabels => labels::reconcile(self, effect).await,
            EffectKind::MergePr => merge::reconcile(self, effect).await,
            EffectKind::Push => push::reconcile(self, effect).await,
            EffectKind::CheckRun => Err(EffectError::Missing {
                kind: effect.kind,
                what: "a check-run implementation (optional in SPEC §6; not built)",
            }),
        }
    }

    async fn send(&self, effect: &Effect) -> Result<Sent, EffectError> {
        match effect.kind {
            EffectKind::PostComment => comments::send_post(self, effect).await,
            EffectKind::EditStatusComment => comments::send_status(self, effect).await,
            EffectKind::CreateIssue => issues::send_create(self, effect).await,
            EffectKind::AppendIssueMarkers => issues::send_body(self, effect).await,
            EffectKind::AdoptPr => pulls::send_adopt(self, effect).await,
            EffectKind::CreatePr => pulls::send_create(self, effect).await,
            EffectKind::SpliceEpicRoadmap => issues::send_body(self, effect).await,
            EffectKind::AddReaction => reactions::send(self, effect).await,
            EffectKind::SetLabels => labels::send(self, effect).await,
            EffectKind::MergePr => merge::send(self, effect).await,
            EffectKind::Push => push::send(self, effect).await,
            EffectKind::CheckRun => Err(EffectError::Missing {
                kind: effect.kind,
                what: "a check-run implementation (optional in SPEC §6; not built)",
            }),
        }
    }
}

/// The payload bytes decoded as the kind's JSON document.
pub(crate) fn payload<T: DeserializeOwned>(effect: &Effect) -> Result<T, EffectError> {
    serde_json::from_slice(&effect.payload).map_err(|e| corrupt(effect, "payload", e.to_string()))
}

/// A field of the `completion` or `precondition` JSON.
pub(crate) fn field<T: DeserializeOwned>(
    effect: &Effect,
    which: &'static str,
    name: &str,
) -> Result<T, EffectError> {
    let source = match which {
        "precondition" => &effect.precondition,
        _ => &effect.completion,
    };
    let value = source
        .get(name)
        .cloned()
        .ok_or_else(|| corrupt(effect, which, format!("no `{name}`")))?;
    serde_json::from_value(value).map_err(|e| corrupt(effect, which, format!("`{name}`: {e}")))
}

/// The identity key a marker must match (the completion's `key` object).
pub(crate) fn identity_key(effect: &Effect) -> Result<Map<String, Value>, EffectError> {
    field(effect, "completion", "key")
}

/// The number in a target like `issue/12` or `pull/3`.
pub(crate) fn target_number(effect: &Effect) -> Result<u64, EffectError> {
    effect
        .target
        .rsplit_once('/')
        .and_then(|(_, n)| n.parse().ok())
        .ok_or_else(|| {
            corrupt(
                effect,
                "target",
                format!("`{}` names no number", effect.target),
            )
        })
}

pub(crate) fn corrupt(effect: &Effect, field: &'static str, detail: String) -> EffectError {
    EffectError::CorruptRow {
        id: effect.id.0,
        kind: effect.kind,
        field,
        detail,
    }
}

/// A reconcile read that failed: nothing may be decided.
pub(crate) fn read_failed(error: GitHubError) -> EffectError {
    EffectError::Read(error)
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
        Ownership {
            own_writes: ["mine".to_owned(), "older".to_owned()].into(),
            entry_seen: ["comment/9".to_owned()].into(),
        }
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
    }
}
