//! `autoforge setup`: runs [`crate::setup`] and prints where to go next.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;

use super::SetupArgs;
use crate::config::Config;
use crate::setup::{self, SetupOptions};

pub(super) fn run(config: &Config, args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let api_url = config.settings.github.api_url.clone();
    let options = SetupOptions {
        web_url: args
            .github_url
            .clone()
            .unwrap_or_else(|| web_url_for(&api_url)),
        api_url,
        org: args.org.clone(),
        public_url: args.url.clone(),
        app_name: args.name.clone(),
        out_dir: args
            .out
            .clone()
            .unwrap_or_else(|| config.state_dir.join("github-app")),
        listen: args.listen,
        force: args.force,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(setup::run(options, |url| {
        println!("Open {url} in a browser on this machine to create the GitHub App.");
        let _ = std::io::stdout().flush();
    }))?;
    let env = outcome.written.env.display();
    println!(
        "Created the GitHub App {} (id {}).",
        outcome.slug, outcome.app_id
    );
    println!(
        "Saved its private key and webhook secret in {} (mode 0600).",
        outcome.written.dir.display()
    );
    println!("Install it on your repositories: {}", outcome.install_url);
    if !outcome.webhook_active {
        println!(
            "Its webhook is inactive: in {} set the webhook URL to https://YOUR-HOST/webhook \
             and the secret to the contents of {}.",
            outcome.html_url,
            outcome.written.secret.display()
        );
    }
    println!("Then start autoforge:  set -a; . {env}; set +a; autoforge serve");
    Ok(ExitCode::SUCCESS)
}

/// GitHub's web address for an API address: github.com for its API, the
/// host for a GitHub Enterprise Server's `/api/v3`.
fn web_url_for(api_url: &str) -> String {
    let api = api_url.trim_end_matches('/');
    if api == "https://api.github.com" {
        return "https://github.com".to_owned();
    }
    api.strip_suffix("/api/v3").unwrap_or(api).to_owned()
}

#[cfg(test)]
mod tests {
    use super::web_url_for;

    #[test]
    fn the_web_address_follows_the_api_address() {
        assert_eq!(web_url_for("https://api.github.com"), "https://github.com");
        assert_eq!(
            web_url_for("https://ghe.example.test/api/v3/"),
            "https://ghe.example.test"
        );
        assert_eq!(
            web_url_for("http://127.0.0.1:9000"),
            "http://127.0.0.1:9000"
        );
    }
}
