//! Logs off a terminal: `autoforge demo` with its stderr piped writes JSON
//! lines, and what a run task and an agent launch log carries the span of
//! that run and of that launch.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

/// The names of the spans a JSON log line was written in.
fn span_names(line: &Value) -> Vec<String> {
    line["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|span| span["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn piped_logs_are_json_lines_with_a_span_per_run_and_per_launch() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .args(["demo", "--timeout", "300"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("RUST_LOG", "autoforge=info")
        .current_dir(dir.path())
        .output()
        .expect("run autoforge demo");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<Value> = stderr
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(!lines.is_empty(), "the demo logged at info");
    let in_run = lines
        .iter()
        .find(|line| span_names(line).iter().any(|name| name == "run"))
        .expect("a line logged inside a run's span");
    let run_span = in_run["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|span| span["name"] == "run")
        .unwrap();
    assert!(run_span["run"].as_str().is_some(), "{run_span}");
    let in_launch = lines
        .iter()
        .find(|line| {
            let names = span_names(line);
            names.iter().any(|n| n == "run") && names.iter().any(|n| n == "launch")
        })
        .expect("a launch's line, inside its run's span");
    let launch_span = in_launch["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|span| span["name"] == "launch")
        .unwrap();
    assert!(launch_span["profile"].as_str().is_some(), "{launch_span}");
    assert!(launch_span["role"].as_str().is_some(), "{launch_span}");
}
