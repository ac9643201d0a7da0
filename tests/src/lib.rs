//! Shared helpers for autoforge end-to-end tests.

pub mod bench;

use std::path::{Path, PathBuf};

/// The repository's root directory (this crate sits in `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The text of a file given relative to the repository root; panics with the
/// path when it cannot be read (a test cannot go on without it).
pub fn read_repo_file(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
