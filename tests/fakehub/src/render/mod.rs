//! JSON renderings of fakehub objects in GitHub's documented shapes. Each
//! object has one function so every endpoint and webhook returns the same
//! complete shape.

mod app;
mod commit;
mod issue;
mod pull;
mod repo;
mod user;

pub use app::{
    check_pull_requests, render_app, render_check_run, render_delivery, render_installation,
    render_installation_hook,
};
pub use commit::{render_commit, render_file};
pub use issue::{
    association, render_comment, render_event, render_issue, render_label, render_reaction,
};
pub use pull::{approvals, mergeability, render_pull};
pub use repo::render_repo;
pub use user::{render_private_user, render_user};

use chrono::{DateTime, Utc};

use crate::world::World;

/// What renderers need besides the object itself.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// Base URL of this fakehub, without a trailing slash.
    pub base: &'a str,
    pub world: &'a World,
}

/// GitHub's timestamp format (`2011-04-10T20:09:31Z`).
pub fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A GitHub-style global node id: a type prefix and the database id.
pub fn node_id(prefix: &str, id: u64) -> String {
    use base64::Engine;
    format!(
        "{prefix}_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.to_be_bytes())
    )
}
