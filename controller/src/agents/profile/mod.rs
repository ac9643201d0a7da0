//! Runtime agent profiles (SPEC §13): the argv prefix of a coding-agent CLI,
//! how it receives its prompt, its environment adjustments, its limits and
//! where its final message and token usage come out ([`output`]).
//!
//! The TOML shape lives in `config`; this module holds the checked runtime
//! form. [`ProfileSpec`] is plain data so the config types convert into it
//! field by field, and [`LaunchProfile::from_spec`] does every check once, at
//! load time, so a launch never discovers a broken profile.
//!
//! The config file spells a removal as `env = { NAME = false }` (TOML has no
//! `null`); here it is the `env_remove` list. Variables the profile needs
//! from the controller's own environment (for example a vendor API key that
//! must not sit in the config file) are listed in `env_inherit`. Values set
//! in `env` may be API keys too, so they are secrets: redacted in `Debug`
//! and fed to the launch's redactor.

pub mod output;
mod price;
mod routing;
mod usage;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use crate::agents::supervisor::environment::{is_credential_name, is_valid_env_name};
use crate::sandbox::SandboxPolicy;

pub use output::{OutputFormat, OutputKind, OutputSpec, ReadOutput, TokenUsage, UsageFields};
pub use price::PriceTable;
pub use routing::{AgentCatalog, ReviewRole, ReviewRoute, RoleRouting, RoundRange, RoutingError};
pub use usage::UsagePattern;

/// The argument placeholder replaced by the path of the prompt file. When a
/// profile's command contains it, the prompt is not written to stdin.
pub const PROMPT_FILE_PLACEHOLDER: &str = "{prompt_file}";
/// The argument placeholder replaced by the path where the agent writes its
/// final message; the CONTROL_RESULT is then searched there, not in stdout.
pub const OUTPUT_PLACEHOLDER: &str = "{output}";

/// A profile as plain data, what the config file's profile converts into.
#[derive(Debug, Clone, Default)]
pub struct ProfileSpec {
    pub command: Vec<String>,
    pub env: BTreeMap<String, SecretString>,
    pub env_remove: Vec<String>,
    pub env_inherit: Vec<String>,
    pub idle_timeout_seconds: u64,
    pub max_runtime_seconds: u64,
    pub usage_pattern: Option<String>,
    /// Where the final message and the usage come out.
    pub output: OutputSpec,
    /// The sandbox this profile's launches run in.
    pub sandbox: SandboxPolicy,
    /// Prices per million tokens, for the estimated cost of a launch.
    pub price: Option<PriceTable>,
}

/// Why a profile was refused at load time. Messages name the profile and the
/// rule; they never echo an environment value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    #[error("agent profile `{profile}`: `command` must name a program")]
    EmptyCommand { profile: String },
    #[error("agent profile `{profile}`: `{field}` must be at least 1 second")]
    ZeroTimeout {
        profile: String,
        field: &'static str,
    },
    #[error("agent profile `{profile}`: `usage_pattern` {reason}")]
    BadUsagePattern { profile: String, reason: String },
    #[error("agent profile `{profile}`: `output`: {reason}")]
    BadOutput { profile: String, reason: String },
    #[error("agent profile `{profile}`: `price`: {reason}")]
    BadPrice { profile: String, reason: String },
    #[error("agent profile `{profile}`: `{name}` is not a valid environment variable name")]
    InvalidEnvName { profile: String, name: String },
    #[error("agent profile `{profile}`: `{name}` is both set and removed")]
    EnvSetAndRemoved { profile: String, name: String },
    #[error(
        "agent profile `{profile}`: `{name}` looks like a controller or GitHub credential and may not reach an agent"
    )]
    CredentialEnvName { profile: String, name: String },
    #[error("agent profile `{profile}`: the command uses `{placeholder}` but no path was given")]
    MissingPlaceholderPath {
        profile: String,
        placeholder: &'static str,
    },
}

/// A checked, ready-to-launch agent profile.
#[derive(Debug, Clone)]
pub struct LaunchProfile {
    pub name: String,
    pub command: Vec<String>,
    /// Variables set for the agent (after the allow-list), by name. Values
    /// may be vendor keys: `Debug` shows them redacted.
    pub env: BTreeMap<String, SecretString>,
    /// Variables removed after the allow-list and `env_inherit` are applied.
    pub env_remove: Vec<String>,
    /// Variables copied from the controller's environment when present.
    pub env_inherit: Vec<String>,
    pub idle_timeout: Duration,
    pub max_runtime: Duration,
    /// How to read the final message and the usage from the output.
    pub output: OutputFormat,
    pub sandbox: SandboxPolicy,
    /// Prices per million tokens; `None` means no cost estimate.
    pub price: Option<PriceTable>,
}

