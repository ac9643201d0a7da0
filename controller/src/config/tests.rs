//! Tests of the whole loading pipeline, file and environment together.

use std::path::Path;

use secrecy::ExposeSecret;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Environment {
    Environment::from_pairs(pairs.iter().copied())
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("autoforge.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

#[test]
fn environment_alone_is_enough_to_start() {
    let config = load(
        None,
        None,
        &env(&[("HOME", "/home/op"), ("AUTOFORGE_GITHUB_TOKEN", "ghp_x")]),
    )
    .expect("loads");
    assert_eq!(config.origin, Origin::EnvironmentOnly);
    assert_eq!(
        config.state_dir,
        Path::new("/home/op/.local/state/autoforge")
    );
    assert!(
        matches!(config.database, DatabaseSource::Managed { ref dir } if dir == Path::new("/home/op/.local/state/autoforge/postgres"))
    );
    assert!(matches!(config.github_auth, GithubAuth::Token(_)));
    assert_eq!(config.settings.server.listen.to_string(), "127.0.0.1:8080");
}

#[test]
fn environment_override_wins_over_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(
        dir.path(),
        "[server]\nlisten = \"127.0.0.1:1\"\n[poll]\ninterval_seconds = 10\n",
    );
    let config = load(
        Some(&file),
        None,
        &env(&[("HOME", "/h"), ("AUTOFORGE_SERVER_LISTEN", "0.0.0.0:9090")]),
    )
    .expect("loads");
    assert_eq!(config.settings.server.listen.to_string(), "0.0.0.0:9090");
    assert_eq!(config.settings.poll.interval_seconds, 10);
}

#[test]
fn invalid_environment_override_is_reported_with_its_variable() {
    let error = load(
        None,
        None,
        &env(&[
            ("HOME", "/h"),
            ("AUTOFORGE_POLL_INTERVAL_SECONDS", "2"),
            ("AUTOFORGE_SERVER_LISTEN", "nowhere"),
        ]),
    )
    .expect_err("refused");
    let problems = error.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].key, "poll.interval_seconds");
    assert_eq!(problems[0].rule, "minimum");
    assert_eq!(
        problems[0].env_var.as_deref(),
        Some("AUTOFORGE_POLL_INTERVAL_SECONDS")
    );
    assert_eq!(
        problems[1].to_string(),
        "server.listen (from AUTOFORGE_SERVER_LISTEN): `nowhere` is not IP:PORT, e.g. 127.0.0.1:8080 [rule: socket-address]"
    );
}

#[test]
fn debug_output_of_the_config_redacts_every_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("app.pem");
    let pem =
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretkeymaterial\n-----END RSA PRIVATE KEY-----\n";
    std::fs::write(&key, pem).expect("write key");
    let file = write_config(
        dir.path(),
        "[database]\nurl = \"postgres://file:filepassword@db/x\"\n[github]\napp_id = 7\n",
    );
    let key_path = key.to_string_lossy().into_owned();
    let config = load(
        Some(&file),
        None,
        &env(&[
            ("HOME", "/h"),
            ("AUTOFORGE_WEBHOOK_SECRET", "whsec-topsecret"),
            ("AUTOFORGE_GITHUB_PRIVATE_KEY_FILE", key_path.as_str()),
            ("DATABASE_URL", "postgres://user:envpassword@db/x"),
        ]),
    )
    .expect("loads");
    let DatabaseSource::External(url) = &config.database else {
        panic!("expected DATABASE_URL to be used");
    };
    assert_eq!(url.expose_secret(), "postgres://user:envpassword@db/x");

    let debug = format!("{config:?}");
    let pretty = format!("{config:#?}");
    for secret in [
        "whsec-topsecret",
        "envpassword",
        "filepassword",
        "MIIEsecretkeymaterial",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
        assert!(!pretty.contains(secret), "{secret} leaked");
    }
    assert!(debug.contains("[REDACTED]"), "{debug}");
    assert!(debug.contains("app_id: 7"), "{debug}");
}

#[test]
fn relative_paths_in_the_file_are_taken_from_its_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(
        dir.path(),
        "state_dir = \"state\"\n[prompts]\ndir = \"prompts\"\n",
    );
    let config = load(Some(&file), None, &env(&[])).expect("loads");
    assert_eq!(config.state_dir, dir.path().join("state"));
    assert_eq!(
        config.settings.prompts.dir,
        Some(dir.path().join("prompts"))
    );
}

#[test]
fn state_dir_flag_wins_over_environment_and_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(dir.path(), "state_dir = \"/from/file\"\n");
    let vars = env(&[("AUTOFORGE_STATE_DIR", "/from/env")]);
    assert_eq!(
        load(Some(&file), None, &vars).expect("loads").state_dir,
        Path::new("/from/env")
    );
    let flagged = load(Some(&file), Some(Path::new("/from/flag")), &vars).expect("loads");
    assert_eq!(flagged.state_dir, Path::new("/from/flag"));
}

#[test]
fn xdg_state_home_is_the_default_state_dir_when_absolute() {
    let config = load(
        None,
        None,
        &env(&[("HOME", "/h"), ("XDG_STATE_HOME", "/xdg")]),
    )
    .expect("loads");
    assert_eq!(config.state_dir, Path::new("/xdg/autoforge"));
    let config = load(
        None,
        None,
        &env(&[("HOME", "/h"), ("XDG_STATE_HOME", "rel")]),
    )
    .expect("loads");
    assert_eq!(config.state_dir, Path::new("/h/.local/state/autoforge"));
    let error = load(None, None, &env(&[])).expect_err("no state dir");
    assert_eq!(error.problems()[0].key, "state_dir");
}

