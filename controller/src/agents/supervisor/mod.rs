//! Supervision of one coding-agent launch (SPEC §13).
//!
//! [`launch`] starts the profile's command in the worktree with an
//! allow-listed environment, gives it the prompt (stdin, or a file named on
//! its command line), captures its output bounded and redacted into a
//! per-launch log directory, enforces the idle and wall-clock limits,
//! honours cancellation, kills whatever is left of its process group, and
//! returns a [`LaunchRecord`] for the journal together with the captured
//! text the CONTROL_RESULT parser reads.
//!
//! Files in the log directory: `prompt.md` (only for `{prompt_file}`
//! profiles), `final-message.txt` (only for `{output}` profiles, written by
//! the agent), `output.log` (both streams, redacted, bounded) and
//! `tail.log` (the redacted stdout and stderr tails, for the dashboard),
//! and `home/` and `tmp/`, the agent's private HOME and TMPDIR.
//!
//! The agent runs inside the bubblewrap sandbox ([`view`] says what it
//! sees), unless the profile's sandbox mode is off.
//!
//! While it runs, the launch reports to [`LaunchSpec::events`] when there
//! is an observer ([`progress`]): its start with the pid, a heartbeat per
//! interval, and its end.

pub mod capture;
pub mod environment;
pub mod escaped;
pub mod process;
pub mod progress;
pub mod view;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tracing::Instrument;

use crate::agents::profile::{LaunchProfile, ProfileError, ReadOutput, TokenUsage};
use crate::machine::AgentPhase;
use crate::redact::Redactor;

pub use capture::{CaptureLimits, LogFile, RedactedCapture};
pub use environment::EnvError;
pub use process::{CancelToken, Heartbeat, LaunchExit, RunLimits, RunReport};
pub use progress::{LaunchEvent, LaunchEvents};

/// The largest final-message file we read; the CONTROL_RESULT block itself
/// may be at most 1 MiB, so its tail end is what matters.
const FINAL_MESSAGE_LIMIT: u64 = 2 * 1024 * 1024;

/// Everything the supervisor needs to start one agent process (the
/// machine's `LaunchRequest` is what it asks for, before a profile and
/// directories are chosen).
#[derive(Debug)]
pub struct LaunchSpec<'a> {
    pub profile: &'a LaunchProfile,
    pub role: AgentPhase,
    /// The rendered prompt. Prompts never hold secrets (SPEC §17).
    pub prompt: &'a str,
    /// The worktree; the agent's working directory.
    pub workdir: &'a Path,
    /// A fresh directory for this launch's files, outside the worktree.
    pub log_dir: PathBuf,
    /// The read-context folder, shown read-only inside the sandbox.
    pub read_context: Option<&'a Path>,
    pub redactor: &'a Redactor,
    pub capture: CaptureLimits,
    pub log_limit: u64,
    /// Time between SIGTERM and SIGKILL when the group is ended.
    pub kill_grace: Duration,
    pub heartbeat_every: Duration,
    pub heartbeat: Option<&'a watch::Sender<Heartbeat>>,
    /// Receives the launch's start, heartbeats and end; its interval
    /// replaces `heartbeat_every`.
    pub events: Option<&'a LaunchEvents>,
    pub cancel: Option<&'a CancelToken>,
}

impl<'a> LaunchSpec<'a> {
    /// A spec with the default bounds (agent capture limits, 8 MiB log,
    /// 5 s kill grace, heartbeat every 5 s), no heartbeat channel and no
    /// cancellation.
    pub fn new(
        profile: &'a LaunchProfile,
        role: AgentPhase,
        prompt: &'a str,
        workdir: &'a Path,
        log_dir: PathBuf,
        redactor: &'a Redactor,
    ) -> Self {
        Self {
            profile,
            role,
            prompt,
            workdir,
            log_dir,
            read_context: None,
            redactor,
            capture: CaptureLimits::AGENT,
            log_limit: LogFile::DEFAULT_LIMIT,
            kill_grace: Duration::from_secs(5),
            heartbeat_every: Duration::from_secs(5),
            heartbeat: None,
            events: None,
            cancel: None,
        }
    }
}

