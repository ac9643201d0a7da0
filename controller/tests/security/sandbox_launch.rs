//! The bubblewrap sandbox around real agent launches: what a sandboxed
//! shell can see and change (its worktree yes; the state directory, the
//! mirror's config, hooks and info, the read context, host processes and —
//! with `network = "none"` — the network no), that its whole process tree
//! dies with the launch, and that a nested `bwrap` works inside it.
//!
//! Real bubblewrap, real git, real processes. A host where bubblewrap cannot
//! run fails these tests; they are never skipped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use autoforge::agents::profile::{LaunchProfile, ProfileSpec};
use autoforge::agents::supervisor::{LaunchExit, LaunchOutcome, LaunchSpec, launch};
use autoforge::machine::AgentPhase as Role;
use autoforge::redact::Redactor;
use autoforge::sandbox::{Network, Sandbox, SandboxMode, SandboxPolicy};
use autoforge::workspace::{Mirror, Workspaces, Worktree};
use tempfile::TempDir;

use crate::common::git::{Upstream, git};

struct World {
    _upstream: Upstream,
    state: TempDir,
    mirror: Mirror,
    mine: Worktree,
    other: Worktree,
    context: PathBuf,
}

/// A state directory laid out like the controller's: a mirror with two
/// issue worktrees, a key file, a config file, a read-context folder.
async fn world() -> World {
    let upstream = Upstream::new();
    let sha = upstream.commit("README.md", "hello\n", "first");
    // Not under /tmp, which is a private tmpfs inside the sandbox: like a
    // real state directory, this one sits below the read-only root.
    let state = tempfile::tempdir_in(crate::state_parent()).unwrap();
    let workspaces = Workspaces::open(state.path()).unwrap();
    let mirror = workspaces
        .mirror("octo", "widgets", &upstream.url())
        .await
        .unwrap();
    mirror
        .fetch_shas(std::slice::from_ref(&sha), None)
        .await
        .unwrap();
    let mine = Worktree::ensure(&mirror, autoforge_journal::testing::issue(1), &sha)
        .await
        .unwrap();
    let other = Worktree::ensure(&mirror, autoforge_journal::testing::issue(2), &sha)
        .await
        .unwrap();
    std::fs::write(state.path().join("app.pem"), "PRIVATE KEY CANARY\n").unwrap();
    std::fs::write(state.path().join("autoforge.toml"), "[github]\n").unwrap();
    let context = state.path().join("launches/1/context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::write(context.join("issue.md"), "the issue\n").unwrap();
    World {
        _upstream: upstream,
        state,
        mirror,
        mine,
        other,
        context,
    }
}

fn profile(script: &str, network: Network) -> LaunchProfile {
    LaunchProfile::from_spec(
        "sandboxed",
        ProfileSpec {
            command: vec!["bash".into(), "-c".into(), script.into()],
            idle_timeout_seconds: 60,
            max_runtime_seconds: 60,
            sandbox: SandboxPolicy {
                network,
                ..SandboxPolicy::default()
            },
            ..ProfileSpec::default()
        },
    )
    .unwrap()
}

async fn run_in(world: &World, profile: &LaunchProfile, role: Role) -> LaunchOutcome {
    let redactor = Redactor::new();
    let mut request = LaunchSpec::new(
        profile,
        role,
        "",
        world.mine.path(),
        world.state.path().join("launches/1/attempt-1"),
        &redactor,
    );
    request.read_context = Some(&world.context);
    request.kill_grace = Duration::from_millis(300);
    launch(request).await.unwrap()
}

/// `CHECK <name> <yes|no>` lines the probing script printed.
fn checks(outcome: &LaunchOutcome) -> BTreeMap<String, String> {
    outcome
        .stdout
        .head
        .lines()
        .filter_map(|line| {
            let mut parts = line.strip_prefix("CHECK ")?.split(' ');
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        })
        .collect()
}

/// A shell fragment printing `CHECK name yes` when `cmd` succeeds.
fn probe(name: &str, cmd: &str) -> String {
    format!(
        "if ( {cmd} ) >/dev/null 2>&1; then echo 'CHECK {name} yes'; else echo 'CHECK {name} no'; fi\n"
    )
}

#[tokio::test]
async fn a_sandboxed_agent_reaches_its_worktree_and_nothing_else_of_the_state_dir() {
    let w = world().await;
    let state = w.state.path().display().to_string();
    let mirror = w.mirror.path().display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut script = String::new();
    for (name, cmd) in [
        ("write_worktree", "echo change > feature.txt".to_owned()),
        (
            "commit",
            "git add feature.txt && git -c user.name=a -c user.email=a@x commit -qm feature"
                .to_owned(),
        ),
        ("read_key", format!("cat {state}/app.pem")),
        ("read_config", format!("cat {state}/autoforge.toml")),
        (
            "see_other_worktree",
            format!("ls {}", w.other.path().display()),
        ),
        ("see_other_admin", format!("ls {mirror}/worktrees/2")),
        ("write_mirror_config", format!("echo x >> {mirror}/config")),
        (
            "write_hook",
            format!("echo x > {mirror}/hooks/post-checkout"),
        ),
        (
            "plant_attributes",
            format!("echo '* filter=evil' > {mirror}/info/attributes"),
        ),
        (
            "plant_alternates",
            format!("echo /tmp > {mirror}/objects/info/alternates"),
        ),
        (
            "read_context",
            format!("cat {}/issue.md", w.context.display()),
        ),
        (
            "write_context",
            format!("echo x > {}/issue.md", w.context.display()),
        ),
        (
            "write_beside_worktree",
            format!("echo x > {}/../beside.txt", w.mine.path().display()),
        ),
        ("write_state_dir", format!("echo x > {state}/planted")),
        (
            "see_host_pid",
            format!("test -e /proc/{}", std::process::id()),
        ),
        (
            "connect_loopback",
            format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        ),
        ("write_home", "echo x > \"$HOME/h\"".to_owned()),
        ("write_tmpdir", "echo x > \"$TMPDIR/t\"".to_owned()),
    ] {
        script.push_str(&probe(name, &cmd));
    }
    script.push_str(&format!(
        "ls -A {state} | tr '\\n' ' ' | sed 's/^/STATE /'; echo\n"
    ));

    let before = w.mine.head().await.unwrap();
    let out = run_in(&w, &profile(&script, Network::None), Role::Implement).await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0), "{:?}", out.stderr);
    let seen = checks(&out);
    let expect_yes = [
        "write_worktree",
        "commit",
        "read_context",
        "write_home",
        "write_tmpdir",
    ];
    for (name, result) in &seen {
        let expected = if expect_yes.contains(&name.as_str()) {
            "yes"
        } else {
            "no"
        };
        assert_eq!(result, expected, "{name}: {}", out.stdout.head);
    }
    assert_eq!(seen.len(), 18, "{}", out.stdout.head);
    // Only the skeleton of directories leading to the bound paths exists.
    let listing = out
        .stdout
        .head
        .lines()
        .find_map(|l| l.strip_prefix("STATE "))
        .unwrap();
    assert!(!listing.contains("app.pem"), "{listing}");
    assert!(!listing.contains("autoforge.toml"), "{listing}");

    // The commit made inside is the worktree's HEAD outside.
    let after = w.mine.head().await.unwrap();
    assert_ne!(after, before);
    assert_eq!(git(w.mine.path(), &["log", "-1", "--format=%s"]), "feature");
    assert!(!w.state.path().join("planted").exists());
    assert!(!w.mirror.path().join("info/attributes").exists());
    assert!(!w.mirror.path().join("objects/info/alternates").exists());
    drop(listener);
}

