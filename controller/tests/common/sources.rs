//! The controller's own source files, for the tests that check rules the
//! compiler cannot: which modules may write to GitHub, which code sits
//! behind a test-only feature. One walker, so every such rule sees the
//! same files.

use std::path::{Path, PathBuf};

/// One `.rs` file under `controller/src`.
pub struct SourceFile {
    /// The path below `src/`, `/`-separated (`github/writes.rs`).
    pub relative: String,
    pub path: PathBuf,
    pub text: String,
}

/// Every `.rs` file under `controller/src`, sorted by path.
pub fn controller_sources() -> Vec<SourceFile> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&src)
                .expect("a file below src/")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            SourceFile {
                relative,
                path,
                text,
            }
        })
        .collect()
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}
