//! Validation runs on a clean export: order, first failure stops the rest,
//! timeouts kill the group, output is redacted, and a commit that only
//! works with an untracked worktree file fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use autoforge::redact::Redactor;
use autoforge::sandbox::{SandboxMode, SandboxPolicy};
use autoforge::validation::{
    ValidationCommand, ValidationLimits, ValidationOutcome, run_validation, run_validation_with,
};
use autoforge::workspace::{CommitSha, Workspaces, Worktree};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use secrecy::SecretString;

use crate::common;
use common::git;

fn shell(line: &str) -> ValidationCommand {
    ValidationCommand::Shell(line.to_owned())
}

#[tokio::test]
async fn a_commit_needing_an_untracked_worktree_file_fails_on_its_export() {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = tmp.path().join("upstream");
    std::fs::create_dir(&upstream).unwrap();
    git(&upstream, &["init", "-q"]);
    std::fs::write(upstream.join("check.sh"), "test -f generated.txt\n").unwrap();
    git(&upstream, &["add", "check.sh"]);
    git(
        &upstream,
        &["commit", "-q", "-m", "check needs generated.txt"],
    );
    let sha = CommitSha::parse(&git(&upstream, &["rev-parse", "HEAD"])).unwrap();

    let ws = Workspaces::open(&tmp.path().join("state")).unwrap();
    let url = format!("file://{}", upstream.display());
    let mirror = ws.mirror("o", "r", &url).await.unwrap();
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let wt = Worktree::ensure(&mirror, autoforge_journal::testing::issue(1), &sha)
        .await
        .unwrap();
    std::fs::write(wt.path().join("generated.txt"), "agent left this\n").unwrap();
    let commands = [ValidationCommand::Argv(vec![
        "sh".into(),
        "check.sh".into(),
    ])];

    // In the agent's worktree the check passes: the test would not catch a
    // dirty export otherwise.
    let in_worktree = run_validation(
        &commands,
        wt.path(),
        Duration::from_secs(30),
        &Redactor::new(),
    )
    .await;
    assert_eq!(in_worktree[0].outcome, ValidationOutcome::Pass);

    let export = mirror.export(&sha).await.unwrap();
    let records = run_validation(
        &commands,
        export.path(),
        Duration::from_secs(30),
        &Redactor::new(),
    )
    .await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, ValidationOutcome::Fail);
    assert_eq!(records[0].command, "sh check.sh");
}

#[tokio::test]
async fn commands_run_in_order_and_the_first_failure_stops_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let commands = [
        shell("echo first >> order.txt"),
        ValidationCommand::Argv(vec!["sh".into(), "-c".into(), "echo oops; exit 3".into()]),
        shell("echo third >> order.txt"),
    ];
    let records = run_validation(
        &commands,
        dir.path(),
        Duration::from_secs(30),
        &Redactor::new(),
    )
    .await;
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].index, 0);
    assert_eq!(records[0].outcome, ValidationOutcome::Pass);
    assert_eq!(records[1].index, 1);
    assert_eq!(records[1].outcome, ValidationOutcome::Fail);
    assert_eq!(records[1].output_tail, "oops\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("order.txt")).unwrap(),
        "first\n"
    );
}

#[tokio::test]
async fn a_command_over_its_timeout_is_recorded_and_its_group_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let line = format!(
        "sh -c 'trap \"\" TERM; while :; do sleep 1; done' & echo $! > {}; echo started; wait",
        pidfile.display()
    );
    // The pid file names a host pid only outside the sandbox's PID
    // namespace: this proves the group kill, the fallback with the sandbox
    // off (the sandboxed kill is proven in `sandbox_launch.rs`).
    let limits = ValidationLimits {
        timeout: Duration::from_secs(1),
        kill_grace: Duration::from_millis(200),
        tail_bytes: 1024,
        sandbox: SandboxPolicy::isolated(SandboxMode::Off),
    };
    let records = run_validation_with(
        &[shell(&line), shell("true")],
        dir.path(),
        &limits,
        &Redactor::new(),
    )
    .await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, ValidationOutcome::Timeout);
    assert!(records[0].duration >= Duration::from_secs(1));
    assert_eq!(records[0].output_tail, "started\n");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH));
}

#[tokio::test]
async fn the_output_tail_is_redacted_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let redactor = Redactor::new().with_secret(SecretString::from("database-password-1"));
    let token = format!("ghp_{}", "Z9y8X7w6V5".repeat(4));
    let line = format!(
        "i=0; while [ $i -lt 500 ]; do echo padding line $i; i=$((i+1)); done; echo database-password-1 {token} >&2; exit 1"
    );
    let limits = ValidationLimits {
        timeout: Duration::from_secs(30),
        kill_grace: Duration::from_millis(200),
        tail_bytes: 512,
        sandbox: SandboxPolicy::isolated(SandboxMode::Bubblewrap),
    };
    let records = run_validation_with(&[shell(&line)], dir.path(), &limits, &redactor).await;
    let tail = &records[0].output_tail;
    assert_eq!(records[0].outcome, ValidationOutcome::Fail);
    assert!(!tail.contains("database-password-1"), "{tail}");
    assert!(!tail.contains(&token), "{tail}");
    assert!(tail.contains("[REDACTED:"), "{tail}");
    assert!(tail.starts_with('['), "{tail}");
    assert!(tail.contains("earlier bytes omitted"), "{tail}");
    assert!(tail.len() < 700, "{}", tail.len());
}

#[tokio::test]
async fn validation_sees_its_configured_binds_and_nothing_beside_them() {
    let export = tempfile::tempdir().unwrap();
    let toolchain = tempfile::tempdir().unwrap();
    let hidden = tempfile::tempdir().unwrap();
    std::fs::write(toolchain.path().join("tool"), "present").unwrap();
    std::fs::write(hidden.path().join("secret"), "hidden").unwrap();
    let policy = SandboxPolicy {
        read_only: vec![toolchain.path().to_owned()],
        ..SandboxPolicy::isolated(SandboxMode::Bubblewrap)
    };
    let limits = ValidationLimits {
        sandbox: policy,
        ..ValidationLimits::new(Duration::from_secs(30))
    };
    let read = |path: std::path::PathBuf| shell(&format!("cat {}", path.display()));
    let records = run_validation_with(
        &[
            read(toolchain.path().join("tool")),
            shell(&format!("! touch {}/new", toolchain.path().display())),
            read(hidden.path().join("secret")),
        ],
        export.path(),
        &limits,
        &Redactor::new(),
    )
    .await;
    let outcomes: Vec<_> = records.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ValidationOutcome::Pass,
            ValidationOutcome::Pass,
            ValidationOutcome::Fail
        ],
        "{records:?}"
    );
}

#[tokio::test]
async fn a_command_that_cannot_start_fails_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let records = run_validation(
        &[ValidationCommand::Argv(vec!["/nonexistent/tool".into()])],
        dir.path(),
        Duration::from_secs(5),
        &Redactor::new(),
    )
    .await;
    assert_eq!(records[0].outcome, ValidationOutcome::Fail);
    assert!(records[0].exit.is_none());
    assert!(
        records[0].output_tail.contains("could not start"),
        "{}",
        records[0].output_tail
    );
}
