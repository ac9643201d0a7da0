//! The configuration the demo runs serve with: written as a TOML file into
//! the state directory (so `autoforge config check` can inspect it) and
//! loaded through the ordinary loader with a synthetic environment that
//! carries the secrets, so nothing from the caller's environment or working
//! directory leaks in.
//!
//! An operator's `--config FILE` contributes its `[agents]` table only:
//! real CLIs replace the scripted agents, everything else stays the demo's.

use std::path::{Path, PathBuf};

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};

use crate::config::{self, Config, Environment};

/// Everything the demo's configuration depends on.
pub struct DemoSettings<'a> {
    pub state_dir: &'a Path,
    pub api_url: &'a str,
    pub app_id: u64,
    pub private_key_file: &'a Path,
    pub webhook_secret: &'a SecretString,
    /// The `[agents]` table (scripted, or the operator's).
    pub agents: toml::Table,
}

/// File name of the generated configuration inside the state directory.
pub const CONFIG_FILE: &str = "autoforge-demo.toml";

/// Poll often: the demo is short and fakehub costs nothing to ask.
const POLL_SECONDS: i64 = 5;

/// The demo's configuration document.
pub fn demo_document(settings: &DemoSettings<'_>) -> toml::Table {
    let table = |pairs: Vec<(&str, toml::Value)>| {
        toml::Value::Table(
            pairs
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    };
    let text = |value: &str| toml::Value::String(value.to_owned());
    let mut document = toml::Table::new();
    document.insert(
        "github".into(),
        table(vec![
            ("api_url", text(settings.api_url)),
            (
                "app_id",
                toml::Value::Integer(i64::try_from(settings.app_id).unwrap_or(i64::MAX)),
            ),
        ]),
    );
    document.insert(
        "poll".into(),
        table(vec![(
            "interval_seconds",
            toml::Value::Integer(POLL_SECONDS),
        )]),
    );
    document.insert("merge".into(), table(vec![("mode", text("auto"))]));
    document.insert(
        "validation".into(),
        table(vec![
            (
                "commands",
                toml::Value::Array(vec![text(super::world::TEST_COMMAND)]),
            ),
            ("timeout_seconds", toml::Value::Integer(60)),
            // The demo's test command fetches nothing.
            ("sandbox", table(vec![("network", text("none"))])),
        ]),
    );
    document.insert("agents".into(), toml::Value::Table(settings.agents.clone()));
    document
}

/// Writes the document into the state directory and loads it.
pub fn load_demo_config(settings: &DemoSettings<'_>) -> anyhow::Result<(Config, PathBuf)> {
    let file = settings.state_dir.join(CONFIG_FILE);
    let text = toml::to_string_pretty(&demo_document(settings))
        .context("cannot render the demo configuration")?;
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    let home = settings.state_dir.display().to_string();
    let env = Environment::from_pairs([
        ("HOME".to_owned(), home),
        (
            config::GITHUB_PRIVATE_KEY_FILE_VAR.to_owned(),
            settings.private_key_file.display().to_string(),
        ),
        (
            config::WEBHOOK_SECRET_VAR.to_owned(),
            settings.webhook_secret.expose_secret().to_owned(),
        ),
    ]);
    let config = config::load(Some(&file), Some(settings.state_dir), &env)
        .with_context(|| format!("the demo configuration {} is invalid", file.display()))?;
    Ok((config, file))
}

/// The `[agents]` table of an operator's configuration file.
pub fn operator_agents(file: &Path) -> anyhow::Result<toml::Table> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let document: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", file.display()))?;
    match document.get("agents") {
        Some(toml::Value::Table(agents)) => Ok(agents.clone()),
        Some(_) => anyhow::bail!("`agents` in {} is not a table", file.display()),
        None => anyhow::bail!(
            "{} has no [agents] section; the demo takes only its agent profiles and roles",
            file.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::config::{DatabaseSource, MergeMode};

    fn settings<'a>(dir: &'a Path, key: &'a Path, secret: &'a SecretString) -> DemoSettings<'a> {
        let agents: toml::Table = toml::from_str(
            "[profiles.s]\ncommand = [\"/bin/true\"]\n[roles]\nimplement = \"s\"\nreview = \"s\"\nfix = \"s\"\nupdate_epic = \"s\"\n",
        )
        .unwrap();
        DemoSettings {
            state_dir: dir,
            api_url: "http://127.0.0.1:9",
            app_id: 7,
            private_key_file: key,
            webhook_secret: secret,
            agents,
        }
    }

    #[test]
    fn the_demo_config_merges_automatically_with_a_managed_database_under_the_state_dir() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("app.pem");
        // Only the armour is checked when loading; the client parses the key.
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let secret = SecretString::from("demo-secret");
        let (config, file) = load_demo_config(&settings(dir.path(), &key, &secret))
            .map_err(|e| format!("{e:#}"))
            .unwrap();
        assert!(file.is_file());
        assert_eq!(config.settings.merge.mode, MergeMode::Auto);
        assert!(
            matches!(&config.database, DatabaseSource::Managed { dir: db } if db.starts_with(dir.path())),
            "{:?}",
            config.database
        );
        assert_eq!(
            config.require_webhook_secret().unwrap().expose_secret(),
            "demo-secret"
        );
        assert!(
            !std::fs::read_to_string(&file)
                .unwrap()
                .contains("demo-secret"),
            "the secret stays out of the written file"
        );
    }

    #[test]
    fn an_operator_agents_table_replaces_the_scripted_profiles_and_roles() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("app.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(
            &file,
            "[merge]\nmode = \"never\"\n[agents.profiles.claude]\ncommand = [\"claude\", \"--print\"]\n[agents.roles]\nimplement = \"claude\"\nreview = \"claude\"\nfix = \"claude\"\nupdate_epic = \"claude\"\n",
        )
        .unwrap();
        let secret = SecretString::from("demo-secret");
        let demo = DemoSettings {
            agents: operator_agents(&file).unwrap(),
            ..settings(dir.path(), &key, &secret)
        };
        let (config, _) = load_demo_config(&demo)
            .map_err(|e| format!("{e:#}"))
            .unwrap();
        let agents = &config.settings.agents;
        assert_eq!(agents.profiles.keys().collect::<Vec<_>>(), ["claude"]);
        assert_eq!(agents.profiles["claude"].command, ["claude", "--print"]);
        assert_eq!(agents.roles.implement.as_deref(), Some("claude"));
        // The operator's other sections do not leak in.
        assert_eq!(config.settings.merge.mode, MergeMode::Auto);
    }

    #[test]
    fn only_the_agents_section_of_an_operator_file_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(
            &file,
            "[merge]\nmode = \"never\"\n[agents.roles]\nimplement = \"claude\"\n",
        )
        .unwrap();
        let agents = operator_agents(&file).unwrap();
        assert_eq!(agents.keys().collect::<Vec<_>>(), ["roles"]);
        std::fs::write(&file, "[merge]\nmode = \"never\"\n").unwrap();
        let error = operator_agents(&file).unwrap_err();
        assert!(error.to_string().contains("no [agents] section"), "{error}");
    }
}
