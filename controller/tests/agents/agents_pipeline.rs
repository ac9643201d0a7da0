//! The agent phase pipeline end to end: scripted agents from
//! `tests/agents/`, well-behaved and hostile, run through `run_phase` in a
//! real worktree of a mirror fed from a bare repository. Every refusal is
//! checked to carry a diagnosis free of the agent's own text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use autoforge::agents::context::{ContextDoc, ContextFiles};
use autoforge::agents::pipeline::{
    CommitPolicy, Expectations, PhaseOutcome, PhaseReport, PhaseRequest, PipelineError, Timeout,
    run_phase,
};
use autoforge::agents::profile::AgentCatalog;
use autoforge::agents::prompt::{PromptSet, TemplateId, Value, limit_value};
use autoforge::agents::result::{ReRequest, ReviewObservations, UpdateEpicObservations};
use autoforge::agents::supervisor::{CancelToken, Heartbeat, LaunchExit};
use autoforge::config::AgentSettings;
use autoforge::machine::{AgentPhase, PhaseResult};
use autoforge::publish::{CommitMessageViolation, IssueRef};
use autoforge::redact::Redactor;
use autoforge::workspace::{CommitSha, Mirror, Workspaces, Worktree};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::json;
use tempfile::TempDir;
use tokio::sync::watch;

use crate::common;
use common::{LEAKABLE_CREDENTIALS, Upstream, agent_script, git, run_child_test, test_in};

/// Printed by every hostile script (`tests/agents/phase_common.sh`).
const CANARY: &str = "CANARY-7f3e-hostile-agent-text";
const ISSUE_URL: &str = "https://github.com/octo/widgets/issues/7";

/// A bare upstream with one commit, its mirror and the issue's worktree.
struct Repo {
    _upstream: Upstream,
    state: TempDir,
    mirror: Mirror,
    worktree: Worktree,
    base: CommitSha,
}

impl Repo {
    async fn new() -> Self {
        let upstream = Upstream::bare();
        let base = upstream.commit("README.md", "hello\n", "Initial commit");
        let state = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::open(&state.path().join("state")).unwrap();
        let mirror = workspaces
            .mirror("octo", "widgets", &upstream.url())
            .await
            .unwrap();
        mirror
            .fetch_shas(std::slice::from_ref(&base), None)
            .await
            .unwrap();
        let worktree = Worktree::ensure(&mirror, autoforge_journal::testing::issue(7), &base)
            .await
            .unwrap();
        Self {
            _upstream: upstream,
            state,
            mirror,
            worktree,
            base,
        }
    }

    fn head(&self) -> String {
        git(self.worktree.path(), &["rev-parse", "HEAD"])
    }
}

fn issue(number: u64) -> IssueRef {
    IssueRef {
        owner: "octo".into(),
        repo: "widgets".into(),
        number: autoforge_journal::testing::issue(number),
    }
}

/// One profile, `scripted`, serving every role, built through the config
/// layer's conversion like the real controller does. `sandbox` is the
/// global `agents.sandbox` switch.
fn catalog(command: Vec<String>, idle: u64, wall: u64, sandbox: &str) -> AgentCatalog {
    let settings: AgentSettings = serde_json::from_value(json!({
        "sandbox": sandbox,
        "profiles": {"scripted": {
            "command": command,
            "env": {"VENDOR_API_KEY": "vendor-secret-value-0042"},
            "idle_timeout_seconds": idle,
            "max_runtime_seconds": wall,
        }},
        "roles": {"implement": "scripted", "review": "scripted", "fix": "scripted", "update_epic": "scripted"}
    }))
    .unwrap();
    settings.catalog(8).unwrap()
}

fn script(name: &str, args: &[&str]) -> Vec<String> {
    std::iter::once(agent_script(name))
        .chain(args.iter().map(|a| (*a).to_owned()))
        .collect()
}

