//! The driver's long steps: running an agent launch and validating its
//! candidate commit. Both work in the repository's mirror under the state
//! directory and journal what they did (launch rows, validation records)
//! under the run's lease, which the driver keeps renewing meanwhile.
//!
//! Each phase's template values, result expectations and read-context
//! are built here (IMPLEMENT, REVIEW) or in their own files
//! ([`super::launch_fix`], [`super::launch_epic`]); running the launch and
//! journalling it is the same for all.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use autoforge_journal::Lease;
use secrecy::SecretString;

use super::error::DriverError;
use super::launch_context::{ContextReader, conventions_doc};
use super::launch_epic::{EpicInputs, epic_plan};
use super::launch_fix::{FixInputs, fix_plan};
use super::launch_implement::{ImplementInputs, implement_plan};
use super::launch_plan::{approved_plan_section, plan_plan};
use super::launch_review::{ReviewInputs, review_plan};
use super::launch_sections::{
    after_validation_failure, append_section, carried_sections, operator_guidance_section,
    protected_work,
};
use super::{RepositoryAccess, Shared};
use crate::agents::context::{ContextDoc, ContextFiles};
use crate::agents::journal::LaunchRecorder;
use crate::agents::pipeline::{Expectations, PhaseRequest, run_phase};
use crate::agents::profile::AgentCatalog;
use crate::agents::prompt::{PromptSet, Value};
use crate::agents::result::ReRequest;
use crate::commands::OperatorPolicy;
use crate::github::{GitHubApi, RepoName};
use crate::machine::{
    AgentPhase, Correction, Event, LaunchInputs, LaunchRequest, RunState, protected_among,
};
use crate::publish::IssueRef;
use crate::redact::Redactor;
use crate::validation::{
    CandidateValidation, CandidateVerdict, ValidationCommand, ValidationLimits, validate_candidate,
};
use crate::workspace::{CommitSha, Mirror, WorkMode, Workspaces, Worktree, kept_ref};

/// What agent launches and validation need; without it the driver leaves
/// runs that wait for an agent or a validation parked.
#[derive(Clone)]
pub struct AgentRuntime {
    pub workspaces: Workspaces,
    pub catalog: AgentCatalog,
    pub prompts: PromptSet,
    pub validation_commands: Vec<ValidationCommand>,
    pub validation_limits: ValidationLimits,
    pub redactor: Redactor,
    /// Time between SIGTERM and SIGKILL when a launch's group is ended.
    pub kill_grace: Duration,
    /// How often a running launch's row is refreshed (`agents.heartbeat_seconds`).
    pub heartbeat_every: Duration,
    /// The pause before an automatic relaunch after a failed launch
    /// (`agents.relaunch_backoff_seconds`, `…_max_seconds`).
    pub relaunch_backoff: super::retry::RelaunchBackoff,
    /// The shortest time between two status-comment edits that show the
    /// running launch (`agents.status_refresh_seconds`).
    pub status_refresh_every: Duration,
    /// Who counts as an operator: their comments are marked as such in the
    /// read-context folder.
    pub operator_policy: OperatorPolicy,
}

/// How the driver reaches the repository's git data.
#[derive(Clone)]
pub struct GitRemote {
    /// The clone URL, without credentials.
    pub url: String,
    /// Travels only in the git process's environment.
    pub credential: GitCredential,
}

/// Where git's credential comes from. An App's installation token expires
/// after an hour, so it is asked for right before every fetch or push
/// instead of being kept from start-up.
#[derive(Clone)]
pub enum GitCredential {
    /// A public remote (local test repositories).
    Anonymous,
    /// A credential that does not expire while the driver runs.
    Fixed(SecretString),
    /// The handle's current token for `repo` (see
    /// [`GitHubApi::git_credential`]): narrowed to that repository.
    FromApi { api: GitHubApi, repo: RepoName },
}

impl GitCredential {
    /// The credential to hand git now; `None` for an anonymous remote.
    pub async fn current(&self) -> Result<Option<SecretString>, DriverError> {
        match self {
            GitCredential::Anonymous => Ok(None),
            GitCredential::Fixed(secret) => Ok(Some(secret.clone())),
            GitCredential::FromApi { api, repo } => Ok(Some(api.git_credential(repo).await?)),
        }
    }
}

