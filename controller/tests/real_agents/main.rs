//! The real coding-agent CLIs (Claude Code, Codex CLI, OpenCode) through
//! the whole loop on the real `autoforge serve`, with fakehub as GitHub and
//! the scripted model server as every vendor's model API. The profiles are
//! the ones `autoforge.example.toml` ships; every launch runs in the agent
//! sandbox. Run them alone with `cargo test -p autoforge --test
//! real_agents`.

#[path = "../common/mod.rs"]
mod common;

mod profiles;
mod real_agent_budget;
mod real_agent_cycle;
mod real_agent_faults;
mod real_agent_read_only;
mod scripts;