/// Every placeholder of `template` that is not a bound, with a visible
/// stand-in value.
fn values_for(template: TemplateId) -> BTreeMap<&'static str, Value> {
    template
        .placeholders()
        .iter()
        .filter(|name| limit_value(name).is_none())
        .map(|name| (*name, Value::trusted(format!("<{name}>"))))
        .collect()
}

fn template_of(phase: AgentPhase) -> TemplateId {
    match phase {
        AgentPhase::Plan => TemplateId::Plan,
        AgentPhase::Implement => TemplateId::Implement,
        AgentPhase::Review => TemplateId::Review,
        AgentPhase::Fix => TemplateId::Fix,
        AgentPhase::UpdateEpic => TemplateId::UpdateEpic,
    }
}

struct Run<'a> {
    repo: &'a Repo,
    phase: AgentPhase,
    round: u32,
    command: Vec<String>,
    expectations: Expectations,
    rerequest: Option<ReRequest>,
    idle: u64,
    wall: u64,
    cancel: Option<&'a CancelToken>,
    heartbeat: Option<&'a watch::Sender<Heartbeat>>,
    /// `off` for the tests that read a pid file the agent wrote: a pid from
    /// inside the sandbox's PID namespace means nothing on the host. They
    /// prove the group kill that remains without the sandbox; the
    /// sandboxed kill is proven in `sandbox_launch.rs`.
    sandbox: &'static str,
}

impl<'a> Run<'a> {
    fn implement(repo: &'a Repo, mode: &str) -> Self {
        Self {
            repo,
            phase: AgentPhase::Implement,
            round: 1,
            command: script("phase_implement.sh", &[mode, ISSUE_URL]),
            expectations: Expectations::Implement {
                run_issue: issue(7),
                base_sha: repo.base.clone(),
            },
            rerequest: None,
            idle: 60,
            wall: 120,
            cancel: None,
            heartbeat: None,
            sandbox: "bubblewrap",
        }
    }

    fn review(repo: &'a Repo, command: Vec<String>, round: u32) -> Self {
        Self {
            repo,
            phase: AgentPhase::Review,
            round,
            command,
            expectations: Expectations::Review(ReviewObservations {
                round,
                reviewed_head_sha: repo.base.clone(),
                failed_validation_index: None,
            }),
            rerequest: None,
            idle: 60,
            wall: 120,
            cancel: None,
            heartbeat: None,
            sandbox: "bubblewrap",
        }
    }

    async fn go(self) -> PhaseReport {
        self.try_go().await.unwrap()
    }

    async fn try_go(self) -> Result<PhaseReport, PipelineError> {
        let catalog = catalog(self.command, self.idle, self.wall, self.sandbox);
        let prompts = PromptSet::embedded();
        let context = ContextFiles {
            issue: Some(ContextDoc {
                facts: vec![("number".into(), "7".into())],
                body: "Please add the feature.".into(),
                ..ContextDoc::default()
            }),
            ..ContextFiles::default()
        };
        let boundary = BTreeMap::from([
            ("REPOSITORY", Value::trusted("octo/widgets")),
            ("ISSUE_URL", Value::trusted(ISSUE_URL)),
        ]);
        let redactor = Redactor::new();
        let request = PhaseRequest {
            phase: self.phase,
            round: self.round,
            catalog: &catalog,
            prompts: &prompts,
            boundary,
            rerequest: self.rerequest,
            values: values_for(match self.rerequest {
                Some(_) => TemplateId::UpdateEpicReRequest,
                None => template_of(self.phase),
            }),
            context: &context,
            mirror: &self.repo.mirror,
            worktree: &self.repo.worktree,
            launch_dir: self.repo.state.path().join("launches/1"),
            redactor: &redactor,
            expectations: self.expectations,
            max_corrections: 1,
            cancel: self.cancel,
            heartbeat: self.heartbeat,
            events: None,
            kill_grace: Duration::from_millis(300),
        };
        run_phase(request).await
    }
}