/// The run's issue, as results name it.
pub(super) fn run_issue(access: &RepositoryAccess, state: &RunState) -> IssueRef {
    IssueRef {
        owner: access.repo.owner().to_owned(),
        repo: access.repo.name().to_owned(),
        number: state.issue,
    }
}

async fn mirror(
    runtime: &AgentRuntime,
    access: &RepositoryAccess,
    remote: &GitRemote,
    shas: &[CommitSha],
) -> Result<Mirror, DriverError> {
    let workspace = |e: crate::workspace::WorkspaceError| DriverError::Workspace(e.to_string());
    let mirror = runtime
        .workspaces
        .mirror(access.repo.owner(), access.repo.name(), &remote.url)
        .await
        .map_err(workspace)?;
    let credential = remote.credential.current().await?;
    mirror
        .fetch_shas(shas, credential.as_ref())
        .await
        .map_err(workspace)?;
    Ok(mirror)
}

/// What differs between phases: the commit the worktree starts from, the
/// template values, what the result is checked against, the context.
pub(super) struct PhasePlan {
    pub phase: AgentPhase,
    pub start: CommitSha,
    pub fetch: Vec<CommitSha>,
    pub values: BTreeMap<&'static str, Value>,
    pub expectations: Expectations,
    pub context: ContextFiles,
    /// UPDATE_EPIC only: ask again for just these fields.
    pub rerequest: Option<ReRequest>,
}

/// Runs `launch` and returns the `AgentFinished` event for it, or
/// `IssueTextChanged` without launching when the issue text is not the
/// one the run accepted.
pub(super) async fn run_launch(
    shared: &Shared,
    lease: &Lease,
    access: &RepositoryAccess,
    state: &RunState,
    launch: &LaunchRequest,
) -> Result<Event, DriverError> {
    let (runtime, remote) = match (&shared.agents, &access.git) {
        (Some(runtime), Some(remote)) => (runtime, remote),
        _ => {
            return Err(DriverError::Unsupported(
                "agent launches are not configured",
            ));
        }
    };
    let issue_url = format!(
        "{}/{}/issues/{}",
        access.html_base.trim_end_matches('/'),
        access.repo,
        state.issue
    );
    let read = access.api.issue(&access.repo, state.issue).await?;
    // Agents work only from the text the run accepted: an edit nobody has
    // accepted yet (its webhook may still be on its way) blocks instead.
    let digest = read.text_digest();
    if state
        .issue_text
        .as_ref()
        .is_some_and(|frozen| *frozen != digest)
    {
        return Ok(Event::IssueTextChanged {
            issue: state.issue,
            digest,
            editor: None,
            by_operator: false,
        });
    }
    let mut reader = ContextReader::new(access, &runtime.operator_policy);
    let issue_doc = reader.issue_doc(&read).await?;
    let mut plan = phase_plan(
        shared,
        lease,
        access,
        state,
        launch,
        &issue_url,
        (issue_doc, &mut reader),
    )
    .await?;
    if let Some(correction) = &launch.correction_of {
        add_correction_section(&mut plan.values, correction);
    }
    if let Some(guidance) = &state.operator_guidance {
        let section = operator_guidance_section(guidance, &runtime.redactor);
        append_section(&mut plan.values, &section);
    }
    let target = LaunchTarget {
        shared,
        lease,
        access,
        state,
        launch,
    };
    run_planned(&target, (runtime, remote), plan, issue_url).await
}

/// Who a launch runs for: the run, its repository and the request.
struct LaunchTarget<'a> {
    shared: &'a Shared,
    lease: &'a Lease,
    access: &'a RepositoryAccess,
    state: &'a RunState,
    launch: &'a LaunchRequest,
}

