//! The dispatcher: claims due deliveries from the inbox (`SKIP LOCKED`, so
//! replicas share the work), turns each into a [`Sighting`], plans and
//! applies it in one transaction together with the delivery's processed
//! mark. A failure is retried with jittered exponential backoff; after
//! [`MAX_ATTEMPTS`] claims, or at once for a payload that can never be
//! read, the delivery is given up with its error recorded.

use std::sync::Arc;
use std::time::Duration;

use autoforge_journal::{Delivery, DeliveryRetry, EventSource, Journal};
use chrono::Utc;
use rand::Rng;
use serde::Deserialize;
use tokio::sync::{Notify, watch};

use super::access::GitHubAccess;
use super::answering::{has_answer, send_pending_answers};
use super::entries::{ChangeEntries, Entry, Recorded, record};
use super::sighting::{Sighting, body_digest, entries_for, labeling_of_event};
use super::signal::RunListener;
use crate::commands::{commands_added_by_edit, parse_commands};
use crate::metrics::{DispatchFailure, Processed};
use crate::webhook::{Classified, ClassifyContext, classify};

/// Claims after which a failing delivery is given up.
pub const MAX_ATTEMPTS: i32 = 6;
const BATCH: i64 = 16;
/// A claim hides a delivery this long; a worker that dies mid-way loses it
/// to another worker afterwards.
const VISIBILITY: Duration = Duration::from_secs(120);
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// The dispatcher's dependencies.
#[derive(Clone)]
pub struct Dispatcher {
    pub journal: Journal,
    pub access: GitHubAccess,
    /// Names this worker in claims (host and process).
    pub worker: String,
    /// Notified by local ingress on each new delivery; deliveries stored by
    /// other replicas are found by the idle poll.
    pub wakeup: Arc<Notify>,
    /// This process's run driver: woken when a run event is stored, and
    /// told to kill a run's agent when a stop is stored.
    pub notifier: Arc<dyn RunListener>,
}

/// Why handling a delivery failed.
enum Failure {
    /// Worth retrying (GitHub or the database may be back later).
    Transient(anyhow::Error),
    /// The payload will never be readable.
    Permanent(anyhow::Error),
}

impl Dispatcher {
    /// Works until `shutdown` turns true; the delivery in hand is finished first.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        // Answers a crash left unsent go out before anything new.
        send_pending_answers(&self.journal, &self.access).await;
        while !*shutdown.borrow() {
            let claimed = match self
                .journal
                .claim_deliveries(&self.worker, BATCH, VISIBILITY)
                .await
            {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(%error, "dispatcher cannot claim deliveries");
                    Vec::new()
                }
            };
            if claimed.is_empty() {
                tokio::select! {
                    () = tokio::time::sleep(IDLE_WAIT) => {}
                    () = self.wakeup.notified() => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            for delivery in claimed {
                self.dispatch_one(&delivery).await;
            }
        }
        tracing::info!("dispatcher stopped");
    }

    /// Handles one claimed delivery and records the outcome.
    pub async fn dispatch_one(&self, delivery: &Delivery) {
        let span = tracing::info_span!(
            "dispatch",
            delivery_id = %delivery.delivery_id,
            event = %delivery.event
        );
        // `instrument`, never an entered guard across `.await`: a guard
        // held while the task is suspended leaks the span into whatever
        // else the worker thread polls, and tracing-subscriber panics when
        // it is closed from another thread.
        tracing::Instrument::instrument(self.dispatch_in_span(delivery), span).await;
    }

    async fn dispatch_in_span(&self, delivery: &Delivery) {
        let failure = match self.handle(delivery).await {
            Ok(()) => return,
            Err(failure) => failure,
        };
        let (error, retry) = match failure {
            Failure::Permanent(error) => (error, DeliveryRetry::GiveUp),
            Failure::Transient(error) if delivery.attempts >= MAX_ATTEMPTS => {
                (error, DeliveryRetry::GiveUp)
            }
            Failure::Transient(error) => (
                error,
                DeliveryRetry::At(Utc::now() + retry_delay(delivery.attempts)),
            ),
        };
        let message = format!("{error:#}");
        crate::metrics::delivery_failed(&delivery.event, failure_outcome(&retry));
        tracing::warn!(error = %message, ?retry, "delivery failed");
        if let Err(error) = self
            .journal
            .record_delivery_failure(delivery.id, &message, retry)
            .await
        {
            // The claim expires and the delivery comes back by itself.
            tracing::error!(%error, "cannot record the delivery failure");
        }
    }

