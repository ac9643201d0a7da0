//! The one way the controller runs git.
//!
//! Every invocation gets a cleared environment: `PATH`, an empty private
//! `HOME`, `LC_ALL=C`, no system or global config, no terminal prompts, no
//! replace refs. Hardening settings go in through `GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which outrank every config file,
//! so a repository config an agent tampered with cannot turn hooks,
//! fsmonitor or a credential helper back on for the controller's own git.
//!
//! The GitHub credential, when a fetch needs one, becomes an
//! `http.<origin>.extraHeader` (scoped to the URL the fetch names) in those
//! same variables of that one process. It is
//! never in argv (visible in `ps`), never in a URL, never in a config file,
//! and git's error output is redacted before it enters an error value.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use tokio::process::Command;

use crate::redact::Redactor;

/// Config every controller git process runs with, whatever the repository
/// config says.
const HARDENING: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    // An empty value clears any helper list a config file set up.
    ("credential.helper", ""),
    ("core.askPass", ""),
    // Fetched commits are referenced by nothing but worktrees until used;
    // automatic gc must not prune them in between.
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("fetch.writeCommitGraph", "false"),
    ("core.commitGraph", "false"),
    ("submodule.recurse", "false"),
    ("advice.detachedHead", "false"),
    ("advice.graftFileDeprecated", "false"),
];

/// Why a git command failed. Output is redacted and bounded.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git {command}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("git {command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
}

/// Runs git with the controller's fixed environment.
#[derive(Debug, Clone)]
pub struct Git {
    home: PathBuf,
}

/// How much of git's stderr an error keeps.
const STDERR_LIMIT: usize = 4096;

impl Git {
    /// `home` is an empty directory owned by the controller: git reads
    /// nothing from the operator's real home.
    pub fn new(home: PathBuf) -> Self {
        Self { home }
    }

    /// A git command in `dir` (a work tree, or a bare repository given with
    /// `--git-dir` in `args`), fully configured except for stdio.
    pub fn command(
        &self,
        dir: &Path,
        args: &[&OsStr],
        credential: Option<&SecretString>,
    ) -> Command {
        let mut command = Command::new("git");
        command.args(args).current_dir(dir).env_clear();
        let path = std::env::var_os("PATH")
            .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
        command
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            // `info/grafts` in the common directory (writable through any
            // worktree) would rewrite parents: fake ancestry, hidden commits.
            .env("GIT_GRAFT_FILE", "/dev/null")
            .env("GIT_OPTIONAL_LOCKS", "0");
        // Stop repository discovery from climbing out of `dir` into some
        // enclosing repository if `dir` turns out not to be one.
        if let Some(parent) = dir.parent() {
            command.env("GIT_CEILING_DIRECTORIES", parent);
        }
        let mut config: Vec<(&str, OsString)> = HARDENING
            .iter()
            .map(|(k, v)| (*k, OsString::from(v)))
            .collect();
        // The header is scoped to the origin of the URL this invocation
        // names, so a URL rewrite (an `insteadOf` planted in the shared
        // mirror config by a concurrently running agent) cannot carry it to
        // another host. No URL argument, no credential.
        let header_key = credential
            .and(origin_of(args))
            .map(|origin| format!("http.{origin}.extraHeader"));
        if let (Some(token), Some(key)) = (credential, header_key.as_deref()) {
            config.push((key, authorization_header(token)));
        }
        command.env("GIT_CONFIG_COUNT", config.len().to_string());
        for (i, (key, value)) in config.into_iter().enumerate() {
            command
                .env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        command.kill_on_drop(true);
        command
    }

    /// Runs git to completion and returns its output whatever the status.
    pub async fn output(
        &self,
        dir: &Path,
        args: &[&OsStr],
        credential: Option<&SecretString>,
    ) -> Result<Output, GitError> {
        self.command(dir, args, credential)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| GitError::Spawn {
                command: describe(args),
                source,
            })
    }

    /// Runs git and returns its stdout; a non-zero exit is an error.
    pub async fn run(
        &self,
        dir: &Path,
        args: &[&OsStr],
        credential: Option<&SecretString>,
    ) -> Result<Vec<u8>, GitError> {
        let output = self.output(dir, args, credential).await?;
        if output.status.success() {
            Ok(output.stdout)
        } else {
            Err(failure(args, &output, credential))
        }
    }

    /// Runs git and returns its stdout as trimmed text.
    pub async fn run_text(&self, dir: &Path, args: &[&OsStr]) -> Result<String, GitError> {
        let stdout = self.run(dir, args, None).await?;
        Ok(String::from_utf8_lossy(&stdout).trim().to_owned())
    }
}

