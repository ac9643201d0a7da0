//! The one way the controller runs git.
//!
//! Every invocation gets a cleared environment: `PATH`, an empty private
//! `HOME`, `LC_ALL=C`, no system or global config, no terminal prompts, no
//! replace refs. Hardening settings go in through `GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which outrank every config file,
//! so a repository config an agent tampered with cannot turn hooks,
//! fsmonitor, a proxy or a credential helper back on for the controller's own
//! git. A [`Git`] bound to a mirror also pins that mirror (see
//! [`super::pin`]) right before each command, which covers the URL-scoped
//! keys the environment cannot outrank.
//!
//! The GitHub credential, when a fetch or push needs one, never enters an
//! environment variable, an argument, a URL or a file. It is written into a
//! pipe whose read end becomes file descriptor 3 of that one git process
//! (through a tiny `sh` wrapper that moves it there from stdin), and a
//! credential helper scoped to the origin of the URL the command names reads
//! it from that descriptor when git asks. The pipe is empty once read. Only
//! git's own process tree holds the descriptor; git's error output is
//! redacted before it enters an error value.

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use secrecy::{ExposeSecret, SecretString};
use tokio::process::Command;

use super::pin::{PinError, pin};
use crate::redact::Redactor;

/// Config every controller git process runs with, whatever the repository
/// config says. Empty values reset list-valued keys (helpers, headers,
/// resolve overrides, push options) that a config file may have filled.
const HARDENING: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),
    ("http.proxy", ""),
    ("http.sslVerify", "true"),
    ("http.extraHeader", ""),
    ("http.curloptResolve", ""),
    ("http.followRedirects", "false"),
    ("http.cookieFile", ""),
    ("http.saveCookies", "false"),
    ("http.emptyAuth", "false"),
    ("push.followTags", "false"),
    ("push.recurseSubmodules", "no"),
    ("push.gpgSign", "false"),
    ("push.pushOption", ""),
    ("push.negotiate", "false"),
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

/// Answers git's `get` with what arrives on descriptor 3 and ignores
/// `store`/`erase`. Git appends the operation name as `$1`.
const CREDENTIAL_HELPER: &str =
    "!f() { cat >/dev/null; if [ \"$1\" = get ]; then cat <&3; fi; }; f";

/// Moves the credential pipe from stdin to descriptor 3, then becomes git.
/// `exec 3<&0` makes a descriptor that survives exec, so git and the
/// helpers it starts inherit it.
const FD3_WRAPPER: &str = "exec 3<&0 0</dev/null && exec git \"$@\"";

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
    #[error("cannot pin the repository before git {command}: {source}")]
    Pin {
        command: String,
        #[source]
        source: PinError,
    },
}

/// Runs git with the controller's fixed environment.
#[derive(Debug, Clone)]
pub struct Git {
    home: PathBuf,
    /// A mirror to pin before every command, when bound to one.
    pinned: Option<PathBuf>,
}

/// git by its absolute path, so it is spawned rather than forked (see
/// `programs`); looked up once, as the controller's `PATH` never changes
/// while it runs and each run starts dozens of git commands.
static GIT_PROGRAM: std::sync::LazyLock<PathBuf> =
    std::sync::LazyLock::new(|| crate::programs::controller_program("git"));

/// How much of git's stderr an error keeps.
const STDERR_LIMIT: usize = 4096;

impl Git {
    /// `home` is an empty directory owned by the controller: git reads
    /// nothing from the operator's real home.
    pub fn new(home: PathBuf) -> Self {
        Self { home, pinned: None }
    }

    /// The same runner, pinning the bare repository `git_dir` before each
    /// command it starts.
    pub fn pinning(&self, git_dir: &Path) -> Self {
        Self {
            home: self.home.clone(),
            pinned: Some(git_dir.to_owned()),
        }
    }

    /// A git command in `dir` (a work tree, or a bare repository given with
    /// `--git-dir` in `args`), fully configured including stdin. The mirror
    /// this runner is bound to is pinned first.
    pub fn command(
        &self,
        dir: &Path,
        args: &[&OsStr],
        credential: Option<&SecretString>,
    ) -> Result<Command, GitError> {
        if let Some(git_dir) = &self.pinned {
            pin(git_dir).map_err(|source| GitError::Pin {
                command: describe(args),
                source,
            })?;
        }
        // The helper is scoped to the origin of the URL this invocation
        // names, so a URL rewrite (an `insteadOf` planted in the shared
        // mirror config by a concurrently running agent) cannot carry the
        // credential to another host. No URL argument, no credential.
        let helper_key = credential
            .and(origin_of(args))
            .map(|origin| format!("credential.{origin}.helper"));
        let mut command = match (credential, &helper_key) {
            (Some(token), Some(_)) => {
                let mut command = Command::new("/bin/sh");
                command.args([OsStr::new("-c"), OsStr::new(FD3_WRAPPER), OsStr::new("git")]);
                command.stdin(credential_pipe(token).map_err(|source| GitError::Spawn {
                    command: describe(args),
                    source,
                })?);
                command
            }
            _ => {
                let mut command = Command::new(&*GIT_PROGRAM);
                command.stdin(Stdio::null());
                command
            }
        };
        command.args(args).current_dir(dir).env_clear();
        self.set_environment(&mut command, dir, helper_key.as_deref());
        command.kill_on_drop(true);
        Ok(command)
    }

