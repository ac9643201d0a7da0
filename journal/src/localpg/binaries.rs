//! Finding the PostgreSQL server programs (`initdb`, `pg_ctl`, `postgres`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::LocalPgError;

/// A directory holding `initdb`, `pg_ctl` and `postgres`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBinaries {
    dir: PathBuf,
}

impl PgBinaries {
    /// Looks, in order, in `$PG_BIN`, `pg_config --bindir`, every `PATH`
    /// entry, and the newest Debian-style `/usr/lib/postgresql/<v>/bin`.
    pub fn find() -> Result<PgBinaries, LocalPgError> {
        let mut searched = Vec::new();
        let candidates = env_dir()
            .into_iter()
            .chain(pg_config_dir())
            .chain(path_dirs())
            .chain(newest_debian_dir(Path::new("/usr/lib/postgresql")));
        for dir in candidates {
            if has_server_programs(&dir) {
                return Ok(PgBinaries { dir });
            }
            searched.push(dir.display().to_string());
        }
        Err(LocalPgError::BinariesNotFound { searched })
    }

    /// Uses an explicit directory, checking that the programs are there.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Result<PgBinaries, LocalPgError> {
        let dir = dir.into();
        if has_server_programs(&dir) {
            Ok(PgBinaries { dir })
        } else {
            Err(LocalPgError::BinariesNotFound {
                searched: vec![dir.display().to_string()],
            })
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn initdb(&self) -> PathBuf {
        self.dir.join("initdb")
    }

    pub fn pg_ctl(&self) -> PathBuf {
        self.dir.join("pg_ctl")
    }
}

fn has_server_programs(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"]
        .iter()
        .all(|program| dir.join(program).is_file())
}

fn env_dir() -> Option<PathBuf> {
    env::var_os("PG_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn pg_config_dir() -> Option<PathBuf> {
    let output = Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let dir = String::from_utf8(output.stdout).ok()?;
    let dir = dir.trim();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

fn path_dirs() -> Vec<PathBuf> {
    env::var_os("PATH")
        .map(|path| env::split_paths(&path).collect())
        .unwrap_or_default()
}

/// The `bin` directory of the highest numeric version under `root`
/// (`15` < `16`, and `9.6` < `10`).
fn newest_debian_dir(root: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(root).ok()?;
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let version: Vec<u32> = name
                .split('.')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            Some((version, entry.path().join("bin")))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, dir)| dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_debian_version_is_compared_numerically() {
        let root = tempfile::tempdir().expect("tempdir");
        for version in ["9.6", "10", "16", "not-a-version"] {
            std::fs::create_dir_all(root.path().join(version).join("bin")).expect("mkdir");
        }
        assert_eq!(
            newest_debian_dir(root.path()),
            Some(root.path().join("16").join("bin"))
        );
    }

    #[test]
    fn a_directory_without_the_server_programs_is_refused() {
        let empty = tempfile::tempdir().expect("tempdir");
        let error = PgBinaries::in_dir(empty.path()).expect_err("no programs");
        let message = error.to_string();
        assert!(message.contains("DATABASE_URL"), "{message}");
        assert!(message.contains("install"), "{message}");
    }
}
