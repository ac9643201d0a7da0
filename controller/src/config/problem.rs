//! What went wrong while loading the configuration, phrased for the operator:
//! every problem names the key path, the rule it broke and, when the value came
//! from the environment, the variable that set it.

use std::fmt;
use std::path::PathBuf;

/// One rule a configuration value broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path such as `github.bogus` or `validation.commands[0]`;
    /// empty for the document root.
    pub key: String,
    /// The rule: a JSON Schema keyword (`additionalProperties`, `type`, …) or
    /// the name of a semantic check (`socket-address`, `profile-defined`, …).
    pub rule: String,
    /// A short explanation that never repeats a secret value.
    pub message: String,
    /// The environment variable that supplied the value, if one did.
    pub env_var: Option<String>,
}

impl Problem {
    pub(crate) fn new(key: impl Into<String>, rule: &str, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            rule: rule.to_owned(),
            message: message.into(),
            env_var: None,
        }
    }

    pub(crate) fn with_env_var(mut self, var: Option<&str>) -> Self {
        self.env_var = var.map(str::to_owned);
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.key.is_empty() {
            "(top level)"
        } else {
            &self.key
        };
        write!(f, "{key}")?;
        if let Some(var) = &self.env_var {
            write!(f, " (from {var})")?;
        }
        write!(f, ": {} [rule: {}]", self.message, self.rule)
    }
}

/// Where the settings being checked came from, for error headlines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    EnvironmentOnly,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::EnvironmentOnly => f.write_str("environment (no config file)"),
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax error. The message is toml's own, without the source
    /// snippet, because the offending line may hold a database password.
    #[error("{}:{line}:{column}: invalid TOML: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{origin}: {} problem(s):{}", problems.len(), ProblemList(problems))]
    Invalid {
        origin: Origin,
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// Every problem, for callers that print or inspect them one by one.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_names_key_env_var_and_rule() {
        let problem = Problem::new("server.listen", "socket-address", "not IP:PORT")
            .with_env_var(Some("AUTOFORGE_SERVER_LISTEN"));
        assert_eq!(
            problem.to_string(),
            "server.listen (from AUTOFORGE_SERVER_LISTEN): not IP:PORT [rule: socket-address]"
        );
    }

    #[test]
    fn invalid_error_lists_every_problem_on_its_own_line() {
        let error = ConfigError::Invalid {
            origin: Origin::EnvironmentOnly,
            problems: vec![
                Problem::new("a", "type", "x"),
                Problem::new("b.c", "minimum", "y"),
            ],
        };
        let text = error.to_string();
        assert!(text.starts_with("environment (no config file): 2 problem(s):"));
        assert!(text.contains("\n  a: x [rule: type]"));
        assert!(text.contains("\n  b.c: y [rule: minimum]"));
    }
}
