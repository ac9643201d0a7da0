//! Pull-request effects: `create_pr` (open the run's PR from
//! `autoforge/<n>`, body carrying `ai-implementation`) and `adopt_pr`
//! (append our block to a human's open, unmarked PR on that branch, guarded
//! by a digest of the body it was planned on).

use std::collections::BTreeMap;

use autoforge_journal::Effect;
use serde::Deserialize;
use serde_json::json;

use super::EffectError;
use super::comments::marker_name;
use super::drive::{
    EffectExecutor, Holder, Observation, Ownership, Sent, field, identity_key, payload,
    read_failed, target_number,
};
use super::issues::{BodyPayload, digest};
use super::markers::{Scan, scan};
use crate::github::{PullRequest, writes};

#[derive(Deserialize)]
struct NewPrPayload {
    title: String,
    body: String,
    head: String,
    base: String,
}

pub(crate) async fn reconcile_create(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: NewPrPayload = payload(effect)?;
    let name = marker_name(effect)?;
    let key = identity_key(effect)?;
    let repo = &executor.repo;
    // Every PR on our branch in any state, and every open PR anywhere (a
    // marker for this issue on another branch holds the identity too).
    let on_branch = executor
        .api
        .pull_requests_by_head(repo, repo.owner(), &wanted.head)
        .await
        .map_err(read_failed)?;
    let open: Vec<PullRequest> = executor
        .api
        .get_all(&repo.api_path("/pulls?state=open"))
        .await
        .map_err(read_failed)?;
    let prs: BTreeMap<u64, PullRequest> = on_branch
        .into_iter()
        .chain(open)
        .map(|pr| (pr.number, pr))
        .collect();
    let mut holders = Vec::new();
    for pr in prs.values() {
        let body = pr.body.as_deref().unwrap_or("");
        match scan(body, name) {
            Scan::Malformed(defect) => {
                return Ok(Observation::Blocked(format!(
                    "{} carries an unreadable marker: {defect}",
                    pr.html_url
                )));
            }
            Scan::Found(markers) => {
                for marker in markers.iter().filter(|m| m.matches(&key)) {
                    holders.push(Holder::new(
                        format!("pull/{}", pr.number),
                        &pr.html_url,
                        marker,
                    ));
                }
            }
            Scan::Absent if pr.state == "open" && pr.head.ref_name == wanted.head => {
                return Ok(Observation::Conflict(format!(
                    "{} is open on {} without our marker; it must be adopted, not duplicated",
                    pr.html_url, wanted.head
                )));
            }
            Scan::Absent => {}
        }
    }
    let ours = match ownership.ours(&holders) {
        Ok(Some(ours)) => ours,
        Ok(None) => return Ok(Observation::Absent),
        Err(verdict) => return Ok(verdict),
    };
    let Some(pr) = prs
        .values()
        .find(|pr| format!("pull/{}", pr.number) == ours.key)
    else {
        return Ok(Observation::Absent);
    };
    let matches = pr.state == "open"
        && pr.head.ref_name == wanted.head
        && pr.base.ref_name == wanted.base
        && pr.title == wanted.title
        && pr.body.as_deref() == Some(wanted.body.as_str());
    Ok(if matches {
        Observation::Present(json!({
            "number": pr.number, "url": pr.html_url, "head_sha": pr.head.sha,
        }))
    } else {
        Observation::Conflict(format!(
            "{} carries this effect's marker but is not the PR that was journalled \
             (state, branches, title or body differ)",
            pr.html_url
        ))
    })
}

pub(crate) async fn send_create(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: NewPrPayload = payload(effect)?;
    let new = writes::NewPullRequest {
        title: &wanted.title,
        body: &wanted.body,
        head: &wanted.head,
        base: &wanted.base,
        draft: false,
    };
    Ok(Sent::from_result(
        writes::create_pull_request(&executor.api, &executor.repo, &new).await,
    ))
}

pub(crate) async fn reconcile_adopt(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let base: String = field(effect, "precondition", "base_sha256")?;
    let name = marker_name(effect)?;
    let number = target_number(effect)?;
    let pr = executor
        .api
        .pull_request(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let body = pr.body.as_deref().unwrap_or("");
    if body == wanted.body {
        return Ok(Observation::Present(json!({
            "number": pr.number, "url": pr.html_url, "head_sha": pr.head.sha,
        })));
    }
    if pr.state != "open" {
        return Ok(Observation::Conflict(format!(
            "{} is no longer open",
            pr.html_url
        )));
    }
    match scan(body, name) {
        Scan::Malformed(defect) => {
            return Ok(Observation::Blocked(format!(
                "{} carries an unreadable marker: {defect}",
                pr.html_url
            )));
        }
        Scan::Found(markers) => {
            let holders: Vec<Holder> = markers
                .iter()
                .map(|m| Holder::new(format!("pull/{}", pr.number), &pr.html_url, m))
                .collect();
            if let Err(verdict) = ownership.ours(&holders) {
                return Ok(verdict);
            }
            return Ok(Observation::Conflict(format!(
                "{} already carries an implementation marker but not the journalled body",
                pr.html_url
            )));
        }
        Scan::Absent => {}
    }
    Ok(if digest(body) == base {
        Observation::Absent
    } else {
        Observation::Conflict(format!(
            "the body of {} changed since the adoption was planned; re-plan it",
            pr.html_url
        ))
    })
}

pub(crate) async fn send_adopt(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Sent, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let number = target_number(effect)?;
    let update = writes::PullRequestUpdate {
        body: Some(&wanted.body),
        ..Default::default()
    };
    Ok(Sent::from_result(
        writes::update_pull_request(&executor.api, &executor.repo, number, &update).await,
    ))
}