/// The launch row the driver persists (SPEC §15: profile, exit, duration,
/// tokens, log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRecord {
    pub profile: String,
    pub role: AgentPhase,
    pub started_at: DateTime<Utc>,
    pub duration: Duration,
    pub exit: LaunchExit,
    /// Bytes of output on stdout and stderr together, kept or not.
    pub output_bytes: u64,
    pub tokens: Option<u64>,
    /// The tokens apart, where the output format tells them apart.
    pub usage: Option<TokenUsage>,
    /// Estimated cost in millionths of the profile's price unit, when the
    /// profile has a price table and the launch reported its usage apart.
    pub cost_micros: Option<u64>,
    pub log_dir: PathBuf,
    pub descendants_killed: bool,
    pub group_survived: bool,
}

/// A finished launch: its record and the redacted text it produced.
#[derive(Debug, Clone)]
pub struct LaunchOutcome {
    pub record: LaunchRecord,
    pub stdout: RedactedCapture,
    pub stderr: RedactedCapture,
    /// The redacted final message: the `{output}` file, for profiles that
    /// declare one and whose agent wrote it, else the JSON field the
    /// profile's output format names.
    pub final_message: Option<String>,
}

impl LaunchOutcome {
    /// The text the CONTROL_RESULT parser searches: the final-message file
    /// when the profile declares one, else the stdout tail.
    pub fn result_text(&self) -> &str {
        self.final_message
            .as_deref()
            .unwrap_or_else(|| self.stdout.tail_text())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Environment(#[from] EnvError),
    #[error("cannot prepare the launch log directory {}: {source}", path.display())]
    LogDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the launch log directory {} lies inside the agent's worktree", .0.display())]
    LogDirInsideWorktree(PathBuf),
    #[error("cannot work out the git directories of the worktree: {0}")]
    GitView(#[source] crate::sandbox::mounts::GitViewError),
    #[error(
        "the agent program's directory {} holds the worktree or the launch logs; \
         put the program in a directory of its own",
        .0.display()
    )]
    ProgramDirTooWide(PathBuf),
    #[error("cannot start agent profile `{profile}`: {source}")]
    Spawn {
        profile: String,
        source: std::io::Error,
    },
}

/// Creates the launch's log directory (never inside the worktree), writes
/// the prompt file if the profile reads one and clears a stale final-message
/// file; the two paths, where the profile uses them.
fn prepare_log_dir(
    request: &LaunchSpec<'_>,
) -> Result<(Option<PathBuf>, Option<PathBuf>), LaunchError> {
    let (profile, log_dir) = (request.profile, &request.log_dir);
    let dir_error = |source| LaunchError::LogDir {
        path: log_dir.clone(),
        source,
    };
    std::fs::create_dir_all(log_dir).map_err(dir_error)?;
    // Inside the worktree the agent could read and rewrite its own log, and
    // the files would show up as untracked changes in the fingerprint.
    let inside = match (log_dir.canonicalize(), request.workdir.canonicalize()) {
        (Ok(log), Ok(work)) => log.starts_with(work),
        _ => log_dir.starts_with(request.workdir),
    };
    if inside {
        return Err(LaunchError::LogDirInsideWorktree(log_dir.clone()));
    }
    let prompt_file = profile
        .uses_prompt_file()
        .then(|| log_dir.join("prompt.md"));
    if let Some(path) = &prompt_file {
        std::fs::write(path, request.prompt).map_err(dir_error)?;
    }
    let output_file = profile
        .uses_output_file()
        .then(|| log_dir.join("final-message.txt"));
    if let Some(path) = &output_file {
        // A stale file from an earlier launch must not pass for this answer.
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(dir_error(e)),
            _ => {}
        }
    }
    Ok((prompt_file, output_file))
}

/// The agent's environment: the profile's allow-listed variables, and a
/// private HOME and TMPDIR unless the profile names its own (a CLI's login
/// state in a directory it binds, say).
fn launch_environment(
    profile: &LaunchProfile,
    dirs: &view::LaunchDirs<'_>,
) -> Result<BTreeMap<String, OsString>, LaunchError> {
    let mut env = environment::agent_environment(profile)?;
    for (name, dir) in [("HOME", &dirs.home), ("TMPDIR", &dirs.tmp)] {
        if profile.env_value(name).is_none() {
            env.insert(name.to_owned(), dir.as_os_str().to_owned());
        }
    }
    Ok(env)
}

