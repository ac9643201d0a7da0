//! `autoforge demo` end to end: the real binary, its in-process fakehub, its
//! managed Postgres and its scripted agents, judged by the JSON report and
//! the exit status.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// `autoforge demo ARGS` with a clean environment, run in `dir`.
fn demo(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .arg("demo")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .current_dir(dir)
        .output()
        .expect("run autoforge demo")
}

fn shown(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_demo_drives_its_epic_to_done_with_one_follow_up_and_no_duplicate_write() {
    let dir = tempfile::tempdir().unwrap();
    let report_file = dir.path().join("report.json");
    let output = demo(
        dir.path(),
        &[
            "--report",
            report_file.to_str().unwrap(),
            "--timeout",
            "300",
        ],
    );
    let transcript = shown(&output);
    assert!(output.status.success(), "{transcript}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&report_file).expect("the report")).unwrap();

    assert_eq!(report["outcome"], "done", "{report:#}");
    assert_eq!(report["duplicates"], 0, "{report:#}");
    let runs = report["runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    for run in runs {
        assert_eq!(run["phase"], "DONE", "{report:#}");
    }
    // Every write the journal intended is on fakehub and was read back.
    let effects = report["effects"].as_object().unwrap();
    for (kind, stages) in effects {
        let stages: Vec<&String> = stages.as_object().unwrap().keys().collect();
        assert_eq!(stages, ["observed"], "{kind}: {report:#}");
    }
    assert_eq!(effects["merge_pr"]["observed"], 3, "{report:#}");
    assert_eq!(effects["create_issue"]["observed"], 1, "{report:#}");
    assert_eq!(
        report["issues_created_by_controller"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "one follow-up issue: {report:#}"
    );
    assert!(report["github_requests"]["by_controller"]["writes"].as_u64() > Some(0));
    assert!(report["wall_seconds"].as_f64() > Some(0.0));

    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in [
        "labelled EPIC",
        "phase   ",
        "agent   REVIEW",
        "GitHub  merge_pr",
        "EPIC DONE",
    ] {
        assert!(
            stdout.contains(line),
            "no `{line}` in the timeline:\n{transcript}"
        );
    }
}

#[test]
fn a_config_file_without_agents_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mine.toml");
    std::fs::write(&config, "[merge]\nmode = \"never\"\n").unwrap();
    let state = dir.path().join("state");
    let output = demo(
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    assert!(!output.status.success(), "{}", shown(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no [agents] section"), "{}", shown(&output));
    assert!(!state.exists(), "nothing was created: {}", shown(&output));
}

/// Every `postmaster.pid` under `dir`: a running (or crashed) Postgres.
fn postmaster_pids(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == "postmaster.pid") {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn an_interrupted_demo_reports_it_and_stops_its_postgres() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let report_file = dir.path().join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .args(["demo", "--state-dir", state.to_str().unwrap()])
        .args(["--report", report_file.to_str().unwrap()])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the demo ended early: {seen:?}"))
            .unwrap();
        let started = line.contains("labelled EPIC");
        seen.push(line);
        if started {
            break;
        }
    }
    assert!(!postmaster_pids(&state).is_empty(), "Postgres runs");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the demo did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{rest:?}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report_file).unwrap()).unwrap();
    assert_eq!(report["outcome"], "interrupted");
    assert_eq!(postmaster_pids(&state), Vec::<std::path::PathBuf>::new());
}
