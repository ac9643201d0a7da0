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
