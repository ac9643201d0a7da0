//! Secrets, read only from the environment or from files the environment
//! names, and held as `secrecy` types so `Debug` never shows them. Also the
//! resolution of where the database lives and how to authenticate to GitHub.

use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

use super::env::{
    DASHBOARD_TOKEN_FILE_VAR, DASHBOARD_TOKEN_VAR, DATABASE_URL_VAR, Environment,
    GITHUB_PRIVATE_KEY_FILE_VAR, GITHUB_TOKEN_FILE_VAR, GITHUB_TOKEN_VAR, WEBHOOK_SECRET_FILE_VAR,
    WEBHOOK_SECRET_VAR,
};
use super::problem::Problem;
use super::settings::Settings;

/// Where the journal's Postgres lives.
#[derive(Debug, Clone)]
pub enum DatabaseSource {
    /// A server reached through this connection URL.
    External(SecretString),
    /// A cluster autoforge runs itself, with its data in `dir`.
    Managed { dir: PathBuf },
}

/// How autoforge authenticates to GitHub.
#[derive(Debug, Clone)]
pub enum GithubAuth {
    App {
        app_id: u64,
        /// The PEM text of the App's private key.
        private_key: SecretString,
    },
    Token(SecretString),
    /// No credential: enough for `config check` and `migrate`, not for `serve`.
    None,
}

/// The secrets and choices derived from them.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub database: DatabaseSource,
    pub github_auth: GithubAuth,
    pub webhook_secret: Option<SecretString>,
    pub dashboard_token: Option<SecretString>,
}

/// `url_var` names the variable that set `database.url` through an
/// `AUTOFORGE_*` override, if one did, for error messages.
pub(crate) fn resolve(
    settings: &Settings,
    state_dir: &Path,
    env: &Environment,
    url_var: Option<&str>,
    problems: &mut Vec<Problem>,
) -> Resolved {
    Resolved {
        database: database_source(settings, state_dir, env, url_var, problems),
        github_auth: github_auth(settings, env, problems),
        webhook_secret: secret_from_env(env, WEBHOOK_SECRET_VAR, WEBHOOK_SECRET_FILE_VAR, problems),
        dashboard_token: secret_from_env(
            env,
            DASHBOARD_TOKEN_VAR,
            DASHBOARD_TOKEN_FILE_VAR,
            problems,
        ),
    }
}

fn database_source(
    settings: &Settings,
    state_dir: &Path,
    env: &Environment,
    url_var: Option<&str>,
    problems: &mut Vec<Problem>,
) -> DatabaseSource {
    let (url, from) = match env.non_empty(DATABASE_URL_VAR) {
        Some(url) => (SecretString::from(url), Some(DATABASE_URL_VAR)),
        None => match &settings.database.url {
            Some(url) => (url.clone(), url_var),
            None => {
                return DatabaseSource::Managed {
                    dir: state_dir.join("postgres"),
                };
            }
        },
    };
    let text = url.expose_secret();
    if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
        problems.push(
            Problem::new(
                "database.url",
                "postgres-url",
                "must start with postgres:// or postgresql:// (value not shown: it may hold a password)",
            )
            .with_env_var(from),
        );
    }
    DatabaseSource::External(url)
}

fn github_auth(settings: &Settings, env: &Environment, problems: &mut Vec<Problem>) -> GithubAuth {
    let token = secret_from_env(env, GITHUB_TOKEN_VAR, GITHUB_TOKEN_FILE_VAR, problems);
    let key_file = env.non_empty(GITHUB_PRIVATE_KEY_FILE_VAR);
    match (settings.github.app_id, key_file, token) {
        (Some(_), Some(_), Some(_)) => {
            problems.push(Problem::new(
                GITHUB_TOKEN_VAR,
                "one-github-credential",
                format!("both a GitHub App (github.app_id, {GITHUB_PRIVATE_KEY_FILE_VAR}) and a token are configured; keep one"),
            ));
            GithubAuth::None
        }
        (Some(app_id), Some(path), None) => match read_private_key(Path::new(path)) {
            Ok(private_key) => GithubAuth::App {
                app_id,
                private_key,
            },
            Err(message) => {
                problems.push(Problem::new(
                    GITHUB_PRIVATE_KEY_FILE_VAR,
                    "private-key-file",
                    message,
                ));
                GithubAuth::None
            }
        },
        (Some(_), None, _) => {
            problems.push(Problem::new(
                "github.app_id",
                "app-needs-private-key",
                format!("a GitHub App needs its private key: set {GITHUB_PRIVATE_KEY_FILE_VAR}"),
            ));
            GithubAuth::None
        }
        (None, Some(_), _) => {
            problems.push(Problem::new(
                GITHUB_PRIVATE_KEY_FILE_VAR,
                "private-key-needs-app-id",
                "a private key is set but github.app_id (AUTOFORGE_GITHUB_APP_ID) is not",
            ));
            GithubAuth::None
        }
        (None, None, Some(token)) => GithubAuth::Token(token),
        (None, None, None) => GithubAuth::None,
    }
}

fn read_private_key(path: &Path) -> Result<SecretString, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    // Only the armour is checked here; the GitHub client parses the key.
    if !(text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----")) {
        return Err(format!(
            "{} does not hold a PEM private key",
            path.display()
        ));
    }
    Ok(SecretString::from(text))
}