#[test]
fn toml_syntax_error_gives_position_without_echoing_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(
        dir.path(),
        "[database]\nurl = \"postgres://u:pw-in-line@h/db\n",
    );
    let error = load(Some(&file), None, &env(&[("HOME", "/h")])).expect_err("syntax error");
    let text = error.to_string();
    assert!(
        matches!(error, ConfigError::Syntax { line: 2, .. }),
        "{text}"
    );
    assert!(!text.contains("pw-in-line"), "{text}");
}

#[test]
fn missing_explicit_file_is_a_read_error() {
    let error = load(
        Some(Path::new("/nonexistent/autoforge.toml")),
        None,
        &env(&[]),
    )
    .expect_err("missing");
    assert!(matches!(error, ConfigError::Read { .. }));
}

#[test]
fn config_file_is_found_by_flag_then_variable_then_working_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vars = env(&[("AUTOFORGE_CONFIG", "/from/env.toml")]);
    assert_eq!(
        locate_file(Some(Path::new("/flag.toml")), &vars, dir.path()),
        Some(PathBuf::from("/flag.toml"))
    );
    assert_eq!(
        locate_file(None, &vars, dir.path()),
        Some(PathBuf::from("/from/env.toml"))
    );
    assert_eq!(locate_file(None, &env(&[]), dir.path()), None);
    let file = write_config(dir.path(), "");
    assert_eq!(locate_file(None, &env(&[]), dir.path()), Some(file));
}

#[test]
fn cross_check_problems_and_secret_problems_are_reported_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(
        dir.path(),
        "[agents.profiles.a]\ncommand = [\"a\"]\n[agents.roles]\nimplement = \"ghost\"\n",
    );
    let error = load(
        Some(&file),
        None,
        &env(&[
            ("HOME", "/h"),
            ("AUTOFORGE_GITHUB_TOKEN_FILE", "/nonexistent"),
        ]),
    )
    .expect_err("refused");
    let rules: Vec<&str> = error.problems().iter().map(|p| p.rule.as_str()).collect();
    assert_eq!(rules, vec!["profile-defined", "secret-file"]);
}

#[test]
fn a_profile_inheriting_a_controller_credential_is_refused_at_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_config(
        dir.path(),
        "[agents.profiles.a]\ncommand = [\"a\"]\nenv_inherit = [\"ANTHROPIC_API_KEY\", \"GITHUB_TOKEN\"]\n",
    );
    let error = load(Some(&file), None, &env(&[("HOME", "/h")])).expect_err("refused");
    let problems: Vec<(&str, &str)> = error
        .problems()
        .iter()
        .map(|p| (p.key.as_str(), p.rule.as_str()))
        .collect();
    assert_eq!(
        problems,
        [("agents.profiles.a.env_inherit", "no-controller-credential")]
    );
}

#[test]
fn webhook_secret_is_required_only_when_asked_for() {
    let config = load(None, None, &env(&[("HOME", "/h")])).expect("loads");
    assert!(config.require_webhook_secret().is_err());
    let config = load(
        None,
        None,
        &env(&[("HOME", "/h"), ("AUTOFORGE_WEBHOOK_SECRET", "s")]),
    )
    .expect("loads");
    assert_eq!(
        config
            .require_webhook_secret()
            .expect("set")
            .expose_secret(),
        "s"
    );
}

#[test]
fn database_url_override_is_named_in_errors_and_never_quoted() {
    let error = load(
        None,
        None,
        &env(&[
            ("HOME", "/h"),
            ("AUTOFORGE_DATABASE_URL", "mysql://u:dbpass@h/x"),
        ]),
    )
    .expect_err("refused");
    let text = error.to_string();
    assert!(
        text.contains("database.url (from AUTOFORGE_DATABASE_URL)"),
        "{text}"
    );
    assert!(!text.contains("dbpass"), "{text}");
}

#[test]
fn database_url_variable_wins_over_the_prefixed_override() {
    let config = load(
        None,
        None,
        &env(&[
            ("HOME", "/h"),
            ("AUTOFORGE_DATABASE_URL", "postgres://override/x"),
            ("DATABASE_URL", "postgres://plain/x"),
        ]),
    )
    .expect("loads");
    let DatabaseSource::External(url) = config.database else {
        panic!("expected an external database");
    };
    assert_eq!(url.expose_secret(), "postgres://plain/x");
}

#[test]
fn schema_errors_never_quote_a_profile_env_value() {
    // Profile env values are secrets (vendor keys); a mistyped one, or an
    // error about the profile around it, must not print them.
    let dir = tempfile::tempdir().expect("tempdir");
    for text in [
        "[agents.profiles.a]\ncommand = [\"a\"]\nenv = { KEY = [\"sk-value-in-array-000000\"] }\n",
        "[agents.profiles.a]\nenv = { KEY = \"sk-value-in-profile-000000\" }\n",
        "[agents.profiles.a]\ncommand = \"not-a-list\"\nenv = { KEY = \"sk-value-in-profile-000000\" }\n",
    ] {
        let file = write_config(dir.path(), text);
        let error = load(Some(&file), None, &env(&[("HOME", "/h")])).expect_err("invalid");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("sk-value"), "{shown}");
    }
}