/// Runs one agent launch to its end. Failures of the agent (non-zero exit,
/// timeout, cancellation) are in the record; `Err` means we could not run it.
pub async fn launch(request: LaunchSpec<'_>) -> Result<LaunchOutcome, LaunchError> {
    let profile = request.profile;
    let log_dir = &request.log_dir;
    let (command, output_file) = sandboxed_command(&request)?;
    let log =
        LogFile::create(&log_dir.join("output.log"), request.log_limit).map_err(|source| {
            LaunchError::LogDir {
                path: log_dir.clone(),
                source,
            }
        })?;
    let mut sink =
        capture::OutputSink::separate(request.capture, Some(log), request.redactor.clone())
            .read_usage_with(&profile.output);
    let stdin = (!profile.uses_prompt_file()).then(|| request.prompt.as_bytes().to_vec());
    let limits = RunLimits {
        idle: Some(profile.idle_timeout),
        wall: profile.max_runtime,
        kill_grace: request.kill_grace,
        heartbeat_every: request
            .events
            .map_or(request.heartbeat_every, LaunchEvents::every),
    };
    let started_at = Utc::now();
    let span =
        tracing::info_span!("launch", profile = %profile.name, role = request.role.role_name());
    span.in_scope(|| tracing::info!(log_dir = %log_dir.display(), "launch started"));
    let report = supervise(&request, command, stdin, limits, &mut sink, span.clone())
        .await
        .map_err(|source| spawn_error(profile, source))?;
    let output_bytes = sink.total_bytes();
    let (stdout, stderr, log_error) = sink.finish();
    if let Some(e) = log_error {
        tracing::warn!(error = %e, "launch log incomplete");
    }
    let read = profile.read_output(&whole_lines(&stdout), stderr.tail_text());
    let record = launch_record(&request, started_at, &report, output_bytes, &read);
    let final_message = match &output_file {
        Some(path) => read_final_message(path, request.redactor).await,
        None => None,
    }
    .or(read.message);
    write_tail_log(log_dir, &stdout, &stderr);
    span.in_scope(|| tracing::info!(exit = ?report.exit, duration_ms = report.duration.as_millis() as u64, output_bytes, "launch finished"));
    if let Some(events) = request.events {
        events.send(LaunchEvent::Finished(Box::new(record.clone())));
    }
    Ok(LaunchOutcome {
        record,
        stdout,
        stderr,
        final_message,
    })
}

fn spawn_error(profile: &LaunchProfile, source: std::io::Error) -> LaunchError {
    LaunchError::Spawn {
        profile: profile.name.clone(),
        source,
    }
}

/// The launch's log directory prepared and its process described: the
/// profile's argv, inside the sandbox, with the agent's environment only;
/// also the final-message file, where the profile has one.
fn sandboxed_command(
    request: &LaunchSpec<'_>,
) -> Result<(tokio::process::Command, Option<PathBuf>), LaunchError> {
    let profile = request.profile;
    let (prompt_file, output_file) = prepare_log_dir(request)?;
    let argv = profile.argv(prompt_file.as_deref(), output_file.as_deref())?;
    let dirs =
        view::LaunchDirs::create(&request.log_dir, output_file.as_deref()).map_err(|source| {
            LaunchError::LogDir {
                path: request.log_dir.clone(),
                source,
            }
        })?;
    let env = launch_environment(profile, &dirs)?;
    let (program, args) = argv.split_first().ok_or_else(|| {
        LaunchError::Profile(ProfileError::EmptyCommand {
            profile: profile.name.clone(),
        })
    })?;
    let program = view::resolve_program(
        program,
        request.workdir,
        env.get("PATH").map(|p| p.as_os_str()),
    )
    .map_err(|source| spawn_error(profile, source))?;
    let sandbox = view::launch_sandbox(request, &dirs, &program)?;
    let mut command = sandbox.command(program.as_os_str(), args, request.workdir);
    command.env_clear().envs(&env);
    Ok((command, output_file))
}

/// The journal's record of a finished launch, priced when the profile has
/// a price table and the launch reported its usage apart.
fn launch_record(
    request: &LaunchSpec<'_>,
    started_at: DateTime<Utc>,
    report: &RunReport,
    output_bytes: u64,
    read: &ReadOutput,
) -> LaunchRecord {
    let profile = request.profile;
    LaunchRecord {
        profile: profile.name.clone(),
        role: request.role,
        started_at,
        duration: report.duration,
        exit: report.exit,
        output_bytes,
        tokens: read.tokens,
        usage: read.usage,
        cost_micros: profile
            .price
            .zip(read.usage)
            .map(|(price, usage)| price.cost_micros(&usage)),
        log_dir: request.log_dir.clone(),
        descendants_killed: report.descendants_killed,
        group_survived: report.group_survived,
    }
}

