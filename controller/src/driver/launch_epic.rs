//! What an UPDATE_EPIC launch is given (SPEC §4 UPDATE_EPIC, §9): the EPIC
//! and its issues with state and title, the finished issue and PR, the
//! merges since the last roadmap update, whether an update is due, and the
//! current managed section. A re-request (a rejected next-issue pick or a
//! voided roadmap) uses its own template and asks only for the missing
//! fields, never for the progress report, which is already posted.
//!
//! The agent edits nothing, so its worktree starts at the default branch's
//! head as read now.

use std::collections::BTreeMap;

use autoforge_journal::{Effect, IssueNumber, PullNumber};

use super::agent_step::PhasePlan;
use super::epic_scope::epic_children;
use super::error::DriverError;
use super::run_task::reads::default_branch_head;
use super::{RepositoryAccess, Shared};
use crate::agents::context::{ContextDoc, ContextFiles};
use crate::agents::pipeline::Expectations;
use crate::agents::prompt::{Value, rerequest_values};
use crate::agents::result::{ReRequest, UpdateEpicObservations};
use crate::effects::markers::{ROADMAP_END, ROADMAP_START, RoadmapMarkers, scan_roadmap};
use crate::effects::recorded_progress_comment;
use crate::machine::AgentPhase;
use crate::publish::IssueRef;

/// The UPDATE_EPIC inputs of one launch, as the machine planned them.
pub(super) struct EpicInputs<'a> {
    pub epic: IssueNumber,
    pub finished_issue: IssueNumber,
    pub finished_pr: Option<PullNumber>,
    pub merges_since_roadmap: u32,
    pub roadmap_due: bool,
    pub want_progress: bool,
    pub rerequest: Option<&'a str>,
    /// Every PR whose merge the run counted, oldest first.
    pub merged_prs: &'a [PullNumber],
    pub update_every: u32,
}

/// The plan of an UPDATE_EPIC launch; `effects` are the run's journal rows
/// (the progress comment already posted is found there).
pub(super) async fn epic_plan(
    shared: &Shared,
    access: &RepositoryAccess,
    effects: &[Effect],
    inputs: EpicInputs<'_>,
) -> Result<PhasePlan, DriverError> {
    let (api, repo) = (&access.api, &access.repo);
    let base = access.html_base.trim_end_matches('/');
    let issue_url = |n: IssueNumber| format!("{base}/{repo}/issues/{n}");
    let pr_url = |n: PullNumber| format!("{base}/{repo}/pull/{n}");
    let epic = api.issue(repo, inputs.epic).await?;
    let epic_body = epic.body.clone().unwrap_or_default();
    let children = epic_children(api, repo, &epic, &shared.config.epic_label).await?;
    let current_section = match scan_roadmap(&epic_body) {
        RoadmapMarkers::Section { inner, .. } => epic_body[inner].trim_matches('\n').to_owned(),
        RoadmapMarkers::Absent | RoadmapMarkers::Malformed(_) => String::new(),
    };
    let section_value = if current_section.is_empty() {
        Value::trusted("(none)")
    } else {
        Value::untrusted(current_section)
    };
    let yes_no = |flag: bool| Value::trusted(if flag { "yes" } else { "no" });
    let pending = inputs.merges_since_roadmap > 0;
    // A re-request asks for the roadmap whenever the machine could still
    // require it (due now, or due at completion with merges uncounted).
    let rerequest = inputs
        .rerequest
        .filter(|_| !inputs.want_progress)
        .map(|reason| {
            (
                reason,
                ReRequest {
                    next_issue: true,
                    roadmap: inputs.roadmap_due || pending,
                },
            )
        });
    let finished_pr_url = inputs.finished_pr.map(pr_url).unwrap_or_default();
    let mut values = BTreeMap::from([
        ("EPIC_URL", Value::trusted(issue_url(inputs.epic))),
        (
            "ISSUE_URL",
            Value::trusted(issue_url(inputs.finished_issue)),
        ),
        ("PR_URL", Value::trusted(finished_pr_url)),
        ("REPOSITORY", Value::trusted(repo.to_string())),
        ("CURRENT_ROADMAP_SECTION", section_value),
        ("ROADMAP_START_MARKER", Value::trusted(ROADMAP_START)),
        ("ROADMAP_END_MARKER", Value::trusted(ROADMAP_END)),
        ("ROADMAP_UPDATE_DUE", yes_no(inputs.roadmap_due)),
    ]);
    match rerequest {
        Some((reason, asked)) => {
            values.insert(
                "PROGRESS_COMMENT_URL",
                Value::trusted(progress_comment_url(effects, inputs.epic).unwrap_or_default()),
            );
            values.insert("RE_REQUEST_REASON", Value::trusted(reason));
            values.extend(rerequest_values(asked));
        }
        None => {
            let counted = usize::try_from(inputs.merges_since_roadmap).unwrap_or(usize::MAX);
            let since = &inputs.merged_prs[inputs.merged_prs.len().saturating_sub(counted)..];
            let listed: Vec<String> = since.iter().map(|n| format!("- {}", pr_url(*n))).collect();
            values.insert(
                "MERGED_SINCE_EPIC_UPDATE",
                Value::trusted(inputs.merges_since_roadmap.to_string()),
            );
            values.insert(
                "MERGED_PRS_SINCE_EPIC_UPDATE",
                Value::trusted(if listed.is_empty() {
                    "(none)".to_owned()
                } else {
                    listed.join("\n")
                }),
            );
            values.insert(
                "EPIC_UPDATE_EVERY",
                Value::trusted(inputs.update_every.to_string()),
            );
        }
    }
    let issue_ref = |number| IssueRef {
        owner: repo.owner().to_owned(),
        repo: repo.name().to_owned(),
        number,
    };
    let asks_roadmap = rerequest.is_none_or(|(_, asked)| asked.roadmap);
    let (_, head) = default_branch_head(api, repo).await?;
    let start = head;
    let issues_list: Vec<String> = children
        .iter()
        .map(|c| format!("#{} [{}] {}", c.number, c.state, c.title))
        .collect();
    Ok(PhasePlan {
        phase: AgentPhase::UpdateEpic,
        fetch: vec![start.clone()],
        start,
        values,
        expectations: Expectations::UpdateEpic(UpdateEpicObservations {
            epic: issue_ref(inputs.epic),
            finished_issue: issue_ref(inputs.finished_issue),
            roadmap_due: inputs.roadmap_due && asks_roadmap,
            merges_pending: pending && asks_roadmap,
        }),
        context: ContextFiles {
            epic: Some(ContextDoc {
                facts: vec![
                    ("number".to_owned(), inputs.epic.to_string()),
                    ("title".to_owned(), epic.title.clone()),
                ],
                body: epic_body,
            }),
            epic_issues: Some(ContextDoc {
                facts: vec![("issues".to_owned(), children.len().to_string())],
                body: issues_list.join("\n"),
            }),
            ..ContextFiles::default()
        },
        rerequest: rerequest.map(|(_, asked)| asked),
    })
}

/// The URL of the progress comment this run posted on `epic` last.
fn progress_comment_url(effects: &[Effect], epic: IssueNumber) -> Option<String> {
    effects
        .iter()
        .rev()
        .find_map(|e| recorded_progress_comment(e, epic))
        .map(|recorded| recorded.url)
}
