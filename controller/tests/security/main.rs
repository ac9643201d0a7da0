//! What stands between an agent and the controller's secrets: git's token
//! kept out of every environment and argv, the pinned mirror, narrowed
//! installation tokens, the managed Postgres behind a password, and the
//! bubblewrap sandbox every agent and validation command runs in (with a
//! hostile agent on the real binary).

#[path = "../common/mod.rs"]
mod common;

mod creds_git;
mod creds_managed_db;
mod creds_tokens;
mod sandbox_config;
mod sandbox_hostile;
mod sandbox_launch;

/// Where a test puts a state directory an agent must not reach: the build's
/// scratch folder, unless that lies under `/tmp` (a clone checked out
/// there), which inside the sandbox is a private tmpfs — the agent would
/// write into its own empty `/tmp` and the test would prove nothing. Then
/// `/var/tmp`, which the sandbox does not show at all, like a real state
/// directory below the read-only root.
fn state_parent() -> &'static std::path::Path {
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    if scratch.starts_with("/tmp") {
        std::path::Path::new("/var/tmp")
    } else {
        scratch
    }
}