/// The run's worktree made ready for the plan's phase: work is kept across
/// relaunches and only a tree the phase cannot use is reset (see
/// `workspace::continuation`); what earlier attempts left is added to the
/// prompt's values.
async fn prepare_worktree(
    target: &LaunchTarget<'_>,
    runtime: &AgentRuntime,
    mirror: &Mirror,
    plan: &mut PhasePlan,
) -> Result<(Worktree, WorkMode), DriverError> {
    let LaunchTarget {
        shared,
        lease,
        state,
        launch,
        ..
    } = *target;
    let workspace = |e: crate::workspace::WorkspaceError| DriverError::Workspace(e.to_string());
    let worktree = Worktree::ensure(mirror, state.issue, &plan.start)
        .await
        .map_err(workspace)?;
    let mode = match plan.phase {
        AgentPhase::Implement | AgentPhase::Fix => WorkMode::Continue,
        AgentPhase::Plan | AgentPhase::Review | AgentPhase::UpdateEpic => WorkMode::ReadOnly,
    };
    let mut prepared = worktree
        .prepare(&plan.start, mode)
        .await
        .map_err(workspace)?;
    if let Some(reason) = protected_work(shared, mirror, &plan.start, &prepared.head).await? {
        prepared = worktree
            .reset_for(&plan.start, &reason)
            .await
            .map_err(workspace)?;
    }
    let kept = worktree.kept_candidate().await.map_err(workspace)?;
    let kept_name = kept_ref(state.issue);
    let carried = carried_sections(
        shared,
        lease.run_id,
        (runtime, state),
        (plan.phase, after_validation_failure(&launch.inputs)),
        (
            &prepared,
            &plan.start,
            kept.as_ref().map(|k| (k, kept_name.as_str())),
        ),
    )
    .await?;
    append_section(&mut plan.values, &carried);
    Ok((worktree, mode))
}

/// Prepares the worktree at the plan's start, runs the phase's agent (its
/// corrections included) and records every launch it took.
async fn run_planned(
    target: &LaunchTarget<'_>,
    (runtime, remote): (&AgentRuntime, &GitRemote),
    mut plan: PhasePlan,
    issue_url: String,
) -> Result<Event, DriverError> {
    let LaunchTarget {
        shared,
        lease,
        access,
        state,
        launch,
    } = *target;
    // The repository's agent instructions come from the base commit the
    // run fetched, never from a tree an agent wrote.
    plan.fetch.extend(state.base_sha.clone());
    let mirror = mirror(runtime, access, remote, &plan.fetch).await?;
    if let Some(base) = &state.base_sha {
        plan.context.project_conventions = conventions_doc(&mirror, base).await?;
    }
    let workspace = |e: crate::workspace::WorkspaceError| DriverError::Workspace(e.to_string());
    let (worktree, mode) = prepare_worktree(target, runtime, &mirror, &mut plan).await?;
    let boundary = BTreeMap::from([
        ("REPOSITORY", Value::trusted(access.repo.to_string())),
        ("ISSUE_URL", Value::trusted(issue_url)),
    ]);
    let launch_dir = launch_dir(runtime, lease, launch)?;
    let catalog = super::repo_settings::catalog_for(state, runtime)?;
    let cancel = shared.notifier.launch_started(lease.run_id);
    let recorder = LaunchRecorder::start(
        shared.journal.clone(),
        lease.clone(),
        state.phase.as_str().to_owned(),
        runtime.heartbeat_every,
    );
    let report = run_phase(PhaseRequest {
        phase: plan.phase,
        round: launch.round,
        catalog: &catalog,
        prompts: &runtime.prompts,
        boundary,
        rerequest: plan.rerequest,
        values: plan.values,
        context: &plan.context,
        mirror: &mirror,
        worktree: &worktree,
        launch_dir,
        redactor: &runtime.redactor,
        expectations: plan.expectations,
        max_corrections: state.settings.max_corrections,
        cancel: Some(cancel.token()),
        heartbeat: None,
        events: Some(recorder.events()),
        kill_grace: runtime.kill_grace,
    })
    .await;
    // Every launch that ran is journalled, also when the phase then failed.
    recorder.finish().await?;
    let report = report.map_err(|e| DriverError::Agent(e.to_string()))?;
    match mode {
        WorkMode::Continue => worktree.keep_candidate().await.map(|_| ()),
        WorkMode::ReadOnly => worktree
            .restore_after_read_only(&plan.start)
            .await
            .map(|_| ()),
    }
    .map_err(workspace)?;
    let outcome = report.agent_outcome();
    let sum = |reported: Vec<u64>| (!reported.is_empty()).then(|| reported.iter().sum());
    Ok(Event::AgentFinished {
        launch: launch.id,
        outcome,
        tokens: sum(report.launches.iter().filter_map(|l| l.tokens).collect()),
        cost_micros: sum(report
            .launches
            .iter()
            .filter_map(|l| l.cost_micros)
            .collect()),
    })
}

