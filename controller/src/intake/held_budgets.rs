//! The rate-limit scopes a poll pass found held at the client's gate.
//!
//! Once an installation's budget is spent beyond what the client waits
//! in-task, every further read of it in the same pass would fail at once
//! at the gate (nothing is sent). The pass skips the rest of that scope's
//! repositories and runs and says so in one line, instead of a warning per
//! run: a fleet of a thousand runs would otherwise log a thousand each
//! interval until the budget refills.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::github::{GitHubApi, GitHubError, RateScope};

/// Held scopes of one pass, with what each held back.
#[derive(Debug, Default)]
pub(super) struct HeldBudgets {
    held: BTreeMap<RateScope, Held>,
}

#[derive(Debug)]
struct Held {
    until: SystemTime,
    skipped: usize,
}

impl HeldBudgets {
    /// Whether `api`'s budget was found held earlier in this pass; the
    /// read it would have made is counted as skipped.
    pub(super) fn skips(&mut self, api: &GitHubApi) -> bool {
        match self.held.get_mut(&api.scope()) {
            Some(held) => {
                held.skipped += 1;
                true
            }
            None => false,
        }
    }

    /// Whether `error` is the gate holding `api`'s budget; if so the scope
    /// is remembered and the caller logs nothing of its own.
    pub(super) fn notice(&mut self, api: &GitHubApi, error: &anyhow::Error) -> bool {
        let until = error
            .chain()
            .find_map(|cause| cause.downcast_ref::<GitHubError>()?.held_until());
        let Some(until) = until else {
            return false;
        };
        self.held
            .entry(api.scope())
            .or_insert(Held { until, skipped: 0 });
        true
    }

    /// One line per held scope.
    pub(super) fn log(&self) {
        for (scope, held) in &self.held {
            let wait_s = held
                .until
                .duration_since(SystemTime::now())
                .unwrap_or_default()
                .as_secs();
            tracing::warn!(
                scope = %scope.gauge_label(),
                wait_s,
                skipped = held.skipped,
                "GitHub's rate-limit budget is held: this pass skipped the rest of its reads"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::github::{GitHubAuth, GitHubClient};
    use secrecy::SecretString;
    use std::time::Duration;

    fn api() -> GitHubApi {
        GitHubClient::new(
            "http://127.0.0.1:9",
            GitHubAuth::Token(SecretString::from("t".to_owned())),
        )
        .unwrap()
        .installation(1)
        .unwrap()
    }

    #[tokio::test]
    async fn once_a_scope_is_found_held_its_later_reads_are_skipped_and_counted() {
        let mut held = HeldBudgets::default();
        let api = api();
        // Another failure says nothing about the budget.
        let unrelated = anyhow::anyhow!("GitHub answered 502");
        assert!(!held.notice(&api, &unrelated));
        assert!(!held.skips(&api));
        let until = SystemTime::now() + Duration::from_secs(600);
        let limited = anyhow::Error::new(GitHubError::RateLimited {
            scope: api.scope(),
            until,
        })
        .context("polling run 7");
        assert!(held.notice(&api, &limited));
        assert!(held.skips(&api));
        assert!(held.skips(&api));
        assert_eq!(held.held[&api.scope()].skipped, 2);
        assert_eq!(held.held[&api.scope()].until, until);
    }
}
