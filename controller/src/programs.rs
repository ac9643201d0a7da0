//! Finding an executable on a search path the way `execvp` would.
//!
//! Commands are started with the absolute path found here rather than a
//! bare name: the standard library can then start them with `posix_spawn`
//! (a `vfork`-like clone that shares the controller's memory until the
//! child execs) instead of `fork`. A command whose environment is cleared
//! and given its own `PATH` but whose program is a bare name falls back to
//! `fork`, which copies the page tables of the whole controller and makes
//! its next writes copy pages: most of the controller's CPU per run went
//! there when git was started by name (docs/benchmarks.md, Cycle cost).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The first `dir/name` on `path` (a `PATH`-style list) that is a file.
pub fn on_path(name: impl AsRef<Path>, path: Option<&OsStr>) -> Option<PathBuf> {
    let name = name.as_ref();
    path.map(std::env::split_paths)
        .into_iter()
        .flatten()
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `name` as found on the controller's own `PATH`, or the bare name when
/// it is not there (starting it then fails with the usual "not found").
pub fn controller_program(name: &str) -> PathBuf {
    on_path(name, std::env::var_os("PATH").as_deref()).unwrap_or_else(|| PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_first_directory_holding_the_file_wins_and_directories_are_skipped() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        std::fs::create_dir(first.path().join("tool")).unwrap();
        std::fs::write(second.path().join("tool"), "").unwrap();
        let path = std::env::join_paths([first.path(), second.path()]).unwrap();
        assert_eq!(
            on_path("tool", Some(&path)),
            Some(second.path().join("tool"))
        );
        assert_eq!(on_path("absent", Some(&path)), None);
        assert_eq!(on_path("tool", None), None);
    }

    #[test]
    fn a_program_missing_from_path_stays_its_bare_name() {
        assert_eq!(
            controller_program("surely-no-such-program-here"),
            PathBuf::from("surely-no-such-program-here")
        );
        assert!(controller_program("sh").is_absolute());
    }
}
