//! The write-ahead effect journal (SPEC §6). An effect is written as an
//! intent in the transaction of the transition that causes it, then moves
//! only forward: `intended → attempted → observed | conflict`. The reconcile
//! before a send may also settle an intent directly (`intended → observed`
//! when the object is already there, `intended → conflict` when a foreign
//! one is in the way). Every move is made under the run's lease, and a
//! database trigger refuses any other move however it is attempted.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;

use crate::error::{JournalError, Result};
use crate::holdings::refused;
use crate::ids::{EffectId, RunId};
use crate::journal::{Journal, JournalTx};
use crate::runs::{Lease, lease_is_current, stale};

/// How many times an effect may be sent, not counting unanswered sends. The
/// second attempt exists only for an unknown outcome that a reconcile proved
/// did not land.
pub const MAX_ATTEMPTS: i32 = 2;

/// How many sends GitHub may answer with a server error, a timeout or a
/// rate limit (with nothing visible afterwards) before the effect is given
/// up as a conflict. Such sends do not count against [`MAX_ATTEMPTS`]: a
/// burst of 502s is GitHub being unwell, not a write whose fate is unknown.
pub const MAX_UNANSWERED_SENDS: i32 = 5;

/// No decision produces more than a handful of writes; a huge batch is a
/// bug upstream and is refused rather than journalled.
pub const MAX_EFFECTS_PER_TRANSITION: usize = 1000;

/// A value in the database that this build does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct UnknownValue {
    pub(crate) what: &'static str,
    pub(crate) value: String,
}

/// Declares a closed enum stored as text, with its exact spellings.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The spelling stored in the database.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::effects::UnknownValue;
            fn from_str(s: &str) -> ::std::result::Result<Self, $crate::effects::UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::effects::UnknownValue { what: $what, value: s.to_owned() }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::effects::UnknownValue;
            fn try_from(s: String) -> ::std::result::Result<Self, $crate::effects::UnknownValue> {
                s.parse()
            }
        }
    };
}
pub(crate) use text_enum;

text_enum!(
    /// The closed set of GitHub writes (SPEC §6), one enum for the machine,
    /// the executor and the journal; `EffectKind::ALL` lists every kind
    /// (for the crash matrix). Adding one needs a migration of the
    /// `effects.kind` CHECK constraint (the latest is
    /// `0005_post_review.sql`), which a test compares with `ALL`.
    EffectKind, "effect kind" {
        Push => "push",
        CreatePr => "create_pr",
        AdoptPr => "adopt_pr",
        PostComment => "post_comment",
        EditStatusComment => "edit_status_comment",
        CreateIssue => "create_issue",
        AppendIssueMarkers => "append_issue_markers",
        SpliceEpicRoadmap => "splice_epic_roadmap",
        AddReaction => "add_reaction",
        SetLabels => "set_labels",
        MergePr => "merge_pr",
        CheckRun => "check_run",
        PostReview => "post_review",
    }
);

text_enum!(
    /// Where an effect is in the write-ahead protocol.
    Stage, "effect stage" {
        /// Committed with its transition, not yet sent.
        Intended => "intended",
        /// About to be (or was) sent; the outcome may be unknown.
        Attempted => "attempted",
        /// Read back from GitHub: it landed. Final.
        Observed => "observed",
        /// It cannot be completed safely; needs an operator. Reopened only
        /// through `reopen_conflict`.
        Conflict => "conflict",
    }
);

/// An effect intent, as the machine decided it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEffect {
    pub kind: EffectKind,
    /// The marker or ref the effect's result is recognised by.
    pub identity: String,
    /// What it writes to (PR, issue, ref).
    pub target: String,
    /// What must hold before sending (e.g. the expected old ref value).
    pub precondition: Value,
    /// The exact bytes to send.
    pub payload: Vec<u8>,
    /// What read-back must show for the effect to count as observed.
    pub completion: Value,
}

