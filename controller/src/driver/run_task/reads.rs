//! The GitHub reads a run task makes besides driving effects: the facts a
//! wait asks for, the start of a run (its issue and EPIC), the bodies that
//! append-kind effects are planned on, and the journal's record of the
//! clean review the merge gate checks.

use std::collections::BTreeMap;

use super::RunTask;
use crate::driver::clean_review::{CleanReviewRecord, find_clean_review};
use crate::driver::error::DriverError;
use crate::driver::{epic_scope, facts, repo_settings};
use crate::github::GitHubError;
use crate::machine::{Awaiting, EffectIntent, Event, MergeReport, NextIssueFacts};

impl RunTask<'_> {
    /// The fresh GitHub read a wait asks for.
    pub(super) async fn read_event(
        &self,
        awaiting: &Awaiting,
    ) -> Result<Option<Event>, DriverError> {
        let (api, repo) = (&self.access.api, &self.access.repo);
        let protected = &self.shared.config.protected_paths;
        Ok(Some(match awaiting {
            Awaiting::Facts { .. } => {
                let clean = self.clean_review().await?;
                Event::GitHubObserved {
                    facts: facts::read_facts(api, repo, &self.state, protected, clean.as_ref())
                        .await?,
                }
            }
            Awaiting::MergeOutcome => {
                let Some(pr) = self.state.pr else {
                    return Ok(None);
                };
                let clean = self.clean_review().await?;
                Event::MergeResult(MergeReport {
                    pr: facts::pr_facts(api, repo, pr, protected, clean.as_ref()).await?,
                })
            }
            Awaiting::NextIssueCheck { issue } => {
                // A pick that does not exist, or is a pull request, is no
                // open issue: the machine rejects it and asks again.
                let open = match api.issue(repo, *issue).await {
                    Ok(read) => read.is_open() && !read.is_pull_request(),
                    Err(GitHubError::Status { status: 404, .. }) => false,
                    Err(other) => return Err(other.into()),
                };
                let (_, base_sha) = facts::default_branch_head(api, repo).await?;
                let branch = crate::machine::RunState::branch_for(*issue);
                Event::NextIssue(NextIssueFacts {
                    issue: *issue,
                    repository: repo.to_string(),
                    open,
                    base_sha,
                    branch_head: facts::branch_head(api, repo, &branch).await?,
                })
            }
            _ => return Ok(None),
        }))
    }

    /// The journal's record of the comment the run's clean review was
    /// posted as, if the run has a clean review.
    pub(super) async fn clean_review(&self) -> Result<Option<CleanReviewRecord>, DriverError> {
        let Some(clean) = &self.state.review.clean else {
            return Ok(None);
        };
        let effects = self.shared.journal.list_effects(self.lease.run_id).await?;
        Ok(find_clean_review(&effects, clean))
    }

    /// `Started`: the issue to start on and its EPIC (an EPIC's first open
    /// child), the repository's default branch and its head now.
    pub(super) async fn started_event(&self, labelled: u64) -> Result<Event, DriverError> {
        let (base_branch, base_sha) =
            facts::default_branch_head(&self.access.api, &self.access.repo).await?;
        let known_epic = self.epic.and_then(|e| u64::try_from(e).ok());
        let (api, repo, label) = (
            &self.access.api,
            &self.access.repo,
            &self.shared.config.epic_label,
        );
        let scope = epic_scope::start_scope(api, repo, labelled, known_epic, label).await?;
        let repository_settings = repo_settings::read_repository_settings(
            api,
            repo,
            &base_sha,
            self.shared.agents.as_ref(),
        )
        .await?;
        let branch = crate::machine::RunState::branch_for(scope.issue);
        Ok(Event::Started {
            repository: self.access.repo.to_string(),
            issue: scope.issue,
            epic: scope.epic,
            base_branch,
            base_sha,
            branch_head: facts::branch_head(api, repo, &branch).await?,
            settings: self.state.settings.clone(),
            repository_settings,
        })
    }

    /// The current bodies of the issues and PRs that append-kind intents
    /// (adopt, marker append, roadmap splice) write to. Read before the
    /// transition commits, so the digest each row records is of the very
    /// body its payload was built on; a later change is caught by the
    /// executor's digest check instead of being overwritten.
    pub(super) async fn bodies_for(
        &self,
        intents: &[EffectIntent],
    ) -> Result<BTreeMap<u64, String>, DriverError> {
        let mut bodies = BTreeMap::new();
        for intent in intents {
            let number = match intent {
                EffectIntent::AdoptPr { pr, .. } => *pr,
                EffectIntent::AppendFollowUpMarkers { issue, .. } => *issue,
                EffectIntent::SpliceEpicRoadmap { epic, .. } => *epic,
                _ => continue,
            };
            if let std::collections::btree_map::Entry::Vacant(slot) = bodies.entry(number) {
                // A PR is an issue to this endpoint: same body either way.
                let read = self.access.api.issue(&self.access.repo, number).await?;
                slot.insert(read.body.unwrap_or_default());
            }
        }
        Ok(bodies)
    }
}
