//! Supervisor behaviour against the scripted agents in `tests/agents/`:
//! timeouts kill whole process groups, the environment is allow-listed,
//! output is bounded and redacted, and results and usage are read back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use autoforge::agents::profile::{LaunchProfile, ProfileSpec};
use autoforge::agents::supervisor::{
    CancelToken, CaptureLimits, Heartbeat, LaunchExit, LaunchOutcome, LaunchSpec, launch,
};
use autoforge::machine::AgentPhase;
use autoforge::redact::Redactor;
use autoforge::sandbox::SandboxMode;
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use secrecy::SecretString;
use tokio::sync::watch;

use crate::common;
use common::{LEAKABLE_CREDENTIALS, agent_script, git, run_child_test, test_in};

/// The agent's working directory, beside (not above) the launch logs.
fn work(dir: &tempfile::TempDir) -> PathBuf {
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    work
}

/// A profile whose launches run outside the sandbox. The tests that read a
/// pid file the agent wrote need it: inside the sandbox's PID namespace a
/// pid means nothing on the host. They prove the process-group machinery,
/// which is what remains with `agents.sandbox = "off"`; the sandboxed kill
/// is proven in `sandbox_launch.rs`.
fn host_profile(command: &[&str], idle: u64, wall: u64) -> LaunchProfile {
    let mut profile = profile(command, idle, wall);
    profile.sandbox.mode = SandboxMode::Off;
    profile
}

fn profile(command: &[&str], idle: u64, wall: u64) -> LaunchProfile {
    LaunchProfile::from_spec(
        "scripted",
        ProfileSpec {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            idle_timeout_seconds: idle,
            max_runtime_seconds: wall,
            usage_pattern: Some(r"tokens used:\s*([0-9][0-9,]*)".into()),
            ..ProfileSpec::default()
        },
    )
    .unwrap()
}

async fn run(
    profile: &LaunchProfile,
    workdir: &Path,
    log_dir: PathBuf,
    redactor: &Redactor,
    prompt: &str,
) -> LaunchOutcome {
    let mut request = LaunchSpec::new(
        profile,
        AgentPhase::Implement,
        prompt,
        workdir,
        log_dir,
        redactor,
    );
    request.kill_grace = Duration::from_millis(300);
    launch(request).await.unwrap()
}

fn assert_dead(pid: i32) {
    assert_eq!(
        kill(Pid::from_raw(pid), None),
        Err(Errno::ESRCH),
        "process {pid} outlived its launch"
    );
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn grandchild_ignoring_sigterm_is_dead_after_a_wall_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let p = host_profile(
        &[
            &agent_script("sleeper_with_grandchild.sh"),
            pidfile.to_str().unwrap(),
        ],
        60,
        1,
    );
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::WallTimeout);
    assert!(!out.record.group_survived);
    assert!(out.record.duration >= Duration::from_secs(1));
    assert!(
        out.stdout.head.contains("started grandchild"),
        "{:?}",
        out.stdout
    );
    assert_dead(read_pid(&pidfile));
}

#[tokio::test]
async fn cancellation_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let p = host_profile(
        &[
            &agent_script("sleeper_with_grandchild.sh"),
            pidfile.to_str().unwrap(),
        ],
        60,
        600,
    );
    let cancel = CancelToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        stopper.cancel();
    });
    let redactor = Redactor::new();
    let workdir = work(&dir);
    let mut request = LaunchSpec::new(
        &p,
        AgentPhase::Fix,
        "",
        &workdir,
        dir.path().join("log"),
        &redactor,
    );
    request.kill_grace = Duration::from_millis(200);
    request.cancel = Some(&cancel);
    let out = launch(request).await.unwrap();
    assert_eq!(out.record.exit, LaunchExit::Cancelled);
    assert!(out.record.duration < Duration::from_secs(60));
    assert_dead(read_pid(&pidfile));
}

