//! `check_run`: the run's one `autoforge` check run per PR head, created
//! on the first write for that head and updated in place afterwards.
//!
//! Row: target `commit/<head sha>`, payload [`CheckPayload`] (the create
//! request), no precondition, completion [`CheckCompletion`]. The check is
//! recognised by its `external_id`, which names the run and the head, so a
//! crash between the create and its record finds the check it made
//! instead of making a second one. Reconcile lists the head's checks named
//! `autoforge`: ours showing the payload's status, conclusion and output is
//! the completion; ours showing something else (an earlier write) or none
//! is a write still to send.

use autoforge_journal::{CommitSha, Effect, EffectKind, IssueNumber, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::EffectError;
use super::executor::EffectExecutor;
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{NoPrecondition, Row, completion, payload};
use super::texts::check_run_text;
use crate::github::{CheckRun, writes};
use crate::machine::{CheckRunView, CheckShows, StatusSnapshot};

/// The name branch protection can require.
pub const CHECK_NAME: &str = "autoforge";

/// The check's visible text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CheckOutput {
    title: String,
    summary: String,
}

/// GitHub's create request, sent as is (an update sends all of it but the
/// name and head, which a check run keeps).
#[derive(Debug, Serialize, Deserialize)]
struct CheckPayload {
    name: String,
    head_sha: CommitSha,
    external_id: String,
    /// `in_progress` or `completed`.
    status: String,
    /// Set exactly when `status` is `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conclusion: Option<String>,
    details_url: String,
    output: CheckOutput,
}

#[derive(Debug, Serialize, Deserialize)]
struct CheckCompletion {
    external_id: String,
    write: String,
}

/// GitHub's conclusion for what the check shows; `None` while in progress.
fn conclusion(shows: &CheckShows) -> Option<&'static str> {
    match shows {
        CheckShows::InProgress { .. } => None,
        CheckShows::Success => Some("success"),
        CheckShows::Neutral { .. } | CheckShows::Superseded { .. } => Some("neutral"),
        CheckShows::Failure { .. } => Some("failure"),
        CheckShows::Cancelled => Some("cancelled"),
    }
}

/// The run's check on `view.head_sha`, showing `view.shows`.
pub(crate) fn plan(
    draft: Draft<'_>,
    issue: IssueNumber,
    view: &CheckRunView,
    status: &StatusSnapshot,
) -> Result<NewEffect, PlanError> {
    let (title, summary) = check_run_text(&view.shows, status)?;
    let external_id = format!("autoforge:run={}:head={}", draft.run(), view.head_sha);
    let conclusion = conclusion(&view.shows);
    let row = Row {
        target: format!("commit/{}", view.head_sha),
        precondition: NoPrecondition {},
        payload: CheckPayload {
            name: CHECK_NAME.to_owned(),
            head_sha: view.head_sha.clone(),
            external_id: external_id.clone(),
            status: if conclusion.is_some() {
                "completed"
            } else {
                "in_progress"
            }
            .to_owned(),
            conclusion: conclusion.map(str::to_owned),
            details_url: draft.ctx.issue_url(issue),
            output: CheckOutput { title, summary },
        },
        completion: CheckCompletion {
            external_id,
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::CheckRun, row)
}

/// Our checks on the head: those carrying the row's `external_id`.
async fn ours(executor: &EffectExecutor, effect: &Effect) -> Result<Vec<CheckRun>, EffectError> {
    let wanted: CheckPayload = payload(effect)?;
    let identity: CheckCompletion = completion(effect)?;
    let runs = executor
        .api
        .check_runs_named(&executor.repo, &wanted.head_sha, CHECK_NAME)
        .await
        .map_err(read_failed)?;
    Ok(runs
        .into_iter()
        .filter(|run| run.external_id.as_deref() == Some(identity.external_id.as_str()))
        .collect())
}

fn shows_payload(run: &CheckRun, wanted: &CheckPayload) -> bool {
    run.status == wanted.status
        && run.conclusion == wanted.conclusion
        && run.output.title.as_deref() == Some(wanted.output.title.as_str())
        && run.output.summary.as_deref() == Some(wanted.output.summary.as_str())
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: CheckPayload = payload(effect)?;
    Ok(match ours(executor, effect).await?.as_slice() {
        [] => Observation::Absent,
        [run] if shows_payload(run, &wanted) => Observation::Present(json!({
            "check_run_id": run.id,
            "url": run.html_url,
        })),
        // Showing an earlier write of this head: the update is due.
        [_] => Observation::Absent,
        [a, b, ..] => {
            Observation::Duplicate(format!("check run {}", a.id), format!("check run {}", b.id))
        }
    })
}

/// Updates our check when the head has one, else creates it.
pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let body: Value = serde_json::from_slice(&effect.payload)
        .map_err(|e| super::row::corrupt(effect, "payload", e.to_string()))?;
    let existing = ours(executor, effect).await?.first().map(|run| run.id);
    let result = match existing {
        Some(id) => {
            let mut update = body;
            if let Some(fields) = update.as_object_mut() {
                fields.remove("name");
                fields.remove("head_sha");
            }
            writes::update_check_run(&executor.api, &executor.repo, id, &update).await
        }
        None => writes::create_check_run(&executor.api, &executor.repo, &body).await,
    };
    Ok(Sent::from_result(result))
}
