//! `autoforge demo` end to end: the real binary, its in-process fakehub, its
//! managed Postgres and its scripted agents, judged by the JSON report and
//! the exit status.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

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