impl Effect {
    /// True when no further send is allowed: [`MAX_ATTEMPTS`] sends whose
    /// outcome was in doubt, or [`MAX_UNANSWERED_SENDS`] sends GitHub
    /// answered with an error.
    pub fn sends_exhausted(&self) -> bool {
        sends_exhausted(self.attempts, self.unanswered)
    }
}

/// The one budget rule for effects and answers (see [`MAX_ATTEMPTS`] and
/// [`MAX_UNANSWERED_SENDS`]).
pub(crate) fn sends_exhausted(attempts: i32, unanswered: i32) -> bool {
    attempts - unanswered >= MAX_ATTEMPTS || unanswered >= MAX_UNANSWERED_SENDS
}

/// An effect as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Effect {
    pub id: EffectId,
    pub run_id: RunId,
    /// The run version whose transition wrote this intent.
    pub phase_entry: i64,
    /// Order within that transition; effects are driven in this order.
    pub position: i32,
    #[sqlx(try_from = "String")]
    pub kind: EffectKind,
    pub identity: String,
    pub target: String,
    pub precondition: Value,
    pub payload: Vec<u8>,
    pub completion: Value,
    #[sqlx(try_from = "String")]
    pub stage: Stage,
    /// Every send so far, unanswered ones included.
    pub attempts: i32,
    /// Sends answered with a server error, a timeout or a rate limit after
    /// which the read-back showed nothing (see [`MAX_UNANSWERED_SENDS`]).
    pub unanswered: i32,
    pub observed: Option<Value>,
    pub reason: Option<String>,
    /// The fencing token of the lease that last moved this effect.
    pub fencing_token: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const EFFECT_COLUMNS: &str = "id, run_id, phase_entry, position, kind, identity, target, \
     precondition, payload, completion, stage, attempts, unanswered, observed, reason, \
     fencing_token, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct TransitionRow {
    previous_version: i64,
    new_version: Option<i64>,
    effect_ids: Vec<i64>,
}

impl JournalTx {
    /// Commits a phase transition: checks the lease and that the run is
    /// still at `expected_version`, stores the new phase and state, writes
    /// the effect intents (in slice order) and an audit event. One statement;
    /// nothing is visible until [`JournalTx::commit`].
    ///
    /// Returns the run's new version and the ids of the intents.
    ///
    /// Long by design: most of it is the one SQL statement, which must stay
    /// one statement so the lease, version and effect checks are atomic.
    pub async fn commit_transition(
        &mut self,
        lease: &Lease,
        expected_version: i64,
        phase: &str,
        state: &Value,
        effects: &[NewEffect],
    ) -> Result<(i64, Vec<EffectId>)> {
        if phase.is_empty() {
            return Err(JournalError::InvalidInput("the phase is empty".to_owned()));
        }
        if effects.len() > MAX_EFFECTS_PER_TRANSITION {
            return Err(JournalError::InvalidInput(format!(
                "{} effects in one transition, more than the {MAX_EFFECTS_PER_TRANSITION} allowed",
                effects.len()
            )));
        }
        let positions: Vec<i32> = (0..MAX_EFFECTS_PER_TRANSITION as i32)
            .take(effects.len())
            .collect();
        let kinds: Vec<&str> = effects.iter().map(|e| e.kind.as_str()).collect();
        let identities: Vec<&str> = effects.iter().map(|e| e.identity.as_str()).collect();
        let targets: Vec<&str> = effects.iter().map(|e| e.target.as_str()).collect();
        let preconditions: Vec<&Value> = effects.iter().map(|e| &e.precondition).collect();
        let payloads: Vec<&[u8]> = effects.iter().map(|e| e.payload.as_slice()).collect();
        let completions: Vec<&Value> = effects.iter().map(|e| &e.completion).collect();

        // Locking the run row FOR UPDATE makes a concurrent takeover wait
        // for this transaction, and re-checks the lease against the newest
        // row version once the lock is granted.
        let row = sqlx::query_as::<_, TransitionRow>(concat!(
            "WITH held AS ( \
                 SELECT r.id, r.phase, r.version FROM runs r WHERE r.id = $1 AND ",
            lease_is_current!("$2", "$3"),
            " FOR UPDATE), \
             moved AS ( \
                 UPDATE runs r SET phase = $5, state = $6, version = r.version + 1, \
                     updated_at = now() \
                 FROM held WHERE r.id = held.id AND held.version = $4 \
                 RETURNING r.id, r.version, held.phase AS from_phase), \
             intents AS ( \
                 INSERT INTO effects (run_id, phase_entry, position, kind, identity, target, \
                     precondition, payload, completion, fencing_token) \
                 SELECT moved.id, moved.version, e.position, e.kind, e.identity, e.target, \
                     e.precondition, e.payload, e.completion, $3 \
                 FROM moved, unnest($7::int4[], $8::text[], $9::text[], $10::text[], \
                     $11::jsonb[], $12::bytea[], $13::jsonb[]) \
                     AS e(position, kind, identity, target, precondition, payload, completion) \
                 RETURNING id, position), \
             audit AS ( \
                 INSERT INTO audit_events (run_id, kind, detail) \
                 SELECT moved.id, 'transition', jsonb_build_object( \
                     'from', moved.from_phase, 'to', $5::text, 'version', moved.version, \
                     'fencing_token', $3::int8, 'effects', cardinality($8::text[])) \
                 FROM moved) \
             SELECT held.version AS previous_version, moved.version AS new_version, \
                 COALESCE((SELECT array_agg(id ORDER BY position) FROM intents), '{}') \
                     AS effect_ids \
             FROM held LEFT JOIN moved ON true"
        ))
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(expected_version)
        .bind(phase)
        .bind(state)
        .bind(&positions)
        .bind(&kinds)
        .bind(&identities)
        .bind(&targets)
        .bind(&preconditions)
        .bind(&payloads)
        .bind(&completions)
        .fetch_optional(self.conn())
        .await?;

        match row {
            None => Err(refused(self.pool(), stale(lease)).await),
            Some(TransitionRow {
                new_version: Some(version),
                effect_ids,
                ..
            }) => Ok((version, effect_ids.into_iter().map(EffectId).collect())),
            Some(TransitionRow {
                previous_version, ..
            }) => Err(JournalError::VersionConflict {
                run_id: lease.run_id,
                expected: expected_version,
                actual: previous_version,
            }),
        }
    }

