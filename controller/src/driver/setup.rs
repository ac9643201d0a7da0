//! Building a [`Driver`] from the configuration, for `autoforge serve`.
//!
//! `serve` calls [`run_from_config`] on its own task with the journal it
//! opened and its shutdown `watch`; the call returns once the driver loop
//! stopped.

use anyhow::Context;
use autoforge_journal::Journal;
use tokio::sync::watch;

use super::convert::{html_base, run_settings};
use super::{Driver, DriverConfig, RepositoryAccess};
use crate::config::Config;
use crate::github::Account;
use crate::serve::GitHubAccess;

/// The driver for every repository `serve` watches.
pub async fn driver_from_config(config: &Config, journal: Journal) -> anyhow::Result<Driver> {
    let access = GitHubAccess::connect(config).await?;
    let login = if access.is_app() {
        format!("{}[bot]", access.app_slug)
    } else {
        let user: Account = access
            .client
            .installation(0)?
            .get_json("/user")
            .await
            .context("cannot read the token's user (GET /user)")?;
        user.login
    };
    let html = html_base(&config.settings.github.api_url);
    let repositories = access
        .watched_repositories()
        .await?
        .into_iter()
        .map(|watched| RepositoryAccess {
            api: watched.api,
            repo: watched.name,
            login: login.clone(),
            html_base: html.clone(),
            merge_method: "merge".to_owned(),
            // The App's installation token is not exposed by the client
            // yet, so serve's driver cannot fetch or push: runs park at
            // their first launch.
            git: None,
        })
        .collect::<Vec<_>>();
    let worker = format!("driver-{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let driver_config = DriverConfig {
        settings: run_settings(&config.settings),
        protected_paths: config.settings.merge.protected_paths.clone(),
        ..DriverConfig::new(worker)
    };
    Ok(Driver::new(driver_config, journal, repositories))
}

/// Runs the driver until `shutdown` turns true.
pub async fn run_from_config(
    config: &Config,
    journal: Journal,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let driver = driver_from_config(config, journal).await?;
    driver.run(shutdown).await;
    Ok(())
}
