//! The pages `setup` serves on loopback: the start page whose one button
//! posts the manifest to GitHub, and the pages after GitHub's redirect.
//! Plain HTML forms: nothing here needs JavaScript.

use maud::{DOCTYPE, Markup, html};

fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
            }
            body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem" {
                h1 { (title) }
                (body)
            }
        }
    }
}

/// What the start page shows and posts.
pub(super) struct StartPage<'a> {
    pub app_name: &'a str,
    /// `https://github.com/settings/apps/new?state=…` or the organization's.
    pub action: &'a str,
    pub owner: Option<&'a str>,
    pub manifest: &'a str,
    pub webhook_url: Option<&'a str>,
    pub permissions: Vec<(String, String)>,
    pub events: Vec<String>,
}

pub(super) fn start(page: &StartPage<'_>) -> Markup {
    layout(
        "Create the autoforge GitHub App",
        html! {
            p {
                "This registers a GitHub App named " strong { (page.app_name) }
                @if let Some(owner) = page.owner { " for the organization " strong { (owner) } }
                @else { " for your account" }
                ". GitHub asks you to confirm; then you come back here and autoforge saves the App's key and webhook secret."
            }
            @match page.webhook_url {
                Some(url) => p { "Webhooks go to " code { (url) } "." },
                None => p { "No webhook URL was given (--url): the App starts without an active webhook; set its URL and secret in the App's settings before `serve` takes work." },
            }
            h2 { "Permissions" }
            ul { @for (name, level) in &page.permissions { li { code { (name) } ": " (level) } } }
            h2 { "Events" }
            ul { @for event in &page.events { li { code { (event) } } } }
            form method="post" action=(page.action) {
                input type="hidden" name="manifest" value=(page.manifest);
                button type="submit" id="create" { "Create the GitHub App on GitHub" }
            }
        },
    )
}

/// After the credentials were saved.
pub(super) struct DonePage<'a> {
    pub app_name: &'a str,
    pub app_id: u64,
    pub install_url: &'a str,
    pub env_file: &'a str,
}

pub(super) fn done(page: &DonePage<'_>) -> Markup {
    layout(
        "GitHub App created",
        html! {
            p id="created" { "Created " strong { (page.app_name) } " (App id " (page.app_id) "). Its private key and webhook secret are saved; " code { (page.env_file) } " names them." }
            p { a href=(page.install_url) { "Install it on your repositories" } }
            p { "You can close this page; the terminal says how to start autoforge." }
        },
    )
}

pub(super) fn failed(reason: &str) -> Markup {
    layout(
        "The GitHub App was not saved",
        html! {
            p id="failed" { (reason) }
            p { a href="/" { "Start again" } }
        },
    )
}
