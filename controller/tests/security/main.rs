//! What stands between an agent and the controller's secrets: git's token
//! kept out of every environment and argv, the pinned mirror, narrowed
//! installation tokens, and the managed Postgres behind a password.

#[path = "../common/mod.rs"]
mod common;

mod creds_git;
mod creds_managed_db;
mod creds_tokens;
