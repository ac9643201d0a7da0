//! One agent phase, from the choice of profile to a typed outcome (SPEC §4,
//! §5, §13): the function the run driver calls for IMPLEMENT, REVIEW, FIX
//! and UPDATE_EPIC.
//!
//! Steps: pick the profile for (agent phase, round) → render the trust boundary
//! and the phase prompt → write the read-context folder → for REVIEW,
//! fingerprint the worktree → launch under the supervisor → for REVIEW,
//! compare the fingerprint (a moved tree voids the result) → parse the
//! CONTROL_RESULT → cross-check it against what the controller reads from
//! the repository itself → on a refused result from an agent that exited 0,
//! relaunch with the correction prompt while the budget lasts.
//!
//! Nothing here writes the journal or GitHub: the caller persists the
//! [`LaunchRecord`]s of every attempt (as they happen, through
//! [`PhaseRequest::events`]) and acts on the [`PhaseOutcome`].
//! Diagnoses are the result parser's own words, which never quote the agent.

mod observe;
mod outcome;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use tokio::sync::watch;

use crate::agents::context::{
    ContextError, ContextFiles, ContextLimits, ensure_outside_worktree, write_context,
};
use crate::agents::profile::{AgentCatalog, LaunchProfile};
use crate::agents::prompt::{PromptSet, RenderError, TemplateId, Value, correction_values};
use crate::agents::result::{
    CapturedOutput, ReRequest, ResultError, correction_allowed, cross_check, parse_result,
    parse_update_epic_rerequest,
};
use crate::agents::supervisor::{
    self, CancelToken, Heartbeat, LaunchError, LaunchEvents, LaunchExit, LaunchRecord, LaunchSpec,
};
use crate::machine::{AgentPhase, AgentResult, PhaseResult};
use crate::redact::Redactor;
use crate::workspace::{Mirror, WorkspaceError, Worktree};

pub use observe::{Candidate, CommitPolicy, Expectations, check_candidate_commits};

/// Everything one agent phase needs.
#[derive(Debug)]
pub struct PhaseRequest<'a> {
    pub phase: AgentPhase,
    /// The review round (REVIEW and FIX); picks the reviewer profile.
    pub round: u32,
    pub catalog: &'a AgentCatalog,
    pub prompts: &'a PromptSet,
    /// `REPOSITORY` and `ISSUE_URL` of the trust-boundary section; `PHASE`
    /// and `CONTEXT_DIR` are filled in here.
    pub boundary: BTreeMap<&'static str, Value>,
    /// For UPDATE_EPIC only: ask again for just these fields (SPEC §4),
    /// with the re-request template, whose values `values` then holds.
    pub rerequest: Option<ReRequest>,
    /// The phase template's values.
    pub values: BTreeMap<&'static str, Value>,
    pub context: &'a ContextFiles,
    pub mirror: &'a Mirror,
    pub worktree: &'a Worktree,
    /// A fresh directory for this phase's files, outside the worktree: the
    /// read-context folder goes to `context/`, attempt N's logs to
    /// `attempt-N/`.
    pub launch_dir: PathBuf,
    pub redactor: &'a Redactor,
    pub expectations: Expectations,
    /// Correction relaunches allowed (`limits.corrections_per_launch`).
    pub max_corrections: u32,
    pub cancel: Option<&'a CancelToken>,
    /// Receives the progress of the running launch.
    pub heartbeat: Option<&'a watch::Sender<Heartbeat>>,
    /// Receives each attempt's start, heartbeats and end, for the journal.
    pub events: Option<&'a LaunchEvents>,
    /// Time between SIGTERM and SIGKILL when a launch's group is ended.
    pub kill_grace: Duration,
}

/// Which limit ended a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    Idle,
    Wall,
}

