//! The dedupe keys of sightings: two sightings of one change, by webhook
//! and by poll, build the same key, so the change acts once.

use super::Sighting;

impl Sighting {
    /// The dedupe key of the change. Trigger removals are keyed per run
    /// (see [`entries_for`]), so they have none here.
    ///
    /// Long by design: one arm per kind of sighting, each naming the fields
    /// that make two sightings the same change.
    pub(super) fn key(&self) -> String {
        match self {
            Sighting::TriggerLabeled {
                repository,
                issue,
                labeling,
                ..
            } => format!("trigger:{repository}#{issue}:{labeling}"),
            Sighting::TriggerRemoved {
                repository, issue, ..
            } => {
                format!("trigger-removed:{repository}#{issue}")
            }
            Sighting::IssueClosed {
                repository,
                issue,
                closed_at,
            } => format!("closed:{repository}#{issue}@{closed_at}"),
            Sighting::IssueReopened {
                repository,
                issue,
                updated_at,
            } => format!("reopened:{repository}#{issue}@{updated_at}"),
            Sighting::IssueEdited {
                repository,
                issue,
                updated_at,
                ..
            } => format!("edited:{repository}#{issue}@{updated_at}"),
            Sighting::Commands {
                repository,
                comment_id,
                updated_at,
                body_digest,
                ..
            } => comment_key(repository, *comment_id, updated_at, body_digest),
            Sighting::PrHead {
                repository,
                pr,
                head_sha,
            } => format!("pr-head:{repository}#{pr}@{head_sha}"),
            Sighting::PrClosed {
                repository,
                pr,
                closed_at,
                ..
            } => format!("pr-closed:{repository}#{pr}@{closed_at}"),
            Sighting::PrReopened {
                repository,
                pr,
                updated_at,
            } => format!("pr-reopened:{repository}#{pr}@{updated_at}"),
            Sighting::PrBase {
                repository,
                pr,
                new_base,
            } => format!("pr-base:{repository}#{pr}@{new_base}"),
            Sighting::ChecksCompleted {
                repository,
                head_sha,
                delivery,
                ..
            } => format!("checks:{repository}@{head_sha}:{delivery}"),
            Sighting::StatusReported {
                repository,
                head_sha,
                delivery,
            } => format!("status:{repository}@{head_sha}:{delivery}"),
            Sighting::PrReviewed {
                repository,
                pr,
                changes_requested: Some(by),
                ..
            } => format!("review:{repository}#{pr}:review-{}", by.review_id),
            Sighting::PrReviewed {
                repository,
                pr,
                head_sha,
                delivery,
                ..
            } => format!("review:{repository}#{pr}@{head_sha}:{delivery}"),
        }
    }
}

/// The dedupe key of one version of a comment. `updated_at` has second
/// resolution, so the body digest tells apart two versions of one second.
pub fn comment_key(
    repository: &str,
    comment_id: u64,
    updated_at: &str,
    body_digest: &str,
) -> String {
    format!(
        "{}{updated_at}:{body_digest}",
        comment_key_prefix(repository, comment_id)
    )
}

/// The common start of the keys of every version of a comment.
pub fn comment_key_prefix(repository: &str, comment_id: u64) -> String {
    format!("comment:{repository}:{comment_id}@")
}

/// A short digest of a comment body for [`comment_key`].
pub fn body_digest(body: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body.as_bytes());
    hex::encode(&digest[..8])
}

/// How a trigger labelling or removal found as a `labeled`/`unlabeled`
/// issue event is named in [`Sighting::TriggerLabeled`] and
/// [`Sighting::TriggerRemoved`]; webhook and poller both use it.
pub fn labeling_of_event(label_event_id: u64) -> String {
    format!("event-{label_event_id}")
}

/// Whether the label removal `removal` happened before the labelling
/// whose change key is `start_key`. Both are named by their issue events
/// (`event-<id>`), whose ids GitHub hands out in increasing order; a
/// removal or labelling known only by its delivery cannot be ordered, so
/// it does not count as earlier.
pub(super) fn predates(removal: &str, start_key: &str) -> bool {
    let id = |text: &str| text.strip_prefix("event-")?.parse::<u64>().ok();
    let labeling = start_key.rsplit_once(':').and_then(|(_, last)| id(last));
    match (id(removal), labeling) {
        (Some(removed), Some(labeled)) => removed < labeled,
        _ => false,
    }
}
