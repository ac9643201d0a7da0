//! The permission table against the code, the App manifest and the README:
//! every API path the sources build needs a row (or is an App-level call),
//! every row is still used, and the manifest and README say exactly what
//! the table says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

use super::permissions::{APP_EVENTS, APP_PERMISSIONS, WITHOUT_PERMISSION, readme_section};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.to_string_lossy().ends_with("_tests.rs")
        {
            found.push(path);
        }
    }
}

/// The first string literal of `text` from `start`, if it begins there
/// (after blanks and an optional `&format!(`).
fn literal_at(text: &str, start: usize) -> Option<String> {
    let rest = text.get(start..)?.trim_start();
    let rest = rest.strip_prefix("&format!(").unwrap_or(rest).trim_start();
    let body = rest.strip_prefix('"')?;
    Some(body[..body.find('"')?].to_owned())
}

/// Query dropped, every `{…}` placeholder spelt `{}`.
fn normalise(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    Regex::new(r"\{[^}]*\}")
        .map(|re| re.replace_all(path, "{}").into_owned())
        .unwrap_or_default()
}

/// Every REST path the product's sources build, normalised, with the
/// files that build it.
fn called_paths() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(&repo_root().join("controller/src"), &mut files);
    let app_literal = Regex::new(r#""(/(?:app|installation|user)(?:/[^"]*)?)""#)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        // The unit tests at the end of a file build paths for fakes.
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let name = file
            .strip_prefix(repo_root())
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut add = |path: String| {
            paths
                .entry(normalise(&path))
                .or_default()
                .insert(name.clone());
        };
        for (at, _) in text.match_indices("api_path(") {
            if let Some(rest) = literal_at(text, at + "api_path(".len()) {
                add(format!("/repos/{{}}/{{}}{rest}"));
            }
        }
        for capture in app_literal.captures_iter(text) {
            add(capture[1].to_owned());
        }
    }
    paths
}

/// An endpoint of the table as a regex over normalised paths; `None` for
/// git entries, which are no REST path.
fn endpoint_pattern(endpoint: &str) -> Option<Regex> {
    let path = &endpoint[endpoint.find('/')?..];
    if endpoint.starts_with("git ") {
        return None;
    }
    let mut pattern = String::from("^");
    for piece in Regex::new(r"\{\*?[^}]*\}|[^{]+").ok()?.find_iter(path) {
        let piece = piece.as_str();
        pattern.push_str(if piece.starts_with("{*") {
            ".+"
        } else if piece.starts_with('{') {
            r"[^/]+"
        } else {
            ""
        });
        if !piece.starts_with('{') {
            pattern.push_str(&regex::escape(piece));
        }
    }
    pattern.push('$');
    Regex::new(&pattern).ok()
}

fn table_endpoints() -> Vec<&'static str> {
    APP_PERMISSIONS
        .iter()
        .flat_map(|grant| grant.endpoints.iter().copied())
        .chain(WITHOUT_PERMISSION.iter().copied())
        .collect()
}

#[test]
fn every_path_the_code_calls_has_a_permission_row_and_every_row_is_called() {
    let called = called_paths();
    assert!(called.len() >= 25, "the scan found too little: {called:#?}");
    let endpoints: Vec<(&str, Regex)> = table_endpoints()
        .into_iter()
        .filter_map(|endpoint| endpoint_pattern(endpoint).map(|re| (endpoint, re)))
        .collect();
    let uncovered: Vec<String> = called
        .iter()
        .filter(|(path, _)| !endpoints.iter().any(|(_, re)| re.is_match(path)))
        .map(|(path, files)| format!("{path} (built in {files:?})"))
        .collect();
    assert!(
        uncovered.is_empty(),
        "add these to github::permissions (and the manifest and README): {uncovered:#?}"
    );
    let unused: Vec<&str> = endpoints
        .iter()
        .filter(|(_, re)| !called.keys().any(|path| re.is_match(path)))
        .map(|(endpoint, _)| *endpoint)
        .collect();
    assert!(
        unused.is_empty(),
        "no code calls these any more: {unused:#?}"
    );
}

#[test]
fn the_app_manifest_asks_for_exactly_the_table() {
    let text = std::fs::read_to_string(repo_root().join("deploy/github-app/manifest.json"))
        .unwrap_or_default();
    let manifest: Value = serde_json::from_str(&text).unwrap_or_default();
    let wanted: serde_json::Map<String, Value> = APP_PERMISSIONS
        .iter()
        .map(|grant| {
            (
                grant.permission.to_owned(),
                Value::from(grant.access.as_str()),
            )
        })
        .collect();
    assert_eq!(manifest["default_permissions"], Value::Object(wanted));
    let events: Vec<Value> = APP_EVENTS.iter().map(|e| Value::from(*e)).collect();
    assert_eq!(manifest["default_events"], Value::Array(events));
}

#[test]
fn the_readme_lists_exactly_the_table() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap_or_default();
    let (open, close) = ("<!-- app-permissions -->\n", "<!-- /app-permissions -->");
    let section = readme
        .split_once(open)
        .and_then(|(_, after)| after.split_once(close))
        .map(|(inside, _)| inside);
    assert_eq!(
        section,
        Some(readme_section().as_str()),
        "README.md between {open:?} and {close:?} must read:\n{}",
        readme_section()
    );
}

#[test]
fn commit_statuses_are_read_for_the_merge_gate() {
    assert!(
        APP_PERMISSIONS
            .iter()
            .any(|grant| grant.permission == "statuses"
                && grant.endpoints.iter().any(|e| e.ends_with("/status")))
    );
}