/// The diagnosis of a rejected phase, after checking it has one launch
/// plus one correction and never quotes the agent.
fn rejected_after_one_correction(report: &PhaseReport) -> &str {
    let PhaseOutcome::Rejected { diagnosis } = &report.outcome else {
        panic!("expected a rejection, got {:?}", report.outcome);
    };
    assert_eq!(report.launches.len(), 2, "one launch plus one correction");
    assert!(
        !diagnosis.contains(CANARY),
        "the diagnosis echoes agent text: {diagnosis}"
    );
    diagnosis
}

/// Runs the IMPLEMENT script in `mode`, expects a rejection whose
/// diagnosis names `fragment`, and returns the repository and report.
async fn implementer_is_rejected(mode: &str, fragment: &str) -> (Repo, PhaseReport) {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, mode).go().await;
    let diagnosis = rejected_after_one_correction(&report);
    assert!(diagnosis.contains(fragment), "{diagnosis}");
    (repo, report)
}

/// The redacted `output.log` of one attempt (`attempt-N/` under the
/// phase's launch directory).
fn output_log_of_attempt(repo: &Repo, attempt: u32) -> String {
    let dir = repo
        .state
        .path()
        .join(format!("launches/1/attempt-{attempt}"));
    std::fs::read_to_string(dir.join("output.log")).unwrap()
}

#[tokio::test]
async fn a_well_behaved_implementer_is_accepted_with_its_commit_checked() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "good").go().await;
    let PhaseOutcome::Accepted(PhaseResult::Implement(result)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(result.head_sha, repo.head());
    assert_eq!(result.pr_title, "Add the feature");
    assert_eq!(report.launches.len(), 1);
    assert_eq!(report.launches[0].exit, LaunchExit::Exited(0));
    assert_eq!(report.commit_policy, CommitPolicy::Passed { commits: 1 });
    let context = repo.state.path().join("launches/1/context/issue.md");
    assert!(
        std::fs::read_to_string(context)
            .unwrap()
            .contains("Please add the feature.")
    );
}

#[tokio::test]
async fn a_well_behaved_reviewer_is_accepted_and_leaves_the_worktree_alone() {
    let repo = Repo::new().await;
    let command = script("phase_review.sh", &["findings", "2"]);
    let report = Run::review(&repo, command, 2).go().await;
    let PhaseOutcome::Accepted(PhaseResult::Review(review)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(review.round, 2);
    assert_eq!(review.findings[0].id, "R2-F1");
    assert_eq!(report.commit_policy, CommitPolicy::NotApplicable);
}

#[tokio::test]
async fn a_clean_review_is_accepted_without_findings() {
    let repo = Repo::new().await;
    let command = script("phase_review.sh", &["clean", "1"]);
    let report = Run::review(&repo, command, 1).go().await;
    let PhaseOutcome::Accepted(PhaseResult::Review(review)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(!review.needs_fix_round() && review.findings.is_empty());
    assert_eq!(review.reviewed_head_sha, repo.base.to_string());
}

#[tokio::test]
async fn a_well_behaved_fixer_resolves_every_open_finding() {
    let repo = Repo::new().await;
    let ids = ["R1-F1", "R1-F2"];
    let report = Run {
        command: script("phase_fix.sh", &["good", ids[0], ids[1]]),
        ..fix_run(&repo, &ids)
    }
    .go()
    .await;
    let PhaseOutcome::Accepted(PhaseResult::Fix(fix)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(fix.previous_head_sha, repo.base.to_string());
    assert_eq!(fix.head_sha, repo.head());
    assert_eq!(fix.resolutions.len(), 2);
    assert_eq!(report.commit_policy, CommitPolicy::Passed { commits: 1 });
}

fn fix_run<'a>(repo: &'a Repo, ids: &[&str]) -> Run<'a> {
    Run {
        repo,
        phase: AgentPhase::Fix,
        round: 1,
        command: Vec::new(),
        expectations: Expectations::Fix {
            run_issue: issue(7),
            round: 1,
            reviewed_head_sha: repo.base.clone(),
            open_finding_ids: ids.iter().map(|id| (*id).to_owned()).collect(),
            handed_over_follow_ups: Vec::new(),
        },
        rerequest: None,
        idle: 60,
        wall: 120,
        cancel: None,
        heartbeat: None,
        sandbox: "bubblewrap",
    }
}

#[tokio::test]
async fn a_fixer_leaving_a_finding_unresolved_is_rejected() {
    let repo = Repo::new().await;
    let ids = ["R1-F1", "R1-F2"];
    let report = Run {
        command: script("phase_fix.sh", &["missing_resolution", ids[0], ids[1]]),
        ..fix_run(&repo, &ids)
    }
    .go()
    .await;
    let diagnosis = rejected_after_one_correction(&report);
    assert!(
        diagnosis.contains("no resolution for open finding R1-F2"),
        "{diagnosis}"
    );
}

fn update_epic_run<'a>(repo: &'a Repo, mode: &str, rerequest: Option<ReRequest>) -> Run<'a> {
    // A re-request that does not ask for the roadmap cannot require it.
    let roadmap_asked = rerequest.is_none_or(|asked| asked.roadmap);
    Run {
        phase: AgentPhase::UpdateEpic,
        command: script("phase_update_epic.sh", &[mode]),
        expectations: Expectations::UpdateEpic(UpdateEpicObservations {
            epic: issue(1),
            finished_issue: issue(7),
            roadmap_due: roadmap_asked,
            merges_pending: roadmap_asked,
        }),
        rerequest,
        ..Run::implement(repo, "unused")
    }
}