#[tokio::test]
async fn a_shared_network_reaches_the_loopback_listener() {
    // The control for `connect_loopback` above: the probe can succeed.
    let w = world().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = probe("connect", &format!("exec 3<>/dev/tcp/127.0.0.1/{port}"));
    let out = run_in(&w, &profile(&script, Network::Shared), Role::Implement).await;
    assert_eq!(checks(&out)["connect"], "yes", "{:?}", out.stderr);
}

#[tokio::test]
async fn the_reviewer_cannot_write_its_worktree_or_commit() {
    let w = world().await;
    let before = w.mine.fingerprint().await.unwrap();
    let script = probe("edit", "echo x >> README.md")
        + &probe(
            "commit",
            "git -c user.name=a -c user.email=a@x commit -q --allow-empty -m x",
        )
        + &probe("read", "cat README.md");
    let out = run_in(&w, &profile(&script, Network::None), Role::Review).await;
    let seen = checks(&out);
    assert_eq!(seen["edit"], "no", "{}", out.stdout.head);
    assert_eq!(seen["commit"], "no", "{}", out.stdout.head);
    assert_eq!(seen["read"], "yes", "{}", out.stdout.head);
    assert_eq!(w.mine.fingerprint().await.unwrap(), before);
}

/// Host processes whose PID namespace is `ns` (as `readlink /proc/self/ns/pid`
/// prints it).
fn processes_in_namespace(ns: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                .is_ok_and(|link| link.to_string_lossy() == ns)
        })
        .collect()
}

