//! Users and bots (`simple-user`, `private-user`).

use serde_json::{Value, json};

use super::{Ctx, node_id, ts};
use crate::world::{User, UserKind};

pub fn render_user(ctx: Ctx<'_>, user: &User) -> Value {
    let base = ctx.base;
    let login = &user.login;
    let u = format!("{base}/users/{login}");
    json!({
        "login": login,
        "id": user.id,
        "node_id": node_id(if user.kind == UserKind::Bot { "BOT" } else { "U" }, user.id),
        "avatar_url": format!("{base}/avatars/{}", user.id),
        "gravatar_id": "",
        "url": u,
        "html_url": format!("{base}/{login}"),
        "followers_url": format!("{u}/followers"),
        "following_url": format!("{u}/following{{/other_user}}"),
        "gists_url": format!("{u}/gists{{/gist_id}}"),
        "starred_url": format!("{u}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{u}/subscriptions"),
        "organizations_url": format!("{u}/orgs"),
        "repos_url": format!("{u}/repos"),
        "events_url": format!("{u}/events{{/privacy}}"),
        "received_events_url": format!("{u}/received_events"),
        "type": user.kind.as_str(),
        "user_view_type": "public",
        "site_admin": false,
    })
}

/// `GET /user`: the simple user plus the private profile fields.
pub fn render_private_user(ctx: Ctx<'_>, user: &User) -> Value {
    let mut v = render_user(ctx, user);
    let owned = ctx
        .world
        .repos
        .values()
        .filter(|r| r.owner_id == user.id)
        .count();
    let extra = json!({
        "name": user.login,
        "company": null,
        "blog": "",
        "location": null,
        "email": null,
        "hireable": null,
        "bio": null,
        "twitter_username": null,
        "public_repos": ctx.world.repos.values().filter(|r| r.owner_id == user.id && !r.private).count(),
        "public_gists": 0,
        "followers": 0,
        "following": 0,
        "created_at": ts(user.created_at),
        "updated_at": ts(user.created_at),
        "private_gists": 0,
        "total_private_repos": owned,
        "owned_private_repos": owned,
        "disk_usage": 0,
        "collaborators": 0,
        "two_factor_authentication": false,
        "plan": {"name": "free", "space": 976562499, "private_repos": 10000, "collaborators": 0},
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}
