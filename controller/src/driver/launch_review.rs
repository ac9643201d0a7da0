//! What a REVIEW launch is given (SPEC §4 REVIEW): the round's binding
//! (PR, HEAD, base, merge base), the previous round's comment, stale
//! findings carried over, the last FIX resolutions, the follow-up issues
//! already created for the PR, and the validation records of the bound
//! HEAD, and the human findings the last FIX resolved. The reviewer's result is checked against the same binding and
//! against those records (no "no fix needed" while a command failed).

use std::collections::BTreeMap;

use autoforge_journal::RunId;

use super::agent_step::PhasePlan;
use super::error::DriverError;
use super::launch_context::ContextReader;
use super::launch_fix::recorded_follow_ups;
use super::launch_sections::validation_evidence;
use super::{RepositoryAccess, Shared};
use crate::agents::context::ContextDoc;
use crate::agents::pipeline::Expectations;
use crate::agents::prompt::{Value, findings_value, follow_up_issues_value};
use crate::agents::result::ReviewObservations;
use crate::machine::{
    AgentPhase, CarriedFindings, Finding, LaunchRequest, Resolution, RoundBinding,
};

/// The REVIEW inputs of one launch, as the machine planned them.
pub(super) struct ReviewInputs<'a> {
    pub binding: &'a RoundBinding,
    pub previous_comment_url: Option<&'a str>,
    pub prior_findings: &'a Option<CarriedFindings>,
    pub last_resolutions: &'a [Resolution],
    pub human_findings: &'a [Finding],
}

/// The rendered validation evidence of the bound HEAD, and the index of its
/// first command that did not pass (the reviewer must report it).
async fn bound_head_evidence(
    shared: &Shared,
    run: RunId,
    binding: &RoundBinding,
) -> Result<(String, Option<usize>), DriverError> {
    let records = shared
        .journal
        .list_validations(run, Some(binding.head_sha.as_str()))
        .await?;
    let runtime = shared.agents.as_ref().ok_or(DriverError::Unsupported(
        "agent launches are not configured",
    ))?;
    let evidence = validation_evidence(
        &runtime.prompts,
        &runtime.redactor,
        &binding.head_sha,
        &records,
    )?;
    let failed = records
        .iter()
        .find(|v| v.outcome != autoforge_journal::ValidationOutcome::Pass)
        .and_then(|v| usize::try_from(v.command_index).ok());
    Ok((evidence, failed))
}

/// The plan of a REVIEW launch of `launch`.
pub(super) async fn review_plan(
    shared: &Shared,
    run: RunId,
    access: &RepositoryAccess,
    launch: &LaunchRequest,
    inputs: ReviewInputs<'_>,
    issue_url: &str,
    (issue_doc, reader): (ContextDoc, &mut ContextReader<'_>),
) -> Result<PhasePlan, DriverError> {
    let binding = inputs.binding;
    let (evidence, failed_validation_index) = bound_head_evidence(shared, run, binding).await?;
    let start = binding.head_sha.clone();
    // Follow-up issues this run created for the PR: the reviewer must not
    // ask again for what is already deferred.
    let effects = shared.journal.list_effects(run).await?;
    let web = access.html_base.trim_end_matches('/');
    let pr_url = format!("{web}/{}/pull/{}", access.repo, binding.pr);
    let issues_base = format!("{web}/{}/issues", access.repo);
    let follow_ups = recorded_follow_ups(&effects, &pr_url, &issues_base);
    let previous = previous_comment_doc(access, inputs.previous_comment_url).await?;
    let context = reader
        .pr_round_files(issue_doc, binding, previous, &follow_ups)
        .await?;
    let values = BTreeMap::from([
        ("REVIEW_ROUND", Value::trusted(launch.round.to_string())),
        ("PR_URL", Value::trusted(pr_url.clone())),
        ("ISSUE_URL", Value::trusted(issue_url)),
        ("REPOSITORY", Value::trusted(access.repo.to_string())),
        (
            "REVIEWED_HEAD_SHA",
            Value::trusted(binding.head_sha.to_string()),
        ),
        (
            "REVIEWED_BASE_REF",
            Value::trusted(binding.base_ref.clone()),
        ),
        (
            "REVIEWED_MERGE_BASE_SHA",
            Value::trusted(binding.merge_base_sha.to_string()),
        ),
        (
            "PREVIOUS_REVIEW_COMMENT_URL",
            Value::trusted(inputs.previous_comment_url.unwrap_or_default()),
        ),
        (
            "EXISTING_FOLLOW_UP_ISSUES",
            follow_up_issues_value(&follow_ups),
        ),
        // Agent-written texts of earlier rounds: shown fenced.
        (
            "PRIOR_FINDINGS",
            Value::untrusted(json_text(inputs.prior_findings)),
        ),
        (
            "PREVIOUS_FIX_RESOLUTIONS",
            Value::untrusted(json_text(inputs.last_resolutions)),
        ),
        // People's texts: fenced like the agents' (findings_value).
        ("HUMAN_FINDINGS", findings_value(inputs.human_findings)),
        ("VALIDATION_EVIDENCE", Value::trusted(evidence)),
        ("ADDITIONAL_SECTIONS", Value::trusted(String::new())),
    ]);
    Ok(PhasePlan {
        phase: AgentPhase::Review,
        fetch: vec![start.clone()],
        start,
        values,
        expectations: Expectations::Review(ReviewObservations {
            round: launch.round,
            reviewed_head_sha: binding.head_sha.clone(),
            failed_validation_index,
        }),
        context,
        rerequest: None,
    })
}

/// `previous-review-comment.md`: the text of the previous round's comment,
/// which the reviewer cannot open itself (it holds no credential). Read
/// by the id in its URL, as it stands on GitHub now.
async fn previous_comment_doc(
    access: &RepositoryAccess,
    url: Option<&str>,
) -> Result<Option<ContextDoc>, DriverError> {
    let Some((url, id)) = url.and_then(|url| Some((url, comment_id_of(url)?))) else {
        return Ok(None);
    };
    let comment = match access.api.issue_comment(&access.repo, id).await {
        Ok(comment) => comment,
        Err(e) if e.is_not_found() => {
            return Ok(Some(ContextDoc::new(
                vec![("url".to_owned(), url.to_owned())],
                "(the comment no longer exists on GitHub)",
            )));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Some(ContextDoc::new(
        vec![
            ("url".to_owned(), url.to_owned()),
            ("updated_at".to_owned(), comment.updated_at),
        ],
        comment.body,
    )))
}

/// The comment id of an `…#issuecomment-<id>` URL.
fn comment_id_of(url: &str) -> Option<u64> {
    url.rsplit_once("#issuecomment-")?.1.parse().ok()
}

/// Earlier rounds' data as JSON for the prompt; empty when there is none.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Null) | Err(_) => String::new(),
        Ok(serde_json::Value::Array(items)) if items.is_empty() => String::new(),
        Ok(other) => other.to_string(),
    }
}