/// What the launch's phase is given: its prompt values, context, start
/// commit and the observations its result is checked against.
///
/// Long by design: one arm per agent phase, each handing its inputs on.
async fn phase_plan(
    shared: &Shared,
    lease: &Lease,
    access: &RepositoryAccess,
    state: &RunState,
    launch: &LaunchRequest,
    issue_url: &str,
    (issue_doc, reader): (ContextDoc, &mut ContextReader<'_>),
) -> Result<PhasePlan, DriverError> {
    Ok(match &launch.inputs {
        LaunchInputs::Plan {
            base_sha, version, ..
        } => {
            plan_plan(
                shared,
                access,
                state,
                (base_sha, *version),
                issue_url,
                (issue_doc, reader),
            )
            .await?
        }
        LaunchInputs::Implement {
            branch,
            base_sha,
            start_sha,
            validation_failure,
            plan: approved,
            ..
        } => {
            let inputs = ImplementInputs {
                branch,
                base: base_sha,
                start: start_sha,
                validation_failure: validation_failure.as_deref(),
            };
            let mut plan = implement_plan(
                shared,
                access,
                state,
                issue_url,
                inputs,
                (issue_doc, reader),
            )
            .await?;
            if let (Some(approved), Some(runtime)) = (approved, shared.agents.as_ref()) {
                let section = approved_plan_section(&runtime.prompts, &runtime.redactor, approved)?;
                append_section(&mut plan.values, &section);
            }
            plan
        }
        LaunchInputs::Review {
            binding,
            previous_comment_url,
            prior_findings,
            last_resolutions,
            human_findings,
        } => {
            let inputs = ReviewInputs {
                binding,
                previous_comment_url: previous_comment_url.as_deref(),
                prior_findings,
                last_resolutions,
                human_findings,
            };
            review_plan(
                shared,
                lease.run_id,
                access,
                launch,
                inputs,
                issue_url,
                (issue_doc, reader),
            )
            .await?
        }
        LaunchInputs::Fix {
            binding,
            comment_url,
            findings,
            validation_failure,
        } => {
            let inputs = FixInputs {
                binding,
                comment_url: comment_url.as_deref(),
                findings,
                validation_failure: validation_failure.as_deref(),
            };
            fix_plan(
                shared,
                lease.run_id,
                access,
                state,
                launch,
                inputs,
                (issue_doc, reader),
            )
            .await?
        }
        LaunchInputs::UpdateEpic {
            epic,
            finished_issue,
            finished_pr,
            merges_since_roadmap,
            roadmap_due,
            want_progress,
            rerequest,
        } => {
            let inputs = EpicInputs {
                epic: *epic,
                finished_issue: *finished_issue,
                finished_pr: *finished_pr,
                merges_since_roadmap: *merges_since_roadmap,
                roadmap_due: *roadmap_due,
                want_progress: *want_progress,
                rerequest: rerequest.as_deref(),
                merged_prs: &state.merged_prs,
                update_every: state.settings.epic_update_every,
            };
            let effects = shared.journal.list_effects(lease.run_id).await?;
            let mut plan = epic_plan(shared, access, &effects, inputs).await?;
            plan.context.issue = Some(issue_doc);
            plan
        }
    })
}

/// A relaunch the machine asked for after refusing a result: the agent
/// hears why, in the controller's own wording (the machine's diagnoses
/// never quote agent text). Templates without an additional-sections slot
/// (UPDATE_EPIC has its re-request instead) are left as they are.
fn add_correction_section(values: &mut BTreeMap<&'static str, Value>, correction: &Correction) {
    let Some(Value::Trusted(text)) = values.get_mut("ADDITIONAL_SECTIONS") else {
        return;
    };
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&format!(
        "## Your previous answer was refused\n\n\
         The controller could not accept the result of launch {}: {}. \
         Answer again and fix exactly that.",
        correction.of_launch, correction.diagnosis
    ));
}

