//! Runs validation commands on a clean export of a candidate commit
//! (SPEC §12).
//!
//! Commands run in order in the export directory, each in its own process
//! group with the same allow-listed, credential-free environment and the
//! same group kill as agents (the supervisor's process pieces, not a second
//! copy), inside the bubblewrap sandbox: they see the system read-only, the
//! export read-write, an empty `/tmp` as HOME and TMPDIR and the extra binds
//! of `[validation.sandbox]`, nothing of the state directory besides; the
//! network as that table says. Each yields a [`CommandRun`]; the first one
//! that does not pass ends the run. Whether a failure is final for its SHA
//! is for the caller to enforce by never asking again for the same commit.

pub mod candidate;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use std::ffi::OsString;

use crate::agents::supervisor::capture::{CaptureLimits, OutputSink};
use crate::agents::supervisor::environment::base_environment;
use crate::agents::supervisor::process::{LaunchExit, RunLimits, run_in_group};
use crate::agents::supervisor::view::resolve_program;
use crate::redact::Redactor;
use crate::sandbox::{Access, Mount, Sandbox, SandboxMode, SandboxPolicy};

pub use candidate::{CandidateError, CandidateValidation, CandidateVerdict, validate_candidate};

/// One configured validation command: the machine's type, frozen into the
/// run with the repository's settings.
pub use crate::machine::ValidationCommand;

/// The verdict on one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ValidationOutcome {
    Pass,
    Fail,
    Timeout,
}

impl ValidationOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Timeout => "TIMEOUT",
        }
    }
}

/// How one validation command ran, as the caller journals it (the stored
/// row is `journal::ValidationRecord`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// Position in `validation.commands`, from 0.
    pub index: usize,
    /// The command as configured, for display.
    pub command: String,
    pub outcome: ValidationOutcome,
    pub duration: Duration,
    /// The redacted end of stdout and stderr together, in arrival order.
    pub output_tail: String,
    /// How the process ended; `None` when it could not be started.
    pub exit: Option<LaunchExit>,
}

/// Bounds for a validation run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationLimits {
    /// Per-command wall-clock limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL on timeout.
    pub kill_grace: Duration,
    /// Bytes of output kept per command.
    pub tail_bytes: usize,
    /// The commands' sandbox: `agents.sandbox` and `[validation.sandbox]`.
    pub sandbox: SandboxPolicy,
}

impl ValidationLimits {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            kill_grace: Duration::from_secs(5),
            tail_bytes: 64 * 1024,
            sandbox: SandboxPolicy::isolated(SandboxMode::Bubblewrap),
        }
    }
}

/// Runs `commands` in `export_dir` in order with a per-command `timeout`,
/// stopping after the first one that does not pass.
pub async fn run_validation(
    commands: &[ValidationCommand],
    export_dir: &Path,
    timeout: Duration,
    redactor: &Redactor,
) -> Vec<CommandRun> {
    run_validation_with(
        commands,
        export_dir,
        &ValidationLimits::new(timeout),
        redactor,
    )
    .await
}

/// [`run_validation`] with explicit limits.
pub async fn run_validation_with(
    commands: &[ValidationCommand],
    export_dir: &Path,
    limits: &ValidationLimits,
    redactor: &Redactor,
) -> Vec<CommandRun> {
    let mut records = Vec::with_capacity(commands.len());
    for (index, command) in commands.iter().enumerate() {
        let record = run_one(index, command, export_dir, limits, redactor).await;
        tracing::info!(
            index,
            outcome = record.outcome.as_str(),
            duration_ms = record.duration.as_millis() as u64,
            "validation command finished"
        );
        let passed = record.outcome == ValidationOutcome::Pass;
        records.push(record);
        if !passed {
            break;
        }
    }
    records
}

async fn run_one(
    index: usize,
    command: &ValidationCommand,
    export_dir: &Path,
    limits: &ValidationLimits,
    redactor: &Redactor,
) -> CommandRun {
    let shown = command.to_string();
    let not_started = |reason: String| CommandRun {
        index,
        command: shown.clone(),
        outcome: ValidationOutcome::Fail,
        duration: Duration::ZERO,
        output_tail: redactor.redact(&reason).into_owned(),
        exit: None,
    };
    let (program, args): (OsString, Vec<OsString>) = match command {
        ValidationCommand::Shell(line) => ("sh".into(), vec!["-c".into(), line.into()]),
        ValidationCommand::Argv(argv) => match argv.split_first() {
            Some((program, args)) => (program.into(), args.iter().map(OsString::from).collect()),
            None => return not_started("empty validation command".into()),
        },
    };
    let mut sandbox = Sandbox::new(limits.sandbox.clone());
    sandbox.push(Mount::bind(export_dir, Access::ReadWrite));
    sandbox.add_policy_binds();
    let env = command_environment(limits);
    let path_var = env.get("PATH").map(|p| p.as_os_str());
    let program = match resolve_program(&program, export_dir, path_var) {
        Ok(program) => program,
        Err(e) => return not_started(format!("could not start `{shown}`: {e}")),
    };
    let mut process = sandbox.command(program.as_os_str(), &args, export_dir);
    process.env_clear().envs(env);
    let mut sink = OutputSink::merged(
        CaptureLimits {
            head_bytes: 0,
            tail_bytes: limits.tail_bytes,
        },
        redactor.clone(),
    );
    let run_limits = RunLimits {
        idle: None,
        wall: limits.timeout,
        kill_grace: limits.kill_grace,
        heartbeat_every: Duration::from_secs(60),
    };
    let report = match run_in_group(process, None, run_limits, &mut sink, None, None).await {
        Ok(report) => report,
        Err(e) => return not_started(format!("could not start `{shown}`: {e}")),
    };
    let (output, _, _) = sink.finish();
    let mut output_tail = output.tail_text().to_owned();
    if output.is_truncated() {
        output_tail.insert_str(
            0,
            &format!("[{} earlier bytes omitted]\n", output.omitted_bytes),
        );
    }
    CommandRun {
        index,
        command: shown,
        outcome: outcome_of(&report.exit),
        duration: report.duration,
        output_tail,
        exit: Some(report.exit),
    }
}

/// The commands' environment: the controller's allow-listed variables, and
/// in bubblewrap a HOME and TMPDIR that exist there.
fn command_environment(limits: &ValidationLimits) -> BTreeMap<String, OsString> {
    let mut env = base_environment();
    if limits.sandbox.mode == SandboxMode::Bubblewrap {
        // The controller's HOME is not there; the sandbox's empty /tmp is.
        for name in ["HOME", "TMPDIR"] {
            env.insert(name.to_owned(), "/tmp".into());
        }
    }
    env
}

/// A command passes only by exiting 0; running out of time is its own outcome.
fn outcome_of(exit: &LaunchExit) -> ValidationOutcome {
    match exit {
        LaunchExit::Exited(0) => ValidationOutcome::Pass,
        LaunchExit::WallTimeout | LaunchExit::IdleTimeout => ValidationOutcome::Timeout,
        LaunchExit::Exited(_) | LaunchExit::Signalled(_) | LaunchExit::Cancelled => {
            ValidationOutcome::Fail
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_commands_display_with_quoting_where_needed() {
        let c = ValidationCommand::Argv(vec!["cargo".into(), "test".into(), "a b".into()]);
        assert_eq!(c.to_string(), "cargo test 'a b'");
        let s = ValidationCommand::Shell("make check && echo ok".into());
        assert_eq!(s.to_string(), "make check && echo ok");
    }
}
