//! What an IMPLEMENT launch is given (SPEC §4 IMPLEMENT): the base and the
//! start commit, the branch the controller will push, the issue with its
//! conversation, the EPIC when the issue belongs to one, and, once a pull
//! request exists, that pull request and the checks of its head.

use std::collections::BTreeMap;

use super::agent_step::{PhasePlan, run_issue};
use super::error::DriverError;
use super::launch_context::ContextReader;
use super::{RepositoryAccess, Shared};
use crate::agents::context::{ContextDoc, ContextFiles};
use crate::agents::pipeline::Expectations;
use crate::agents::prompt::Value;
use crate::machine::{AgentPhase, RunState};
use crate::workspace::CommitSha;

/// The IMPLEMENT inputs of one launch, as the machine planned them.
pub(super) struct ImplementInputs<'a> {
    pub branch: &'a str,
    pub base: &'a CommitSha,
    pub start: &'a CommitSha,
    pub validation_failure: Option<&'a str>,
}

/// The plan of an IMPLEMENT launch for `state`'s issue.
pub(super) async fn implement_plan(
    shared: &Shared,
    access: &RepositoryAccess,
    state: &RunState,
    issue_url: &str,
    inputs: ImplementInputs<'_>,
    (issue_doc, reader): (ContextDoc, &mut ContextReader<'_>),
) -> Result<PhasePlan, DriverError> {
    let (base, start) = (inputs.base.clone(), inputs.start.clone());
    let start_description = if start == base {
        "the default branch head"
    } else {
        "the head of the pull request"
    };
    let (mut context, epic_url) = issue_and_epic_context(shared, state, issue_doc, reader).await?;
    if let Some(pr) = state.pr {
        context.pull_request = Some(reader.pull_request_doc(pr, &start).await?);
        context.checks = Some(reader.checks_doc(&start).await?);
    }
    let values = BTreeMap::from([
        ("ISSUE_NUMBER", Value::trusted(state.issue.to_string())),
        ("ISSUE_URL", Value::trusted(issue_url)),
        ("EPIC_URL", Value::trusted(epic_url)),
        ("REPOSITORY", Value::trusted(access.repo.to_string())),
        ("DEFAULT_BRANCH", Value::trusted(state.base_branch.clone())),
        ("BASE_SHA", Value::trusted(base.to_string())),
        ("START_SHA", Value::trusted(start.to_string())),
        ("START_DESCRIPTION", Value::trusted(start_description)),
        ("BRANCH", Value::trusted(inputs.branch)),
        (
            "ADDITIONAL_SECTIONS",
            Value::trusted(implement_failure_section(inputs.validation_failure)),
        ),
    ]);
    Ok(PhasePlan {
        phase: AgentPhase::Implement,
        fetch: vec![base.clone(), start.clone()],
        start,
        values,
        expectations: Expectations::Implement {
            run_issue: run_issue(access, state),
            base_sha: base,
        },
        context,
        rerequest: None,
    })
}

/// What an IMPLEMENT relaunch after a failed validation is told: without
/// it the agent would hand back the same commit, which the controller
/// never validates twice, and simply use up the bound.
pub(super) fn implement_failure_section(validation_failure: Option<&str>) -> String {
    validation_failure.map_or_else(String::new, |summary| {
        format!(
            "## The previous attempt failed validation\n\n\
             Your last commit was not pushed: {summary}. The controller never \
             validates one commit twice; add a commit that repairs it."
        )
    })
}

/// The read context every launch about an issue starts from: the issue,
/// and its EPIC with the EPIC's issues when it has one; with the EPIC line
/// the prompt shows.
pub(super) async fn issue_and_epic_context(
    shared: &Shared,
    state: &RunState,
    issue_doc: ContextDoc,
    reader: &mut ContextReader<'_>,
) -> Result<(ContextFiles, String), DriverError> {
    let mut context = ContextFiles {
        issue: Some(issue_doc),
        ..ContextFiles::default()
    };
    let mut epic_url = "(none: this issue belongs to no EPIC)".to_owned();
    if let Some(epic) = &state.epic {
        let read = reader
            .epic_docs(epic.epic, &shared.config.epic_label)
            .await?;
        epic_url = format!("{} (see `epic.md` and `epic-issues.md`)", read.url);
        context.epic = Some(read.epic);
        context.epic_issues = Some(read.issues);
    }
    Ok((context, epic_url))
}