/// A fresh directory for one launch, outside every worktree.
fn launch_dir(
    runtime: &AgentRuntime,
    lease: &Lease,
    launch: &LaunchRequest,
) -> Result<PathBuf, DriverError> {
    let dir = runtime
        .workspaces
        .state_dir()
        .join("launches")
        .join(format!("run-{}", lease.run_id))
        .join(format!(
            "launch-{}-{}",
            launch.id,
            uuid::Uuid::new_v4().simple()
        ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| DriverError::Workspace(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// Validates `candidate` and returns the `ValidationFinished` event, with
/// the protected paths it changes since its merge base with `base` (the
/// default-branch head the run started from).
pub(super) async fn validate(
    shared: &Shared,
    lease: &Lease,
    access: &RepositoryAccess,
    (base, commit): (&CommitSha, &CommitSha),
    commands: &[ValidationCommand],
) -> Result<Event, DriverError> {
    let (runtime, remote) = match (&shared.agents, &access.git) {
        (Some(runtime), Some(remote)) => (runtime, remote),
        _ => return Err(DriverError::Unsupported("validation is not configured")),
    };
    let mirror = mirror(runtime, access, remote, &[commit.clone(), base.clone()]).await?;
    let changed = mirror
        .changed_paths(base, commit)
        .await
        .map_err(|e| DriverError::Workspace(e.to_string()))?;
    let protected_paths = protected_among(
        changed.iter().map(String::as_str),
        &shared.config.protected_paths,
    );
    let verdict = validate_candidate(CandidateValidation {
        journal: &shared.journal,
        lease,
        mirror: &mirror,
        sha: commit,
        commands,
        limits: runtime.validation_limits.clone(),
        redactor: &runtime.redactor,
    })
    .await
    .map_err(|e| DriverError::Validation(e.to_string()))?;
    let (passed, failed_index, summary) = match verdict {
        CandidateVerdict::Passed => (true, None, "every validation command passed".to_owned()),
        CandidateVerdict::Failed { index, outcome } => (
            false,
            Some(u32::try_from(index).unwrap_or(u32::MAX)),
            format!(
                "validation command {} ({}) ended {}",
                index + 1,
                commands
                    .get(index)
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                outcome.as_str()
            ),
        ),
    };
    Ok(Event::ValidationFinished {
        sha: commit.clone(),
        passed,
        failed_index,
        summary,
        protected_paths,
    })
}

#[cfg(test)]
mod tests {
    use super::super::launch_implement::implement_failure_section;
    use super::{BTreeMap, Correction, Value, add_correction_section};

    #[test]
    fn a_correction_relaunch_is_told_why_its_last_answer_was_refused() {
        let correction = Correction {
            of_launch: 3,
            diagnosis: "head_sha equals the base: nothing was committed".into(),
        };
        let mut values = BTreeMap::from([(
            "ADDITIONAL_SECTIONS",
            Value::trusted(implement_failure_section(Some("`make` FAIL"))),
        )]);
        add_correction_section(&mut values, &correction);
        let Some(Value::Trusted(text)) = values.get("ADDITIONAL_SECTIONS") else {
            panic!("the section stays trusted controller text");
        };
        assert!(text.starts_with("## The previous attempt failed validation"));
        assert!(text.contains("## Your previous answer was refused"));
        assert!(text.contains("launch 3: head_sha equals the base"));

        let mut without_slot = BTreeMap::from([("EPIC_URL", Value::trusted("u"))]);
        add_correction_section(&mut without_slot, &correction);
        assert_eq!(without_slot.len(), 1, "no placeholder is invented");
    }

    #[test]
    fn an_implement_relaunch_after_a_failed_validation_is_told_the_failure() {
        let section = implement_failure_section(Some("command 0 `make test` FAIL"));
        assert!(section.starts_with("## The previous attempt failed validation"));
        assert!(section.contains("command 0 `make test` FAIL"));
        assert_eq!(implement_failure_section(None), "");
    }
}