/// Runs the launch's process group to its end while its heartbeats are
/// passed on (see [`forward_heartbeats`]); the caller's own heartbeat
/// channel ends on the last one.
async fn supervise(
    request: &LaunchSpec<'_>,
    command: tokio::process::Command,
    stdin: Option<Vec<u8>>,
    limits: RunLimits,
    sink: &mut capture::OutputSink,
    span: tracing::Span,
) -> std::io::Result<RunReport> {
    let (beats, watched) = watch::channel(Heartbeat::default());
    let run = process::run_in_group(command, stdin, limits, sink, request.cancel, Some(&beats))
        .instrument(span);
    let report = tokio::select! {
        report = run => report,
        never = forward_heartbeats(request, watched.clone()) => match never {},
    }?;
    if let Some(caller) = request.heartbeat {
        caller.send_replace(*watched.borrow());
    }
    Ok(report)
}

/// Passes the running launch's heartbeats on: the first (which carries the
/// pid) as its start, the others as progress, each also to the caller's
/// own heartbeat channel. Never ends by itself; the launch drops it.
async fn forward_heartbeats(
    request: &LaunchSpec<'_>,
    mut watched: watch::Receiver<Heartbeat>,
) -> std::convert::Infallible {
    let mut started = false;
    loop {
        if watched.changed().await.is_err() {
            return std::future::pending().await;
        }
        let beat = *watched.borrow_and_update();
        if let Some(caller) = request.heartbeat {
            caller.send_replace(beat);
        }
        let Some(events) = request.events else {
            continue;
        };
        if !started {
            started = true;
            events.send(LaunchEvent::Started {
                profile: request.profile.name.clone(),
                role: request.role,
                pid: beat.pid,
                log_dir: request.log_dir.clone(),
                price: request.profile.price,
            });
        } else {
            events.send(LaunchEvent::Progress(beat));
        }
    }
}

/// The captured stdout for the profile's output reader: all of it when
/// nothing was omitted, else the head and the tail on lines of their own,
/// so JSON events from both ends are seen (a line cut at the gap does not
/// parse and is skipped).
fn whole_lines(stdout: &RedactedCapture) -> std::borrow::Cow<'_, str> {
    if stdout.omitted_bytes == 0 {
        std::borrow::Cow::Borrowed(stdout.tail_text())
    } else {
        std::borrow::Cow::Owned(format!("{}\n{}", stdout.head, stdout.tail))
    }
}

/// Reads the last [`FINAL_MESSAGE_LIMIT`] bytes of the agent's final-message
/// file, redacted. A missing or unreadable file is "no final message".
///
/// The agent controls that path: it is opened without following a symlink
/// (a file of the agent's choosing is not its answer) and without blocking
/// (opening a FIFO with no writer would wait forever), and only a regular
/// file is read.
async fn read_final_message(path: &Path, redactor: &Redactor) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .ok()?;
    let mut file = tokio::fs::File::from_std(file);
    let meta = file.metadata().await.ok()?;
    if !meta.is_file() {
        return None;
    }
    let len = meta.len();
    // The file is created empty for the sandbox to bind; still empty means
    // the agent wrote no final message.
    if len == 0 {
        return None;
    }
    if len > FINAL_MESSAGE_LIMIT {
        use tokio::io::AsyncSeekExt;
        file.seek(std::io::SeekFrom::Start(len - FINAL_MESSAGE_LIMIT))
            .await
            .ok()?;
    }
    let mut bytes = Vec::new();
    file.take(FINAL_MESSAGE_LIMIT)
        .read_to_end(&mut bytes)
        .await
        .ok()?;
    Some(
        redactor
            .redact(&String::from_utf8_lossy(&bytes))
            .into_owned(),
    )
}

fn write_tail_log(log_dir: &Path, stdout: &RedactedCapture, stderr: &RedactedCapture) {
    let text = format!(
        "== stdout ({} bytes, {} omitted) ==\n{}\n== stderr ({} bytes, {} omitted) ==\n{}\n",
        stdout.total_bytes,
        stdout.omitted_bytes,
        stdout.tail_text(),
        stderr.total_bytes,
        stderr.omitted_bytes,
        stderr.tail_text()
    );
    if let Err(e) = std::fs::write(log_dir.join("tail.log"), text) {
        tracing::warn!(error = %e, "cannot write tail.log");
    }
}
