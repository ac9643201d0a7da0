//! The sandbox as the operator meets it: `autoforge config check` shows
//! every profile's mounts, and `autoforge demo` (like `serve`) refuses to
//! start on a host where bubblewrap cannot create its namespaces, naming
//! the fix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn autoforge(dir: &Path, path: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .current_dir(dir)
        .output()
        .expect("run autoforge")
}

#[test]
fn config_check_prints_each_profiles_mounts_and_network() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("autoforge.toml");
    std::fs::write(
        &file,
        "[agents.profiles.tool]\ncommand = [\"/opt/tool/bin/agent\"]\n\n\
         [agents.profiles.tool.sandbox]\nnetwork = \"none\"\nread_only = [\"/srv/toolchain\"]\n\
         read_write = [\"/var/cache/tool\"]\n",
    )
    .unwrap();
    let out = autoforge(
        dir.path(),
        "/usr/bin:/bin",
        &["config", "check", file.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for line in [
        "sandbox: bubblewrap; every launch sees:",
        "  read-only  /usr",
        "  proc       /proc (own PID namespace)",
        "profile tool (sandbox bubblewrap, network none), in addition:",
        "  read-write <worktree> (read-only for the reviewer)",
        "  read-only  /opt/tool/bin",
        "  read-only  /srv/toolchain",
        "  read-write /var/cache/tool",
        // Validation commands often fetch dependencies: shared by default.
        "validation commands (sandbox bubblewrap, network shared), in addition:",
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line:?} in\n{stdout}");
    }
    assert!(!stdout.contains("/etc/shadow"), "{stdout}");
}

#[test]
fn validation_commands_have_their_own_sandbox_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("autoforge.toml");
    std::fs::write(
        &file,
        "[agents.profiles.tool]\ncommand = [\"agent\"]\n\n\
         [validation.sandbox]\nnetwork = \"none\"\nread_only = [\"/srv/toolchain\"]\n",
    )
    .unwrap();
    let out = autoforge(
        dir.path(),
        "/usr/bin:/bin",
        &["config", "check", file.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let validation: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("validation commands"))
        .collect();
    assert_eq!(
        validation.first().copied(),
        Some("validation commands (sandbox bubblewrap, network none), in addition:"),
        "{stdout}"
    );
    assert!(
        validation.contains(&"  read-only  /srv/toolchain"),
        "{stdout}"
    );
}

#[test]
fn a_bind_that_would_show_the_state_directory_or_a_secret_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let key = dir.path().join("keys").join("app.pem");
    let file = dir.path().join("autoforge.toml");
    std::fs::write(
        &file,
        format!(
            "state_dir = \"{state}\"\n\n[agents.profiles.tool]\ncommand = [\"agent\"]\n\n\
             [agents.profiles.tool.sandbox]\nread_only = [\"{parent}\"]\n\n\
             [validation.sandbox]\nread_write = [\"{keys}\"]\n",
            state = state.display(),
            parent = dir.path().display(),
            keys = key.parent().unwrap().display(),
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autoforge"))
        .args(["config", "check", file.to_str().unwrap()])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("AUTOFORGE_GITHUB_PRIVATE_KEY_FILE", &key)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "agents.profiles.tool.sandbox.read_only",
        "would show the state directory",
        "would show the config file",
        "validation.sandbox.read_write",
        "would show the file of AUTOFORGE_GITHUB_PRIVATE_KEY_FILE",
    ] {
        assert!(stderr.contains(needle), "{needle:?} in\n{stderr}");
    }
}

#[test]
fn a_relative_sandbox_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("autoforge.toml");
    std::fs::write(
        &file,
        "[agents.profiles.tool]\ncommand = [\"agent\"]\n\n\
         [agents.profiles.tool.sandbox]\nread_write = [\"cache\"]\n",
    )
    .unwrap();
    let out = autoforge(
        dir.path(),
        "/usr/bin:/bin",
        &["config", "check", file.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("agents.profiles.tool.sandbox.read_write"),
        "{stderr}"
    );
}

#[test]
fn the_demo_refuses_to_start_where_bubblewrap_cannot_create_namespaces() {
    // A `bwrap` that fails the way it does without user namespaces, first
    // on PATH: the start-up probe has to notice and stop everything.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let out = autoforge(dir.path(), &path, &["demo", "--timeout", "120"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for part in [
        "setting up uid map: Permission denied",
        "install bubblewrap",
        "user namespaces",
        "agents.sandbox",
    ] {
        assert!(stderr.contains(part), "{part:?} in\n{stderr}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("agent   IMPLEMENT"), "{stdout}");
}