const NEXT_ISSUE_ONLY: ReRequest = ReRequest {
    next_issue: true,
    roadmap: false,
};

#[tokio::test]
async fn a_well_behaved_epic_updater_is_accepted() {
    let repo = Repo::new().await;
    let report = update_epic_run(&repo, "good", None).go().await;
    let PhaseOutcome::Accepted(PhaseResult::UpdateEpic(update)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(update.next_issue, None);
    assert!(
        update
            .roadmap_section
            .as_deref()
            .unwrap()
            .contains("gadgets")
    );
}

#[tokio::test]
async fn a_rerequest_for_the_next_issue_accepts_just_that_field() {
    let repo = Repo::new().await;
    let report = update_epic_run(&repo, "rerequest_next", Some(NEXT_ISSUE_ONLY))
        .go()
        .await;
    let PhaseOutcome::Accepted(PhaseResult::UpdateEpic(update)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(
        update.next_issue,
        Some(autoforge_journal::testing::issue(8))
    );
    assert_eq!(
        update.next_issue_repository.as_deref(),
        Some("octo/widgets")
    );
    assert_eq!(update.progress, None);
}

#[tokio::test]
async fn a_rerequest_answer_repeating_the_progress_is_refused() {
    let repo = Repo::new().await;
    let report = update_epic_run(&repo, "rerequest_with_progress", Some(NEXT_ISSUE_ONLY))
        .go()
        .await;
    let diagnosis = rejected_after_one_correction(&report);
    assert!(diagnosis.contains("not asked for"), "{diagnosis}");
}

#[tokio::test]
async fn expectations_of_another_phase_are_a_caller_error_before_any_launch() {
    let repo = Repo::new().await;
    let run = Run {
        phase: AgentPhase::Review,
        ..Run::implement(&repo, "good")
    };
    assert!(matches!(
        run.try_go().await,
        Err(PipelineError::ExpectationsOfAnotherPhase("REVIEW"))
    ));
    assert_eq!(repo.head(), repo.base.to_string(), "nothing was launched");
}

#[tokio::test]
async fn cancelling_a_running_agent_kills_its_group_and_reports_cancelled() {
    let repo = Repo::new().await;
    let pidfile = repo.state.path().join("grandchild.pid");
    let cancel = CancelToken::new();
    let (heartbeat, beats) = watch::channel(Heartbeat::default());
    let run = Run {
        command: script("sleeper_with_grandchild.sh", &[pidfile.to_str().unwrap()]),
        sandbox: "off",
        cancel: Some(&cancel),
        heartbeat: Some(&heartbeat),
        ..Run::implement(&repo, "unused")
    };
    let canceller = async {
        while !pidfile.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    };
    let (report, ()) = tokio::join!(run.go(), canceller);
    assert_eq!(report.outcome, PhaseOutcome::Cancelled);
    assert_eq!(report.launches.len(), 1);
    assert_eq!(report.launches[0].exit, LaunchExit::Cancelled);
    assert_grandchild_dead(&pidfile);
    assert!(
        beats.borrow().output_bytes > 0,
        "no heartbeat was published"
    );
}

fn assert_grandchild_dead(pidfile: &std::path::Path) {
    let pid: i32 = std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        kill(Pid::from_raw(pid), None),
        Err(Errno::ESRCH),
        "the grandchild {pid} outlived its launch"
    );
}

#[tokio::test]
async fn output_without_a_block_gets_one_correction_then_is_rejected() {
    let (repo, report) =
        implementer_is_rejected("no_block", "no complete CONTROL_RESULT block").await;
    assert!(
        report
            .launches
            .iter()
            .all(|l| l.exit == LaunchExit::Exited(0))
    );
    assert!(output_log_of_attempt(&repo, 2).contains("All done"));
}

#[tokio::test]
async fn of_two_blocks_the_last_one_is_used() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "two_blocks").go().await;
    let PhaseOutcome::Accepted(PhaseResult::Implement(result)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(result.pr_title, "Add the feature");
    assert_eq!(report.launches.len(), 1);
}

