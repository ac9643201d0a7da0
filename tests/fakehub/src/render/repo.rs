//! Repositories (`full-repository`, which also satisfies `repository` and
//! `minimal-repository`).

use serde_json::{Map, Value, json};

use super::{Ctx, node_id, render_user, ts};
use crate::world::{Repo, UserKind};

/// `*_url` fields and the path GitHub gives each (relative to the repo URL).
const URL_FIELDS: &[(&str, &str)] = &[
    ("forks_url", "/forks"),
    ("keys_url", "/keys{/key_id}"),
    ("collaborators_url", "/collaborators{/collaborator}"),
    ("teams_url", "/teams"),
    ("hooks_url", "/hooks"),
    ("issue_events_url", "/issues/events{/number}"),
    ("events_url", "/events"),
    ("assignees_url", "/assignees{/user}"),
    ("branches_url", "/branches{/branch}"),
    ("tags_url", "/tags"),
    ("blobs_url", "/git/blobs{/sha}"),
    ("git_tags_url", "/git/tags{/sha}"),
    ("git_refs_url", "/git/refs{/sha}"),
    ("trees_url", "/git/trees{/sha}"),
    ("statuses_url", "/statuses/{sha}"),
    ("languages_url", "/languages"),
    ("stargazers_url", "/stargazers"),
    ("contributors_url", "/contributors"),
    ("subscribers_url", "/subscribers"),
    ("subscription_url", "/subscription"),
    ("commits_url", "/commits{/sha}"),
    ("git_commits_url", "/git/commits{/sha}"),
    ("comments_url", "/comments{/number}"),
    ("issue_comment_url", "/issues/comments{/number}"),
    ("contents_url", "/contents/{+path}"),
    ("compare_url", "/compare/{base}...{head}"),
    ("merges_url", "/merges"),
    ("archive_url", "/{archive_format}{/ref}"),
    ("downloads_url", "/downloads"),
    ("issues_url", "/issues{/number}"),
    ("pulls_url", "/pulls{/number}"),
    ("milestones_url", "/milestones{/number}"),
    (
        "notifications_url",
        "/notifications{?since,all,participating}",
    ),
    ("labels_url", "/labels{/name}"),
    ("releases_url", "/releases{/id}"),
    ("deployments_url", "/deployments"),
];

pub fn render_repo(ctx: Ctx<'_>, repo: &Repo) -> Value {
    let base = ctx.base;
    let owner = ctx.world.users.get(&repo.owner_id);
    let owner_login = owner.map(|o| o.login.as_str()).unwrap_or("ghost");
    let full_name = format!("{owner_login}/{}", repo.name);
    let api = format!("{base}/repos/{full_name}");
    let open = repo.issues.values().filter(|i| i.state_open).count();
    let mut m = Map::new();
    for (field, suffix) in URL_FIELDS {
        m.insert(
            (*field).to_string(),
            Value::String(format!("{api}{suffix}")),
        );
    }
    let rest = json!({
        "id": repo.id,
        "node_id": node_id("R", repo.id),
        "name": repo.name,
        "full_name": full_name,
        "private": repo.private,
        "owner": owner.map(|o| render_user(ctx, o)).unwrap_or(Value::Null),
        "html_url": format!("{base}/{full_name}"),
        "description": null,
        "fork": false,
        "url": api,
        "created_at": ts(repo.created_at),
        "updated_at": ts(repo.pushed_at),
        "pushed_at": ts(repo.pushed_at),
        "git_url": format!("{base}/{full_name}.git"),
        "ssh_url": format!("{base}/{full_name}.git"),
        "clone_url": format!("{base}/{full_name}.git"),
        "svn_url": format!("{base}/{full_name}"),
        "homepage": null,
        "mirror_url": null,
        "size": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "language": null,
        "has_issues": true,
        "has_projects": false,
        "has_downloads": true,
        "has_wiki": false,
        "has_pages": false,
        "has_discussions": false,
        "forks_count": 0,
        "archived": false,
        "disabled": false,
        "open_issues_count": open,
        "license": null,
        "allow_forking": true,
        "is_template": false,
        "web_commit_signoff_required": false,
        "topics": [],
        "visibility": if repo.private { "private" } else { "public" },
        "forks": 0,
        "open_issues": open,
        "watchers": 0,
        "default_branch": repo.default_branch,
        "network_count": 0,
        "custom_properties": {},
        "subscribers_count": 0,
        "allow_squash_merge": repo.settings.allow_squash_merge,
        "allow_merge_commit": repo.settings.allow_merge_commit,
        "allow_rebase_merge": repo.settings.allow_rebase_merge,
        "allow_auto_merge": repo.settings.allow_auto_merge,
        "delete_branch_on_merge": repo.settings.delete_branch_on_merge,
        "allow_update_branch": repo.settings.allow_update_branch,
        "use_squash_pr_title_as_default": repo.settings.use_squash_pr_title_as_default,
    });
    if let Value::Object(r) = rest {
        m.extend(r);
    }
    // GitHub names the organisation only for a repository one owns.
    if let Some(org) = owner.filter(|o| o.kind == UserKind::Organization) {
        m.insert("organization".into(), render_user(ctx, org));
    }
    Value::Object(m)
}