    async fn handle(&self, delivery: &Delivery) -> Result<(), Failure> {
        let context = ClassifyContext {
            trigger_label: &self.access.trigger_label,
            app_slug: &self.access.app_slug,
            own_login: &self.access.own_login,
            is_app: self.access.is_app(),
        };
        let observation = classify(&delivery.event, &delivery.payload, &context)
            .map_err(|error| Failure::Permanent(error.into()))?;
        let sighting = if self.served(delivery) {
            self.sighting(delivery, observation)
                .await
                .map_err(Failure::Transient)?
        } else {
            None
        };
        let change = match &sighting {
            Some(sighting) => {
                let api = self
                    .access
                    .api_for(delivery.installation_id)
                    .map_err(Failure::Transient)?;
                entries_for(sighting, &self.journal, &self.access, &api)
                    .await
                    .map_err(Failure::Transient)?
            }
            None => None,
        };
        let applied = record(
            &self.journal,
            change.as_ref(),
            EventSource::Webhook,
            Some(delivery.id),
        )
        .await
        .map_err(|error| Failure::Transient(error.into()))?;
        if let (Some(change), Recorded::Done { .. }) = (&change, &applied) {
            notify_driver(&self.journal, self.notifier.as_ref(), change).await;
            if has_answer(change) {
                #[cfg(feature = "crash-points")]
                crate::effects::crashpoint::crash_point(
                    crate::effects::crashpoint::Point::AfterIntentCommit,
                    autoforge_journal::EffectKind::PostComment,
                    &crate::effects::answer_crash_identity(&change.key),
                );
                send_pending_answers(&self.journal, &self.access).await;
            }
        }
        crate::metrics::delivery_processed(&delivery.event, processed_outcome(&change, &applied));
        tracing::info!(
            ?applied,
            key = change.as_ref().map(|p| p.key.as_str()),
            "delivery processed"
        );
        Ok(())
    }

    /// Whether the delivery's repository belongs to an owner this
    /// controller serves (`github.allowed_owners`); others are recorded as
    /// processed and nothing else.
    fn served(&self, delivery: &Delivery) -> bool {
        let Some(repository) = delivery.repository.as_deref() else {
            return true;
        };
        let owner = repository
            .split_once('/')
            .map_or(repository, |(owner, _)| owner);
        let served = self.access.serves_owner(owner);
        if !served {
            tracing::info!(%repository, "delivery ignored: the owner is not in github.allowed_owners");
        }
        served
    }

