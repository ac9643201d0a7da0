//! The managed Postgres as the real binary uses it: `autoforge migrate`
//! with no database configured creates a private state directory, a 0600
//! password only the controller can read, a cluster that refuses the
//! passwordless socket connections an earlier version allowed — and never
//! prints that password, even at the most verbose log level.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_autoforge");

fn migrate(state_dir: &Path) -> Output {
    Command::new(BIN)
        .args(["--state-dir"])
        .arg(state_dir)
        .arg("migrate")
        .env_clear()
        .env("HOME", state_dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "trace")
        .output()
        .expect("run autoforge migrate")
}

#[tokio::test]
async fn migrate_keeps_the_managed_password_private_and_never_prints_it() {
    let scratch = tempfile::Builder::new()
        .prefix("af-creds-db")
        .tempdir_in("/tmp")
        .expect("tempdir");
    // Readable by everyone, as an operator's umask could have made it.
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let state = scratch.path().join("state");

    let output = migrate(&state);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");

    let file = state.join("postgres").join("password");
    let meta = std::fs::metadata(&file).expect("the password file");
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), nix::unistd::Uid::effective().as_raw());
    let password = std::fs::read_to_string(&file).expect("read the password");
    let password = password.trim();
    assert!(
        password.len() >= 32,
        "a weak password: {} chars",
        password.len()
    );
    assert!(!stdout.contains(password), "stdout shows the password");
    assert!(!stderr.contains(password), "stderr shows the password");
    let log =
        std::fs::read_to_string(state.join("postgres").join("server.log")).unwrap_or_default();
    assert!(!log.contains(password), "the server log shows the password");

    let mode = std::fs::metadata(&state).expect("state dir").mode() & 0o777;
    assert!(mode == 0o700 || mode == 0o710, "state dir is {mode:o}");
    let hba = std::fs::read_to_string(state.join("postgres/data/pg_hba.conf")).expect("hba");
    assert!(!hba.contains("trust"), "{hba}");

    // A second start reads the same password and succeeds.
    let again = migrate(&state);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let after = std::fs::read_to_string(&file).expect("read the password");
    assert_eq!(after.trim(), password);
}
