//! Step 2 of a run task: the settled effects of the latest transition as
//! the machine hears them in `EffectsObserved`, from the journal's effect
//! rows and the values the executor read back.

use autoforge_journal::{Effect, EffectKind, IssueNumber, PullNumber};
use serde_json::Value;

use crate::machine::EffectReadBack;

/// Why an observed effect cannot be described to the machine.
#[derive(Debug, thiserror::Error)]
#[error("effect {id} ({kind}) was observed as {observed}, which lacks `{field}`")]
pub struct ObservedShapeError {
    pub id: i64,
    pub kind: EffectKind,
    pub field: &'static str,
    pub observed: Value,
}

/// The machine's view of one observed effect; `None` for kinds the machine
/// does not wait on (status comment, reactions, labels, check runs, inline
/// reviews, merge — the merge outcome is read back separately).
pub fn observed_for_machine(
    effect: &Effect,
    observed: &Value,
) -> Result<Option<EffectReadBack>, ObservedShapeError> {
    let missing = |field: &'static str| ObservedShapeError {
        id: effect.id.0,
        kind: effect.kind,
        field,
        observed: observed.clone(),
    };
    let text = |field: &'static str| {
        observed
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| missing(field))
    };
    let number = |field: &'static str| {
        observed
            .get(field)
            .and_then(Value::as_u64)
            .ok_or_else(|| missing(field))
    };
    let pull = |field| PullNumber::new(number(field)?).map_err(|_| missing(field));
    let issue = |field| IssueNumber::new(number(field)?).map_err(|_| missing(field));
    Ok(Some(match effect.kind {
        EffectKind::Push => EffectReadBack::Pushed {
            sha: text("sha")?.parse().map_err(|_| missing("sha"))?,
        },
        EffectKind::CreatePr | EffectKind::AdoptPr => EffectReadBack::PullRequest {
            number: pull("number")?,
        },
        EffectKind::PostComment => EffectReadBack::Comment { url: text("url")? },
        EffectKind::CreateIssue => EffectReadBack::FollowUpIssue {
            finding_id: identity_field(&effect.identity, "finding_id")
                .ok_or_else(|| missing("finding_id"))?,
            issue: issue("number")?,
        },
        EffectKind::AppendIssueMarkers => EffectReadBack::MarkersAppended {
            issue: effect
                .target
                .strip_prefix("issue/")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| missing("target issue"))?,
        },
        EffectKind::SpliceEpicRoadmap => EffectReadBack::RoadmapSpliced,
        EffectKind::EditStatusComment
        | EffectKind::AddReaction
        | EffectKind::SetLabels
        | EffectKind::MergePr
        | EffectKind::CheckRun
        // The round's review comment is what the machine waits on.
        | EffectKind::PostReview => return Ok(None),
    }))
}

/// `value` of `name=value` in an identity such as
/// `ai-follow-up:pr=4:finding_id=F-1`.
fn identity_field(identity: &str, name: &str) -> Option<String> {
    identity
        .split(':')
        .filter_map(|part| part.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use autoforge_journal::{EffectId, RunId, Stage};
    use serde_json::json;

    fn effect(kind: EffectKind, identity: &str, target: &str) -> Effect {
        Effect {
            id: EffectId(1),
            run_id: RunId(1),
            phase_entry: 1,
            position: 0,
            kind,
            identity: identity.into(),
            target: target.into(),
            precondition: json!({}),
            payload: Vec::new(),
            completion: json!({}),
            stage: Stage::Observed,
            attempts: 1,
            unanswered: 0,
            observed: None,
            reason: None,
            fencing_token: 1,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn read_back_values_become_the_observations_the_machine_waits_for() {
        let pr = effect(EffectKind::CreatePr, "ai-implementation:issue=3", "head/x");
        assert_eq!(
            observed_for_machine(&pr, &json!({"number": 9, "url": "u"})).unwrap(),
            Some(EffectReadBack::PullRequest {
                number: autoforge_journal::testing::pull(9)
            })
        );
        let follow = effect(
            EffectKind::CreateIssue,
            "ai-follow-up:pr=4:finding_id=F-2",
            "issues",
        );
        assert_eq!(
            observed_for_machine(&follow, &json!({"number": 12})).unwrap(),
            Some(EffectReadBack::FollowUpIssue {
                finding_id: "F-2".into(),
                issue: autoforge_journal::testing::issue(12)
            })
        );
        let status = effect(
            EffectKind::EditStatusComment,
            "autoforge-status:run=1",
            "issue/1",
        );
        assert_eq!(observed_for_machine(&status, &json!({})).unwrap(), None);
    }

    #[test]
    fn a_read_back_value_without_its_field_is_an_error_not_a_guess() {
        let push = effect(EffectKind::Push, "refs/heads/b@abc", "refs/heads/b");
        let error = observed_for_machine(&push, &json!({"ref": "refs/heads/b"})).unwrap_err();
        assert_eq!(error.field, "sha");
    }
}