impl LaunchProfile {
    /// Checks `spec` and builds the runtime profile named `name`.
    pub fn from_spec(name: &str, spec: ProfileSpec) -> Result<Self, ProfileError> {
        let profile = name.to_owned();
        if spec
            .command
            .first()
            .is_none_or(|program| program.trim().is_empty())
        {
            return Err(ProfileError::EmptyCommand { profile });
        }
        for (field, value) in [
            ("idle_timeout_seconds", spec.idle_timeout_seconds),
            ("max_runtime_seconds", spec.max_runtime_seconds),
        ] {
            if value == 0 {
                return Err(ProfileError::ZeroTimeout { profile, field });
            }
        }
        let names = spec
            .env
            .keys()
            .chain(&spec.env_remove)
            .chain(&spec.env_inherit);
        for env_name in names {
            if !is_valid_env_name(env_name) {
                return Err(ProfileError::InvalidEnvName {
                    profile,
                    name: env_name.clone(),
                });
            }
            if is_credential_name(env_name) {
                return Err(ProfileError::CredentialEnvName {
                    profile,
                    name: env_name.clone(),
                });
            }
        }
        if let Some(both) = spec
            .env_remove
            .iter()
            .find(|n| spec.env.contains_key(n.as_str()) || spec.env_inherit.contains(n))
        {
            return Err(ProfileError::EnvSetAndRemoved {
                profile,
                name: both.clone(),
            });
        }
        if let Some(reason) = spec.price.as_ref().and_then(PriceTable::problem) {
            return Err(ProfileError::BadPrice { profile, reason });
        }
        let output = OutputFormat::from_spec(spec.output, spec.usage_pattern.as_deref()).map_err(
            |(key, reason)| match key {
                "usage_pattern" => ProfileError::BadUsagePattern {
                    profile: profile.clone(),
                    reason,
                },
                _ => ProfileError::BadOutput {
                    profile: profile.clone(),
                    reason,
                },
            },
        )?;
        Ok(Self {
            name: profile,
            command: spec.command,
            env: spec.env,
            env_remove: spec.env_remove,
            env_inherit: spec.env_inherit,
            idle_timeout: Duration::from_secs(spec.idle_timeout_seconds),
            max_runtime: Duration::from_secs(spec.max_runtime_seconds),
            output,
            sandbox: spec.sandbox,
            price: spec.price,
        })
    }

    /// Whether the prompt goes into a file named on the command line rather
    /// than on stdin.
    pub fn uses_prompt_file(&self) -> bool {
        self.command
            .iter()
            .any(|a| a.contains(PROMPT_FILE_PLACEHOLDER))
    }

    /// Whether the agent writes its final message to a file we name.
    pub fn uses_output_file(&self) -> bool {
        self.command.iter().any(|a| a.contains(OUTPUT_PLACEHOLDER))
    }

    /// The full argv with `{prompt_file}` and `{output}` replaced, also
    /// inside larger arguments such as `--out={output}`.
    ///
    /// Returns an error rather than launching with a literal placeholder when
    /// the command uses one and the caller passed no path for it.
    pub fn argv(
        &self,
        prompt_file: Option<&Path>,
        output_file: Option<&Path>,
    ) -> Result<Vec<OsString>, ProfileError> {
        let missing = |placeholder| ProfileError::MissingPlaceholderPath {
            profile: self.name.clone(),
            placeholder,
        };
        if self.uses_prompt_file() && prompt_file.is_none() {
            return Err(missing(PROMPT_FILE_PLACEHOLDER));
        }
        if self.uses_output_file() && output_file.is_none() {
            return Err(missing(OUTPUT_PLACEHOLDER));
        }
        let substitutions = [
            (PROMPT_FILE_PLACEHOLDER, prompt_file),
            (OUTPUT_PLACEHOLDER, output_file),
        ];
        Ok(self
            .command
            .iter()
            .map(|arg| substitute(arg, &substitutions))
            .collect())
    }

    /// Token usage read from a text output with `usage_pattern` (JSON
    /// outputs are read whole by [`LaunchProfile::read_output`]).
    pub fn parse_tokens(&self, output: &str) -> Option<u64> {
        self.output.usage_pattern.as_ref()?.tokens_in(output)
    }

    /// The final message and the usage in a launch's captured output.
    pub fn read_output(&self, stdout: &str, stderr: &str) -> ReadOutput {
        self.output.read(stdout, stderr)
    }

    /// The values this profile sets, for the launch's redactor: a vendor
    /// key written into the config file must not reach a log either.
    pub fn env_secrets(&self) -> impl Iterator<Item = &SecretString> {
        self.env.values()
    }

    /// The value of an `env` entry, for building the child's environment.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(ExposeSecret::expose_secret)
    }
}

