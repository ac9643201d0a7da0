//! Tracing subscriber set-up: human format on a terminal, JSON otherwise.
//!
//! Logs go to stderr so stdout stays free for command output (`config
//! schema`, `status --json`). The filter comes from, in order: `RUST_LOG`,
//! the `-v`/`-q` flags, `logging.filter` in the configuration.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Environment variable that overrides every other filter source.
pub const RUST_LOG_VAR: &str = "RUST_LOG";

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid log filter from {source_name}: {message}")]
    BadFilter {
        source_name: &'static str,
        message: String,
    },
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// The filter directives to use and where they came from. `verbosity` is the
/// number of `-v` minus the number of `-q`.
pub fn choose_filter<'a>(
    rust_log: Option<&'a str>,
    configured: &'a str,
    verbosity: i8,
) -> (&'a str, &'static str) {
    if let Some(directives) = rust_log.filter(|text| !text.trim().is_empty()) {
        return (directives, RUST_LOG_VAR);
    }
    match verbosity {
        0 => (configured, "logging.filter"),
        1 => ("debug", "-v"),
        2.. => ("trace", "-vv"),
        -1 => ("warn", "-q"),
        _ => ("error", "-qq"),
    }
}

/// Whether to write JSON lines rather than human-readable text.
pub fn writes_json(format: LogFormat, stderr_is_terminal: bool) -> bool {
    match format {
        LogFormat::Json => true,
        LogFormat::Human => false,
        LogFormat::Auto => !stderr_is_terminal,
    }
}

fn parse_filter(directives: &str, source_name: &'static str) -> Result<EnvFilter, LoggingError> {
    EnvFilter::builder()
        .parse(directives)
        .map_err(|error| LoggingError::BadFilter {
            source_name,
            message: error.to_string(),
        })
}

/// Installs the global subscriber writing to stderr. Call once, early.
pub fn init(filter: &str, format: LogFormat, verbosity: i8) -> Result<(), LoggingError> {
    let rust_log = std::env::var(RUST_LOG_VAR).ok();
    let (directives, source_name) = choose_filter(rust_log.as_deref(), filter, verbosity);
    let filter = parse_filter(directives, source_name)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = if writes_json(format, std::io::stderr().is_terminal()) {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|_| LoggingError::AlreadyInstalled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_over_flags_and_configuration() {
        assert_eq!(
            choose_filter(Some("trace"), "info", -2),
            ("trace", "RUST_LOG")
        );
    }

    #[test]
    fn blank_rust_log_counts_as_unset() {
        assert_eq!(
            choose_filter(Some(" "), "info,autoforge=debug", 0),
            ("info,autoforge=debug", "logging.filter")
        );
    }

    #[test]
    fn verbose_and_quiet_flags_move_the_level() {
        assert_eq!(choose_filter(None, "info", 1).0, "debug");
        assert_eq!(choose_filter(None, "info", 3).0, "trace");
        assert_eq!(choose_filter(None, "info", -1).0, "warn");
        assert_eq!(choose_filter(None, "info", -5).0, "error");
    }

    #[test]
    fn auto_format_is_human_on_a_terminal_and_json_elsewhere() {
        assert!(!writes_json(LogFormat::Auto, true));
        assert!(writes_json(LogFormat::Auto, false));
        assert!(writes_json(LogFormat::Json, true));
        assert!(!writes_json(LogFormat::Human, false));
    }

    #[test]
    fn malformed_filter_names_its_source() {
        let error = parse_filter("info,[unclosed", "logging.filter").expect_err("malformed");
        assert!(
            error
                .to_string()
                .starts_with("invalid log filter from logging.filter:"),
            "{error}"
        );
        assert!(parse_filter("info,autoforge=debug", "logging.filter").is_ok());
    }
}
