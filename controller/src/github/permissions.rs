//! The GitHub App permissions and webhook events the controller needs, with
//! the endpoints that need each, read off the calls in this crate. The App
//! manifest (`deploy/github-app/manifest.json`) and the README's permission
//! table are checked against this table, and the table against every API
//! path the sources build, so none of the three can drift from the code.

/// How much of a permission the App asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionLevel {
    Read,
    Write,
}

impl PermissionLevel {
    /// The spelling of GitHub's manifest and installation permissions.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionLevel::Read => "read",
            PermissionLevel::Write => "write",
        }
    }
}

/// One App permission and what the controller does with it.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    /// GitHub's key (`pull_requests`), as in a manifest.
    pub permission: &'static str,
    /// GitHub's name for it on the App settings page.
    pub title: &'static str,
    pub access: PermissionLevel,
    /// What it is used for, for the README.
    pub purpose: &'static str,
    /// The calls that need it: `METHOD /path/{param}` (`{*param}` spans
    /// segments), or `git …` for smart-HTTP git.
    pub endpoints: &'static [&'static str],
}

/// Every permission the App asks for, in GitHub's settings-page order.
pub const APP_PERMISSIONS: &[Grant] = &[
    Grant {
        permission: "checks",
        title: "Checks",
        access: PermissionLevel::Write,
        purpose: "the merge gate reads the check runs of a PR head; the run shows itself in the `autoforge` check run",
        endpoints: &[
            "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
            "POST /repos/{owner}/{repo}/check-runs",
            "PATCH /repos/{owner}/{repo}/check-runs/{id}",
        ],
    },
    Grant {
        permission: "contents",
        title: "Contents",
        access: PermissionLevel::Write,
        purpose: "push the issue branch, merge the PR, read refs, files and comparisons",
        endpoints: &[
            "git push over HTTPS",
            "PUT /repos/{owner}/{repo}/pulls/{number}/merge",
            "GET /repos/{owner}/{repo}/git/ref/{*ref}",
            "GET /repos/{owner}/{repo}/contents/{*path}",
            "GET /repos/{owner}/{repo}/compare/{basehead}",
        ],
    },
    Grant {
        permission: "issues",
        title: "Issues",
        access: PermissionLevel::Write,
        purpose: "read issues, their events and sub-issues; comment, label, react, open follow-up issues",
        endpoints: &[
            "GET POST /repos/{owner}/{repo}/issues",
            "GET PATCH /repos/{owner}/{repo}/issues/{number}",
            "GET POST /repos/{owner}/{repo}/issues/{number}/comments",
            "GET PATCH /repos/{owner}/{repo}/issues/comments/{id}",
            "GET POST /repos/{owner}/{repo}/issues/comments/{id}/reactions",
            "GET /repos/{owner}/{repo}/issues/{number}/events",
            "GET /repos/{owner}/{repo}/issues/{number}/sub_issues",
            "GET /repos/{owner}/{repo}/issues/{number}/parent",
            "POST /repos/{owner}/{repo}/issues/{number}/labels",
            "DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}",
        ],
    },
    Grant {
        permission: "metadata",
        title: "Metadata",
        access: PermissionLevel::Read,
        purpose: "read repositories and a person's permission on one (the operator check)",
        endpoints: &[
            "GET /repos/{owner}/{repo}",
            "GET /repos/{owner}/{repo}/collaborators/{login}/permission",
            "GET /repos/{owner}/{repo}/rules/branches/{branch}",
            "GET /installation/repositories",
        ],
    },
    Grant {
        permission: "pull_requests",
        title: "Pull requests",
        access: PermissionLevel::Write,
        purpose: "open, edit and merge the run's PR; read PRs, their files, reviews and review comments; post each review round's inline review",
        endpoints: &[
            "GET POST /repos/{owner}/{repo}/pulls",
            "GET PATCH /repos/{owner}/{repo}/pulls/{number}",
            "GET /repos/{owner}/{repo}/pulls/{number}/files",
            "GET POST /repos/{owner}/{repo}/pulls/{number}/reviews",
            "GET /repos/{owner}/{repo}/pulls/{number}/reviews/{id}",
            "GET /repos/{owner}/{repo}/pulls/{number}/reviews/{id}/comments",
        ],
    },
    Grant {
        permission: "statuses",
        title: "Commit statuses",
        access: PermissionLevel::Read,
        purpose: "the merge gate reads the combined commit status of a PR head",
        endpoints: &["GET /repos/{owner}/{repo}/commits/{ref}/status"],
    },
];

/// Calls made as the App itself (its JWT) or, with a token, as the token's
/// user: they need no installation permission.
pub const WITHOUT_PERMISSION: &[&str] = &[
    "GET /app",
    "GET /app/installations",
    "POST /app/installations/{id}/access_tokens",
    "GET /app/hook/config",
    "GET /app/hook/deliveries",
    "POST /app/hook/deliveries/{id}/attempts",
    "GET /user",
];

/// The webhook events the App subscribes to; installation events arrive
/// without a subscription.
pub const APP_EVENTS: &[&str] = &[
    "check_run",
    "check_suite",
    "issue_comment",
    "issues",
    "pull_request",
    "pull_request_review",
    "status",
];

/// The README's permission section as it must read: a table of
/// [`APP_PERMISSIONS`] and the [`APP_EVENTS`] line.
pub fn readme_section() -> String {
    let mut text = String::from("| Permission | Access | Used to |\n|---|---|---|\n");
    for grant in APP_PERMISSIONS {
        let access = match grant.access {
            PermissionLevel::Read => "read",
            PermissionLevel::Write => "read & write",
        };
        text.push_str(&format!(
            "| {} | {access} | {} |\n",
            grant.title, grant.purpose
        ));
    }
    let events: Vec<String> = APP_EVENTS.iter().map(|e| format!("`{e}`")).collect();
    text.push_str(&format!("\nEvents: {}.\n", events.join(", ")));
    text
}
