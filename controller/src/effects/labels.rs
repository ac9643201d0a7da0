//! `set_labels`: the run's status labels on its issue. Observed when every
//! label to add is present and every label to remove is absent (GitHub
//! compares label names case-insensitively, and so do we).
//!
//! Row: target `issue/<n>`, payload [`LabelsPayload`], no precondition,
//! completion the bare nonce.

use autoforge_journal::{Effect, EffectKind, IssueNumber, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{NoPrecondition, Nonce, Row, payload, target_number};
use crate::github::{Issue, writes};

/// The labels to have and not to have afterwards.
#[derive(Serialize, Deserialize)]
struct LabelsPayload {
    add: Vec<String>,
    remove: Vec<String>,
}

/// `add` present and `remove` absent on `issue`.
pub(crate) fn plan(
    draft: Draft<'_>,
    issue: IssueNumber,
    add: &[String],
    remove: &[String],
) -> Result<NewEffect, PlanError> {
    let row = Row {
        target: format!("issue/{issue}"),
        precondition: NoPrecondition {},
        payload: LabelsPayload {
            add: add.to_vec(),
            remove: remove.to_vec(),
        },
        completion: Nonce {
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::SetLabels, row)
}

fn missing<'a>(issue: &Issue, wanted: &'a LabelsPayload) -> (Vec<&'a String>, Vec<&'a String>) {
    let to_add = wanted.add.iter().filter(|l| !issue.has_label(l)).collect();
    let to_remove = wanted
        .remove
        .iter()
        .filter(|l| issue.has_label(l))
        .collect();
    (to_add, to_remove)
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: LabelsPayload = payload(effect)?;
    let number = target_number(effect)?;
    let issue = executor
        .api
        .issue(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let (to_add, to_remove) = missing(&issue, &wanted);
    Ok(if to_add.is_empty() && to_remove.is_empty() {
        let labels: Vec<&str> = issue.labels.iter().map(|l| l.name.as_str()).collect();
        Observation::Present(json!({ "labels": labels }))
    } else {
        Observation::Absent
    })
}

/// Adds what is missing, then removes what is left over, stopping at the
/// first answer that is not a success: every one of these writes is
/// idempotent, so the next reconcile decides what remains.
pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let wanted: LabelsPayload = payload(effect)?;
    let number = target_number(effect)?;
    let issue = executor
        .api
        .issue(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let (to_add, to_remove) = missing(&issue, &wanted);
    if !to_add.is_empty() {
        let labels: Vec<String> = to_add.into_iter().cloned().collect();
        let sent = Sent::from_result(
            writes::add_labels(&executor.api, &executor.repo, number, &labels).await,
        );
        if sent != Sent::Answered {
            return Ok(sent);
        }
    }
    for label in to_remove {
        let sent = Sent::from_result(
            writes::remove_label(&executor.api, &executor.repo, number, label).await,
        );
        if sent != Sent::Answered {
            return Ok(sent);
        }
    }
    Ok(Sent::Answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::Label;

    #[test]
    fn only_the_difference_is_written() {
        let issue = Issue {
            id: 1,
            number: autoforge_journal::testing::issue(1),
            title: "t".into(),
            body: None,
            state: "open".into(),
            labels: vec![
                Label {
                    name: "Autoforge:Review".into(),
                },
                Label {
                    name: "keep".into(),
                },
            ],
            user: None,
            html_url: "u".into(),
            pull_request: None,
        };
        let wanted = LabelsPayload {
            add: vec!["autoforge:review".into(), "autoforge:blocked".into()],
            remove: vec!["autoforge:implement".into(), "keep".into()],
        };
        let (add, remove) = missing(&issue, &wanted);
        assert_eq!(add, vec!["autoforge:blocked"]);
        assert_eq!(remove, vec!["keep"]);
    }
}