#[tokio::test]
async fn a_block_only_in_the_dropped_head_of_a_huge_output_is_refused() {
    implementer_is_rejected("block_in_head_only", "earlier output was not captured").await;
}

#[tokio::test]
async fn a_two_mebibyte_block_is_refused_by_its_size() {
    implementer_is_rejected("huge_block", "over the limit of 1048576 bytes").await;
}

#[tokio::test]
async fn invalid_json_is_refused_with_its_position_only() {
    implementer_is_rejected("invalid_json", "not valid JSON").await;
}

#[tokio::test]
async fn a_result_for_another_phase_is_refused() {
    implementer_is_rejected("wrong_phase", "phase must be \"IMPLEMENT\"").await;
}

#[tokio::test]
async fn a_head_sha_naming_another_commit_is_refused() {
    let (repo, report) = implementer_is_rejected("other_head", "but the worktree HEAD is").await;
    assert!(
        rejected_after_one_correction(&report).contains(&repo.head()),
        "{:?}",
        report.outcome
    );
}

#[tokio::test]
async fn a_review_of_another_round_is_refused() {
    let repo = Repo::new().await;
    let command = script("phase_review.sh", &["wrong_round", "3"]);
    let report = Run::review(&repo, command, 3).go().await;
    let diagnosis = rejected_after_one_correction(&report);
    assert!(
        diagnosis.contains("round is 4, but this is round 3"),
        "{diagnosis}"
    );
}

#[tokio::test]
async fn a_credential_in_the_pr_body_is_refused_and_never_repeated() {
    let (repo, report) = implementer_is_rejected("credential_in_body", "pr_body").await;
    assert!(
        !rejected_after_one_correction(&report).contains("ghp_"),
        "{:?}",
        report.outcome
    );
    let log = output_log_of_attempt(&repo, 1);
    assert!(!log.contains("ghp_0123456789"), "the token reached the log");
}

#[tokio::test]
async fn a_commit_message_closing_another_issue_is_refused_by_the_commit_policy() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "closes_other_issue").go().await;
    assert!(
        matches!(report.outcome, PhaseOutcome::Accepted(_)),
        "{:?}",
        report.outcome
    );
    let CommitPolicy::Refused(CommitMessageViolation::ClosesAnotherIssue { sha, .. }) =
        &report.commit_policy
    else {
        panic!("{:?}", report.commit_policy);
    };
    assert_eq!(sha, &repo.head());
}

