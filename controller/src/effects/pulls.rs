//! Pull-request effects: `create_pr` (open the run's PR from
//! `autoforge/<n>`, body carrying `ai-implementation`) and `adopt_pr`
//! (append our block to a human's open, unmarked PR on that branch, guarded
//! by a digest of the body it was planned on).
//!
//! Rows: `create_pr` targets `head/<branch>` with [`NewPrPayload`];
//! `adopt_pr` targets `pull/<n>` with the whole new body and a
//! [`BaseDigest`]. Both complete with the `ai-implementation` marker
//! naming the issue ([`Marked`]).

use std::collections::BTreeMap;

use autoforge_journal::{Effect, EffectKind, IssueNumber, NewEffect, PullNumber};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::markers::{MarkerName, Scan, scan};
use super::planning::{Draft, PlanError, blank_line_after, identity_key};
use super::protocol::{Holder, Observation, Ownership, Sent, read_failed};
use super::row::{
    BaseDigest, BodyPayload, Marked, Row, completion, digest, payload, precondition, target_number,
};
use crate::github::{PullRequest, writes};
use crate::publish::bodies::{compose_pr_body, implementation_block};
use crate::publish::{FieldKind, check_field};

/// The pull request to open, exactly as journalled.
#[derive(Serialize, Deserialize)]
struct NewPrPayload {
    title: String,
    body: String,
    head: String,
    base: String,
}

/// Opening is planned for a branch with no PR of ours on it.
#[derive(Serialize, Deserialize)]
struct CreatePrecondition {
    no_pr_on_branch: String,
}

/// The implementation marker names the issue the PR implements.
#[derive(Serialize)]
struct ImplementationKey {
    issue: String,
}

fn implementation(draft: &Draft<'_>, issue: IssueNumber) -> Result<Marked, PlanError> {
    let key = identity_key(&ImplementationKey {
        issue: draft.ctx.issue_url(issue),
    })?;
    Ok(draft.marked(MarkerName::Implementation, key))
}

/// The run's PR for `issue`, from `branch` into `base`.
pub(crate) fn plan_create(
    draft: Draft<'_>,
    issue: IssueNumber,
    branch: &str,
    base: &str,
    title: &str,
    body: &str,
) -> Result<NewEffect, PlanError> {
    check_field("pr title", title, FieldKind::OneLine { max_chars: 256 })?;
    let ctx = draft.ctx;
    let composed = compose_pr_body(body, &ctx.issue_ref(issue), &ctx.issue_url(issue))?;
    let row = Row {
        target: format!("head/{branch}"),
        precondition: CreatePrecondition {
            no_pr_on_branch: branch.to_owned(),
        },
        payload: NewPrPayload {
            title: title.to_owned(),
            body: draft.stamp(&composed, MarkerName::Implementation)?,
            head: branch.to_owned(),
            base: base.to_owned(),
        },
        completion: implementation(&draft, issue)?,
    };
    draft.finish(EffectKind::CreatePr, row)
}

/// Our implementation block appended to `pr`'s body as read at phase start.
pub(crate) fn plan_adopt(
    draft: Draft<'_>,
    pr: PullNumber,
    issue: IssueNumber,
) -> Result<NewEffect, PlanError> {
    let ctx = draft.ctx;
    let base = ctx.body_of(pr.as_issue())?;
    if scan(base, MarkerName::Implementation) != Scan::Absent {
        return Err(PlanError::Refused(format!(
            "#{pr} already carries an implementation marker"
        )));
    }
    let block = draft.stamp(
        &implementation_block(&ctx.issue_ref(issue), &ctx.issue_url(issue)),
        MarkerName::Implementation,
    )?;
    let row = Row {
        target: format!("pull/{pr}"),
        precondition: BaseDigest {
            base_sha256: digest(base),
        },
        payload: BodyPayload {
            body: format!("{base}{}{block}", blank_line_after(base)),
        },
        completion: implementation(&draft, issue)?,
    };
    draft.finish(EffectKind::AdoptPr, row)
}

pub(crate) async fn reconcile_create(
    executor: &EffectExecutor,
    effect: &Effect,
    ownership: &Ownership,
) -> Result<Observation, EffectError> {
    let wanted: NewPrPayload = payload(effect)?;
    let Marked {
        marker: name, key, ..
    } = completion(effect)?;
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
    let prs: BTreeMap<PullNumber, PullRequest> = on_branch
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
    let BaseDigest { base_sha256: base } = precondition(effect)?;
    let Marked { marker: name, .. } = completion(effect)?;
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