#[tokio::test]
async fn leftover_background_process_is_killed_after_a_clean_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("bg.pid");
    let script = format!("sleep 1000 & echo $! > {}; echo done", pidfile.display());
    let p = host_profile(&["sh", "-c", &script], 60, 60);
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert!(out.record.descendants_killed);
    assert_eq!(out.stdout.head, "done\n");
    assert_dead(read_pid(&pidfile));
}

#[tokio::test]
async fn a_process_that_left_the_group_with_setsid_is_killed_at_the_end() {
    // killpg cannot reach a new session; the launch tag in its inherited
    // environment still identifies it.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("escaped.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 1000' </dev/null >/dev/null 2>&1 & \
         while [ ! -s {} ]; do sleep 0.05; done; echo done",
        pidfile.display(),
        pidfile.display()
    );
    let p = host_profile(&["sh", "-c", &script], 60, 60);
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert!(out.record.descendants_killed);
    let pid = read_pid(&pidfile);
    // Reaping by PID 1 may lag the SIGKILL a little.
    for _ in 0..100 {
        if kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_dead(pid);
}

#[tokio::test]
async fn an_agent_that_never_reads_a_large_prompt_does_not_hang_the_launch() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&["sh", "-c", "exec 0<&-; echo started; sleep 0.2"], 60, 60);
    let prompt = "x".repeat(8 * 1024 * 1024);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        run(
            &p,
            &work(&dir),
            dir.path().join("log"),
            &Redactor::new(),
            &prompt,
        ),
    )
    .await
    .expect("the launch hung on a prompt nobody reads");
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert_eq!(out.stdout.head, "started\n");
}

#[tokio::test]
async fn a_final_message_path_turned_into_a_fifo_or_symlink_is_not_read() {
    // Opening a FIFO nobody writes blocks forever; a symlink would have the
    // controller read a file of the agent's choosing as its answer.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("elsewhere.txt");
    std::fs::write(&secret, "not the agent's answer\n").unwrap();
    for script in [
        "rm -f \"$1\"; mkfifo \"$1\"".to_owned(),
        format!("rm -f \"$1\"; ln -s {} \"$1\"", secret.display()),
    ] {
        let p = profile(&["sh", "-c", &script, "sh", "{output}"], 60, 60);
        let log = dir.path().join(format!("log-{}", script.len()));
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            run(&p, &work(&dir), log, &Redactor::new(), ""),
        )
        .await
        .expect("reading the final message hung");
        // Inside the sandbox the file is a mount point and both commands
        // fail; either way nothing but a regular file is read.
        assert_eq!(out.final_message, None, "{script}");
    }
}

#[tokio::test]
async fn wall_timeout_fires_even_while_the_agent_floods_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&["sh", "-c", "yes flooding-the-pipe"], 60, 1);
    let (hb_tx, hb_rx) = watch::channel(Heartbeat::default());
    let redactor = Redactor::new();
    let workdir = work(&dir);
    let mut request = LaunchSpec::new(
        &p,
        AgentPhase::Implement,
        "",
        &workdir,
        dir.path().join("log"),
        &redactor,
    );
    request.kill_grace = Duration::from_millis(200);
    request.heartbeat_every = Duration::from_millis(100);
    request.heartbeat = Some(&hb_tx);
    // Small enough that even a starved `yes` overflows it within the second.
    request.log_limit = 64 * 1024;
    let out = launch(request).await.unwrap();
    assert_eq!(out.record.exit, LaunchExit::WallTimeout);
    assert!(out.record.duration < Duration::from_secs(20));
    assert!(out.stdout.is_truncated());
    assert!(out.stdout.tail.ends_with("flooding-the-pipe\n"));
    let heartbeat = *hb_rx.borrow();
    assert_eq!(heartbeat.output_bytes, out.record.output_bytes);
    assert!(heartbeat.elapsed >= Duration::from_secs(1));
    let log_len = std::fs::metadata(dir.path().join("log/output.log"))
        .unwrap()
        .len();
    assert!(log_len < 1024 * 1024 + 200, "log is {log_len} bytes");
}

