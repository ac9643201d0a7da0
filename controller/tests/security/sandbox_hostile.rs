//! A hostile agent against the real binary: `autoforge demo --config …`
//! whose implementer (`tests/agents/hostile_implement.sh`) tries to reach
//! Postgres, keys, configuration, other processes' environments, other
//! mirrors, worktrees and launches, to rewrite the mirror's config and
//! hooks, plant a filter, point its output file at a secret, write outside
//! its worktree and outlive its launch — and then does its honest work.
//!
//! Every attempt must fail inside the sandbox (the agent records each one in
//! its stdout, read back from the launch directories), nothing may be left
//! running, and the EPIC must still finish with exactly the demo's writes.
//!
//! As root every file is readable and the test would prove nothing, so when
//! the test runs as root the controller runs as `nobody` with a state
//! directory owned by that user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const NOBODY: u32 = 65534;
/// The escaping process's argument (`sleep 86399.4242`), unique enough to
/// find it among the host's processes.
const ESCAPEE: &str = "86399.4242";

/// Every attempt the hostile agent records, each of which must be blocked.
const ATTACKS: &[&str] = &[
    "postgres_tcp",
    "postgres_data_dir",
    "read_app_key",
    "read_demo_config",
    "find_secret_files",
    "read_environ",
    "see_controller",
    "list_other_mirror",
    "list_other_repo_worktrees",
    "list_other_issue_worktrees",
    "list_other_launches",
    "list_state_dir",
    "write_mirror_config",
    "git_config_filter",
    "write_mirror_hook",
    "plant_attributes",
    "plant_alternates",
    "symlink_output",
    "write_beside_worktree",
    "write_state_dir",
    "write_root",
    "write_launch_dir",
    "write_usr",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies the demo's scripted agents and the hostile implementer into `dir`.
fn install_agents(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let demo = repo_root().join("controller/demo-agents");
    for entry in std::fs::read_dir(demo).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::copy(
        repo_root().join("tests/agents/hostile_implement.sh"),
        dir.join("hostile_implement.sh"),
    )
    .unwrap();
}

/// The operator config: the hostile implementer and the demo's honest
/// reviewer, fixer and EPIC updater, all without network.
fn config(agents: &Path, state: &Path, sandbox: &str) -> String {
    let a = agents.display();
    let s = state.display();
    let profile = |name: &str, command: &str| {
        format!(
            "[agents.profiles.{name}]\ncommand = {command}\nidle_timeout_seconds = 60\n\
             max_runtime_seconds = 120\n\n[agents.profiles.{name}.sandbox]\nnetwork = \"none\"\n\n"
        )
    };
    let mut text = format!("[agents]\nsandbox = \"{sandbox}\"\n\n");
    text += &profile(
        "hostile",
        &format!("[\"{a}/hostile_implement.sh\", \"{s}\", \"{{output}}\"]"),
    );
    text += &profile("review", &format!("[\"{a}/review.sh\", \"1\"]"));
    text += &profile("fix", &format!("[\"{a}/fix.sh\"]"));
    text += &profile(
        "update-epic",
        &format!("[\"{a}/update_epic.sh\", \"1\", \"2\", \"3\"]"),
    );
    text += "[agents.roles]\nimplement = \"hostile\"\nreview = \"review\"\nfix = \"fix\"\n\
             update_epic = \"update-epic\"\n";
    text
}

/// Decoys beside the real state: another repository's mirror and worktree
/// and another run's launch, which no agent of this run may see.
fn plant_decoys(state: &Path) {
    for (dir, file) in [
        ("repos/other-owner/secret.git", "HEAD"),
        ("worktrees/other-owner/secret/9", "README.md"),
        ("launches/run-999/launch-1/attempt-1", "output.log"),
    ] {
        let dir = state.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), "decoy\n").unwrap();
    }
}

fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// Where the unprivileged demo works. As root, the checkout may sit below a
/// directory `nobody` cannot traverse (`/root` is 0700), so the scratch
/// directory and a copy of the binary go below a world-traversable base
/// instead; it is not under `/tmp` or `/var/tmp`, which are private tmpfs
/// mounts inside the sandbox.
fn scratch_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    if !nix::unistd::geteuid().is_root() {
        return tempfile::tempdir_in(crate::state_parent()).unwrap();
    }
    let base = Path::new("/var/lib/autoforge-tests");
    std::fs::create_dir_all(base).unwrap();
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o755)).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// `autoforge demo` as an unprivileged user (as `nobody` when we are root).
fn run_demo(scratch: &Path, config_file: &Path, state: &Path) -> Output {
    let root = nix::unistd::geteuid().is_root();
    let mut command = if root {
        // `nobody` runs its own copy: the build's may be out of its reach.
        let binary = scratch.join("autoforge");
        std::fs::copy(env!("CARGO_BIN_EXE_autoforge"), &binary).unwrap();
        chown_tree(scratch, NOBODY);
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(&binary);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_autoforge"))
    };
    command
        .arg("demo")
        .arg("--config")
        .arg(config_file)
        .arg("--state-dir")
        .arg(state)
        .arg("--report")
        .arg(scratch.join("report.json"))
        .args(["--timeout", "300"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", scratch)
        .current_dir(scratch)
        .output()
        .expect("run autoforge demo")
}

/// The stdout logs of every launch under the state directory.
fn launch_logs(state: &Path) -> Vec<(PathBuf, String)> {
    let mut logs = Vec::new();
    let mut stack = vec![state.join("launches")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "output.log") {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                logs.push((path, text));
            }
        }
    }
    logs
}