/// Replaces each placeholder in `arg` by its path, building an `OsString` so
/// non-UTF-8 paths survive intact.
fn substitute(arg: &str, substitutions: &[(&str, Option<&Path>); 2]) -> OsString {
    let mut out = OsString::new();
    let mut rest = arg;
    'scan: while !rest.is_empty() {
        for (placeholder, path) in substitutions {
            if let (Some(path), Some(stripped)) = (path, rest.strip_prefix(placeholder)) {
                out.push(path.as_os_str());
                rest = stripped;
                continue 'scan;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            let mut buf = [0u8; 4];
            out.push(OsStr::new(c.encode_utf8(&mut buf)));
        }
        rest = chars.as_str();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn spec(command: &[&str]) -> ProfileSpec {
        ProfileSpec {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            idle_timeout_seconds: 600,
            max_runtime_seconds: 3600,
            ..ProfileSpec::default()
        }
    }

    #[test]
    fn placeholders_are_replaced_whole_and_inside_arguments() {
        let p = LaunchProfile::from_spec(
            "codex",
            spec(&[
                "codex",
                "exec",
                "--prompt-file",
                "{prompt_file}",
                "--out={output}",
            ]),
        )
        .unwrap();
        assert!(p.uses_prompt_file() && p.uses_output_file());
        let argv = p
            .argv(
                Some(Path::new("/l/prompt.md")),
                Some(Path::new("/l/final.txt")),
            )
            .unwrap();
        assert_eq!(
            argv,
            [
                "codex",
                "exec",
                "--prompt-file",
                "/l/prompt.md",
                "--out=/l/final.txt"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn a_command_without_placeholders_reads_the_prompt_on_stdin() {
        let p = LaunchProfile::from_spec("claude", spec(&["claude", "-p"])).unwrap();
        assert!(!p.uses_prompt_file());
        assert_eq!(
            p.argv(None, None).unwrap(),
            ["claude", "-p"].map(OsString::from)
        );
    }

    #[test]
    fn a_used_placeholder_without_a_path_is_an_error() {
        let p = LaunchProfile::from_spec("x", spec(&["x", "{output}"])).unwrap();
        assert_eq!(
            p.argv(None, None),
            Err(ProfileError::MissingPlaceholderPath {
                profile: "x".into(),
                placeholder: OUTPUT_PLACEHOLDER
            })
        );
    }

    #[test]
    fn empty_command_zero_timeouts_and_bad_regex_are_refused() {
        assert!(matches!(
            LaunchProfile::from_spec("p", spec(&[])),
            Err(ProfileError::EmptyCommand { .. })
        ));
        let mut s = spec(&["a"]);
        s.idle_timeout_seconds = 0;
        assert!(matches!(
            LaunchProfile::from_spec("p", s),
            Err(ProfileError::ZeroTimeout {
                field: "idle_timeout_seconds",
                ..
            })
        ));
        let mut s = spec(&["a"]);
        s.usage_pattern = Some("(".into());
        assert!(matches!(
            LaunchProfile::from_spec("p", s),
            Err(ProfileError::BadUsagePattern { .. })
        ));
    }

    #[test]
    fn credential_variable_names_cannot_be_configured_but_vendor_keys_can() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "AUTOFORGE_WEBHOOK_SECRET",
            "DATABASE_URL",
        ] {
            let mut s = spec(&["a"]);
            s.env.insert(name.into(), SecretString::from("v"));
            assert!(
                matches!(
                    LaunchProfile::from_spec("p", s),
                    Err(ProfileError::CredentialEnvName { .. })
                ),
                "{name}"
            );
        }
        let mut s = spec(&["a"]);
        s.env_inherit.push("ANTHROPIC_API_KEY".into());
        s.env
            .insert("OPENAI_BASE_URL".into(), SecretString::from("http://x"));
        assert!(LaunchProfile::from_spec("p", s).is_ok());
    }

    #[test]
    fn a_name_both_set_and_removed_is_refused() {
        let mut s = spec(&["a"]);
        s.env.insert("FOO".into(), SecretString::from("1"));
        s.env_remove.push("FOO".into());
        assert!(matches!(
            LaunchProfile::from_spec("p", s),
            Err(ProfileError::EnvSetAndRemoved { .. })
        ));
    }

    #[test]
    fn env_values_are_redacted_in_debug_and_offered_to_the_redactor() {
        let mut s = spec(&["a"]);
        s.env.insert(
            "VENDOR_API_KEY".into(),
            SecretString::from("sk-canary-1234567"),
        );
        let p = LaunchProfile::from_spec("p", s).unwrap();
        assert!(!format!("{p:?}").contains("canary"));
        assert_eq!(p.env_value("VENDOR_API_KEY"), Some("sk-canary-1234567"));
        assert_eq!(
            p.env_secrets()
                .map(ExposeSecret::expose_secret)
                .collect::<Vec<_>>(),
            ["sk-canary-1234567"]
        );
    }

    #[test]
    fn tokens_are_read_through_the_profile_pattern() {
        let mut s = spec(&["a"]);
        s.usage_pattern = Some(r"tokens used:\s*([0-9][0-9,]*)".into());
        let p = LaunchProfile::from_spec("p", s).unwrap();
        assert_eq!(p.parse_tokens("tokens used: 1,234\n"), Some(1_234));
        let none = LaunchProfile::from_spec("q", spec(&["a"])).unwrap();
        assert_eq!(none.parse_tokens("tokens used: 1\n"), None);
    }
}
