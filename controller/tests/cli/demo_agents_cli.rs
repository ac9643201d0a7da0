//! `autoforge demo --agents CLI` without the user's key: it names the
//! variable to set and starts nothing. (The run with a key calls a real
//! model, so it is not run here.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn demo_with_real_agents_and_no_key_names_the_variable_and_starts_nothing() {
    for (cli, var) in [
        ("claude", "ANTHROPIC_API_KEY"),
        ("codex", "OPENAI_API_KEY"),
        ("opencode", "OPENROUTER_API_KEY"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_autoforge"))
            .arg("--state-dir")
            .arg(&state)
            .args(["demo", "--agents", cli])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{cli}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("set {var} in the environment")),
            "{cli}: {stderr}"
        );
        assert!(stderr.contains("nothing was started"), "{cli}: {stderr}");
        assert!(stdout.is_empty(), "{cli} printed a timeline: {stdout}");
        assert!(!state.exists(), "{cli}: the state directory was made");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{cli}: the refusal came only after {:?}",
            started.elapsed()
        );
    }
}