/// Host processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(needle))
        .collect()
}

/// The two tests look for the same escaping process; one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A scratch directory with the agents, decoys and config, and the demo's
/// output after running it with `agents.sandbox = sandbox`.
fn hostile_demo(sandbox: &str) -> (tempfile::TempDir, PathBuf, Output) {
    let scratch = scratch_dir();
    let agents = scratch.path().join("agents");
    let state = scratch.path().join("state");
    install_agents(&agents);
    plant_decoys(&state);
    let config_file = scratch.path().join("hostile.toml");
    std::fs::write(&config_file, config(&agents, &state, sandbox)).unwrap();
    let output = run_demo(scratch.path(), &config_file, &state);
    (scratch, state, output)
}

#[test]
fn a_hostile_agent_reaches_nothing_of_the_controller_and_the_epic_still_finishes() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (scratch, state, output) = hostile_demo("bubblewrap");
    let transcript = format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{transcript}");

    // The agent's own record of every attempt.
    let hostile: Vec<(PathBuf, String)> = launch_logs(&state)
        .into_iter()
        .filter(|(_, text)| text.contains("ATTACK "))
        .collect();
    assert!(
        !hostile.is_empty(),
        "no hostile launch log found\n{transcript}"
    );
    for (path, text) in &hostile {
        let shown = format!("{}:\n{text}", path.display());
        for attack in ATTACKS {
            assert!(
                text.contains(&format!("ATTACK {attack} blocked")),
                "{attack} not blocked in {shown}"
            );
        }
        assert!(!text.contains("SUCCEEDED"), "{shown}");
        assert!(text.contains("ESCAPE started"), "{shown}");
        assert!(!text.contains("PRIVATE KEY"), "{shown}");
        if nix::unistd::geteuid().is_root() {
            // Running as nobody, the nested sandbox has to work.
            assert!(text.contains("NESTED ok"), "{shown}");
        }
    }

    // Nothing outlived its launch, and the demo stopped its Postgres.
    assert_eq!(processes_with(ESCAPEE), Vec::<String>::new());
    let scratch_path = scratch.path().display().to_string();
    assert_eq!(processes_with(&scratch_path), Vec::<String>::new());

    // Nothing the agent tried to write exists on the host.
    let mirror = state.join("repos/demo-operator/tinytext.git");
    for planted in [
        state.join("planted"),
        state.join("worktrees/demo-operator/tinytext/planted"),
        mirror.join("info/attributes"),
        mirror.join("hooks/post-checkout"),
        mirror.join("objects/info/alternates"),
    ] {
        assert!(!planted.exists(), "{} exists", planted.display());
    }
    let config = std::fs::read_to_string(mirror.join("config")).unwrap();
    assert!(
        !config.contains("hooksPath") && !config.contains("evil"),
        "{config}"
    );

    // The honest part still went through, with the demo's writes only.
    let report: Value =
        serde_json::from_slice(&std::fs::read(scratch.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["outcome"], "done", "{report:#}");
    assert_eq!(report["duplicates"], 0, "{report:#}");
    let effects = &report["effects"];
    assert_eq!(effects["create_pr"]["observed"], 3, "{report:#}");
    assert_eq!(effects["merge_pr"]["observed"], 3, "{report:#}");
    assert_eq!(effects["create_issue"]["observed"], 1, "{report:#}");
}

#[test]
fn without_the_sandbox_the_same_agent_reaches_the_controller() {
    // The control: the probes of the hostile agent can succeed, so their
    // failure above is the sandbox's doing.
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_scratch, state, output) = hostile_demo("off");
    // Without the PID namespace the escaped process outlives the launch
    // (`env -i` also hides it from the launch-tag sweep): end it here.
    for line in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = line.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(line.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(ESCAPEE) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let logs: String = launch_logs(&state)
        .into_iter()
        .map(|(_, text)| text)
        .filter(|text| text.contains("ATTACK "))
        .collect();
    let shown = format!("{logs}\n{}", String::from_utf8_lossy(&output.stderr));
    for attack in [
        "read_app_key",
        "read_demo_config",
        "list_other_mirror",
        "list_state_dir",
        "write_state_dir",
        "see_controller",
    ] {
        assert!(
            logs.contains(&format!("ATTACK {attack} SUCCEEDED")),
            "{attack} was blocked without a sandbox: {shown}"
        );
    }
}
