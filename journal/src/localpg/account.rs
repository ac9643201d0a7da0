//! Running the server as an unprivileged OS user. `initdb` and `postgres`
//! refuse to run as root, so when autoforge runs as root (containers) it
//! starts them as the `postgres` user, owns the cluster's directories to
//! that user, and checks that it can reach them.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::unistd::{Gid, Uid, User, chown};

use super::LocalPgError;

/// The user the server runs as when we are root.
const SERVER_USER: &str = "postgres";

/// Who the server processes run as: `None` means "as ourselves".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunAs {
    pub uid: Uid,
    pub gid: Gid,
}

impl RunAs {
    /// `Some(postgres)` when we are root, `None` otherwise.
    pub fn detect() -> Result<Option<RunAs>, LocalPgError> {
        if !Uid::effective().is_root() {
            return Ok(None);
        }
        let user = User::from_name(SERVER_USER)
            .map_err(|source| LocalPgError::Os {
                action: format!("look up the {SERVER_USER} user"),
                source,
            })?
            .ok_or(LocalPgError::NoServerUser)?;
        Ok(Some(RunAs {
            uid: user.uid,
            gid: user.gid,
        }))
    }

    /// Makes `command` run as this user (std also drops supplementary groups).
    pub fn apply(self, command: &mut Command) {
        command.uid(self.uid.as_raw()).gid(self.gid.as_raw());
    }

    fn can_traverse(self, meta: &fs::Metadata) -> bool {
        let mode = meta.mode();
        if meta.uid() == self.uid.as_raw() {
            mode & 0o100 != 0
        } else if meta.gid() == self.gid.as_raw() {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        }
    }
}

/// Creates `dir` (and missing parents) if needed, private to the server's
/// user: mode 0700 and, when running as another user, owned by it. An
/// existing directory must be a real directory (not a symlink) owned by us or
/// by the server user, so a planted directory in /tmp is refused.
pub(crate) fn private_dir(dir: &Path, run_as: Option<RunAs>) -> Result<(), LocalPgError> {
    let io = |action: &str| {
        let action = format!("{action} {}", dir.display());
        move |source| LocalPgError::Io { action, source }
    };
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            let allowed = [
                Some(Uid::effective().as_raw()),
                run_as.map(|r| r.uid.as_raw()),
            ];
            if !meta.is_dir() || !allowed.contains(&Some(meta.uid())) {
                return Err(LocalPgError::UnsafeDirectory {
                    dir: dir.to_path_buf(),
                });
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // Parents get ordinary permissions so the server's user can
            // traverse them; only the leaf is private.
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent).map_err(io("create the parents of"))?;
            }
            fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(io("create"))?;
        }
        Err(error) => return Err(io("inspect")(error)),
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(io("set permissions of"))?;
    if let Some(run_as) = run_as {
        chown(dir, Some(run_as.uid), Some(run_as.gid)).map_err(|source| LocalPgError::Os {
            action: format!("give {} to the {SERVER_USER} user", dir.display()),
            source,
        })?;
    }
    Ok(())
}

/// When the server runs as another user, lets it pass through the data
/// root's parent (the controller's 0700 state directory) without opening
/// that up: the parent is given the server's group with execute only, so
/// the server can reach its own directory by name and list nothing. A
/// parent someone else owns is left alone for [`check_reachable`] to explain.
pub(crate) fn grant_parent_traversal(
    dir: &Path,
    run_as: Option<RunAs>,
) -> Result<(), LocalPgError> {
    let (Some(run_as), Some(parent)) = (run_as, dir.parent()) else {
        return Ok(());
    };
    let meta = fs::metadata(parent).map_err(|source| LocalPgError::Io {
        action: format!("inspect {}", parent.display()),
        source,
    })?;
    if run_as.can_traverse(&meta) || meta.uid() != Uid::effective().as_raw() {
        return Ok(());
    }
    chown(parent, None, Some(run_as.gid)).map_err(|source| LocalPgError::Os {
        action: format!("give {} to the {SERVER_USER} group", parent.display()),
        source,
    })?;
    let mode = (meta.mode() & 0o7707) | 0o010;
    fs::set_permissions(parent, fs::Permissions::from_mode(mode)).map_err(|source| {
        LocalPgError::Io {
            action: format!("let the {SERVER_USER} user traverse {}", parent.display()),
            source,
        }
    })
}

/// Checks that the server's user can reach `dir` through every parent.
/// Without this, a root-owned 0700 parent (like /root) makes `initdb` fail
/// with an obscure permission error.
pub(crate) fn check_reachable(dir: &Path, run_as: Option<RunAs>) -> Result<(), LocalPgError> {
    let Some(run_as) = run_as else {
        return Ok(());
    };
    for parent in dir.ancestors().skip(1) {
        let meta = fs::metadata(parent).map_err(|source| LocalPgError::Io {
            action: format!("inspect {}", parent.display()),
            source,
        })?;
        if !run_as.can_traverse(&meta) {
            return Err(LocalPgError::Unreachable {
                dir: dir.to_path_buf(),
                blocking: parent.to_path_buf(),
            });
        }
    }
    Ok(())
}
