//! Putting a mirror back into the shape the controller expects before any
//! of its own git commands touches it.
//!
//! Agents work in worktrees whose common git directory is the mirror, so
//! whatever they write to its `config`, `hooks/`, `info/attributes`,
//! alternates or `shallow` file would steer the controller's next fetch,
//! push or `git status`: a proxy that sees the token, a hook that runs as
//! the controller, a filter that rewrites what gets checked. Pinning
//! rewrites the config to a fixed text and deletes everything else an
//! attacker could plant; the environment-level settings in [`super::git`]
//! back this up for the keys git lets the command line override.

use std::fs;
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};

/// The whole config of a mirror. Nothing else belongs there: no remote (the
/// URL is passed per fetch), no credential, no proxy, no filters, no hooks
/// path, no URL rewrites.
pub(super) const MIRROR_CONFIG: &str =
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n";

/// Files that only an attacker puts into a bare mirror: attribute rules
/// (filters, `export-ignore`), a shallow boundary or grafts (cut or fake
/// history), alternates (objects from elsewhere), a `commondir` redirect and
/// per-worktree config.
const PLANTED: &[&str] = &[
    "info/attributes",
    "info/grafts",
    "shallow",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "commondir",
    "config.worktree",
];

/// Why a mirror could not be pinned.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct PinError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn fail(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PinError {
    let path = path.to_owned();
    move |source| PinError {
        action,
        path,
        source,
    }
}

/// Restores `git_dir/config`, deletes planted files and every hook.
pub(super) fn pin(git_dir: &Path) -> Result<(), PinError> {
    pin_config(git_dir)?;
    for planted in PLANTED {
        remove_any(&git_dir.join(planted))?;
    }
    // `core.hooksPath=/dev/null` already keeps git from looking here; with
    // no hooks directory at all a lapse there still runs nothing.
    remove_any(&git_dir.join("hooks"))
}

/// Rewrites the config unless it is already exactly ours. The new text goes
/// to a fresh 0600 file that replaces the old one by rename: writing through the
/// old path would follow a planted symlink into some other file, and a git
/// reading concurrently sees either the old or the new config, never half.
fn pin_config(git_dir: &Path) -> Result<(), PinError> {
    let config = git_dir.join("config");
    let is_ours = fs::symlink_metadata(&config).is_ok_and(|meta| meta.file_type().is_file())
        && fs::read_to_string(&config).ok().as_deref() == Some(MIRROR_CONFIG);
    if is_ours {
        return Ok(());
    }
    // A random name: runs of several issues pin the same mirror at once.
    let mut fresh = tempfile::Builder::new()
        .prefix("config.autoforge-")
        .tempfile_in(git_dir)
        .map_err(fail("create a new config in", git_dir))?;
    fresh
        .write_all(MIRROR_CONFIG.as_bytes())
        .and_then(|()| fresh.as_file().sync_all())
        .map_err(fail("write a new config in", git_dir))?;
    fresh
        .persist(&config)
        .map(drop)
        .map_err(|e| fail("replace", &config)(e.error))
}

/// Deletes a file, a symlink or a whole directory; absence is fine.
fn remove_any(path: &Path) -> Result<(), PinError> {
    let removed = match fs::symlink_metadata(path) {
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(error) => Err(error),
        // `remove_dir_all` removes a symlink itself, never what it names.
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    };
    match removed {
        Err(error) if error.kind() != ErrorKind::NotFound => Err(fail("remove", path)(error)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_symlinked_config_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        let git_dir = dir.path().join("mirror.git");
        fs::create_dir_all(git_dir.join("hooks")).unwrap();
        fs::write(git_dir.join("hooks/pre-push"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink(&victim, git_dir.join("config")).unwrap();

        pin(&git_dir).unwrap();

        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = fs::symlink_metadata(git_dir.join("config")).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(
            fs::read_to_string(git_dir.join("config")).unwrap(),
            MIRROR_CONFIG
        );
        assert!(!git_dir.join("hooks").exists());
    }

    #[test]
    fn concurrent_pins_of_one_mirror_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().to_owned();
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let git_dir = git_dir.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        fs::write(git_dir.join("config"), "[http]\n\tproxy = x\n").ok();
                        fs::create_dir_all(git_dir.join("hooks")).ok();
                        pin(&git_dir).unwrap();
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        pin(&git_dir).unwrap();
        assert_eq!(
            fs::read_to_string(git_dir.join("config")).unwrap(),
            MIRROR_CONFIG
        );
    }
}
