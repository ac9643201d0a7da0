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
use super::launch_context::epic_context;
use super::run_task::reads::default_branch_head;
use super::{RepositoryAccess, Shared};
use crate::agents::context::ContextFiles;
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
    let epic = api.issue(repo, inputs.epic).await?;
    let epic_body = epic.body.clone().unwrap_or_default();
    let children = epic_children(api, repo, &epic, &shared.config.epic_label).await?;
    let pending = inputs.merges_since_roadmap > 0;
    let rerequest = epic_rerequest(&inputs);
    let values = epic_values(access, effects, &inputs, &epic_body, rerequest);
    let issue_ref = |number| IssueRef {
        owner: repo.owner().to_owned(),
        repo: repo.name().to_owned(),
        number,
    };
    let asks_roadmap = rerequest.is_none_or(|(_, asked)| asked.roadmap);
    let (_, head) = default_branch_head(api, repo).await?;
    let start = head;
    let epic_docs = epic_context(&epic, &children);
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
            epic: Some(epic_docs.epic),
            epic_issues: Some(epic_docs.issues),
            ..ContextFiles::default()
        },
        rerequest: rerequest.map(|(_, asked)| asked),
    })
}

/// What a re-request asks for, with the machine's reason, unless this
/// launch is the first (which reports progress). The roadmap is asked for
/// whenever the machine could still require it (due now, or due at
/// completion with merges uncounted).
fn epic_rerequest<'a>(inputs: &EpicInputs<'a>) -> Option<(&'a str, ReRequest)> {
    let pending = inputs.merges_since_roadmap > 0;
    inputs
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
        })
}

/// The prompt's values: the EPIC, the finished issue and PR, the roadmap
/// as it stands, and either the merges to report or what a re-request
/// asks for.
fn epic_values(
    access: &RepositoryAccess,
    effects: &[Effect],
    inputs: &EpicInputs<'_>,
    epic_body: &str,
    rerequest: Option<(&str, ReRequest)>,
) -> BTreeMap<&'static str, Value> {
    let repo = &access.repo;
    let base = access.html_base.trim_end_matches('/');
    let issue_url = |n: IssueNumber| format!("{base}/{repo}/issues/{n}");
    let pr_url = |n: PullNumber| format!("{base}/{repo}/pull/{n}");
    let yes_no = |flag: bool| Value::trusted(if flag { "yes" } else { "no" });
    let finished_pr_url = inputs.finished_pr.map(pr_url).unwrap_or_default();
    let mut values = BTreeMap::from([
        ("EPIC_URL", Value::trusted(issue_url(inputs.epic))),
        (
            "ISSUE_URL",
            Value::trusted(issue_url(inputs.finished_issue)),
        ),
        ("PR_URL", Value::trusted(finished_pr_url)),
        ("REPOSITORY", Value::trusted(repo.to_string())),
        ("CURRENT_ROADMAP_SECTION", roadmap_section_value(epic_body)),
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
        None => values.extend(merges_values(inputs, pr_url)),
    }
    values
}

/// The EPIC's managed roadmap section as it stands, untrusted, or `(none)`.
fn roadmap_section_value(epic_body: &str) -> Value {
    let current = match scan_roadmap(epic_body) {
        RoadmapMarkers::Section { inner, .. } => epic_body[inner].trim_matches('\n'),
        RoadmapMarkers::Absent | RoadmapMarkers::Malformed(_) => "",
    };
    if current.is_empty() {
        Value::trusted("(none)")
    } else {
        Value::untrusted(current.to_owned())
    }
}

/// The merges an update reports: how many since the roadmap was last
/// written, their PRs (the newest that many of the run's merges) and the
/// configured cadence.
fn merges_values(
    inputs: &EpicInputs<'_>,
    pr_url: impl Fn(PullNumber) -> String,
) -> [(&'static str, Value); 3] {
    let counted = usize::try_from(inputs.merges_since_roadmap).unwrap_or(usize::MAX);
    let since = &inputs.merged_prs[inputs.merged_prs.len().saturating_sub(counted)..];
    let listed: Vec<String> = since.iter().map(|n| format!("- {}", pr_url(*n))).collect();
    [
        (
            "MERGED_SINCE_EPIC_UPDATE",
            Value::trusted(inputs.merges_since_roadmap.to_string()),
        ),
        (
            "MERGED_PRS_SINCE_EPIC_UPDATE",
            Value::trusted(if listed.is_empty() {
                "(none)".to_owned()
            } else {
                listed.join("\n")
            }),
        ),
        (
            "EPIC_UPDATE_EVERY",
            Value::trusted(inputs.update_every.to_string()),
        ),
    ]
}

/// The URL of the progress comment this run posted on `epic` last.
fn progress_comment_url(effects: &[Effect], epic: IssueNumber) -> Option<String> {
    effects
        .iter()
        .rev()
        .find_map(|e| recorded_progress_comment(e, epic))
        .map(|recorded| recorded.url)
}