/// A secret given inline (`var`) or in a file (`file_var`), never both.
fn secret_from_env(
    env: &Environment,
    var: &str,
    file_var: &str,
    problems: &mut Vec<Problem>,
) -> Option<SecretString> {
    match (env.non_empty(var), env.non_empty(file_var)) {
        (Some(_), Some(_)) => {
            problems.push(Problem::new(
                var,
                "one-source",
                format!("set {var} or {file_var}, not both"),
            ));
            None
        }
        (Some(value), None) => Some(SecretString::from(value)),
        (None, Some(path)) => match std::fs::read_to_string(path) {
            // Files written by editors and secret mounts often end in a newline
            // that is not part of the secret.
            Ok(text) if !text.trim_end_matches(['\n', '\r']).is_empty() => {
                Some(SecretString::from(text.trim_end_matches(['\n', '\r'])))
            }
            Ok(_) => {
                problems.push(Problem::new(
                    file_var,
                    "secret-file",
                    format!("{path} is empty"),
                ));
                None
            }
            Err(error) => {
                problems.push(Problem::new(
                    file_var,
                    "secret-file",
                    format!("cannot read {path}: {error}"),
                ));
                None
            }
        },
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_with(settings: &Settings, env: &[(&str, &str)]) -> (Resolved, Vec<Problem>) {
        let mut problems = Vec::new();
        let resolved = resolve(
            settings,
            Path::new("/state"),
            &Environment::from_pairs(env.iter().copied()),
            None,
            &mut problems,
        );
        (resolved, problems)
    }

    #[test]
    fn without_a_url_the_database_is_managed_under_the_state_dir() {
        let (resolved, problems) = resolve_with(&Settings::default(), &[]);
        assert!(problems.is_empty());
        assert!(
            matches!(resolved.database, DatabaseSource::Managed { ref dir } if dir == Path::new("/state/postgres"))
        );
        assert!(matches!(resolved.github_auth, GithubAuth::None));
        assert!(resolved.webhook_secret.is_none());
    }

    #[test]
    fn database_url_from_the_environment_wins_over_the_file() {
        let mut settings = Settings::default();
        settings.database.url = Some(SecretString::from("postgres://file/db"));
        let (resolved, _) = resolve_with(&settings, &[(DATABASE_URL_VAR, "postgres://env/db")]);
        let DatabaseSource::External(url) = resolved.database else {
            panic!("expected an external database");
        };
        assert_eq!(url.expose_secret(), "postgres://env/db");
    }

    #[test]
    fn non_postgres_url_is_refused_without_quoting_it() {
        let (_, problems) = resolve_with(
            &Settings::default(),
            &[(DATABASE_URL_VAR, "mysql://u:pw@h/db")],
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].env_var.as_deref(), Some(DATABASE_URL_VAR));
        assert!(!problems[0].to_string().contains("pw@h"));
    }

    #[test]
    fn app_id_and_key_file_make_app_auth() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("app.pem");
        std::fs::write(
            &key,
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
        )
        .expect("write");
        let mut settings = Settings::default();
        settings.github.app_id = Some(42);
        let key_path = key.to_string_lossy().into_owned();
        let (resolved, problems) = resolve_with(
            &settings,
            &[(GITHUB_PRIVATE_KEY_FILE_VAR, key_path.as_str())],
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(matches!(
            resolved.github_auth,
            GithubAuth::App { app_id: 42, .. }
        ));
    }

    #[test]
    fn app_id_without_key_and_key_that_is_not_pem_are_refused() {
        let mut settings = Settings::default();
        settings.github.app_id = Some(42);
        let (_, problems) = resolve_with(&settings, &[]);
        assert_eq!(problems[0].rule, "app-needs-private-key");

        let dir = tempfile::tempdir().expect("tempdir");
        let key = dir.path().join("app.pem");
        std::fs::write(&key, "not a key").expect("write");
        let key_path = key.to_string_lossy().into_owned();
        let (_, problems) = resolve_with(
            &settings,
            &[(GITHUB_PRIVATE_KEY_FILE_VAR, key_path.as_str())],
        );
        assert_eq!(problems[0].rule, "private-key-file");
    }

    #[test]
    fn token_and_secret_files_are_read_without_their_trailing_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").expect("write");
        let secret_path = secret.to_string_lossy().into_owned();
        let (resolved, problems) = resolve_with(
            &Settings::default(),
            &[
                (WEBHOOK_SECRET_FILE_VAR, secret_path.as_str()),
                (GITHUB_TOKEN_VAR, "ghp_abc"),
            ],
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            resolved.webhook_secret.expect("set").expose_secret(),
            "s3cret"
        );
        assert!(
            matches!(resolved.github_auth, GithubAuth::Token(ref t) if t.expose_secret() == "ghp_abc")
        );
    }

    #[test]
    fn secret_given_inline_and_as_file_is_refused() {
        let (_, problems) = resolve_with(
            &Settings::default(),
            &[
                (WEBHOOK_SECRET_VAR, "a"),
                (WEBHOOK_SECRET_FILE_VAR, "/nonexistent"),
            ],
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].rule, "one-source");
    }

    #[test]
    fn missing_secret_file_is_reported_with_its_variable() {
        let (_, problems) = resolve_with(
            &Settings::default(),
            &[(GITHUB_TOKEN_FILE_VAR, "/nonexistent/token")],
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, GITHUB_TOKEN_FILE_VAR);
    }
}