    /// Sends a conflicted effect back to `intended` with its attempts reset.
    ///
    /// This is the one backwards move, and it is explicit because it is an
    /// operator's decision (`unblock`): the conflict was looked at, and the
    /// executor will reconcile before any send, so a fresh attempt budget
    /// cannot cause a duplicate. The previous reason and attempts are kept
    /// in an audit event.
    pub async fn reopen_conflict(&mut self, lease: &Lease, id: EffectId) -> Result<()> {
        let reopened: Option<EffectId> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE), \
             previous AS (SELECT e.id, e.reason, e.attempts FROM effects e, held \
                 WHERE e.id = $1 AND e.run_id = held.id AND e.stage = 'conflict' FOR UPDATE), \
             reopened AS ( \
                 UPDATE effects e SET stage = 'intended', attempts = 0, reason = NULL, \
                     fencing_token = $4, updated_at = now() \
                 FROM previous WHERE e.id = previous.id RETURNING e.id), \
             audit AS ( \
                 INSERT INTO audit_events (run_id, kind, detail) \
                 SELECT $2, 'effect_reopened', jsonb_build_object('effect', previous.id, \
                     'previous_reason', previous.reason, 'previous_attempts', previous.attempts) \
                 FROM previous) \
             SELECT id FROM reopened"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .fetch_optional(self.conn())
        .await?;
        match reopened {
            Some(_) => Ok(()),
            None => {
                let error = diagnose(self.conn(), lease, id, Stage::Intended).await;
                Err(refused(self.pool(), error).await)
            }
        }
    }
}

