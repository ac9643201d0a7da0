//! What the controller knows before a launch, completed after the agent
//! exits with what only the repository can tell: the worktree HEAD, its
//! ancestry and the new commits. Computed from the mirror and the worktree
//! (never from the agent's word), so the cross-checks compare the result
//! with the controller's own reading.

use crate::agents::result::{
    FixObservations, HandedOverFollowUp, ImplementObservations, Observations, ReviewObservations,
    UpdateEpicObservations,
};
use crate::publish::{CommitMessageViolation, IssueRef, check_commit_message};
use crate::workspace::{CommitSha, Mirror, WorkspaceError, Worktree};

/// The facts fixed before the launch, by phase. IMPLEMENT and FIX also
/// name the commit their candidate's new commits are counted from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectations {
    /// A plan is read-only work: nothing to observe but the answer.
    Plan,
    Implement {
        run_issue: IssueRef,
        /// The default-branch head the launch started from.
        base_sha: CommitSha,
    },
    Review(ReviewObservations),
    Fix {
        run_issue: IssueRef,
        round: u32,
        reviewed_head_sha: CommitSha,
        open_finding_ids: Vec<String>,
        handed_over_follow_ups: Vec<HandedOverFollowUp>,
    },
    UpdateEpic(UpdateEpicObservations),
}

/// The candidate an IMPLEMENT or FIX launch left in the worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub run_issue: IssueRef,
    /// Where the new commits are counted from (base or reviewed HEAD).
    pub since: CommitSha,
    pub head: CommitSha,
}

/// The commit-message policy over a candidate's new commits (SPEC §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitPolicy {
    /// PLAN, REVIEW and UPDATE_EPIC produce no commits to push.
    NotApplicable,
    /// Every new commit's message may be published.
    Passed { commits: usize },
    /// The first message that may not be pushed, named by commit.
    Refused(CommitMessageViolation),
}

impl Expectations {
    /// The observations for the cross-check, read after the agent exited,
    /// and the candidate whose commits the push would publish.
    pub async fn observe(
        &self,
        mirror: &Mirror,
        worktree: &Worktree,
    ) -> Result<(Observations, Option<Candidate>), WorkspaceError> {
        Ok(match self {
            Self::Plan => (Observations::Plan, None),
            Self::Review(observed) => (Observations::Review(observed.clone()), None),
            Self::UpdateEpic(observed) => (Observations::UpdateEpic(observed.clone()), None),
            Self::Implement {
                run_issue,
                base_sha,
            } => {
                let head = worktree.head().await?;
                let descends = mirror.is_ancestor(base_sha, &head).await?;
                let observed = ImplementObservations {
                    run_issue: run_issue.clone(),
                    worktree_head: head.clone(),
                    base_sha: base_sha.clone(),
                    head_descends_from_base: descends,
                };
                let candidate = Candidate {
                    run_issue: run_issue.clone(),
                    since: base_sha.clone(),
                    head,
                };
                (Observations::Implement(observed), Some(candidate))
            }
            Self::Fix {
                run_issue,
                round,
                reviewed_head_sha,
                open_finding_ids,
                handed_over_follow_ups,
            } => {
                let head = worktree.head().await?;
                let descends = mirror.is_ancestor(reviewed_head_sha, &head).await?;
                // Commits of a HEAD that left the reviewed line are not "new
                // commits" of this fix; the ancestry check refuses it anyway.
                let new_commits = if descends {
                    mirror.new_commits(reviewed_head_sha, &head).await?
                } else {
                    Vec::new()
                };
                let observed = FixObservations {
                    run_issue: run_issue.clone(),
                    round: *round,
                    reviewed_head_sha: reviewed_head_sha.clone(),
                    worktree_head: head.clone(),
                    head_descends_from_reviewed: descends,
                    open_finding_ids: open_finding_ids.clone(),
                    new_commits,
                    handed_over_follow_ups: handed_over_follow_ups.clone(),
                };
                let candidate = Candidate {
                    run_issue: run_issue.clone(),
                    since: reviewed_head_sha.clone(),
                    head,
                };
                (Observations::Fix(observed), Some(candidate))
            }
        })
    }
}

/// Checks the message of every commit in `since..head` of `candidate`.
pub async fn check_candidate_commits(
    mirror: &Mirror,
    candidate: &Candidate,
) -> Result<CommitPolicy, WorkspaceError> {
    let messages = mirror
        .commit_messages(&candidate.since, &candidate.head)
        .await?;
    for commit in &messages {
        if let Err(violation) =
            check_commit_message(commit.sha.as_str(), &commit.message, &candidate.run_issue)
        {
            return Ok(CommitPolicy::Refused(violation));
        }
    }
    Ok(CommitPolicy::Passed {
        commits: messages.len(),
    })
}
