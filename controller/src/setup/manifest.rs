//! The App manifest `setup` posts to GitHub, built from
//! [`crate::github::permissions`] so that the App asks for exactly what the
//! code calls and handles (`deploy/github-app/manifest.json` is the same
//! document with placeholders, held to it by a test).

use serde_json::{Map, Value, json};

use crate::github::permissions::{APP_EVENTS, APP_PERMISSIONS};

/// `default_permissions`: each permission the code needs, at its level.
pub fn default_permissions() -> Map<String, Value> {
    APP_PERMISSIONS
        .iter()
        .map(|grant| {
            (
                grant.permission.to_owned(),
                Value::from(grant.access.as_str()),
            )
        })
        .collect()
}

/// `default_events`: each webhook event the code handles.
pub fn default_events() -> Vec<Value> {
    APP_EVENTS.iter().map(|event| Value::from(*event)).collect()
}

/// The manifest for an App called `name` whose homepage is `homepage`,
/// sending webhooks to `webhook_url` (none: the App starts without an
/// active webhook), and returning to `redirect_url` once created.
pub fn app_manifest(
    name: &str,
    homepage: &str,
    webhook_url: Option<&str>,
    redirect_url: &str,
) -> Value {
    let mut manifest = json!({
        "name": name,
        "url": homepage,
        "description": "Turns a labelled issue into a reviewed pull request.",
        "redirect_url": redirect_url,
        "public": false,
        "default_permissions": default_permissions(),
        "default_events": default_events(),
    });
    if let Some(url) = webhook_url {
        manifest["hook_attributes"] = json!({ "url": url, "active": true });
    }
    manifest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped_manifest() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/github-app/manifest.json"
        );
        let text = std::fs::read_to_string(path).expect("deploy/github-app/manifest.json");
        serde_json::from_str(&text).expect("the shipped manifest parses")
    }

    #[test]
    fn setup_posts_the_permissions_and_events_of_the_shipped_manifest() {
        let manifest = app_manifest(
            "autoforge",
            "https://example.test",
            None,
            "http://127.0.0.1:1/callback",
        );
        let shipped = shipped_manifest();
        assert_eq!(
            manifest["default_permissions"],
            shipped["default_permissions"]
        );
        assert_eq!(manifest["default_events"], shipped["default_events"]);
        assert!(manifest.get("hook_attributes").is_none());
    }

    #[test]
    fn a_public_url_becomes_the_active_webhook() {
        let manifest = app_manifest(
            "autoforge",
            "https://bot.example.test",
            Some("https://bot.example.test/webhook"),
            "http://127.0.0.1:1/callback",
        );
        assert_eq!(
            manifest["hook_attributes"]["url"],
            "https://bot.example.test/webhook"
        );
        assert_eq!(manifest["hook_attributes"]["active"], true);
        assert_eq!(manifest["redirect_url"], "http://127.0.0.1:1/callback");
    }
}
