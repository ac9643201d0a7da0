//! `drive`: one step of the write-ahead protocol for one effect (SPEC §6
//! rule 2) — reconcile by a complete identity read, mark `attempted`, send
//! once, read back — and the dispatch from an effect's kind to the kind's
//! `reconcile` and `send`. What those may conclude is in [`super::protocol`].

use autoforge_journal::{Effect, EffectKind, Lease, MAX_UNANSWERED_SENDS, Stage};
use serde::Deserialize;
use serde_json::Value;

#[cfg(feature = "crash-points")]
use super::crashpoint::{Point, crash_point};
use super::executor::EffectExecutor;
use super::protocol::{Observation, Ownership, Sent};
use super::row::Nonce;
use super::{
    EffectError, check_run, comments, epic, issues, labels, merge, pulls, push, reactions, reviews,
};
use crate::metrics::DriveEnd;

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

impl EffectExecutor {
    /// One step of SPEC §6 rule 2 for `effect` (a row of
    /// `pending_effects`). At most one write is sent per call.
    pub async fn drive(&self, lease: &Lease, effect: &Effect) -> Result<DriveOutcome, EffectError> {
        let outcome = self.drive_step(lease, effect).await;
        crate::metrics::effect_driven(effect.kind, drive_end(&outcome));
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
        if effect.sends_exhausted() {
            let last = effect
                .reason
                .as_deref()
                .map(|answer| format!(", the last: {answer}"))
                .unwrap_or_default();
            let reason = format!(
                "{} was sent {} times without a visible result ({} of them answered with \
                 an error{last}); perform it by hand (target {}, identity {}) or remove \
                 whatever prevents it, then unblock",
                effect.kind, effect.attempts, effect.unanswered, effect.target, effect.identity
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
            // After a send whose outcome is unknown, a refusal may be
            // GitHub refusing for the sake of that earlier send, still
            // landing (a merge it is finishing): the next reconcile
            // decides, within the unanswered budget.
            (Observation::Absent, Sent::Refused(reason))
                if effect.attempts > 0 && effect.unanswered + 1 < MAX_UNANSWERED_SENDS =>
            {
                let answer = format!("GitHub refused the {}: {reason}", effect.kind);
                tracing::warn!(effect = %effect.id, kind = %effect.kind, %answer, "refused after an earlier send of unknown outcome; reconciled again later");
                self.journal
                    .mark_unanswered(lease, effect.id, &answer)
                    .await?;
                Ok(DriveOutcome::StillAttempted)
            }
            (Observation::Absent, Sent::Refused(reason)) => {
                let reason = format!("GitHub refused the {}: {reason}", effect.kind);
                self.journal
                    .mark_conflict(lease, effect.id, &reason)
                    .await?;
                Ok(DriveOutcome::Conflict { reason })
            }
            (Observation::Absent, Sent::Unknown(error)) => {
                // GitHub answered with an error and nothing landed: this
                // send is not one whose outcome is in doubt, so it does not
                // spend one of the effect's attempts.
                tracing::warn!(effect = %effect.id, kind = %effect.kind, %error, "send answered with an error and not visible; stays attempted");
                self.journal
                    .mark_unanswered(lease, effect.id, &error)
                    .await?;
                Ok(DriveOutcome::StillAttempted)
            }
            (Observation::Absent, Sent::Answered) => {
                tracing::warn!(effect = %effect.id, kind = %effect.kind, "write answered but not visible after sending; stays attempted");
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
        // Every row this build writes carries its nonce in `completion`.
        let own_writes = self
            .journal
            .list_effects(effect.run_id)
            .await?
            .iter()
            .filter_map(|e| Nonce::deserialize(&e.completion).ok())
            .map(|n| n.write)
            .collect();
        Ok(Ownership::new(own_writes, self.entry_seen.clone()))
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
            EffectKind::CheckRun => check_run::reconcile(self, effect).await,
            EffectKind::PostReview => reviews::reconcile(self, effect, ownership).await,
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
            EffectKind::CheckRun => check_run::send(self, effect).await,
            EffectKind::PostReview => reviews::send(self, effect).await,
        }
    }
}

/// The metric's fixed name for how a drive step ended (never its reason).
fn drive_end(outcome: &Result<DriveOutcome, EffectError>) -> DriveEnd {
    match outcome {
        Ok(DriveOutcome::Observed(_)) => DriveEnd::Observed,
        Ok(DriveOutcome::StillAttempted) => DriveEnd::StillAttempted,
        Ok(DriveOutcome::Conflict { .. }) => DriveEnd::Conflict,
        Ok(DriveOutcome::Blocked { .. }) => DriveEnd::Blocked,
        Ok(DriveOutcome::Rerequest { .. }) => DriveEnd::Rerequest,
        Err(_) => DriveEnd::Error,
    }
}
