//! What a FIX launch is given (SPEC §4 FIX): the reviewed head to commit
//! on, the review comment to resolve (its exact bytes from the journal),
//! the open findings, and the follow-up issues this PR already has, which
//! the fixer may defer to. The result is cross-checked against the same
//! facts: the reviewed head, this round's finding ids, the listed issues.

use std::collections::BTreeMap;

use autoforge_journal::{Effect, RunId};

use super::agent_step::PhasePlan;
use super::clean_review::find_review_comment;
use super::error::DriverError;
use super::launch_context::ContextReader;
use super::{RepositoryAccess, Shared};
use crate::agents::context::ContextDoc;
use crate::agents::pipeline::Expectations;
use crate::agents::prompt::{Value, findings_value, follow_up_issues_value};
use crate::agents::result::HandedOverFollowUp;
use crate::effects::recorded_follow_up;
use crate::machine::{AgentPhase, Finding, LaunchRequest, RoundBinding, RunState};

/// The FIX inputs of one launch, as the machine planned them.
pub(super) struct FixInputs<'a> {
    pub binding: &'a RoundBinding,
    pub comment_url: Option<&'a str>,
    pub findings: &'a [Finding],
    pub validation_failure: Option<&'a str>,
}

/// The prompt section of a relaunch whose last candidate failed validation.
fn failed_validation_section(summary: impl std::fmt::Display) -> String {
    format!(
        "## The previous attempt failed validation\n\n\
         Your last commit was not pushed: {summary}. Its commits are still in \
         this worktree; add a commit on top of them that repairs it."
    )
}

/// The plan of a FIX launch of `launch` for `state`'s issue.
pub(super) async fn fix_plan(
    shared: &Shared,
    run: RunId,
    access: &RepositoryAccess,
    state: &RunState,
    launch: &LaunchRequest,
    inputs: FixInputs<'_>,
    (issue_doc, reader): (ContextDoc, &mut ContextReader<'_>),
) -> Result<PhasePlan, DriverError> {
    let base = access.html_base.trim_end_matches('/');
    let issue_url = format!("{base}/{}/issues/{}", access.repo, state.issue);
    let pr_url = format!("{base}/{}/pull/{}", access.repo, inputs.binding.pr);
    let effects = shared.journal.list_effects(run).await?;
    let issues_base = format!("{base}/{}/issues", access.repo);
    let follow_ups = recorded_follow_ups(&effects, &pr_url, &issues_base);
    let open_ids: Vec<String> = inputs.findings.iter().map(|f| f.id.clone()).collect();
    let handed_over = follow_ups
        .iter()
        .map(|(finding, url)| HandedOverFollowUp {
            url: url.clone(),
            for_finding: open_ids.contains(finding).then(|| finding.clone()),
        })
        .collect();
    let additional = inputs
        .validation_failure
        .map_or_else(String::new, failed_validation_section);
    let values = BTreeMap::from([
        ("REVIEW_ROUND", Value::trusted(launch.round.to_string())),
        ("PR_URL", Value::trusted(pr_url.clone())),
        ("ISSUE_URL", Value::trusted(issue_url)),
        ("REPOSITORY", Value::trusted(access.repo.to_string())),
        (
            "REVIEW_COMMENT_URL",
            Value::trusted(inputs.comment_url.unwrap_or("(not recorded)")),
        ),
        (
            "REVIEWED_HEAD_SHA",
            Value::trusted(inputs.binding.head_sha.to_string()),
        ),
        ("FINDINGS", findings_value(inputs.findings)),
        ("FOLLOW_UP_ISSUES", follow_up_issues_value(&follow_ups)),
        ("ADDITIONAL_SECTIONS", Value::trusted(additional)),
    ]);
    let review_comment = find_review_comment(&effects, inputs.binding).map(|record| {
        ContextDoc::new(
            vec![("comment_id".to_owned(), record.comment_id.to_string())],
            record.body,
        )
    });
    let context = reader
        .pr_round_files(issue_doc, inputs.binding, review_comment, &follow_ups)
        .await?;
    let start = inputs.binding.head_sha.clone();
    Ok(PhasePlan {
        phase: AgentPhase::Fix,
        fetch: vec![start.clone()],
        start: start.clone(),
        values,
        expectations: Expectations::Fix {
            run_issue: super::agent_step::run_issue(access, state),
            round: launch.round,
            reviewed_head_sha: start,
            open_finding_ids: open_ids,
            handed_over_follow_ups: handed_over,
        },
        context,
        rerequest: None,
    })
}

/// `(finding id, issue URL)` of every follow-up issue the run created for
/// `pr_url` and saw land, oldest first. The URL is built like every URL the
/// controller publishes (`issues_base` + number), so the fixer's answer is
/// compared with the same form.
pub(super) fn recorded_follow_ups(
    effects: &[Effect],
    pr_url: &str,
    issues_base: &str,
) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(recorded_follow_up)
        .filter(|follow_up| follow_up.pr_url == pr_url)
        .map(|follow_up| {
            let url = format!("{issues_base}/{}", follow_up.number);
            (follow_up.finding_id, url)
        })
        .collect()
}