#[tokio::test]
async fn a_reviewer_that_edits_the_worktree_voids_its_result() {
    let repo = Repo::new().await;
    let command = script("edits_worktree_reviewer.sh", &[]);
    // The sandbox mounts a reviewer's worktree read-only, so the edit
    // cannot happen there; the fingerprint is the second line, tested
    // here without the first.
    let report = Run {
        sandbox: "off",
        ..Run::review(&repo, command, 1)
    }
    .go()
    .await;
    assert_eq!(report.outcome, PhaseOutcome::ReviewerMovedWorktree);
    assert_eq!(
        report.launches.len(),
        1,
        "a voided review earns no correction"
    );
}

#[tokio::test]
async fn a_non_zero_exit_is_a_crash_even_with_a_valid_block() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "crash").go().await;
    assert_eq!(
        report.outcome,
        PhaseOutcome::Crashed {
            exit: LaunchExit::Exited(3)
        }
    );
    assert_eq!(report.launches.len(), 1, "a crash earns no correction");
}

#[tokio::test]
async fn a_blocked_answer_is_reported_with_its_message() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "blocked").go().await;
    assert_eq!(
        report.outcome,
        PhaseOutcome::AgentBlocked {
            message: "The issue asks for two incompatible things.".into()
        }
    );
}

#[tokio::test]
async fn a_silent_agent_times_out_and_its_process_group_dies() {
    let repo = Repo::new().await;
    let pidfile = repo.state.path().join("grandchild.pid");
    let report = Run {
        command: script("sleeper_with_grandchild.sh", &[pidfile.to_str().unwrap()]),
        sandbox: "off",
        idle: 1,
        wall: 30,
        ..Run::implement(&repo, "unused")
    }
    .go()
    .await;
    assert_eq!(report.outcome, PhaseOutcome::TimedOut(Timeout::Idle));
    assert_eq!(report.launches.len(), 1);
    assert_grandchild_dead(&pidfile);
}

#[tokio::test]
async fn an_agent_that_fixes_its_answer_on_correction_is_accepted_with_two_records() {
    let repo = Repo::new().await;
    let report = Run::implement(&repo, "fixed_on_correction").go().await;
    let PhaseOutcome::Accepted(PhaseResult::Implement(result)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(result.head_sha, repo.head());
    assert_eq!(report.launches.len(), 2);
    assert_ne!(report.launches[0].log_dir, report.launches[1].log_dir);
    assert_eq!(report.commit_policy, CommitPolicy::Passed { commits: 1 });
}

/// The environment check runs in a child copy of this test binary, so the
/// credential variables are set for that process alone.
const ENV_CHILD_FLAG: &str = "AGENTS_PIPELINE_ENV_CHILD";

#[test]
fn an_agent_printing_its_environment_shows_no_controller_credential() {
    run_child_test(
        &test_in(module_path!(), "env_printer_child"),
        ENV_CHILD_FLAG,
        &LEAKABLE_CREDENTIALS,
    );
}

#[tokio::test]
#[ignore = "runs only as the child process of an_agent_printing_its_environment_shows_no_controller_credential"]
async fn env_printer_child() {
    if std::env::var_os(ENV_CHILD_FLAG).is_none() {
        return;
    }
    let repo = Repo::new().await;
    let report = Run {
        command: script("print_env.sh", &[]),
        ..Run::implement(&repo, "unused")
    }
    .go()
    .await;
    rejected_after_one_correction(&report);
    let env = output_log_of_attempt(&repo, 1);
    assert!(env.contains("PATH="), "{env}");
    for leaked in [
        "GITHUB_TOKEN",
        "AUTOFORGE_",
        "DATABASE_URL",
        "leaked",
        ENV_CHILD_FLAG,
    ] {
        assert!(
            !env.contains(leaked),
            "`{leaked}` reached the agent:\n{env}"
        );
    }
    // The profile's own vendor key reaches the agent but not the log.
    assert!(env.contains("VENDOR_API_KEY=[REDACTED"), "{env}");
    assert!(!env.contains("vendor-secret-value-0042"), "{env}");
}