#[tokio::test]
async fn idle_timeout_fires_when_the_agent_goes_silent() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&[&agent_script("silent_idle.sh")], 1, 60);
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "go",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::IdleTimeout);
    assert!(out.record.duration < Duration::from_secs(30));
    assert_eq!(out.stdout.head, "thinking\n");
}

#[tokio::test]
async fn output_over_the_bound_keeps_head_and_tail_with_counts() {
    let dir = tempfile::tempdir().unwrap();
    let lines = 20_000;
    let p = profile(
        &[&agent_script("huge_output.sh"), &lines.to_string()],
        60,
        120,
    );
    let redactor = Redactor::new();
    let (hb_tx, hb_rx) = watch::channel(Heartbeat::default());
    let workdir = work(&dir);
    let mut request = LaunchSpec::new(
        &p,
        AgentPhase::Review,
        "",
        &workdir,
        dir.path().join("log"),
        &redactor,
    );
    request.capture = CaptureLimits {
        head_bytes: 4096,
        tail_bytes: 8192,
    };
    request.log_limit = 64 * 1024;
    request.heartbeat = Some(&hb_tx);
    let out = launch(request).await.unwrap();

    let expected_total: u64 = (0..lines)
        .map(|i| {
            format!(
                "line {i} of generous padding to make the output larger than the capture bounds\n"
            )
            .len() as u64
        })
        .sum::<u64>()
        + "THE END\n".len() as u64;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert_eq!(out.stdout.total_bytes, expected_total);
    assert_eq!(out.record.output_bytes, expected_total);
    assert!(out.stdout.is_truncated());
    assert!(out.stdout.head.starts_with("line 0 of"));
    assert!(out.stdout.head.len() <= 4096);
    assert!(out.stdout.tail.ends_with("THE END\n"));
    assert!(out.stdout.tail.len() <= 8192);
    assert_eq!(
        out.stdout.omitted_bytes,
        expected_total - out.stdout.head.len() as u64 - out.stdout.tail.len() as u64
    );
    let log = std::fs::read_to_string(dir.path().join("log/output.log")).unwrap();
    assert!(log.len() < 64 * 1024 + 200, "log is {} bytes", log.len());
    assert!(log.contains("further bytes not written"));
    assert_eq!(hb_rx.borrow().output_bytes, expected_total);
}

#[tokio::test]
async fn well_behaved_implementer_commits_and_reports_its_head_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["checkout", "-q", "--detach"]);

    let p = profile(&[&agent_script("well_behaved_implement.sh")], 60, 60);
    let out = run(
        &p,
        &repo,
        dir.path().join("log"),
        &Redactor::new(),
        "implement it",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0), "{:?}", out.stderr);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    assert_ne!(head, base);
    assert!(
        out.result_text()
            .contains(&format!("\"head_sha\":\"{head}\""))
    );
    assert_eq!(out.record.tokens, Some(12_345));
    assert_eq!(out.record.profile, "scripted");
    assert_eq!(out.record.role, AgentPhase::Implement);
}

#[tokio::test]
async fn secrets_never_reach_the_launch_logs_or_captures() {
    let dir = tempfile::tempdir().unwrap();
    let known = "correct-horse-battery-staple";
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
    let redactor = Redactor::new().with_secret(SecretString::from(known));
    let prompt = format!("known {known}\ntoken {token}\nplain words\n");
    let p = profile(&[&agent_script("echo_prompt.sh")], 60, 60);
    let log_dir = dir.path().join("log");
    let out = run(&p, &work(&dir), log_dir.clone(), &redactor, &prompt).await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert!(out.stdout.head.contains("plain words"));
    assert!(log_dir.join("output.log").exists());
    assert!(log_dir.join("tail.log").exists());
    for entry in std::fs::read_dir(&log_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue; // the agent's private home/ and tmp/
        }
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(known), "{text}");
        assert!(!text.contains(&token), "{text}");
    }
    assert!(!out.stdout.head.contains(known));
    assert!(!out.stdout.head.contains(&token));
}

