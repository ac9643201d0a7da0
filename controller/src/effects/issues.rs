//! Issue effects: `create_issue` (a follow-up issue carrying
//! `ai-follow-up`) and `append_issue_markers` (our markers appended to an
//! issue a fixer handed over), plus the body write shared by every kind that
//! replaces a whole issue body (`append_issue_markers`, `splice_epic_roadmap`).
//!
//! Append kinds are guarded by a digest of the body they were planned on:
//! the body GitHub shows must be either exactly that base (send) or exactly
//! the payload (observed). Anything else means someone edited it in
//! between, and overwriting would lose their bytes.
//!
//! Rows: `create_issue` targets `issues` with [`NewIssuePayload`] and
//! completes with the follow-up marker ([`Marked`]); `append_issue_markers`
//! targets `issue/<n>` with the whole new body, a [`BaseDigest`] and an
//! [`AppendCompletion`].

use autoforge_journal::{Effect, EffectKind, IssueNumber, NewEffect, PullNumber};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::markers::{MarkerName, Scan, scan};
use super::planning::{Draft, PlanError, blank_line_after, identity_key};
use super::protocol::{Holder, Observation, Ownership, Sent, read_failed};
use super::row::{
    BaseDigest, BodyPayload, Marked, NoPrecondition, Row, completion, digest, observed_as,
    observed_key, payload, precondition, target_number,
};
use crate::github::{Issue, writes};
use crate::publish::bodies::compose_follow_up_body;
use crate::publish::{FieldKind, check_field};

/// The follow-up issue to open, exactly as journalled.
#[derive(Serialize, Deserialize)]
struct NewIssuePayload {
    title: String,
    body: String,
    #[serde(default)]
    labels: Vec<String>,
}

/// A follow-up is identified by the finding and the PR it came from.
#[derive(Serialize, Deserialize)]
struct FollowUpKey {
    finding_id: String,
    pr: String,
}

/// An observed issue as read-back recorded it.
#[derive(Deserialize)]
struct ObservedIssue {
    number: IssueNumber,
}

/// A follow-up issue the run created and saw land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedFollowUp {
    pub finding_id: String,
    /// The URL of the pull request whose finding it defers.
    pub pr_url: String,
    pub number: IssueNumber,
}

/// The follow-up issue `effect` created, if it is one and was observed.
pub fn recorded_follow_up(effect: &Effect) -> Option<RecordedFollowUp> {
    let key: FollowUpKey = observed_key(effect, EffectKind::CreateIssue, MarkerName::FollowUp)?;
    let observed: ObservedIssue = observed_as(effect)?;
    Some(RecordedFollowUp {
        finding_id: key.finding_id,
        pr_url: key.pr,
        number: observed.number,
    })
}

/// What appending follow-up markers completes: one marker per finding.
#[derive(Serialize, Deserialize)]
struct AppendCompletion {
    marker: MarkerName,
    finding_ids: Vec<String>,
    pr: String,
    write: String,
}

/// A follow-up issue for `finding_id` of PR `pr`.
pub(crate) fn plan_follow_up(
    draft: Draft<'_>,
    pr: PullNumber,
    finding_id: &str,
    title: &str,
    body: &str,
) -> Result<NewEffect, PlanError> {
    check_field(
        "follow-up title",
        title,
        FieldKind::OneLine { max_chars: 256 },
    )?;
    let pr_url = draft.ctx.pr_url(pr);
    let composed = compose_follow_up_body(body, finding_id, &pr_url)?;
    let key = identity_key(&FollowUpKey {
        finding_id: finding_id.to_owned(),
        pr: pr_url.clone(),
    })?;
    let row = Row {
        target: "issues".into(),
        precondition: NoPrecondition {},
        payload: NewIssuePayload {
            title: title.to_owned(),
            body: draft.stamp(&composed, MarkerName::FollowUp)?,
            labels: Vec::new(),
        },
        completion: draft.marked(MarkerName::FollowUp, key),
    };
    draft.finish(EffectKind::CreateIssue, row)
}

