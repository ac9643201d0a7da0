//! Running one child in its own process group, under limits, and making sure
//! nothing it started outlives it. Agents and validation commands share this.
//!
//! The child is the leader of a fresh process group, so every descendant
//! that does not deliberately leave the group can be signalled at once. On a
//! timeout or cancellation the group gets SIGTERM, a grace period, then
//! SIGKILL. After *any* end — a clean exit included — the group is
//! terminated the same way and we poll until the kernel reports it empty
//! (`killpg(pgid, 0)` → `ESRCH`), so a grandchild that ignored SIGTERM is gone
//! before the caller sees the result. Descendants that left the group with
//! `setsid` are then found by the launch tag in their environment and
//! killed too (see [`super::escaped`]). If the future is dropped half-way, a
//! guard SIGKILLs the group.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until, timeout};

use super::capture::{OutputSink, Stream};
use super::escaped::{LAUNCH_TAG_VAR, kill_tagged, new_tag};
use crate::agents::profile::TokenUsage;

/// How long we wait for the kernel to report a SIGKILLed group empty. Orphans
/// are reaped by PID 1, which on some hosts takes over a second.
const GROUP_GONE_DEADLINE: Duration = Duration::from_secs(10);
/// How long pipes may stay open once the group is dead (a process that left
/// the group could still hold them).
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(25);

/// Why the child stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum LaunchExit {
    /// The child exited by itself with this code.
    Exited(i32),
    /// The child was ended by this signal that we did not send.
    Signalled(i32),
    /// No output for the idle timeout; we killed the group.
    IdleTimeout,
    /// The wall-clock limit passed; we killed the group.
    WallTimeout,
    /// An operator stopped the run; we killed the group.
    Cancelled,
}

impl LaunchExit {
    pub fn is_success(self) -> bool {
        self == Self::Exited(0)
    }

    fn from_status(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => Self::Exited(code),
            (None, Some(signal)) => Self::Signalled(signal),
            // Neither code nor signal does not happen on Unix; report it as
            // a failure rather than inventing success.
            (None, None) => Self::Exited(-1),
        }
    }
}

/// Live progress of a running child, published on a `watch` channel: once
/// right after the spawn, then every `heartbeat_every`, and at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// The child's process id (the sandbox's, when sandboxed); 0 before
    /// the first heartbeat.
    pub pid: u32,
    pub elapsed: Duration,
    pub output_bytes: u64,
    pub since_last_output: Duration,
    /// Tokens reported so far, when the sink reads usage (see
    /// [`OutputSink::read_usage_with`]) and the output already shows some.
    pub tokens: Option<u64>,
    /// The same counts apart, where the output format tells them apart.
    pub usage: Option<TokenUsage>,
}

/// A cloneable stop request shared between the operator path and a launch.
#[derive(Debug, Clone)]
pub struct CancelToken {
    sender: Arc<watch::Sender<bool>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    pub fn new() -> Self {
        Self {
            sender: Arc::new(watch::channel(false).0),
        }
    }

    /// Asks every launch holding this token (or a clone) to stop.
    pub fn cancel(&self) {
        self.sender.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.sender.borrow()
    }

    /// Completes once `cancel` has been called, also if it was called before.
    pub async fn cancelled(&self) {
        let mut receiver = self.sender.subscribe();
        // The sender lives in `self`, so the channel cannot close under us.
        let _ = receiver.wait_for(|stopped| *stopped).await;
    }
}

/// Limits for one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Kill when no output arrived for this long.
    pub idle: Option<Duration>,
    /// Kill when the child has run this long.
    pub wall: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// How often the heartbeat is published.
    pub heartbeat_every: Duration,
}

/// What happened to the child and its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunReport {
    pub exit: LaunchExit,
    pub duration: Duration,
    /// Processes of the group were still alive after the child ended and
    /// had to be killed.
    pub descendants_killed: bool,
    /// The group was still not empty after SIGKILL and the deadline.
    pub group_survived: bool,
    /// Pipes stayed open after the group died; the rest of the output was
    /// abandoned.
    pub capture_abandoned: bool,
}

/// SIGKILLs the group if the run is abandoned before it finished cleanly.
struct GroupGuard {
    pgid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// Whether any process (zombies included) is still in the group.
fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// Makes this process non-dumpable, once, before its first child starts.
///
/// Agents and validation commands run as the controller's user, so by
/// default they could read `/proc/<controller>/environ` (where
/// `AUTOFORGE_GITHUB_TOKEN`, `DATABASE_URL` and the webhook secret live;
/// unsetting them does not clear that page) or attach to the controller
/// with ptrace. A non-dumpable process refuses both to processes without
/// `CAP_SYS_PTRACE`. The flag resets in children on `exec`, so they are
/// unaffected; the cost is no core dumps of the controller.
pub fn protect_controller_process() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(error) = nix::sys::prctl::set_dumpable(false) {
            tracing::warn!(%error, "cannot make the controller non-dumpable; children may read its environment");
        }
    });
}

