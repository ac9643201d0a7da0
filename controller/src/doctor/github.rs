//! The GitHub checks: the API answers our credentials; for an App, the
//! permissions and events it really holds cover what the code needs
//! ([`APP_PERMISSIONS`], [`APP_EVENTS`]), its webhook points at our webhook
//! path, and its recent deliveries arrived. Only reads, as the App itself.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Check;
use crate::config::{Config, GithubAuth};
use crate::github::HookDelivery;
use crate::github::permissions::{APP_EVENTS, APP_PERMISSIONS, PermissionLevel};
use crate::github::{GitHubAuth, GitHubClient};

/// How many of the newest deliveries are judged.
const RECENT_DELIVERIES: usize = 10;

#[derive(Debug, Deserialize)]
struct AppInfo {
    slug: Option<String>,
    #[serde(default)]
    permissions: BTreeMap<String, String>,
    #[serde(default)]
    events: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct HookConfig {
    #[serde(default)]
    url: Option<String>,
}

pub async fn checks(config: &Config) -> Vec<Check> {
    let api_url = &config.settings.github.api_url;
    let auth = match &config.github_auth {
        GithubAuth::App {
            app_id,
            private_key,
        } => GitHubAuth::App {
            app_id: *app_id,
            private_key_pem: private_key.clone(),
        },
        GithubAuth::Token(token) => GitHubAuth::Token(token.clone()),
        GithubAuth::None => {
            return vec![Check::fail(
                "github",
                "no GitHub credentials are configured",
                "set github.app_id and AUTOFORGE_GITHUB_PRIVATE_KEY_FILE (or AUTOFORGE_GITHUB_TOKEN)",
            )];
        }
    };
    let is_app = matches!(auth, GitHubAuth::App { .. });
    let client = match GitHubClient::new(api_url, auth) {
        Ok(client) => client,
        Err(error) => {
            return vec![Check::fail(
                "github",
                error.to_string(),
                "check github.api_url and the credentials",
            )];
        }
    };
    if is_app {
        app_checks(&client, config).await
    } else {
        token_checks(&client, api_url).await
    }
}

async fn token_checks(client: &GitHubClient, api_url: &str) -> Vec<Check> {
    let read = match client.installation(0) {
        Ok(api) => api.get_json::<serde_json::Value>("/user").await,
        Err(error) => Err(error),
    };
    match read {
        Ok(user) => vec![
            Check::ok(
                "github",
                format!(
                    "{api_url} answers as {}",
                    user["login"].as_str().unwrap_or("?")
                ),
            ),
            Check::skipped(
                "github:permissions",
                "a token has no App permissions to compare",
            ),
        ],
        Err(error) => vec![Check::fail(
            "github",
            format!("GET /user: {error}"),
            "check github.api_url and that the token is valid",
        )],
    }
}

async fn app_checks(client: &GitHubClient, config: &Config) -> Vec<Check> {
    let api_url = &config.settings.github.api_url;
    let api = match client.app() {
        Ok(api) => api,
        Err(error) => return vec![Check::fail("github", error.to_string(), "check the App id")],
    };
    let app: AppInfo = match api.get_json("/app").await {
        Ok(app) => app,
        Err(error) => {
            return vec![Check::fail(
                "github",
                format!("GET /app: {error}"),
                "check github.api_url, github.app_id and that the private key belongs to that App",
            )];
        }
    };
    let mut checks = vec![Check::ok(
        "github",
        format!(
            "{api_url} answers as the App `{}`",
            app.slug.as_deref().unwrap_or("?")
        ),
    )];
    checks.push(permissions_check(&app.permissions));
    checks.push(events_check(&app.events));
    checks.push(match api.get_json::<HookConfig>("/app/hook/config").await {
        Ok(hook) => webhook_check(hook.url.as_deref(), &config.settings.webhook.path, config),
        Err(error) => Check::fail(
            "github:webhook",
            format!("GET /app/hook/config: {error}"),
            "open the App's settings page and check its webhook",
        ),
    });
    checks.push(match api.hook_deliveries_since(None).await {
        Ok(deliveries) => deliveries_check(&deliveries),
        Err(error) => Check::fail(
            "github:deliveries",
            format!("GET /app/hook/deliveries: {error}"),
            "open the App's settings page, Advanced tab, for its recent deliveries",
        ),
    });
    checks
}

fn rank(level: &str) -> u8 {
    match level {
        "read" => 1,
        "write" => 2,
        "admin" => 3,
        _ => 0,
    }
}

/// Every permission the code needs, at least at the level it needs.
fn permissions_check(granted: &BTreeMap<String, String>) -> Check {
    let missing: Vec<String> = APP_PERMISSIONS
        .iter()
        .filter(|grant| {
            let held = granted.get(grant.permission).map_or(0, |l| rank(l));
            let wanted = match grant.access {
                PermissionLevel::Read => 1,
                PermissionLevel::Write => 2,
            };
            held < wanted
        })
        .map(|grant| {
            let held = granted.get(grant.permission).map_or("none", String::as_str);
            format!(
                "{} needs {} (has {held})",
                grant.title,
                grant.access.as_str()
            )
        })
        .collect();
    if missing.is_empty() {
        Check::ok(
            "github:permissions",
            format!(
                "the App holds all {} permissions the code uses",
                APP_PERMISSIONS.len()
            ),
        )
    } else {
        Check::fail(
            "github:permissions",
            missing.join("; "),
            "grant them on the App's settings page (Permissions & events), then accept them on each installation",
        )
    }
}

fn events_check(subscribed: &[String]) -> Check {
    let missing: Vec<&str> = APP_EVENTS
        .iter()
        .copied()
        .filter(|event| !subscribed.iter().any(|s| s == event))
        .collect();
    if missing.is_empty() {
        Check::ok(
            "github:events",
            format!("subscribed to {}", APP_EVENTS.join(", ")),
        )
    } else {
        Check::fail(
            "github:events",
            format!("not subscribed to {}", missing.join(", ")),
            "subscribe to them on the App's settings page (Permissions & events)",
        )
    }
}

fn webhook_check(url: Option<&str>, path: &str, config: &Config) -> Check {
    let url = url.unwrap_or_default();
    if url.is_empty() {
        return Check::fail(
            "github:webhook",
            "the App has no webhook URL",
            format!("set it to https://YOUR-HOST{path} on the App's settings page"),
        );
    }
    let Ok(parsed) = url.parse::<http::Uri>() else {
        return Check::fail(
            "github:webhook",
            format!("the webhook URL `{url}` is not a URL"),
            format!("set it to https://YOUR-HOST{path}"),
        );
    };
    if parsed.path() != path {
        return Check::fail(
            "github:webhook",
            format!("the webhook URL `{url}` does not end in {path}, where serve listens"),
            format!(
                "set its path to {path}, or webhook.path to `{}`",
                parsed.path()
            ),
        );
    }
    if config.webhook_secret.is_none() {
        return Check::fail(
            "github:webhook",
            format!("{url}, but no webhook secret is configured here"),
            "set AUTOFORGE_WEBHOOK_SECRET (or _FILE) to the App's webhook secret",
        );
    }
    Check::ok(
        "github:webhook",
        format!("{url}, webhook secret configured"),
    )
}

fn deliveries_check(deliveries: &[HookDelivery]) -> Check {
    let recent = &deliveries[..deliveries.len().min(RECENT_DELIVERIES)];
    if recent.is_empty() {
        return Check::ok("github:deliveries", "no delivery yet");
    }
    let failed: Vec<String> = recent
        .iter()
        // A delivery still under way has no status code yet.
        .filter(|d| d.status != "pending" && !(200..300).contains(&d.status_code))
        .map(|d| {
            format!(
                "{} {} at {}: {} {}",
                d.event, d.guid, d.delivered_at, d.status_code, d.status
            )
        })
        .collect();
    if failed.is_empty() {
        return Check::ok(
            "github:deliveries",
            format!("the last {} deliveries arrived", recent.len()),
        );
    }
    Check::fail(
        "github:deliveries",
        format!(
            "{} of the last {} deliveries failed: {}",
            failed.len(),
            recent.len(),
            failed.join("; ")
        ),
        "check that serve is reachable at the webhook URL and shares the webhook secret; \
         failed deliveries are redelivered by the poller",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_below_the_needed_level_is_named_with_what_the_app_has() {
        let mut granted: BTreeMap<String, String> = APP_PERMISSIONS
            .iter()
            .map(|g| (g.permission.to_owned(), g.access.as_str().to_owned()))
            .collect();
        assert_eq!(permissions_check(&granted).status, super::super::Status::Ok);
        granted.insert("pull_requests".into(), "read".into());
        granted.remove("checks");
        let check = permissions_check(&granted);
        assert_eq!(check.status, super::super::Status::Fail);
        assert!(
            check
                .detail
                .contains("Pull requests needs write (has read)"),
            "{}",
            check.detail
        );
        assert!(check.detail.contains("Checks needs write (has none)"));
    }
}
