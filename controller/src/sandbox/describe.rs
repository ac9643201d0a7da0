//! What `autoforge config check` shows of the sandbox: the mounts a launch
//! of each profile and a validation command would get, with the per-launch
//! paths as placeholders.

use std::path::Path;

use super::{Access, Mount, Sandbox, SandboxMode, SandboxPolicy};

/// The view of a launch under `policy` for display (`config check`): the
/// fixed mounts, then the per-launch ones as placeholders, then the
/// directory of `program` when it is an absolute path, then the policy's
/// binds. The supervisor builds the real list in `agents::supervisor::view`.
pub fn describe_launch(policy: &SandboxPolicy, program: &str) -> Vec<String> {
    let placeholders = [
        ("<launch dir>", Access::ReadOnly),
        ("<launch dir>/home (HOME)", Access::ReadWrite),
        ("<launch dir>/tmp (TMPDIR)", Access::ReadWrite),
        ("<worktree> (read-only for the reviewer)", Access::ReadWrite),
        (
            "<mirror> (config, hooks, info, refs; worktrees/ emptied)",
            Access::ReadOnly,
        ),
        (
            "<mirror>/worktrees/<issue> and <mirror>/objects (not objects/info)",
            Access::ReadWrite,
        ),
        ("<read-context folder>", Access::ReadOnly),
    ];
    describe_with(policy, &placeholders, program)
}

/// The view of a validation command under `policy` for display.
pub fn describe_validation(policy: &SandboxPolicy) -> Vec<String> {
    let placeholders = [(
        "<export of the candidate commit> (HOME=TMPDIR=/tmp)",
        Access::ReadWrite,
    )];
    describe_with(policy, &placeholders, "")
}

fn describe_with(
    policy: &SandboxPolicy,
    placeholders: &[(&str, Access)],
    program: &str,
) -> Vec<String> {
    let mut sandbox = Sandbox::new(policy.clone());
    if policy.mode == SandboxMode::Off {
        return vec!["no sandbox: everything the controller's user can reach".to_owned()];
    }
    sandbox.extend(
        placeholders
            .iter()
            .map(|(path, access)| Mount::bind(Path::new(path), *access)),
    );
    let program = Path::new(program);
    if program.is_absolute()
        && let Some(dir) = program.parent()
        && !["/usr", "/bin", "/sbin", "/lib"]
            .iter()
            .any(|r| dir.starts_with(r))
    {
        sandbox.push(Mount::bind(dir, Access::ReadOnly));
    }
    sandbox.add_policy_binds();
    sandbox.describe()
}