/// Follow-up markers for `finding_ids` of PR `pr`, appended to `issue`'s
/// body as read at phase start. A finding whose marker is already there is
/// refused: the hand-over would write it twice.
pub(crate) fn plan_append(
    draft: Draft<'_>,
    issue: IssueNumber,
    pr: PullNumber,
    finding_ids: &[String],
) -> Result<NewEffect, PlanError> {
    let base = draft.ctx.body_of(issue)?;
    let pr_url = draft.ctx.pr_url(pr);
    let present = scan(base, MarkerName::FollowUp)
        .into_result()
        .map_err(PlanError::Marker)?;
    let mut lines = Vec::new();
    for finding_id in finding_ids {
        let key = identity_key(&FollowUpKey {
            finding_id: finding_id.to_owned(),
            pr: pr_url.clone(),
        })?;
        if present.iter().any(|m| m.matches(&key)) {
            return Err(PlanError::Refused(format!(
                "#{issue} already carries the marker of {finding_id}"
            )));
        }
        lines.push(draft.marker(MarkerName::FollowUp, &key, true)?);
    }
    let row = Row {
        target: format!("issue/{issue}"),
        precondition: BaseDigest {
            base_sha256: digest(base),
        },
        payload: BodyPayload {
            body: format!("{base}{}{}", blank_line_after(base), lines.join("\n")),
        },
        completion: AppendCompletion {
            marker: MarkerName::FollowUp,
            finding_ids: finding_ids.to_vec(),
            pr: pr_url,
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::AppendIssueMarkers, row)
}

pub(crate) async fn reconcile_create(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: NewIssuePayload = payload(effect)?;
    let Marked {
        marker: name, key, ..
    } = completion(effect)?;
    // Every issue in every state: a closed follow-up still holds its
    // identity, and a listing cut short could hide ours.
    let path = executor.repo.api_path("/issues?state=all");
    let issues: Vec<Issue> = executor.api.get_all(&path).await.map_err(read_failed)?;
    let mut holders = Vec::new();
    for issue in issues.iter().filter(|i| !i.is_pull_request()) {
        let body = issue.body.as_deref().unwrap_or("");
        match scan(body, name) {
            Scan::Absent => {}
            Scan::Malformed(defect) => {
                return Ok(Observation::Blocked(format!(
                    "{} carries an unreadable marker: {defect}",
                    issue.html_url
                )));
            }
            Scan::Found(markers) => {
                for marker in markers.iter().filter(|m| m.matches(&key)) {
                    holders.push(Holder::new(
                        format!("issue/{}", issue.number),
                        &issue.html_url,
                        marker,
                    ));
                }
            }
        }
    }
    let ours = match ownership.ours(&holders) {
        Ok(ours) => ours,
        Err(verdict) => return Ok(verdict),
    };
    let Some(ours) = ours else {
        return Ok(Observation::Absent);
    };
    let Some(issue) = issues
        .iter()
        .find(|i| format!("issue/{}", i.number) == ours.key)
    else {
        return Ok(Observation::Absent);
    };
    Ok(
        if issue.title == wanted.title && issue.body.as_deref() == Some(wanted.body.as_str()) {
            Observation::Present(json!({ "number": issue.number, "url": issue.html_url }))
        } else {
            Observation::Conflict(format!(
                "{} carries this effect's marker but its title or body differs from what was journalled",
                issue.html_url
            ))
        },
    )
}

pub(crate) async fn send_create(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: NewIssuePayload = payload(effect)?;
    Ok(Sent::from_result(
        writes::create_issue(
            &executor.api,
            &executor.repo,
            &wanted.title,
            &wanted.body,
            &wanted.labels,
        )
        .await,
    ))
}

pub(crate) async fn reconcile_append(
    executor: &EffectExecutor,
    effect: &Effect,
    _ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let BaseDigest { base_sha256: base } = precondition(effect)?;
    let number = target_number(effect)?;
    let issue = executor
        .api
        .issue(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let body = issue.body.as_deref().unwrap_or("");
    Ok(if body == wanted.body {
        Observation::Present(json!({ "number": issue.number, "url": issue.html_url }))
    } else if !issue.is_open() {
        Observation::Conflict(format!(
            "{} is closed; markers are appended only to open issues",
            issue.html_url
        ))
    } else if digest(body) == base {
        Observation::Absent
    } else {
        Observation::Conflict(format!(
            "the body of {} changed since the markers were planned; re-plan the hand-over",
            issue.html_url
        ))
    })
}

/// Replaces the target issue's body with the payload, byte for byte.
pub(crate) async fn send_body(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let number = target_number(effect)?;
    Ok(Sent::from_result(
        writes::update_issue_body(&executor.api, &executor.repo, number, &wanted.body).await,
    ))
}
