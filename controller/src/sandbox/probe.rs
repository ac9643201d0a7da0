//! The start-up check: can bubblewrap create its namespaces on this host?
//!
//! `serve` and `demo` run a trivial sandboxed `true` (with every namespace a
//! launch uses, the network one included) before they accept work, and
//! refuse to start when it fails, because otherwise the first agent launch
//! would fail instead, after a run was already leased.

use std::process::Stdio;
use std::time::Duration;

use super::{Network, Sandbox, SandboxMode, SandboxPolicy};

const PROBE_DEADLINE: Duration = Duration::from_secs(20);

/// The fix an operator has to apply, shown with every probe failure.
const FIX: &str = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`), \
make sure unprivileged user namespaces are enabled (`sysctl user.max_user_namespaces` > 0; \
on Ubuntu 24.04 also `kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for bwrap), \
and in a container allow them and a fresh /proc (Docker: `--security-opt seccomp=unconfined \
--security-opt apparmor=unconfined --security-opt systempaths=unconfined`, \
or a seccomp profile that permits `unshare`/`clone` with namespace flags and `mount`); \
see docs/security.md. Only where that is impossible, set `agents.sandbox = \"off\"`, \
which runs agents without any isolation";

/// Why the sandbox cannot work here.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("bubblewrap (`bwrap`) is not installed or not on PATH: {source}; to fix: {FIX}")]
    NotInstalled { source: std::io::Error },
    #[error("bubblewrap cannot create its namespaces on this host ({detail}); to fix: {FIX}")]
    Refused { detail: String },
    #[error("the bubblewrap probe did not finish within {PROBE_DEADLINE:?}; to fix: {FIX}")]
    TimedOut,
}

/// Runs `true` in a sandbox with every namespace, no network.
pub async fn probe() -> Result<(), ProbeError> {
    let sandbox = Sandbox::new(SandboxPolicy {
        mode: SandboxMode::Bubblewrap,
        network: Network::None,
        ..SandboxPolicy::default()
    });
    let mut command = sandbox.command("true".as_ref(), &[], std::path::Path::new("/"));
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(PROBE_DEADLINE, command.output()).await {
        Err(_) => return Err(ProbeError::TimedOut),
        Ok(Err(source)) => return Err(ProbeError::NotInstalled { source }),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let detail = match stderr.trim() {
        "" => format!("bwrap exited with {}", output.status),
        text => text.chars().take(500).collect(),
    };
    Err(ProbeError::Refused { detail })
}

/// What `serve`/`demo` call before starting: probes when the sandbox is on,
/// warns loudly when the operator turned it off.
pub async fn startup_check(mode: SandboxMode) -> Result<(), ProbeError> {
    match mode {
        SandboxMode::Bubblewrap => {
            probe().await?;
            tracing::info!(
                "bubblewrap sandbox available; every agent and validation command runs inside it"
            );
            Ok(())
        }
        SandboxMode::Off => {
            tracing::warn!(
                "agents.sandbox = \"off\": agents and validation commands run WITHOUT a sandbox, \
                 as the controller's own user, and can read everything it can"
            );
            Ok(())
        }
    }
}
