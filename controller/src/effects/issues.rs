//! Issue effects: `create_issue` (a follow-up issue carrying
//! `ai-follow-up`) and `append_issue_markers` (our markers appended to an
//! issue a fixer handed over), plus the body write shared by every kind that
//! replaces a whole issue body (`append_issue_markers`, `splice_epic_roadmap`).
//!
//! Append kinds are guarded by a digest of the body they were planned on:
//! the body GitHub shows must be either exactly that base (send) or exactly
//! the payload (observed). Anything else means someone edited it in
//! between, and overwriting would lose their bytes.

use autoforge_journal::Effect;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::EffectError;
use super::comments::marker_name;
use super::drive::{
    EffectExecutor, Holder, Observation, Ownership, Sent, field, identity_key, payload,
    read_failed, target_number,
};
use super::markers::{Scan, scan};
use crate::github::{Issue, writes};

/// Lower-case hex SHA-256 of `text`.
pub(crate) fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[derive(Deserialize)]
struct NewIssuePayload {
    title: String,
    body: String,
    #[serde(default)]
    labels: Vec<String>,
}

/// The payload of whole-body writes.
#[derive(Deserialize)]
pub(crate) struct BodyPayload {
    pub body: String,
}

pub(crate) async fn reconcile_create(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: NewIssuePayload = payload(effect)?;
    let name = marker_name(effect)?;
    let key = identity_key(effect)?;
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
    let base: String = field(effect, "precondition", "base_sha256")?;
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
