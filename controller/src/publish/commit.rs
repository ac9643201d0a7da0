//! The commit-message policy (SPEC §7): a candidate's commits are published
//! by the push, so their messages carry no credential and close no issue
//! other than the run's own. Violations name the commit, never quote it.

use super::issue_ref::IssueRef;
use super::policy::CLOSING_REFERENCE;
use crate::redact::{CredentialKind, find_credential};

/// Why a commit message may not be pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitMessageViolation {
    #[error("commit {sha}: message contains credential-shaped text ({kind})")]
    Credential { sha: String, kind: CredentialKind },
    #[error("commit {sha}: message closes an issue other than the run's own at byte {offset}")]
    ClosesAnotherIssue { sha: String, offset: usize },
}

/// Checks the message of commit `sha` for the run whose issue is `run_issue`.
pub fn check_commit_message(
    sha: &str,
    message: &str,
    run_issue: &IssueRef,
) -> Result<(), CommitMessageViolation> {
    if let Some(kind) = find_credential(message) {
        return Err(CommitMessageViolation::Credential {
            sha: sha.into(),
            kind,
        });
    }
    for captures in CLOSING_REFERENCE.captures_iter(message) {
        let Some(reference) = captures.name("reference") else {
            continue;
        };
        if !run_issue.is_named_by(reference.as_str()) {
            return Err(CommitMessageViolation::ClosesAnotherIssue {
                sha: sha.into(),
                offset: captures.get(0).map_or(0, |m| m.start()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue() -> IssueRef {
        IssueRef {
            owner: "o".into(),
            repo: "r".into(),
            number: autoforge_journal::testing::issue(12),
        }
    }

    #[test]
    fn closing_the_runs_own_issue_is_allowed() {
        for msg in [
            "Add x\n\nCloses #12",
            "fix o/r#12",
            "Resolves: https://github.com/O/R/issues/12",
        ] {
            assert_eq!(check_commit_message("a", msg, &issue()), Ok(()), "{msg}");
        }
    }

    #[test]
    fn closing_another_issue_is_refused_even_after_the_own_one() {
        for msg in [
            "Closes #12, closes #13",
            "fixes #012",
            "resolve other/r#12",
            "close GH-3",
        ] {
            assert!(
                matches!(
                    check_commit_message("abc", msg, &issue()),
                    Err(CommitMessageViolation::ClosesAnotherIssue { .. })
                ),
                "{msg}"
            );
        }
    }

    #[test]
    fn markup_between_keyword_and_reference_does_not_hide_another_issue() {
        for msg in [
            "Closes **#13**",
            "Fixes [other/r#12](https://github.com/other/r/issues/12)",
            "resolves <https://github.com/o/r/issues/3>",
            "fixes www.github.com/o/r/issues/3",
        ] {
            assert!(
                matches!(
                    check_commit_message("abc", msg, &issue()),
                    Err(CommitMessageViolation::ClosesAnotherIssue { .. })
                ),
                "{msg}"
            );
        }
        assert_eq!(
            check_commit_message("a", "Closes **#12**", &issue()),
            Ok(())
        );
    }

    #[test]
    fn a_credential_is_refused_and_named_by_commit() {
        let msg = format!("debug\n\ntoken ghp_{}", "a1B2c3D4e5".repeat(4));
        let err = check_commit_message("deadbeef", &msg, &issue()).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "commit deadbeef: message contains credential-shaped text (github-token)"
        );
    }
}