    fn set_environment(&self, command: &mut Command, dir: &Path, helper_key: Option<&str>) {
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
        let mut config: Vec<(&str, &str)> = HARDENING.to_vec();
        if let Some(key) = helper_key {
            // After the reset of `credential.helper` above, so it survives.
            config.push((key, CREDENTIAL_HELPER));
        }
        command.env("GIT_CONFIG_COUNT", config.len().to_string());
        for (i, (key, value)) in config.into_iter().enumerate() {
            command
                .env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
    }

    /// Runs git to completion and returns its output whatever the status.
    pub async fn output(
        &self,
        dir: &Path,
        args: &[&OsStr],
        credential: Option<&SecretString>,
    ) -> Result<Output, GitError> {
        self.command(dir, args, credential)?
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

/// A pipe already holding the helper's answer, its write end closed, to be
/// the child's stdin. Both ends are close-on-exec in this process, so no
/// other child the controller starts meanwhile inherits them. A token is
/// far below the pipe's capacity, so writing before the child runs cannot
/// block.
fn credential_pipe(token: &SecretString) -> std::io::Result<std::io::PipeReader> {
    let (reader, mut writer) = std::io::pipe()?;
    let answer = SecretString::from(format!(
        "username=x-access-token\npassword={}\n",
        token.expose_secret()
    ));
    writer.write_all(answer.expose_secret().as_bytes())?;
    drop(writer);
    Ok(reader)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TOKEN: &str = "ghs_supersecrettokenvalue1234567890";

    fn fetch_args(url: &str) -> [&OsStr; 2] {
        [OsStr::new("fetch"), OsStr::new(url)]
    }

    #[test]
    fn the_credential_is_in_no_argument_and_no_environment_variable() {
        let token = SecretString::from(TOKEN);
        let git = Git::new(PathBuf::from("/nonexistent-home"));
        let args = fetch_args("https://example.com/o/r");
        let with = git.command(Path::new("/tmp"), &args, Some(&token)).unwrap();
        let std = with.as_std();
        for arg in std.get_args() {
            assert!(!arg.to_string_lossy().contains("supersecret"), "{arg:?}");
        }
        for (key, value) in std.get_envs() {
            let value = value.map(OsStr::to_string_lossy).unwrap_or_default();
            assert!(!value.contains("supersecret"), "{key:?}={value}");
            assert!(!value.contains("Authorization"), "{key:?}={value}");
        }
        let helper = std
            .get_envs()
            .filter_map(|(_, v)| v)
            .any(|v| v == OsStr::new(CREDENTIAL_HELPER));
        assert!(helper, "the helper is configured");

        let without = git.command(Path::new("/tmp"), &args, None).unwrap();
        // Git itself, by its absolute path so it is spawned, not forked.
        let program = Path::new(without.as_std().get_program());
        assert!(program.is_absolute(), "{program:?}");
        assert_eq!(program.file_name(), Some(OsStr::new("git")));
        assert!(
            without
                .as_std()
                .get_envs()
                .filter_map(|(_, v)| v)
                .all(|v| v != OsStr::new(CREDENTIAL_HELPER))
        );
    }

    /// The credential helper git would run for `url`, in the environment of
    /// a command that fetched `fetched` with a token.
    fn helper_git_would_run(fetched: &str, url: &str) -> String {
        let token = SecretString::from(TOKEN);
        let home = tempfile::tempdir().unwrap();
        let git = Git::new(home.path().to_owned());
        let args = fetch_args(fetched);
        let template = git.command(home.path(), &args, Some(&token)).unwrap();
        let mut probe = std::process::Command::new("git");
        probe
            .args(["config", "--get-urlmatch", "credential.helper", url])
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
    fn the_helper_answers_only_for_the_origin_the_fetch_names() {
        // Another issue's agent shares the mirror and can plant
        // `url.<evil>.insteadOf` between our pin and the fetch; the
        // rewritten URL must not receive the token.
        let fetched = "https://github.com/octo/widgets.git";
        assert_eq!(helper_git_would_run(fetched, fetched), CREDENTIAL_HELPER);
        for elsewhere in [
            "https://evil.example/octo/widgets.git",
            "http://github.com/octo/widgets.git",
            "https://github.com.evil.example/x",
        ] {
            assert_eq!(helper_git_would_run(fetched, elsewhere), "", "{elsewhere}");
        }
    }

    #[test]
    fn the_helper_prints_what_the_pipe_holds_and_only_for_get() {
        let token = SecretString::from(TOKEN);
        let run = |operation: &str| {
            let script = format!("{} {operation}", &CREDENTIAL_HELPER[1..]);
            let output = std::process::Command::new("/bin/sh")
                .args(["-c", &format!("exec 3<&0 0</dev/null; {script}")])
                .stdin(credential_pipe(&token).unwrap())
                .output()
                .unwrap();
            assert!(output.status.success(), "{operation}");
            String::from_utf8(output.stdout).unwrap()
        };
        assert_eq!(
            run("get"),
            format!("username=x-access-token\npassword={TOKEN}\n")
        );
        assert_eq!(run("store"), "");
        assert_eq!(run("erase"), "");
    }

    #[test]
    fn hooks_are_off_and_no_outside_config_is_read() {
        let git = Git::new(PathBuf::from("/h"));
        let cmd = git
            .command(Path::new("/tmp/x"), &[OsStr::new("status")], None)
            .unwrap();
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
