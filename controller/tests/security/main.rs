//! What stands between an agent and the controller's secrets: git's token
//! kept out of every environment and argv, the pinned mirror, narrowed
//! installation tokens, the managed Postgres behind a password, and the
//! bubblewrap sandbox every agent and validation command runs in (with a
//! hostile agent on the real binary); and the scan of every byte the chaos
//! workload and the demo write for their secrets (`secret_scan`).

#[path = "../common/mod.rs"]
mod common;

mod creds_git;
mod creds_managed_db;
mod creds_tokens;
mod hostile_commands;
mod hostile_edits;
mod sandbox_config;
mod sandbox_hostile;
mod sandbox_launch;
mod secret_scan;

/// Where a test puts a state directory an agent must not reach: the build's
/// scratch folder, unless that lies under `/tmp` or `/var/tmp` (a clone
/// checked out there), which inside the sandbox are private tmpfs mounts —
/// the agent would write into its own empty copy and the test would prove
/// nothing. Then a folder below the read-only root, like a real state
/// directory: `/var/lib/autoforge-tests` as root, else under `$HOME`.
fn state_parent() -> std::path::PathBuf {
    let scratch = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if !scratch.starts_with("/tmp") && !scratch.starts_with("/var/tmp") {
        return scratch;
    }
    let parent = if nix::unistd::geteuid().is_root() {
        std::path::PathBuf::from("/var/lib/autoforge-tests")
    } else {
        let home = std::env::var_os("HOME").expect("HOME is set");
        std::path::Path::new(&home).join(".cache/autoforge-tests")
    };
    std::fs::create_dir_all(&parent).expect("create the tests' state parent");
    parent
}
