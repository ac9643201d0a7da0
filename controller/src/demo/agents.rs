//! The scripted demo agents: POSIX `sh` programs embedded in the binary,
//! written into the state directory at start and wired as agent profiles.
//!
//! They make real commits in the run's worktree and answer with real
//! CONTROL_RESULT blocks, so the demo exercises the same launch, parse,
//! validation and publish path a coding-agent CLI would. Which issue gets
//! the review findings and which issues form the EPIC are passed as
//! arguments, because the agents' environment is cleared by the supervisor.
//! They run in the sandbox without network, like the demo's validation.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// `(file name, contents)` of every script, from `controller/demo-agents/`.
const SCRIPTS: [(&str, &str); 5] = [
    ("common.sh", include_str!("../../demo-agents/common.sh")),
    (
        "implement.sh",
        include_str!("../../demo-agents/implement.sh"),
    ),
    ("review.sh", include_str!("../../demo-agents/review.sh")),
    ("fix.sh", include_str!("../../demo-agents/fix.sh")),
    (
        "update_epic.sh",
        include_str!("../../demo-agents/update_epic.sh"),
    ),
];

/// Seconds a scripted agent may stay silent or run; they finish in well
/// under a second, so hitting these means a defect, not a slow machine.
const IDLE_TIMEOUT_SECONDS: i64 = 60;
const MAX_RUNTIME_SECONDS: i64 = 120;

/// The installed scripts.
#[derive(Debug, Clone)]
pub struct DemoAgents {
    dir: PathBuf,
}

impl DemoAgents {
    /// Writes every script into `dir` (created if missing) and makes the
    /// agents executable. Existing files are replaced, so a kept state
    /// directory always runs this binary's agents.
    pub fn install(dir: &Path) -> anyhow::Result<DemoAgents> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, text) in SCRIPTS {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
        Ok(DemoAgents {
            dir: dir.to_path_buf(),
        })
    }

    /// Path of one installed script.
    pub fn script(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The `[agents]` table: one profile per phase and the roles naming
    /// them. Each of `reviewed_issues` gets the findings in its first
    /// review round; `children` are the EPIC's issues in order.
    pub fn agents_table(&self, reviewed_issues: &[u64], children: &[u64]) -> toml::Table {
        let mut profiles = toml::Table::new();
        let mut add = |name: &str, script: &str, args: Vec<String>| {
            let mut command = vec![toml::Value::String(
                self.script(script).display().to_string(),
            )];
            command.extend(args.into_iter().map(toml::Value::String));
            let mut profile = toml::Table::new();
            profile.insert("command".into(), toml::Value::Array(command));
            profile.insert(
                "idle_timeout_seconds".into(),
                toml::Value::Integer(IDLE_TIMEOUT_SECONDS),
            );
            profile.insert(
                "max_runtime_seconds".into(),
                toml::Value::Integer(MAX_RUNTIME_SECONDS),
            );
            // They need no network; their directory is bound read-only
            // because it holds their program.
            let mut sandbox = toml::Table::new();
            sandbox.insert("network".into(), toml::Value::String("none".into()));
            profile.insert("sandbox".into(), toml::Value::Table(sandbox));
            profiles.insert(name.into(), toml::Value::Table(profile));
        };
        add("demo-implement", "implement.sh", Vec::new());
        add(
            "demo-review",
            "review.sh",
            reviewed_issues.iter().map(ToString::to_string).collect(),
        );
        add("demo-fix", "fix.sh", Vec::new());
        add(
            "demo-update-epic",
            "update_epic.sh",
            children.iter().map(ToString::to_string).collect(),
        );
        let mut roles = toml::Table::new();
        for (role, profile) in [
            ("implement", "demo-implement"),
            ("review", "demo-review"),
            ("fix", "demo-fix"),
            ("update_epic", "demo-update-epic"),
        ] {
            roles.insert(role.into(), toml::Value::String(profile.into()));
        }
        let mut agents = toml::Table::new();
        agents.insert("profiles".into(), toml::Value::Table(profiles));
        agents.insert("roles".into(), toml::Value::Table(roles));
        agents
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
