//! `autoforge doctor`: checks that an installation can work before it is
//! trusted with a run, one line per check with what to do when it fails.
//!
//! [`Report`] holds the [`Check`]s in the order they ran and renders them
//! for people or as JSON. The checks themselves live in [`local`] (the
//! configuration, git, bubblewrap, agent programs, prompts, the
//! database), [`github`] (the App's real permissions, events, webhook
//! configuration and recent deliveries, read, never written) and
//! [`probe`] (`--probe`: one real, billable agent launch per profile in a
//! throw-away repository).

pub mod github;
pub mod local;
pub mod probe;

use serde::Serialize;

use crate::config::{Config, ConfigError};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Fail,
    /// Not run, because something it needs failed or is not configured.
    Skipped,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Fail => "FAIL",
            Status::Skipped => "SKIP",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable name, for scripts reading `--json` (`database`, `agent:claude`).
    pub name: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A probe's measurements, for `--probe` lines only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<probe::ProbeFacts>,
}

impl Check {
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Status::Ok, detail, None)
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(name, Status::Fail, detail, Some(fix.into()))
    }

    pub fn skipped(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Status::Skipped, detail, None)
    }

    fn new(
        name: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
        fix: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            status,
            detail: detail.into(),
            fix,
            probe: None,
        }
    }

    /// The line people read: `OK   name: detail`, and on a failure what
    /// to do after an arrow.
    pub fn line(&self) -> String {
        let mut line = format!("{:<4} {}: {}", self.status.label(), self.name, self.detail);
        if let Some(fix) = &self.fix {
            line.push_str(" -> ");
            line.push_str(fix);
        }
        line
    }
}

/// Every check, in the order they ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn extend(&mut self, checks: impl IntoIterator<Item = Check>) {
        self.checks.extend(checks);
    }

    /// Whether any check failed (the command then exits 1).
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }

    /// The report for people, one line per check and a closing verdict.
    pub fn text(&self) -> String {
        let mut text: String = self.checks.iter().map(|c| c.line() + "\n").collect();
        let failed = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .count();
        text.push_str(&match failed {
            0 => "doctor: every check passed\n".to_owned(),
            n => format!("doctor: {n} check(s) failed\n"),
        });
        text
    }

    /// The report for machines: `{"ok": bool, "checks": [...]}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({ "ok": !self.failed(), "checks": self.checks })
    }
}

/// The checks that need no probe, given how loading the configuration went.
/// A configuration that does not load still gets the host checks, so one
/// run shows everything that is wrong.
pub async fn run_checks(config: &Result<Config, ConfigError>) -> Report {
    let mut report = Report::default();
    report.push(local::config_check(config));
    report.push(local::git_check().await);
    let sandbox = config
        .as_ref()
        .map_or(crate::sandbox::SandboxMode::Bubblewrap, |c| {
            c.settings.agents.sandbox
        });
    report.push(local::sandbox_check(sandbox).await);
    let Ok(config) = config else {
        for name in ["agents", "prompts", "database", "github"] {
            report.push(Check::skipped(name, "needs a valid configuration"));
        }
        return report;
    };
    report.extend(local::agent_checks(config));
    report.push(local::prompts_check(config));
    report.push(local::database_check(config).await);
    report.extend(github::checks(config).await);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_names_its_fix_and_fails_the_report() {
        let mut report = Report::default();
        report.push(Check::ok("git", "git version 2.47"));
        assert!(!report.failed());
        report.push(Check::fail(
            "database",
            "cannot connect",
            "set DATABASE_URL",
        ));
        assert!(report.failed());
        let text = report.text();
        assert!(text.contains("OK   git: git version 2.47\n"), "{text}");
        assert!(
            text.contains("FAIL database: cannot connect -> set DATABASE_URL\n"),
            "{text}"
        );
        assert!(text.ends_with("doctor: 1 check(s) failed\n"), "{text}");
        let json = report.json();
        assert_eq!(json["ok"], false);
        assert_eq!(json["checks"][1]["status"], "fail");
        assert_eq!(json["checks"][1]["fix"], "set DATABASE_URL");
        assert!(json["checks"][0].get("fix").is_none());
    }
}
