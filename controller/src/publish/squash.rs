//! The squash commit the controller asks GitHub for (SPEC §10): titled
//! after the pull request, `<PR title> (#<n>)`, with a body that closes
//! the run's own issue. The PR title is read from GitHub when the gate
//! passes (a person may have edited it), so it is held to the same rules
//! as the title an agent proposed before it lands on the base branch.

use super::issue_ref::IssueRef;
use super::policy::{FieldKind, PolicyViolation, check_field};
use autoforge_journal::PullNumber;

/// GitHub's limit on a PR title; the squash title adds ` (#n)` to it.
const PR_TITLE_MAX_CHARS: usize = 256;

/// The squash commit's title and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SquashCommit {
    pub title: String,
    pub message: String,
}

/// Composes the squash commit of pull request `pr` for `run_issue`.
pub fn compose_squash_commit(
    pr_title: &str,
    pr: PullNumber,
    run_issue: &IssueRef,
) -> Result<SquashCommit, PolicyViolation> {
    let pr_title = pr_title.trim();
    check_field(
        "squash commit title",
        pr_title,
        FieldKind::OneLine {
            max_chars: PR_TITLE_MAX_CHARS,
        },
    )?;
    // The body is the controller's own line only: the closing keyword is
    // the point of it, and nothing else goes in.
    Ok(SquashCommit {
        title: format!("{pr_title} (#{pr})"),
        message: format!("Closes #{}", run_issue.number),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue() -> IssueRef {
        IssueRef {
            owner: "o".into(),
            repo: "r".into(),
            number: autoforge_journal::testing::issue(7),
        }
    }

    #[test]
    fn the_title_names_the_pull_request_and_the_body_closes_the_runs_issue() {
        let commit = compose_squash_commit(
            "Add the widget",
            autoforge_journal::testing::pull(12),
            &issue(),
        );
        assert_eq!(
            commit.ok(),
            Some(SquashCommit {
                title: "Add the widget (#12)".into(),
                message: "Closes #7".into(),
            })
        );
    }

    #[test]
    fn an_edited_title_that_closes_another_issue_is_refused() {
        let refused = compose_squash_commit(
            "Add it, fixes #3",
            autoforge_journal::testing::pull(12),
            &issue(),
        );
        assert!(
            matches!(refused, Err(PolicyViolation::ClosingKeyword { .. })),
            "{refused:?}"
        );
    }
}
