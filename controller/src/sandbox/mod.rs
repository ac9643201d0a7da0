//! The boundary every agent launch and validation command runs inside
//! (SPEC §13 "Sandbox", invariant 7 of the architecture).
//!
//! A [`Sandbox`] is the list of [`Mount`]s one launch may see plus the
//! [`SandboxPolicy`] of its profile. [`Sandbox::command`] turns a program
//! and its arguments into a `bwrap` command line: new user, PID, IPC, UTS
//! and mount namespaces, no capabilities, `--die-with-parent`, and the
//! network unshared when the policy says `none`. Killing the `bwrap`
//! process ends the namespace's first process and, with it, every process
//! of the namespace, whatever session or group they moved to.
//!
//! What the mounts are is decided in [`mounts`]: the system read-only, a
//! filtered `/etc`, a fresh `/dev`, `/proc` and `/tmp`, and then only the
//! paths the caller adds. [`probe`] checks at start-up that bubblewrap can
//! create its namespaces on this host. With [`SandboxMode::Off`] the program
//! runs directly, as the operator explicitly asked.

pub mod describe;
pub mod mounts;
pub mod probe;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::process::Command;

pub use describe::{describe_launch, describe_validation};
pub use mounts::{Access, Mount, dot_dot_dirs, git_mounts, system_mounts};
pub use probe::{ProbeError, probe, startup_check};

/// The bubblewrap executable, looked up on `PATH`.
pub const BWRAP: &str = "bwrap";

/// `bwrap` as found on the controller's own `PATH` (not the child's, which
/// a profile may change), so the start-up probe and every launch run the
/// same program.
pub fn bwrap_program() -> PathBuf {
    crate::programs::controller_program(BWRAP)
}

/// Whether launches are sandboxed at all (`agents.sandbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Every launch runs under bubblewrap; the default.
    #[default]
    Bubblewrap,
    /// Launches run as plain child processes. Only for hosts where
    /// bubblewrap cannot work; every launch logs a warning.
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bubblewrap => "bubblewrap",
            Self::Off => "off",
        }
    }
}

/// The network a sandboxed process gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network (agent CLIs call their model's API).
    #[default]
    Shared,
    /// A network namespace of its own with only a loopback device.
    None,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::None => "none",
        }
    }
}

/// What one profile (or the validation commands) asks of the sandbox on top
/// of the fixed view: extra binds for toolchains and caches, and the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    pub network: Network,
    /// Host paths visible read-only at the same place.
    pub read_only: Vec<PathBuf>,
    /// Host paths visible read-write at the same place.
    pub read_write: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// Sandboxed as `mode` says, with no network and nothing extra: the
    /// narrowest view, the default of validation runs started in code.
    pub fn isolated(mode: SandboxMode) -> Self {
        Self {
            mode,
            network: Network::None,
            ..Self::default()
        }
    }
}

/// The view of one launch: the policy and the mounts in the order they are
/// applied (a later mount covers an earlier one at or below its path).
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    mounts: Vec<Mount>,
}

impl Sandbox {
    /// A sandbox that sees the system (see [`system_mounts`]) and nothing
    /// else yet.
    pub fn new(policy: SandboxPolicy) -> Self {
        Self {
            policy,
            mounts: system_mounts(),
        }
    }

    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Adds one mount after the ones already there.
    pub fn push(&mut self, mount: Mount) -> &mut Self {
        self.mounts.push(mount);
        self
    }

    /// Adds several mounts in order.
    pub fn extend(&mut self, mounts: impl IntoIterator<Item = Mount>) -> &mut Self {
        self.mounts.extend(mounts);
        self
    }

    /// Adds the profile's own extra binds, last, so they are what the
    /// operator wrote even where they overlap the fixed view.
    pub fn add_policy_binds(&mut self) -> &mut Self {
        let extra: Vec<Mount> = self
            .policy
            .read_only
            .iter()
            .map(|p| Mount::bind(p, Access::ReadOnly))
            .chain(
                self.policy
                    .read_write
                    .iter()
                    .map(|p| Mount::bind(p, Access::ReadWrite)),
            )
            .collect();
        self.mounts.extend(extra);
        self
    }

    /// The `bwrap` arguments up to (not including) the program: namespaces,
    /// mounts, working directory.
    pub fn bwrap_args(&self, cwd: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            // A new session: the sandboxed process cannot push input into
            // the controller's terminal (TIOCSTI).
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "autoforge-sandbox",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if self.policy.network == Network::None {
            args.push("--unshare-net".into());
        }
        for mount in &self.mounts {
            mount.push_args(&mut args);
        }
        // The directories bubblewrap made to hold the mount points live in
        // its root tmpfs; nothing may be written there.
        args.extend(["--remount-ro".into(), "/".into()]);
        args.push("--chdir".into());
        args.push(cwd.as_os_str().to_owned());
        args.push("--".into());
        args
    }

    /// The command that runs `program args…` in `cwd` inside this sandbox
    /// (or directly when the mode is off). The caller sets the environment;
    /// bubblewrap passes it through unchanged.
    pub fn command(&self, program: &OsStr, args: &[OsString], cwd: &Path) -> Command {
        match self.policy.mode {
            SandboxMode::Off => {
                tracing::warn!(
                    program = %program.to_string_lossy(),
                    "agents.sandbox is off: starting a child without the bubblewrap sandbox"
                );
                let mut command = Command::new(program);
                command.args(args).current_dir(cwd);
                command
            }
            SandboxMode::Bubblewrap => {
                let mut command = Command::new(bwrap_program());
                command
                    .args(self.bwrap_args(cwd))
                    .arg(program)
                    .args(args)
                    // bwrap resolves `--chdir` inside; its own working
                    // directory only has to exist on the host.
                    .current_dir("/");
                command
            }
        }
    }

    /// One line per mount, as `config check` and the docs show them.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "sandbox {}, network {}",
            self.policy.mode.as_str(),
            self.policy.network.as_str()
        )];
        lines.extend(self.mounts.iter().map(ToString::to_string));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_none_policy_unshares_the_network() {
        let mut policy = SandboxPolicy::isolated(SandboxMode::Bubblewrap);
        let args = Sandbox::new(policy.clone()).bwrap_args(Path::new("/"));
        assert!(args.iter().any(|a| a == "--unshare-net"));
        policy.network = Network::Shared;
        let args = Sandbox::new(policy).bwrap_args(Path::new("/"));
        assert!(!args.iter().any(|a| a == "--unshare-net"));
        for flag in ["--unshare-user", "--unshare-pid", "--die-with-parent"] {
            assert!(args.iter().any(|a| a == flag), "{flag}");
        }
    }

    #[test]
    fn policy_binds_come_after_the_fixed_view() {
        let policy = SandboxPolicy {
            read_only: vec!["/opt/tool".into()],
            read_write: vec!["/var/cache/tool".into()],
            ..SandboxPolicy::default()
        };
        let mut sandbox = Sandbox::new(policy);
        sandbox.push(Mount::bind(Path::new("/w"), Access::ReadWrite));
        sandbox.add_policy_binds();
        let shown = sandbox.describe();
        let tail: Vec<&str> = shown.iter().rev().take(3).map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "read-write /var/cache/tool",
                "read-only  /opt/tool",
                "read-write /w"
            ]
        );
    }
}