/// How the phase ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseOutcome {
    /// A success result that passed the schema, the policy and the
    /// cross-checks.
    Accepted(PhaseResult),
    /// The agent answered `status: "failure"` (the run goes to FAILED).
    AgentFailure {
        message: String,
    },
    /// The agent answered `status: "blocked"` (the run goes to BLOCKED).
    AgentBlocked {
        message: String,
    },
    /// The last attempt's result was refused and no correction is left.
    Rejected {
        diagnosis: String,
    },
    /// A reviewer changed the worktree; its result is void.
    ReviewerMovedWorktree,
    /// Non-zero exit or a signal we did not send.
    Crashed {
        exit: LaunchExit,
    },
    TimedOut(Timeout),
    Cancelled,
}

/// The outcome with what the driver journals.
#[derive(Debug, Clone)]
pub struct PhaseReport {
    pub outcome: PhaseOutcome,
    /// One record per attempt, first launch first.
    pub launches: Vec<LaunchRecord>,
    /// For an accepted IMPLEMENT or FIX: the policy over the new commits.
    pub commit_policy: CommitPolicy,
}

/// Why the phase could not be run at all (as opposed to an agent failing).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("no agent profile is configured for role `{}`", .0.role_name())]
    NoProfile(AgentPhase),
    #[error("the expectations given are for another phase than {0}")]
    ExpectationsOfAnotherPhase(&'static str),
    #[error("only UPDATE_EPIC can be asked again for some fields, not {0}")]
    ReRequestOutsideUpdateEpic(&'static str),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Context(#[from] ContextError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

fn template_for(phase: AgentPhase, rerequest: Option<ReRequest>) -> TemplateId {
    match (phase, rerequest) {
        (AgentPhase::Plan, _) => TemplateId::Plan,
        (AgentPhase::Implement, _) => TemplateId::Implement,
        (AgentPhase::Review, _) => TemplateId::Review,
        (AgentPhase::Fix, _) => TemplateId::Fix,
        (AgentPhase::UpdateEpic, None) => TemplateId::UpdateEpic,
        (AgentPhase::UpdateEpic, Some(_)) => TemplateId::UpdateEpicReRequest,
    }
}

fn expectations_fit(phase: AgentPhase, expectations: &Expectations) -> bool {
    matches!(
        (phase, expectations),
        (AgentPhase::Plan, Expectations::Plan)
            | (AgentPhase::Implement, Expectations::Implement { .. })
            | (AgentPhase::Review, Expectations::Review(_))
            | (AgentPhase::Fix, Expectations::Fix { .. })
            | (AgentPhase::UpdateEpic, Expectations::UpdateEpic(_))
    )
}

/// Runs one agent phase to its outcome; see the module documentation.
pub async fn run_phase(request: PhaseRequest<'_>) -> Result<PhaseReport, PipelineError> {
    let phase = request.phase;
    if !expectations_fit(phase, &request.expectations) {
        return Err(PipelineError::ExpectationsOfAnotherPhase(phase.spec_name()));
    }
    if request.rerequest.is_some() && phase != AgentPhase::UpdateEpic {
        return Err(PipelineError::ReRequestOutsideUpdateEpic(phase.spec_name()));
    }
    let profile = request
        .catalog
        .profile_for(phase, request.round)
        .ok_or(PipelineError::NoProfile(phase))?;
    ensure_outside_worktree(&request.launch_dir, request.worktree.path())?;
    let redactor = launch_redactor(request.redactor, profile);

    let context_dir = request.launch_dir.join("context");
    write_context(
        &context_dir,
        request.context,
        &redactor,
        ContextLimits::default(),
    )?;
    let mut boundary = request.boundary.clone();
    boundary.insert("PHASE", Value::trusted(phase.spec_name()));
    boundary.insert(
        "CONTEXT_DIR",
        Value::trusted(context_dir.display().to_string()),
    );
    let first_prompt = request.prompts.render_launch(
        &boundary,
        template_for(phase, request.rerequest),
        &request.values,
    )?;

    let mut launches = Vec::new();
    let mut prompt = first_prompt.clone();
    let mut corrections_used = 0;
    loop {
        if request.cancel.is_some_and(CancelToken::is_cancelled) {
            return Ok(report(PhaseOutcome::Cancelled, launches));
        }
        let attempt = launches.len() + 1;
        let log_dir = request.launch_dir.join(format!("attempt-{attempt}"));
        let attempt_outcome = attempt_once(&request, profile, &prompt, log_dir, &redactor).await?;
        let exited_zero = attempt_outcome.record.exit.is_success();
        launches.push(attempt_outcome.record);
        let refusal = match attempt_outcome.verdict {
            Verdict::Final(outcome) => return Ok(report(outcome, launches)),
            Verdict::Accepted(result, candidate) => {
                let commit_policy = match candidate {
                    Some(candidate) => check_candidate_commits(request.mirror, &candidate).await?,
                    None => CommitPolicy::NotApplicable,
                };
                return Ok(PhaseReport {
                    outcome: PhaseOutcome::Accepted(result),
                    launches,
                    commit_policy,
                });
            }
            Verdict::Refused(error) => error,
        };
        if !correction_allowed(exited_zero, corrections_used, request.max_corrections) {
            let outcome = PhaseOutcome::Rejected {
                diagnosis: refusal.diagnosis(),
            };
            return Ok(report(outcome, launches));
        }
        corrections_used += 1;
        let values = correction_values(phase, &refusal, corrections_used, request.max_corrections);
        let correction = request.prompts.render(TemplateId::Correction, &values)?;
        // The correction follows the original instructions, which it refers
        // to ("as the instructions above describe").
        prompt = format!("{}\n\n---\n\n{}", first_prompt.trim_end(), correction);
    }
}

fn report(outcome: PhaseOutcome, launches: Vec<LaunchRecord>) -> PhaseReport {
    PhaseReport {
        outcome,
        launches,
        commit_policy: CommitPolicy::NotApplicable,
    }
}

/// The caller's redactor plus the values this profile hands its agent: a
/// vendor key set in the config or inherited from our environment must not
/// come back through the agent's output into a log.
pub(crate) fn launch_redactor(base: &Redactor, profile: &LaunchProfile) -> Redactor {
    let mut redactor = base.clone();
    for secret in profile.env_secrets() {
        redactor.add_secret(secret.clone());
    }
    for name in &profile.env_inherit {
        if let Ok(value) = std::env::var(name) {
            redactor.add_secret(SecretString::from(value));
        }
    }
    redactor
}

enum Verdict {
    Final(PhaseOutcome),
    Accepted(PhaseResult, Option<Candidate>),
    Refused(ResultError),
}

struct Attempt {
    record: LaunchRecord,
    verdict: Verdict,
}

/// One launch and the judgement of its answer.
async fn attempt_once(
    request: &PhaseRequest<'_>,
    profile: &LaunchProfile,
    prompt: &str,
    log_dir: PathBuf,
    redactor: &Redactor,
) -> Result<Attempt, PipelineError> {
    // The reviewer and the planner are read-only; anything they change
    // voids the answer.
    let before = if matches!(request.phase, AgentPhase::Review | AgentPhase::Plan) {
        Some(request.worktree.fingerprint().await?)
    } else {
        None
    };
    let workdir: &Path = request.worktree.path();
    let mut launch = LaunchSpec::new(profile, request.phase, prompt, workdir, log_dir, redactor);
    let context_dir = request.launch_dir.join("context");
    launch.read_context = Some(&context_dir);
    launch.cancel = request.cancel;
    launch.heartbeat = request.heartbeat;
    launch.events = request.events;
    launch.kill_grace = request.kill_grace;
    let outcome = supervisor::launch(launch).await?;
    let verdict = judge(request, &outcome, before).await?;
    Ok(Attempt {
        record: outcome.record,
        verdict,
    })
}

async fn judge(
    request: &PhaseRequest<'_>,
    outcome: &supervisor::LaunchOutcome,
    before: Option<crate::workspace::WorktreeFingerprint>,
) -> Result<Verdict, PipelineError> {
    if let Some(before) = before
        && request.worktree.fingerprint().await? != before
    {
        return Ok(Verdict::Final(PhaseOutcome::ReviewerMovedWorktree));
    }
    match outcome.record.exit {
        LaunchExit::Exited(_) => {}
        LaunchExit::Cancelled => return Ok(Verdict::Final(PhaseOutcome::Cancelled)),
        LaunchExit::IdleTimeout => {
            return Ok(Verdict::Final(PhaseOutcome::TimedOut(Timeout::Idle)));
        }
        LaunchExit::WallTimeout => {
            return Ok(Verdict::Final(PhaseOutcome::TimedOut(Timeout::Wall)));
        }
        exit @ LaunchExit::Signalled(_) => {
            return Ok(Verdict::Final(PhaseOutcome::Crashed { exit }));
        }
    }
    let exit = outcome.record.exit;
    // A non-zero exit is a crash whatever it printed (SPEC §3): the driver
    // retries it with backoff, and it earns no correction.
    if !exit.is_success() {
        return Ok(Verdict::Final(PhaseOutcome::Crashed { exit }));
    }
    let captured = captured_result(outcome);
    let parsed = match request.rerequest {
        Some(asked) => parse_update_epic_rerequest(&captured, asked),
        None => parse_result(request.phase, &captured),
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return Ok(Verdict::Refused(error)),
    };
    let (observations, candidate) = request
        .expectations
        .observe(request.mirror, request.worktree)
        .await?;
    Ok(match cross_check(&parsed, &observations) {
        Err(error) => Verdict::Refused(error),
        Ok(AgentResult::Failure { message }) => {
            Verdict::Final(PhaseOutcome::AgentFailure { message })
        }
        Ok(AgentResult::Blocked { message }) => {
            Verdict::Final(PhaseOutcome::AgentBlocked { message })
        }
        Ok(AgentResult::Success { result }) => Verdict::Accepted(result, candidate),
    })
}

/// What the parser searches: the final-message file when the agent wrote
/// one, else the captured end of stdout.
fn captured_result(outcome: &supervisor::LaunchOutcome) -> CapturedOutput {
    match &outcome.final_message {
        Some(text) => CapturedOutput::complete(text.clone()),
        None => CapturedOutput {
            tail: outcome.stdout.tail_text().to_owned(),
            head_truncated: outcome.stdout.is_truncated(),
            total_bytes: outcome.stdout.total_bytes,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_runs_its_own_template() {
        let pairs: Vec<_> = AgentPhase::ALL
            .into_iter()
            .map(|phase| (phase, template_for(phase, None)))
            .collect();
        assert_eq!(
            pairs,
            [
                (AgentPhase::Plan, TemplateId::Plan),
                (AgentPhase::Implement, TemplateId::Implement),
                (AgentPhase::Review, TemplateId::Review),
                (AgentPhase::Fix, TemplateId::Fix),
                (AgentPhase::UpdateEpic, TemplateId::UpdateEpic),
            ]
        );
        let asked = ReRequest {
            next_issue: true,
            roadmap: false,
        };
        assert_eq!(
            template_for(AgentPhase::UpdateEpic, Some(asked)),
            TemplateId::UpdateEpicReRequest
        );
    }

    #[test]
    fn a_final_message_is_parsed_whole_and_stdout_by_its_captured_end() {
        let stdout = supervisor::RedactedCapture {
            head: "start\n".into(),
            tail: "end\n".into(),
            total_bytes: 100,
            omitted_bytes: 90,
        };
        let mut outcome = supervisor::LaunchOutcome {
            record: LaunchRecord {
                profile: "p".into(),
                role: AgentPhase::Implement,
                started_at: chrono::Utc::now(),
                duration: Duration::ZERO,
                exit: LaunchExit::Exited(0),
                output_bytes: 100,
                tokens: None,
                usage: None,
                cost_micros: None,
                log_dir: PathBuf::new(),
                descendants_killed: false,
                group_survived: false,
            },
            stdout,
            stderr: supervisor::RedactedCapture::default(),
            final_message: None,
        };
        let from_stdout = captured_result(&outcome);
        assert_eq!(from_stdout.tail, "end\n");
        assert!(from_stdout.head_truncated);
        outcome.final_message = Some("final".into());
        let from_file = captured_result(&outcome);
        assert_eq!(from_file.tail, "final");
        assert!(!from_file.head_truncated);
    }
}
