//! Errors of the GitHub client. Callers branch on them: a 404 is often an
//! answer ("no parent issue"), a rate limit means "later", and for a write
//! the difference between a refusal and an unknown outcome decides whether
//! the effect executor marks a conflict or reconciles.

use super::pagination::LinkError;
use super::ratelimit::RateScope;
use std::time::SystemTime;

#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    /// GitHub answered with a non-success status (after retries, for reads).
    #[error("GitHub answered {status} to {method} {path}: {message}")]
    Status {
        method: &'static str,
        path: String,
        status: u16,
        message: String,
    },
    /// The scope's budget is paused for longer than we are willing to wait.
    #[error("GitHub rate limit for {scope:?} holds requests until {until:?}")]
    RateLimited { scope: RateScope, until: SystemTime },
    /// No response arrived in time; for a write the outcome is unknown.
    #[error("{method} {path} timed out")]
    Timeout { method: &'static str, path: String },
    /// The connection failed or the request could not be sent or read.
    #[error("{method} {path} failed before GitHub answered: {message}")]
    Transport {
        method: &'static str,
        path: String,
        message: String,
    },
    /// No installation token could be obtained (App key, App not installed,
    /// GitHub down); the request itself was not sent.
    #[error("could not obtain GitHub credentials (GitHub answered {status}): {message}")]
    Credentials { status: u16, message: String },
    /// A success body that does not have the shape we read.
    #[error("GitHub's answer to {path} does not have the expected shape: {source}")]
    Decode {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// A listing stopped before its end; partial listings are never returned.
    #[error("listing {path} could not be completed after {pages_read} page(s): {source}")]
    IncompleteListing {
        path: String,
        pages_read: usize,
        #[source]
        source: Box<GitHubError>,
    },
    #[error("listing {path} is inconsistent: {detail}")]
    InconsistentListing { path: String, detail: String },
    /// A success answer that contradicts itself or our request.
    #[error("GitHub's answer to {path} is unusable: {detail}")]
    UnexpectedAnswer { path: String, detail: String },
    #[error("listing {path} has more than {max_pages} pages")]
    TooManyPages { path: String, max_pages: usize },
    #[error(transparent)]
    Link(#[from] LinkError),
    /// Misconfiguration: bad API URL, unreadable private key, wrong auth kind.
    #[error("GitHub client setup: {0}")]
    Setup(String),
}

impl GitHubError {
    /// The HTTP status GitHub answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            GitHubError::Status { status, .. } => Some(*status),
            GitHubError::IncompleteListing { source, .. } => source.status(),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// When the rate-limit gate opens again, if the request was held at it
    /// (and so never sent).
    pub fn held_until(&self) -> Option<SystemTime> {
        match self {
            GitHubError::RateLimited { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// True when a write may or may not have landed: the executor must
    /// reconcile before deciding anything (SPEC §6 rule 2).
    pub fn is_outcome_unknown(&self) -> bool {
        match self {
            GitHubError::Timeout { .. } | GitHubError::Transport { .. } => true,
            GitHubError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// True for failures worth retrying a read for.
    pub(super) fn is_transient(&self) -> bool {
        match self {
            GitHubError::Credentials { status, .. } => *status >= 500,
            other => other.is_outcome_unknown(),
        }
    }
}

/// Renders an octocrab error without its useless `Display` ("GitHub") and
/// without anything but status and message.
pub(super) fn describe_octocrab_error(error: &octocrab::Error) -> String {
    match error {
        octocrab::Error::GitHub { source, .. } => {
            format!("GitHub answered {}: {}", source.status_code, source.message)
        }
        other => {
            let mut message = other.to_string();
            let mut cause = std::error::Error::source(other);
            while let Some(inner) = cause {
                message.push_str(": ");
                message.push_str(&inner.to_string());
                cause = inner.source();
            }
            message
        }
    }
}