#[tokio::test]
async fn prompt_file_and_output_file_profiles_get_paths_in_the_log_dir() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(
        &[&agent_script("echo_prompt.sh"), "{prompt_file}", "{output}"],
        60,
        60,
    );
    let log_dir = dir.path().join("log");
    let out = run(
        &p,
        &work(&dir),
        log_dir.clone(),
        &Redactor::new(),
        "prompt via file\n",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert_eq!(out.stdout.head, "prompt via file\n");
    assert_eq!(out.final_message.as_deref(), Some("final answer\n"));
    assert_eq!(out.result_text(), "final answer\n");
    assert!(log_dir.join("prompt.md").exists());
}

#[tokio::test]
async fn a_missing_program_is_a_launch_error_not_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&["/nonexistent/agent-binary"], 60, 60);
    let redactor = Redactor::new();
    let workdir = work(&dir);
    let request = LaunchSpec::new(
        &p,
        AgentPhase::Implement,
        "",
        &workdir,
        dir.path().join("log"),
        &redactor,
    );
    assert!(launch(request).await.is_err());
}

#[tokio::test]
async fn a_log_dir_inside_the_worktree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&[&agent_script("print_env.sh")], 60, 60);
    let redactor = Redactor::new();
    let workdir = work(&dir);
    let request = LaunchSpec::new(
        &p,
        AgentPhase::Review,
        "",
        &workdir,
        workdir.join(".autoforge/log"),
        &redactor,
    );
    assert!(matches!(
        launch(request).await,
        Err(autoforge::agents::supervisor::LaunchError::LogDirInsideWorktree(_))
    ));
}

/// The environment check runs in a child copy of this test binary, so the
/// credential variables can be set for that process alone without touching
/// the environment of the threads running the other tests.
const ENV_CHILD_FLAG: &str = "SUPERVISOR_ENV_CHILD";

#[test]
fn env_printer_sees_no_controller_credentials() {
    let mut env = LEAKABLE_CREDENTIALS.to_vec();
    env.extend([
        ("ANTHROPIC_API_KEY", "vendor-key-for-the-agent"),
        ("SOME_RANDOM_VARIABLE", "not-allow-listed"),
    ]);
    run_child_test(
        &test_in(module_path!(), "env_printer_child"),
        ENV_CHILD_FLAG,
        &env,
    );
}

#[tokio::test]
#[ignore = "runs only as the child process of env_printer_sees_no_controller_credentials"]
async fn env_printer_child() {
    if std::env::var_os(ENV_CHILD_FLAG).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = LaunchProfile::from_spec(
        "env",
        ProfileSpec {
            command: vec![agent_script("print_env.sh")],
            env: [("AGENT_MODE".to_owned(), SecretString::from("scripted"))].into(),
            env_inherit: vec!["ANTHROPIC_API_KEY".into()],
            env_remove: vec!["TERM".into()],
            idle_timeout_seconds: 60,
            max_runtime_seconds: 60,
            ..ProfileSpec::default()
        },
    )
    .unwrap();
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    let env = &out.stdout.head;
    for leaked in [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "AUTOFORGE_",
        "DATABASE_URL",
        "leaked",
        "SOME_RANDOM_VARIABLE",
        ENV_CHILD_FLAG,
    ] {
        assert!(
            !env.contains(leaked),
            "`{leaked}` reached the agent:\n{env}"
        );
    }
    assert!(env.contains("AGENT_MODE=scripted"), "{env}");
    assert!(
        env.contains("ANTHROPIC_API_KEY=vendor-key-for-the-agent"),
        "{env}"
    );
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.lines().any(|l| l.starts_with("TERM=")), "{env}");
}