    /// The sighting an observation stands for; `None` when it concerns no
    /// run (ignored events, comments without commands, …).
    ///
    /// Long by design: one arm per kind of classified delivery.
    async fn sighting(
        &self,
        delivery: &Delivery,
        observation: Classified,
    ) -> anyhow::Result<Option<Sighting>> {
        let times: PayloadTimes = serde_json::from_slice(&delivery.payload)?;
        // Without a version stamp the change cannot be matched with a poll
        // sighting; keying it by the delivery still makes it act once.
        let unversioned = format!("delivery-{}", delivery.delivery_id);
        let sighting = match observation {
            Classified::TriggerLabelAdded {
                issue,
                issue_open,
                sender,
            } => {
                if !issue_open {
                    return Ok(None);
                }
                let api = self.access.api_for(delivery.installation_id)?;
                let labeling = self
                    .access
                    .latest_trigger_labeling(&api, &issue.repository, issue.number)
                    .await?
                    .map_or_else(
                        || format!("delivery-{}", delivery.delivery_id),
                        |event| labeling_of_event(event.id),
                    );
                Sighting::TriggerLabeled {
                    repository: issue.repository,
                    issue: issue.number,
                    actor: sender,
                    labeling,
                }
            }
            Classified::TriggerLabelRemoved { issue, sender } => {
                let api = self.access.api_for(delivery.installation_id)?;
                let removal = self
                    .access
                    .latest_trigger_removal(&api, &issue.repository, issue.number)
                    .await?
                    .map_or_else(
                        || format!("delivery-{}", delivery.delivery_id),
                        |event| labeling_of_event(event.id),
                    );
                Sighting::TriggerRemoved {
                    repository: issue.repository,
                    issue: issue.number,
                    actor: Some(sender),
                    removal,
                }
            }
            Classified::IssueClosed { issue } => Sighting::IssueClosed {
                repository: issue.repository,
                issue: issue.number,
                closed_at: times
                    .issue_closed_at()
                    .unwrap_or_else(|| unversioned.clone()),
            },
            Classified::IssueReopened { issue } => Sighting::IssueReopened {
                repository: issue.repository,
                issue: issue.number,
                updated_at: times
                    .issue_updated_at()
                    .unwrap_or_else(|| unversioned.clone()),
            },
            Classified::IssueEdited { issue, editor, .. } => Sighting::IssueEdited {
                repository: issue.repository,
                issue: issue.number,
                editor,
                updated_at: times
                    .issue_updated_at()
                    .unwrap_or_else(|| unversioned.clone()),
            },
            Classified::CommentCreated {
                issue,
                comment_id,
                body,
                author,
                ..
            } => Sighting::Commands {
                repository: issue.repository,
                issue: issue.number,
                comment_id,
                updated_at: times
                    .comment_updated_at()
                    .unwrap_or_else(|| unversioned.clone()),
                body_digest: body_digest(&body),
                actor: author,
                commands: parse_commands(&body),
            },
            Classified::CommentEdited {
                issue,
                comment_id,
                old_body,
                new_body,
                editor,
                ..
            } => Sighting::Commands {
                repository: issue.repository,
                issue: issue.number,
                comment_id,
                updated_at: times
                    .comment_updated_at()
                    .unwrap_or_else(|| unversioned.clone()),
                body_digest: body_digest(&new_body),
                actor: editor,
                commands: commands_added_by_edit(&old_body, &new_body),
            },
            Classified::PrSynchronize { pr, head_sha, .. } => Sighting::PrHead {
                repository: pr.repository,
                pr: pr.number,
                head_sha,
            },
            Classified::PrClosed {
                pr,
                merged,
                merge_commit_sha,
                ..
            } => Sighting::PrClosed {
                repository: pr.repository,
                pr: pr.number,
                merged,
                merge_commit_sha: if merged { merge_commit_sha } else { None },
                closed_at: times.pr_closed_at().unwrap_or_else(|| unversioned.clone()),
            },
            Classified::PrReopened { pr } => Sighting::PrReopened {
                repository: pr.repository,
                pr: pr.number,
                updated_at: times.pr_updated_at().unwrap_or_else(|| unversioned.clone()),
            },
            Classified::PrBaseChanged { pr, new_base, .. } => Sighting::PrBase {
                repository: pr.repository,
                pr: pr.number,
                new_base,
            },
            Classified::PrReviewed {
                pr,
                head_sha,
                changes_requested,
            } => Sighting::PrReviewed {
                repository: pr.repository,
                pr: pr.number,
                head_sha,
                delivery: delivery.delivery_id.clone(),
                changes_requested,
            },
            Classified::StatusReported {
                repository,
                head_sha,
            } => Sighting::StatusReported {
                repository,
                head_sha,
                delivery: delivery.delivery_id.clone(),
            },
            Classified::CheckCompleted {
                repository,
                head_sha,
                pull_requests,
            } => Sighting::ChecksCompleted {
                repository,
                head_sha,
                pull_requests,
                delivery: delivery.delivery_id.clone(),
            },
            Classified::InstallationChanged {
                installation_id,
                action,
                ..
            } => {
                // The poller lists installations every pass, so nothing to
                // queue; the driver rebuilds its map of served repositories
                // (runs of a removed one stop there). The delivery row is
                // the record.
                tracing::info!(installation_id, %action, "installation changed");
                self.notifier.repositories_changed();
                return Ok(None);
            }
            Classified::Ignored { why } => {
                tracing::debug!(%why, "delivery ignored");
                return Ok(None);
            }
        };
        Ok(Some(sighting))
    }
}