/// Spawns `command` as a group leader with piped output, feeds it `stdin`
/// (then closes it; `None` means no stdin at all), and supervises it.
///
/// The caller has already set argv, working directory and a cleared,
/// allow-listed environment.
///
/// Long by design: spawning, the supervision loop and the teardown share
/// the child, its process group, the output channel and the deadlines; in
/// pieces they would hand all of that back and forth.
pub async fn run_in_group(
    mut command: Command,
    stdin: Option<Vec<u8>>,
    limits: RunLimits,
    sink: &mut OutputSink,
    cancel: Option<&CancelToken>,
    heartbeat: Option<&watch::Sender<Heartbeat>>,
) -> io::Result<RunReport> {
    command
        .process_group(0)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    protect_controller_process();
    let tag = new_tag();
    command.env(LAUNCH_TAG_VAR, &tag);
    let started = Instant::now();
    let mut child = command.spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw)
        .ok_or_else(|| io::Error::other("spawned child has no process id"))?;
    let mut guard = GroupGuard { pgid, armed: true };
    let pid = child.id().unwrap_or_default();

    let writer = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => Some(tokio::spawn(async move {
            // A child that exits without reading its prompt closes the pipe;
            // that is its business, not an error of ours.
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        })),
        _ => None,
    };
    let (tx, mut rx) = mpsc::channel::<(Stream, Vec<u8>)>(64);
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(out, Stream::Stdout, tx.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(err, Stream::Stderr, tx.clone())));
    }
    drop(tx);

    let wall_deadline = started + limits.wall;
    let mut last_output = started;
    let mut pipes_open = true;
    let mut ticker = tokio::time::interval(limits.heartbeat_every);
    let publish = |sink: &OutputSink, last_output: Instant| {
        if let Some(hb) = heartbeat {
            let read = sink.usage_so_far();
            hb.send_replace(Heartbeat {
                pid,
                elapsed: started.elapsed(),
                output_bytes: sink.total_bytes(),
                since_last_output: last_output.elapsed(),
                tokens: read.as_ref().and_then(|r| r.tokens),
                usage: read.and_then(|r| r.usage),
            });
        }
    };
    let far_future = started + Duration::from_secs(100 * 365 * 24 * 3600);
    let cancelled = async {
        match cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(cancelled);

    let ended = loop {
        let idle_deadline = limits.idle.map_or(far_future, |idle| last_output + idle);
        // Output comes last: a child flooding its pipes keeps that branch
        // always ready, and with `biased` it would otherwise starve the
        // limits, the exit and the heartbeat.
        tokio::select! {
            biased;
            () = &mut cancelled => break Err(LaunchExit::Cancelled),
            () = sleep_until(wall_deadline) => break Err(LaunchExit::WallTimeout),
            () = sleep_until(idle_deadline) => break Err(LaunchExit::IdleTimeout),
            status = child.wait() => break Ok(status?),
            _ = ticker.tick() => {
                publish(sink, last_output);
                sink.flush_log();
            }
            chunk = rx.recv(), if pipes_open => match chunk {
                Some((stream, bytes)) => {
                    sink.push(stream, &bytes);
                    last_output = Instant::now();
                }
                None => pipes_open = false,
            },
        }
    };

    // Whether the child ended or we are ending it, the group is terminated
    // the same way; a clean exit only changes what we report.
    let leader_status = ended.as_ref().ok().copied();
    let descendants_killed = leader_status.is_some() && group_alive(pgid);
    let group_survived = terminate_group(&mut child, pgid, limits.kill_grace, leader_status).await;
    if !group_survived {
        guard.armed = false;
    }
    let escaped = kill_tagged(&tag, GROUP_GONE_DEADLINE).await;
    let descendants_killed = descendants_killed || escaped.found;
    let group_survived = group_survived || escaped.survived;
    let exit = match ended {
        Ok(status) => LaunchExit::from_status(status),
        Err(reason) => reason,
    };

    let drained = timeout(DRAIN_DEADLINE, async {
        while let Some((stream, bytes)) = rx.recv().await {
            sink.push(stream, &bytes);
        }
    })
    .await
    .is_ok();
    for task in readers.into_iter().chain(writer) {
        task.abort();
    }
    publish(sink, last_output);
    Ok(RunReport {
        exit,
        duration: started.elapsed(),
        descendants_killed,
        group_survived,
        capture_abandoned: !drained,
    })
}

/// SIGTERM to the group, up to `grace` for it to go, SIGKILL, then wait for
/// the kernel to report it empty. Reaps the leader along the way (an unreaped
/// leader keeps the group non-empty). Returns whether the group survived.
async fn terminate_group(
    child: &mut Child,
    pgid: Pid,
    grace: Duration,
    mut leader: Option<ExitStatus>,
) -> bool {
    let reap = |child: &mut Child, leader: &mut Option<ExitStatus>| {
        if leader.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            *leader = Some(status);
        }
    };
    if !group_alive(pgid) {
        return false;
    }
    let _ = killpg(pgid, Signal::SIGTERM);
    let grace_deadline = Instant::now() + grace;
    loop {
        reap(child, &mut leader);
        if !group_alive(pgid) {
            return false;
        }
        if Instant::now() >= grace_deadline {
            break;
        }
        sleep(POLL).await;
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    let gone_deadline = Instant::now() + GROUP_GONE_DEADLINE;
    loop {
        reap(child, &mut leader);
        if !group_alive(pgid) {
            return false;
        }
        if Instant::now() >= gone_deadline {
            tracing::error!(pgid = pgid.as_raw(), "process group survived SIGKILL");
            return true;
        }
        sleep(POLL).await;
    }
}

async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    stream: Stream,
    tx: mpsc::Sender<(Stream, Vec<u8>)>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send((stream, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        }
    }
}
