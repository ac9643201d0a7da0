//! The shipped profiles, loaded from `autoforge.example.toml` and pointed
//! at the model server: the only changes are the base URL (an `env` entry
//! for Claude Code, the provider's URL in Codex's argv and in OpenCode's
//! config), and where the pinned CLIs are installed (on `PATH` and bound
//! read-only into the sandbox). The vendor keys reach serve's environment
//! and, through each profile's `env_inherit`, the agent.

use std::path::{Path, PathBuf};

use modelserver::clis::{self, AgentCli};
use toml::{Table, Value};

/// The base URLs the example's Codex and OpenCode profiles name.
const OPENAI_URL: &str = "https://api.openai.com/v1";
const OPENROUTER_URL: &str = "https://openrouter.ai/api/v1";
pub const ANTHROPIC_KEY: &str = "sk-ant-modelserver-test";
pub const OPENAI_KEY: &str = "sk-openai-modelserver-test";
pub const OPENROUTER_KEY: &str = "sk-or-modelserver-test";

/// The installed CLIs, or `None` when the test is skipped.
pub struct Installed {
    /// The cache's `bin/` (links to each CLI).
    pub bin: PathBuf,
    /// The cache itself, which the links point into.
    pub cache: PathBuf,
}

/// Finds (installing when needed) the three CLIs.
pub fn installed() -> Option<Installed> {
    let mut bin = None;
    for cli in [AgentCli::ClaudeCode, AgentCli::Codex, AgentCli::OpenCode] {
        let path = clis::require(cli)?;
        bin = path.parent().map(Path::to_path_buf);
    }
    let bin = bin.expect("a CLI path has a directory");
    let cache = clis::cache_dir().expect("the CLI cache");
    Some(Installed { bin, cache })
}

/// The `[agents]` section of the example (profiles and roles), as TOML
/// text, with every profile aimed at `base` (the model server's
/// `http://127.0.0.1:PORT`).
pub fn example_agents(base: &str, installed: &Installed) -> String {
    example_agents_routed(base, installed, None)
}

/// [`example_agents`] with the example's roles replaced by `roles`
/// (`role = "profile"` lines), to put one CLI in a chosen seat.
pub fn example_agents_routed(base: &str, installed: &Installed, roles: Option<&str>) -> String {
    example_agents_tweaked(base, installed, roles, |_, _| {})
}

/// [`example_agents_routed`], with `tweak` applied to each profile table
/// after it was aimed (a test's shorter idle timeout, say).
pub fn example_agents_tweaked(
    base: &str,
    installed: &Installed,
    roles: Option<&str>,
    tweak: impl Fn(&str, &mut Table),
) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../autoforge.example.toml");
    let text = std::fs::read_to_string(&example).expect("the example config");
    let doc: Table = text.parse().expect("the example is TOML");
    let mut agents = doc["agents"].as_table().expect("[agents]").clone();
    let profiles = agents
        .get_mut("profiles")
        .and_then(Value::as_table_mut)
        .expect("[agents.profiles]");
    for (name, profile) in profiles.iter_mut() {
        let profile = profile.as_table_mut().expect("a profile table");
        aim(name, profile, base);
        tweak(name, profile);
        let sandbox = profile
            .entry("sandbox")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .expect("a sandbox table");
        let cache = installed.cache.display().to_string();
        sandbox.insert("read_only".into(), Value::Array(vec![Value::String(cache)]));
    }
    if let Some(roles) = roles {
        let routed: Table = roles.parse().expect("roles are TOML");
        agents.insert("roles".into(), Value::Table(routed));
    }
    let mut out = Table::new();
    out.insert("agents".into(), Value::Table(agents));
    toml::to_string(&out).expect("TOML")
}

/// Points one profile at the model server.
fn aim(name: &str, profile: &mut Table, base: &str) {
    let openai = format!("{base}/v1");
    if name.starts_with("claude") {
        let env = profile
            .entry("env")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .expect("an env table");
        env.insert("ANTHROPIC_BASE_URL".into(), Value::String(base.to_owned()));
    } else if name.starts_with("codex") {
        let command = profile["command"].as_array_mut().expect("a command");
        let mut aimed = false;
        for arg in command.iter_mut() {
            let text = arg.as_str().expect("an argument").to_owned();
            if text.contains(OPENAI_URL) {
                *arg = Value::String(text.replace(OPENAI_URL, &openai));
                aimed = true;
            }
        }
        assert!(aimed, "profile {name} names {OPENAI_URL} in its argv");
    } else if name.starts_with("opencode") {
        let env = profile["env"].as_table_mut().expect("an env table");
        let config = env["OPENCODE_CONFIG_CONTENT"]
            .as_str()
            .expect("OpenCode's config")
            .to_owned();
        assert!(
            config.contains(OPENROUTER_URL),
            "profile {name} names {OPENROUTER_URL}"
        );
        env.insert(
            "OPENCODE_CONFIG_CONTENT".into(),
            Value::String(config.replace(OPENROUTER_URL, &openai)),
        );
    } else {
        panic!("an example profile this test does not know: {name}");
    }
}

/// serve's `PATH`: the CLIs' links first.
pub fn path_with(installed: &Installed) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", installed.bin.display())
}
