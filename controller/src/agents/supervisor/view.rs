//! The sandbox of one agent launch: which host paths it sees and how.
//!
//! On top of the sandbox's fixed system view: the launch's log directory
//! read-only (the prompt file lives there), its private `home/` and `tmp/`
//! and the final-message file read-write, the worktree (read-only for the
//! reviewer) with the git directories committing needs, the read-context
//! folder read-only, the directory of the agent's program read-only, then
//! the profile's own binds. Nothing else of the state directory exists
//! inside.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::machine::AgentPhase;
use crate::sandbox::{Access, Mount, Sandbox, dot_dot_dirs, git_mounts};

use super::{LaunchError, LaunchSpec};

/// The per-launch directories that become the agent's HOME and TMPDIR. Kept
/// with the logs, so what an agent left there can be inspected afterwards.
pub const HOME_DIR: &str = "home";
pub const TMP_DIR: &str = "tmp";

/// The host directories of one launch the sandbox binds.
pub(super) struct LaunchDirs<'a> {
    pub log_dir: &'a Path,
    pub home: PathBuf,
    pub tmp: PathBuf,
    pub output_file: Option<&'a Path>,
}

impl<'a> LaunchDirs<'a> {
    pub fn create(log_dir: &'a Path, output_file: Option<&'a Path>) -> std::io::Result<Self> {
        let dirs = Self {
            log_dir,
            home: log_dir.join(HOME_DIR),
            tmp: log_dir.join(TMP_DIR),
            output_file,
        };
        std::fs::create_dir_all(&dirs.home)?;
        std::fs::create_dir_all(&dirs.tmp)?;
        if let Some(file) = output_file {
            // Bound as a single file, so it must exist; being a mount point
            // it cannot be replaced (by a symlink, say) from inside.
            std::fs::write(file, b"")?;
        }
        Ok(dirs)
    }
}

/// The sandbox for `request`, whose program is `program` (as
/// [`resolve_program`] returned it).
pub(super) fn launch_sandbox(
    request: &LaunchSpec<'_>,
    dirs: &LaunchDirs<'_>,
    program: &Path,
) -> Result<Sandbox, LaunchError> {
    let access = match request.role {
        AgentPhase::Plan | AgentPhase::Review => Access::ReadOnly,
        AgentPhase::Implement | AgentPhase::Fix | AgentPhase::UpdateEpic => Access::ReadWrite,
    };
    let mut sandbox = Sandbox::new(request.profile.sandbox.clone());
    sandbox
        .push(Mount::bind(dirs.log_dir, Access::ReadOnly))
        .push(Mount::bind(&dirs.home, Access::ReadWrite))
        .push(Mount::bind(&dirs.tmp, Access::ReadWrite));
    if let Some(file) = dirs.output_file {
        sandbox.push(Mount::bind(file, Access::ReadWrite));
    }
    sandbox.push(Mount::bind(request.workdir, access));
    sandbox.extend(git_mounts(request.workdir, access).map_err(LaunchError::GitView)?);
    if let Some(context) = request.read_context {
        sandbox.push(Mount::bind(context, Access::ReadOnly));
    }
    if let Some(dir) = program_dir(program, request.workdir, dirs.log_dir)? {
        sandbox.push(Mount::bind(&dir, Access::ReadOnly));
        // Arguments may name files beside the program with the path as the
        // profile spelled it (`…/controller/../tests/agents/x.sh`).
        if let Some(given) = request.profile.command.first() {
            sandbox.extend(dot_dot_dirs(Path::new(given)));
        }
    }
    sandbox.add_policy_binds();
    Ok(sandbox)
}

/// The directory of an agent program given by absolute path outside the
/// system directories (scripted agents, a CLI installed under `/opt`), which
/// the sandbox would not show otherwise. A directory that holds the worktree
/// or the launch logs is refused: it is the state directory or above it.
fn program_dir(
    program: &Path,
    workdir: &Path,
    log_dir: &Path,
) -> Result<Option<PathBuf>, LaunchError> {
    if !program.is_absolute() {
        return Ok(None);
    }
    let Some(dir) = program.parent() else {
        return Ok(None);
    };
    let system = ["/usr", "/bin", "/sbin", "/lib", "/lib64"];
    if system.iter().any(|root| dir.starts_with(root)) {
        return Ok(None);
    }
    let dir = dir.to_owned();
    let within = |place: &Path| {
        let place = place.canonicalize().unwrap_or_else(|_| place.to_owned());
        (place.starts_with(&dir), dir.starts_with(&place))
    };
    for place in [workdir, log_dir] {
        match within(place) {
            // Inside the worktree or the log directory: visible already.
            (_, true) => return Ok(None),
            (true, false) => return Err(LaunchError::ProgramDirTooWide(dir)),
            (false, false) => {}
        }
    }
    Ok(Some(dir))
}

/// The program to start: an absolute path made canonical (inside the
/// sandbox only the bound directory exists, so `a/../b` would not resolve),
/// a bare name as it is (found on `PATH` inside). A program that does not
/// exist is an error here, before bubblewrap would report it as the agent's
/// own failure.
pub(crate) fn resolve_program(
    program: &OsStr,
    workdir: &Path,
    path_var: Option<&OsStr>,
) -> std::io::Result<PathBuf> {
    let given = Path::new(program);
    let not_found = || {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("`{}` not found", given.display()),
        )
    };
    if given.is_absolute() {
        return given.canonicalize();
    }
    if given.components().count() > 1 {
        // Relative to the worktree, which is bound at its own path.
        return workdir.join(given).metadata().map(|_| given.to_owned());
    }
    if crate::programs::on_path(given, path_var).is_some() {
        Ok(given.to_owned())
    } else {
        Err(not_found())
    }
}
