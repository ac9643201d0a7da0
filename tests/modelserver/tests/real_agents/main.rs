//! The real coding-agent CLIs (Claude Code, Codex CLI, OpenCode, at the
//! versions `scripts/install-agent-clis.sh` pins) driven against the
//! modelserver, outside autoforge: each writes a file and commits with its
//! own tools and reports the real HEAD; each read-only setup refuses a
//! write the model asks for; the usage each reports equals what the server
//! claimed; nothing is left in /tmp. Run them alone with
//! `cargo test -p modelserver --test real_agents -- real_agent`.

mod claude;
mod codex;
mod harness;
mod opencode;
