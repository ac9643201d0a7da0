//! The environment of every child the controller starts (agents and
//! validation commands): built from an allow-list, never inherited wholesale.
//!
//! Order: the allow-listed names present in the controller's environment,
//! then the profile's `env_inherit` names, then its `env` values, then its
//! `env_remove` names. A credential denylist is checked on the *result*, so
//! no combination of allow-list and profile settings can hand an agent the
//! GitHub credential, a controller secret or the database URL.
//!
//! The denylist targets the controller's own credentials. A profile may
//! legitimately pass a vendor key such as `ANTHROPIC_API_KEY` or
//! `OPENAI_API_KEY`: that key belongs to the agent and is its to use.

use std::collections::BTreeMap;
use std::ffi::OsString;

use secrecy::ExposeSecret;

use crate::agents::profile::LaunchProfile;

/// Names copied from the controller's environment when present.
const ALLOWED_NAMES: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
];
/// Name prefixes copied from the controller's environment.
const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Names that carry a controller or GitHub credential, or that would let a
/// child reconfigure git to send one.
const DENIED_NAMES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "DATABASE_URL",
    "PGPASSWORD",
    "PGPASSFILE",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
];
const DENIED_PREFIXES: &[&str] = &["AUTOFORGE_", "GIT_CONFIG", "GITHUB_APP_"];
/// A name mentioning GitHub and one of these words is treated as a credential.
const GITHUB_SECRET_WORDS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "PAT", "CREDENTIAL"];

/// Whether `name` looks like a variable that holds one of the controller's
/// credentials. Case-insensitive, because some tools read either case.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if DENIED_NAMES.contains(&upper.as_str())
        || DENIED_PREFIXES.iter().any(|p| upper.starts_with(p))
    {
        return true;
    }
    let mentions_github = upper.contains("GITHUB") || upper.starts_with("GH_");
    mentions_github && GITHUB_SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// A portable variable name: a letter or `_`, then letters, digits or `_`.
pub fn is_valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn is_allowed(name: &str) -> bool {
    ALLOWED_NAMES.contains(&name) || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A refused environment; the value is never part of the message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("refusing to start a child with `{0}` in its environment: it looks like a credential")]
    CredentialName(String),
}

/// The environment for a validation command or a profile-less child: the
/// allow-listed names of the controller's environment, nothing else.
pub fn base_environment() -> BTreeMap<String, OsString> {
    std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            (is_allowed(&name) && !is_credential_name(&name)).then_some((name, value))
        })
        .collect()
}

/// The environment for an agent launched with `profile`.
pub fn agent_environment(profile: &LaunchProfile) -> Result<BTreeMap<String, OsString>, EnvError> {
    let mut env = base_environment();
    for name in &profile.env_inherit {
        if let Some(value) = std::env::var_os(name) {
            env.insert(name.clone(), value);
        }
    }
    for (name, value) in &profile.env {
        env.insert(name.clone(), OsString::from(value.expose_secret()));
    }
    for name in &profile.env_remove {
        env.remove(name);
    }
    check_environment(&env)?;
    Ok(env)
}

/// Refuses an environment holding any credential-looking name.
pub fn check_environment(env: &BTreeMap<String, OsString>) -> Result<(), EnvError> {
    match env.keys().find(|name| is_credential_name(name)) {
        Some(name) => Err(EnvError::CredentialName(name.clone())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn controller_credentials_are_denied_and_vendor_keys_are_not() {
        for name in [
            "GITHUB_TOKEN",
            "gh_token",
            "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE",
            "DATABASE_URL",
            "GIT_CONFIG_COUNT",
            "MY_GITHUB_APP_KEY",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "PATH",
            "GITHUB_ACTIONS",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn env_names_must_be_portable() {
        assert!(is_valid_env_name("_A1"));
        for bad in ["", "1A", "A-B", "A=B", "A B"] {
            assert!(!is_valid_env_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_base_environment_holds_only_allow_listed_names() {
        let env = base_environment();
        assert!(env.keys().all(|name| is_allowed(name)), "{:?}", env.keys());
        assert!(env.contains_key("PATH"));
    }

    #[test]
    fn a_credential_name_in_the_final_environment_is_refused() {
        let mut env = base_environment();
        env.insert("GH_TOKEN".into(), "x".into());
        assert_eq!(
            check_environment(&env),
            Err(EnvError::CredentialName("GH_TOKEN".into()))
        );
    }
}