const DUMPABLE_CHILD_FLAG: &str = "SUPERVISOR_DUMPABLE_CHILD";

#[test]
fn the_controller_is_not_dumpable_once_it_has_launched_a_child() {
    run_child_test(
        &test_in(module_path!(), "not_dumpable_child"),
        DUMPABLE_CHILD_FLAG,
        &[],
    );
}

/// Agents run as the controller's user: without this, any of them could
/// read the controller's secrets from `/proc/<pid>/environ` or its memory.
#[tokio::test]
#[ignore = "runs only as the child process of the_controller_is_not_dumpable_once_it_has_launched_a_child"]
async fn not_dumpable_child() {
    if std::env::var_os(DUMPABLE_CHILD_FLAG).is_none() {
        return;
    }
    assert!(nix::sys::prctl::get_dumpable().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let p = profile(&["sh", "-c", "echo hi"], 60, 60);
    let out = run(
        &p,
        &work(&dir),
        dir.path().join("log"),
        &Redactor::new(),
        "",
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0));
    assert!(!nix::sys::prctl::get_dumpable().unwrap());
}

/// A json-lines profile that reports usage per event, priced.
fn priced_json_lines(command: &[&str]) -> LaunchProfile {
    use autoforge::agents::profile::{OutputKind, OutputSpec, PriceTable, UsageFields};
    LaunchProfile::from_spec(
        "priced",
        ProfileSpec {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            idle_timeout_seconds: 60,
            max_runtime_seconds: 60,
            output: OutputSpec {
                kind: OutputKind::JsonLines,
                usage: UsageFields {
                    input: Some("/usage/in".into()),
                    output: Some("/usage/out".into()),
                    cached: None,
                },
                ..OutputSpec::default()
            },
            price: Some(PriceTable {
                input: 2.0,
                output: 10.0,
                cached: 0.0,
            }),
            ..ProfileSpec::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn a_launch_reports_its_start_heartbeats_with_tokens_so_far_and_its_priced_end() {
    use autoforge::agents::supervisor::{LaunchEvent, LaunchEvents};
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo '{"usage":{"in":1000,"out":100}}'; sleep 1.5; echo '{"usage":{"in":500,"out":50}}'"#;
    let p = priced_json_lines(&["sh", "-c", script]);
    let redactor = Redactor::new();
    let workdir = work(&dir);
    let (events, mut received) = LaunchEvents::channel(Duration::from_millis(200));
    let mut request = LaunchSpec::new(
        &p,
        AgentPhase::Implement,
        "",
        &workdir,
        dir.path().join("log"),
        &redactor,
    );
    request.events = Some(&events);
    let out = launch(request).await.unwrap();
    drop(events);
    let mut seen = Vec::new();
    while let Some(event) = received.recv().await {
        seen.push(event);
    }

    let LaunchEvent::Started {
        pid,
        profile,
        log_dir,
        price,
        ..
    } = &seen[0]
    else {
        panic!("the first event is the start: {seen:?}");
    };
    assert!(*pid > 0);
    assert_eq!(profile, "priced");
    assert_eq!(log_dir, &dir.path().join("log"));
    assert!(price.is_some());
    let so_far: Vec<Option<u64>> = seen
        .iter()
        .filter_map(|e| match e {
            LaunchEvent::Progress(beat) => Some(beat.tokens),
            _ => None,
        })
        .collect();
    assert!(
        so_far.contains(&Some(1_100)),
        "a heartbeat saw the first event's tokens: {so_far:?}"
    );
    let Some(LaunchEvent::Finished(record)) = seen.last() else {
        panic!("the last event is the end: {seen:?}");
    };
    assert_eq!(**record, out.record);
    assert_eq!(record.tokens, Some(1_650));
    let usage = record.usage.unwrap();
    assert_eq!((usage.input, usage.output, usage.cached), (1_500, 150, 0));
    // 1500 × 2 + 150 × 10 millionths.
    assert_eq!(record.cost_micros, Some(4_500));
}