/// The error for a finished git process that failed.
pub fn failure(args: &[&OsStr], output: &Output, credential: Option<&SecretString>) -> GitError {
    let mut redactor = Redactor::new();
    if let Some(token) = credential {
        redactor.add_secret(token.clone());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim();
    let cut = stderr.floor_char_boundary(STDERR_LIMIT.min(stderr.len()));
    GitError::Failed {
        command: describe(args),
        status: output.status.to_string(),
        stderr: redactor.redact(&stderr[..cut]).into_owned(),
    }
}

/// The first few arguments, for messages. Arguments never hold secrets.
fn describe(args: &[&OsStr]) -> String {
    args.iter()
        .take(6)
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `scheme://host[:port]/` of the first http(s) URL among `args`.
fn origin_of(args: &[&OsStr]) -> Option<String> {
    args.iter().find_map(|arg| {
        let arg = arg.to_str()?;
        let (scheme, rest) = arg.split_once("://")?;
        if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
            return None;
        }
        let host = rest.split('/').next().filter(|h| !h.is_empty())?;
        Some(format!("{scheme}://{host}/"))
    })
}

/// `Authorization: Basic base64("x-access-token:<token>")`, the form GitHub
/// accepts for installation and personal tokens over HTTPS git.
fn authorization_header(token: &SecretString) -> OsString {
    let encoded = base64::engine::general_purpose::STANDARD
        .encode(format!("x-access-token:{}", token.expose_secret()));
    OsString::from(format!("Authorization: Basic {encoded}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_credential_travels_only_in_the_environment_of_that_process() {
        let token = SecretString::from("ghs_supersecrettokenvalue1234567890");
        let encoded = base64::engine::general_purpose::STANDARD
            .encode("x-access-token:ghs_supersecrettokenvalue1234567890");
        let git = Git::new(PathBuf::from("/nonexistent-home"));
        let args = [OsStr::new("fetch"), OsStr::new("https://example.com/o/r")];
        let with = git.command(Path::new("/tmp"), &args, Some(&token));
        let std = with.as_std();
        for arg in std.get_args() {
            let arg = arg.to_string_lossy();
            assert!(
                !arg.contains("supersecret") && !arg.contains(&encoded),
                "{arg}"
            );
        }
        let header = std
            .get_envs()
            .filter_map(|(_, v)| v)
            .any(|v| v.to_string_lossy() == format!("Authorization: Basic {encoded}"));
        assert!(header);

        let without = git.command(Path::new("/tmp"), &args, None);
        assert!(
            without
                .as_std()
                .get_envs()
                .filter_map(|(_, v)| v)
                .all(|v| !v.to_string_lossy().contains("Authorization"))
        );
    }

    /// What git itself would send as `http.extraHeader` to `url`, run with
    /// the environment of a command that fetched `fetched` with a token.
    fn header_git_would_send(fetched: &str, url: &str) -> String {
        let token = SecretString::from("ghs_scopedtokenvalue000000000000000");
        let home = tempfile::tempdir().unwrap();
        let git = Git::new(home.path().to_owned());
        let args = [OsStr::new("fetch"), OsStr::new(fetched)];
        let template = git.command(home.path(), &args, Some(&token));
        let mut probe = std::process::Command::new("git");
        probe
            .args(["config", "--get-urlmatch", "http.extraHeader", url])
            .current_dir(home.path())
            .env_clear();
        for (key, value) in template.as_std().get_envs() {
            if let Some(value) = value {
                probe.env(key, value);
            }
        }
        let out = probe.output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn the_header_goes_only_to_the_origin_the_fetch_names() {
        // Another issue's agent shares the mirror and can plant
        // `url.<evil>.insteadOf` between our config restore and the fetch;
        // the rewritten URL must not receive the token.
        let fetched = "https://github.com/octo/widgets.git";
        assert!(header_git_would_send(fetched, fetched).starts_with("Authorization: Basic "));
        for elsewhere in [
            "https://evil.example/octo/widgets.git",
            "http://github.com/octo/widgets.git",
            "https://github.com.evil.example/x",
        ] {
            assert_eq!(header_git_would_send(fetched, elsewhere), "", "{elsewhere}");
        }
    }

    #[test]
    fn hooks_are_off_and_no_outside_config_is_read() {
        let git = Git::new(PathBuf::from("/h"));
        let cmd = git.command(Path::new("/tmp/x"), &[OsStr::new("status")], None);
        let envs: Vec<(String, String)> = cmd
            .as_std()
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_string_lossy().into(), v?.to_string_lossy().into())))
            .collect();
        let get = |name: &str| {
            envs.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("GIT_CONFIG_NOSYSTEM"), Some("1"));
        assert_eq!(get("GIT_CONFIG_GLOBAL"), Some("/dev/null"));
        assert_eq!(get("GIT_TERMINAL_PROMPT"), Some("0"));
        assert_eq!(get("HOME"), Some("/h"));
        assert_eq!(get("GIT_CONFIG_KEY_0"), Some("core.hooksPath"));
        assert_eq!(get("GIT_CONFIG_VALUE_0"), Some("/dev/null"));
    }
}