/// After a change committed: the runs it queued events for are due now, a
/// stop kills the run's agent at once, and the driver looks without
/// waiting for its next poll. Failures here only cost latency (the idle
/// re-check finds the events), so they are logged, not returned.
pub(super) async fn notify_driver(
    journal: &Journal,
    notifier: &dyn RunListener,
    change: &ChangeEntries,
) {
    for entry in &change.entries {
        let Entry::Signal { run_id, signal, .. } = entry else {
            continue;
        };
        if signal.stops_the_run() && notifier.stop_run(*run_id) {
            tracing::info!(run = %run_id, "stop stored; the running agent is cancelled");
        }
        if let Err(error) = journal.wake_run(*run_id).await {
            tracing::warn!(%error, run = %run_id, "cannot make the run due now");
        }
    }
    notifier.wake_driver();
}

fn processed_outcome(change: &Option<ChangeEntries>, applied: &Recorded) -> Processed {
    match (change, applied) {
        (None, _) => Processed::Ignored,
        (Some(_), Recorded::AlreadySeen) => Processed::AlreadySeen,
        (Some(_), Recorded::Done { started: Some(_) }) => Processed::Started,
        (Some(_), Recorded::Done { started: None }) => Processed::Applied,
    }
}

fn failure_outcome(retry: &DeliveryRetry) -> DispatchFailure {
    match retry {
        DeliveryRetry::GiveUp => DispatchFailure::GaveUp,
        DeliveryRetry::At(_) => DispatchFailure::Retry,
    }
}

/// Exponential backoff from 2 s, capped at 5 minutes, with ±25 % jitter so
/// that a burst of failures does not retry in lockstep.
pub fn retry_delay(attempts: i32) -> chrono::Duration {
    let exponent = u32::try_from(attempts.clamp(1, 9) - 1).unwrap_or(0);
    let base_ms = (2_000_u64 << exponent).min(300_000);
    let jitter = rand::rng().random_range(0.75..1.25);
    // Both factors are small and positive: the product fits easily.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let millis = (base_ms as f64 * jitter) as i64;
    chrono::Duration::milliseconds(millis)
}

/// The version stamps of the objects in a payload, which classification
/// does not keep but dedupe keys need.
#[derive(Debug, Default, Deserialize)]
struct PayloadTimes {
    issue: Option<Stamps>,
    comment: Option<Stamps>,
    pull_request: Option<Stamps>,
}

#[derive(Debug, Default, Deserialize)]
struct Stamps {
    updated_at: Option<String>,
    closed_at: Option<String>,
}

impl PayloadTimes {
    fn issue_updated_at(&self) -> Option<String> {
        self.issue.as_ref()?.updated_at.clone()
    }
    fn issue_closed_at(&self) -> Option<String> {
        self.issue.as_ref()?.closed_at.clone()
    }
    fn comment_updated_at(&self) -> Option<String> {
        self.comment.as_ref()?.updated_at.clone()
    }
    fn pr_updated_at(&self) -> Option<String> {
        self.pull_request.as_ref()?.updated_at.clone()
    }
    fn pr_closed_at(&self) -> Option<String> {
        self.pull_request.as_ref()?.closed_at.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_grows_and_stays_capped() {
        let first = retry_delay(1).num_milliseconds();
        let third = retry_delay(3).num_milliseconds();
        let late = retry_delay(50).num_milliseconds();
        assert!((1_500..=2_500).contains(&first), "{first}");
        assert!((6_000..=10_000).contains(&third), "{third}");
        assert!(late <= 375_000, "{late}");
    }
}