async fn assert_namespace_empties(out: &LaunchOutcome) {
    let ns = out
        .stdout
        .head
        .lines()
        .find_map(|l| l.strip_prefix("PIDNS "))
        .expect("the agent printed its PID namespace")
        .to_owned();
    assert!(ns.starts_with("pid:["), "{ns}");
    let mut left = processes_in_namespace(&ns);
    for _ in 0..100 {
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = processes_in_namespace(&ns);
    }
    panic!("processes {left:?} of the launch's namespace outlived it");
}

/// Starts a grandchild that leaves the session and the environment behind
/// (so neither the group kill nor the launch tag reaches it) and ignores
/// SIGTERM, then does `rest`.
fn escaping(rest: &str) -> String {
    format!(
        "echo PIDNS $(readlink /proc/self/ns/pid)\n\
         setsid env -i sh -c 'trap \"\" TERM; exec sleep 1000' </dev/null >/dev/null 2>&1 &\n\
         sleep 0.2\n{rest}\n"
    )
}

#[tokio::test]
async fn an_escaped_grandchild_dies_when_the_agent_exits() {
    let w = world().await;
    let out = run_in(
        &w,
        &profile(&escaping("echo done"), Network::None),
        Role::Fix,
    )
    .await;
    assert_eq!(out.record.exit, LaunchExit::Exited(0), "{:?}", out.stderr);
    assert_namespace_empties(&out).await;
}

#[tokio::test]
async fn an_escaped_grandchild_dies_when_the_launch_times_out() {
    let w = world().await;
    let mut p = profile(
        &escaping("trap '' TERM; while :; do sleep 1; done"),
        Network::None,
    );
    p.max_runtime = Duration::from_secs(2);
    let out = run_in(&w, &p, Role::Fix).await;
    assert_eq!(out.record.exit, LaunchExit::WallTimeout);
    assert_namespace_empties(&out).await;
}

#[tokio::test]
async fn a_nested_bwrap_runs_inside_the_sandbox() {
    // What an agent CLI with a sandbox of its own (Codex) does. As root the
    // outer bwrap covers parts of /proc and the inner one may not mount a
    // fresh /proc, so the check runs as an unprivileged user there, which
    // is how the controller is meant to run anyway.
    let sandbox = Sandbox::new(SandboxPolicy {
        mode: SandboxMode::Bubblewrap,
        network: Network::None,
        ..SandboxPolicy::default()
    });
    let inner = [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "true",
    ];
    let mut argv: Vec<std::ffi::OsString> = Vec::new();
    if nix::unistd::geteuid().is_root() {
        argv.extend(["runuser", "-u", "nobody", "--"].map(Into::into));
    }
    argv.push("bwrap".into());
    argv.extend(sandbox.bwrap_args(Path::new("/")));
    argv.extend(inner.map(Into::into));
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nested bwrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_probe_succeeds_where_bubblewrap_works() {
    autoforge::sandbox::probe()
        .await
        .expect("bubblewrap works here");
}