impl Journal {
    /// Records that the effect is about to be sent (attempts + 1). Allowed
    /// from `intended`, or again from `attempted` after a reconcile showed
    /// the first send did not land; never once the budget is spent (see
    /// [`Effect::sends_exhausted`]). Returns the new attempt count.
    pub async fn mark_attempted(&self, lease: &Lease, id: EffectId) -> Result<i32> {
        let mut conn = self.conn().await?;
        let attempts: Option<i32> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE) \
             UPDATE effects e SET stage = 'attempted', attempts = e.attempts + 1, \
                 fencing_token = $4, updated_at = now() \
             FROM held WHERE e.id = $1 AND e.run_id = held.id \
                 AND e.stage IN ('intended', 'attempted') \
                 AND e.attempts - e.unanswered < $5 AND e.unanswered < $6 \
             RETURNING e.attempts"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(MAX_ATTEMPTS)
        .bind(MAX_UNANSWERED_SENDS)
        .fetch_optional(&mut *conn)
        .await?;
        match attempts {
            Some(attempts) => Ok(attempts),
            None => {
                let error = diagnose(&mut conn, lease, id, Stage::Attempted).await;
                Err(refused(&self.pool, error).await)
            }
        }
    }

    /// Records that the last send was answered with a server error, a
    /// timeout or a rate limit and the read-back after it showed nothing:
    /// that send does not count against [`MAX_ATTEMPTS`]. Only for an
    /// `attempted` effect with a send not yet so recorded. `answer` (what
    /// GitHub said) is kept in `reason` for the operator, should the budget
    /// run out.
    pub async fn mark_unanswered(&self, lease: &Lease, id: EffectId, answer: &str) -> Result<()> {
        let mut conn = self.conn().await?;
        let marked: Option<i64> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE) \
             UPDATE effects e SET unanswered = e.unanswered + 1, reason = $5, updated_at = now() \
             FROM held WHERE e.id = $1 AND e.run_id = held.id \
                 AND e.stage = 'attempted' AND e.unanswered < e.attempts \
                 AND e.unanswered < $6 \
             RETURNING e.id"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(answer)
        .bind(MAX_UNANSWERED_SENDS)
        .fetch_optional(&mut *conn)
        .await?;
        match marked {
            Some(_) => Ok(()),
            None => {
                let error = diagnose(&mut conn, lease, id, Stage::Attempted).await;
                Err(refused(&self.pool, error).await)
            }
        }
    }

    /// Records what read-back showed: the effect landed. Final.
    pub async fn mark_observed(&self, lease: &Lease, id: EffectId, observed: &Value) -> Result<()> {
        self.finish(lease, id, Stage::Observed, Some(observed), None)
            .await
    }

    /// Records that the effect cannot be completed safely, and why.
    pub async fn mark_conflict(&self, lease: &Lease, id: EffectId, reason: &str) -> Result<()> {
        self.finish(lease, id, Stage::Conflict, None, Some(reason))
            .await
    }

    async fn finish(
        &self,
        lease: &Lease,
        id: EffectId,
        to: Stage,
        observed: Option<&Value>,
        reason: Option<&str>,
    ) -> Result<()> {
        let mut conn = self.conn().await?;
        let moved: Option<EffectId> = sqlx::query_scalar(concat!(
            "WITH held AS (SELECT r.id FROM runs r WHERE r.id = $2 AND ",
            lease_is_current!("$3", "$4"),
            " FOR SHARE) \
             UPDATE effects e SET stage = $5, observed = $6, reason = $7, \
                 fencing_token = $4, updated_at = now() \
             FROM held WHERE e.id = $1 AND e.run_id = held.id \
                 AND e.stage IN ('intended', 'attempted') \
             RETURNING e.id"
        ))
        .bind(id)
        .bind(lease.run_id)
        .bind(&lease.owner)
        .bind(lease.fencing_token)
        .bind(to.as_str())
        .bind(observed)
        .bind(reason)
        .fetch_optional(&mut *conn)
        .await?;
        match moved {
            Some(_) => Ok(()),
            None => {
                let error = diagnose(&mut conn, lease, id, to).await;
                Err(refused(&self.pool, error).await)
            }
        }
    }

    /// The run's effects still to drive (`intended` or `attempted`), in the
    /// order they must be driven.
    pub async fn pending_effects(&self, run_id: RunId) -> Result<Vec<Effect>> {
        Ok(sqlx::query_as::<_, Effect>(sqlx::AssertSqlSafe(format!(
            "SELECT {EFFECT_COLUMNS} FROM effects \
             WHERE run_id = $1 AND stage IN ('intended', 'attempted') \
             ORDER BY phase_entry, position"
        )))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Every effect of the run, oldest first (for the dashboard).
    pub async fn list_effects(&self, run_id: RunId) -> Result<Vec<Effect>> {
        Ok(sqlx::query_as::<_, Effect>(sqlx::AssertSqlSafe(format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE run_id = $1 \
             ORDER BY phase_entry, position"
        )))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One effect, or `None`.
    pub async fn get_effect(&self, id: EffectId) -> Result<Option<Effect>> {
        Ok(sqlx::query_as::<_, Effect>(sqlx::AssertSqlSafe(format!(
            "SELECT {EFFECT_COLUMNS} FROM effects WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }
}

#[derive(sqlx::FromRow)]
struct EffectStanding {
    run_id: RunId,
    #[sqlx(try_from = "String")]
    stage: Stage,
    attempts: i32,
    unanswered: i32,
    held: bool,
}

/// Explains why a guarded effect update matched no row. Only runs on the
/// failure path, so the happy path stays one round trip.
async fn diagnose(conn: &mut PgConnection, lease: &Lease, id: EffectId, to: Stage) -> JournalError {
    let standing = sqlx::query_as::<_, EffectStanding>(concat!(
        // A released lease leaves `lease_owner` NULL, which makes the
        // comparison NULL rather than false.
        "SELECT e.run_id, e.stage, e.attempts, e.unanswered, COALESCE((",
        lease_is_current!("$2", "$3"),
        "), false) AS held FROM effects e JOIN runs r ON r.id = e.run_id WHERE e.id = $1"
    ))
    .bind(id)
    .bind(&lease.owner)
    .bind(lease.fencing_token)
    .fetch_optional(&mut *conn)
    .await;
    match standing {
        Err(error) => error.into(),
        Ok(None) => JournalError::NotFound {
            what: "effect",
            id: id.0,
        },
        Ok(Some(effect)) if effect.run_id != lease.run_id => JournalError::InvalidInput(format!(
            "effect {id} belongs to run {}, not to the leased run {}",
            effect.run_id, lease.run_id
        )),
        Ok(Some(effect)) if !effect.held => stale(lease),
        Ok(Some(effect))
            if to == Stage::Attempted
                && effect.stage == Stage::Attempted
                && sends_exhausted(effect.attempts, effect.unanswered) =>
        {
            JournalError::AttemptsExhausted {
                effect_id: id,
                attempts: effect.attempts,
            }
        }
        Ok(Some(effect)) => JournalError::IllegalStage {
            effect_id: id,
            from: effect.stage,
            to,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_spelling() {
        for kind in EffectKind::ALL {
            assert_eq!(kind.as_str().parse::<EffectKind>().ok(), Some(*kind));
        }
        assert_eq!(EffectKind::ALL.len(), 13);
    }

    #[test]
    fn every_kind_and_no_other_is_allowed_by_the_schema() {
        // The latest migration that set the constraint; a migration changing
        // it again must be read here instead.
        let schema = include_str!("../migrations/0005_post_review.sql");
        let open = "CHECK (kind IN (";
        let start = schema.find(open).map(|at| at + open.len());
        let list = start.and_then(|s| schema[s..].find("))").map(|len| &schema[s..s + len]));
        let allowed: Vec<&str> = list
            .unwrap_or_default()
            .split(',')
            .map(|k| k.trim().trim_matches('\''))
            .collect();
        let kinds: Vec<&str> = EffectKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(allowed, kinds);
    }

    #[test]
    fn unknown_stage_is_an_error_not_a_default() {
        let error = "sent".parse::<Stage>().err().map(|e| e.to_string());
        assert_eq!(error.as_deref(), Some("unknown effect stage \"sent\""));
    }
}
