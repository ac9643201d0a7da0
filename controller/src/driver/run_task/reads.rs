//! The GitHub reads a run task makes besides driving effects: the facts a
//! wait asks for (`Awaiting::Facts`: the issue, the issue branch, the run's
//! pull request with its checks and mergeability, and unmarked PRs on the
//! branch that could be adopted), the start of a run (its issue and EPIC),
//! the bodies that append-kind effects are planned on, the diffs inline
//! reviews are placed on, and the journal's
//! record of the clean review the merge gate checks.
//!
//! A read that fails is a transient failure of the step (the driver backs
//! off); an absent branch or PR is a fact, not a failure.
//!
//! `clean_review_intact` is reported from the journal's record of the clean
//! review comment (see [`crate::driver::clean_review`]): without a record it
//! is `false`, so a merge never rests on a review the controller cannot show.

use std::collections::BTreeMap;

use super::RunTask;
use serde_json::Value;

use crate::driver::clean_review::{CleanReviewRecord, comment_intact, find_clean_review};
use crate::driver::error::DriverError;
use crate::driver::{epic_scope, repo_settings};
use crate::effects::ReviewDiffs;
use crate::effects::markers::{MarkerName, scan};
use crate::github::{GitHubApi, GitHubError, PullRequest, RepoName};
use crate::machine::{
    AllowedMergeMethods, Awaiting, ChecksState, EffectIntent, Event, GitHubFacts, MergeReport,
    MergeableState, NextIssueFacts, PrFacts, PrState, ReviewRequirement, RunState, is_protected,
};
use crate::workspace::CommitSha;
use autoforge_journal::{IssueNumber, PullNumber};

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
                    facts: read_facts(api, repo, &self.state, protected, clean.as_ref()).await?,
                }
            }
            Awaiting::MergeOutcome => {
                let Some(pr) = self.state.pr else {
                    return Ok(None);
                };
                let clean = self.clean_review().await?;
                Event::MergeResult(MergeReport {
                    pr: pr_facts(api, repo, pr, protected, clean.as_ref()).await?,
                })
            }
            Awaiting::NextIssueCheck { issue } => {
                // A pick that does not exist, or is a pull request, is no
                // open issue: the machine rejects it and asks again.
                let (open, issue_text) = match api.issue(repo, *issue).await {
                    Ok(read) => (
                        read.is_open() && !read.is_pull_request(),
                        Some(read.text_digest()),
                    ),
                    Err(GitHubError::Status { status: 404, .. }) => (false, None),
                    Err(other) => return Err(other.into()),
                };
                let (_, base_sha) = default_branch_head(api, repo).await?;
                let branch = crate::machine::RunState::branch_for(*issue);
                let epic_issues = match &self.state.epic {
                    Some(epic) => {
                        let label = &self.shared.config.epic_label;
                        epic_scope::epic_issue_numbers(api, repo, epic.epic, label).await?
                    }
                    None => Vec::new(),
                };
                Event::NextIssue(NextIssueFacts {
                    issue: *issue,
                    repository: repo.to_string(),
                    open,
                    base_sha,
                    branch_head: branch_head(api, repo, &branch).await?,
                    issue_text,
                    epic_issues,
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
    pub(super) async fn started_event(
        &self,
        labelled: IssueNumber,
        labeled_by: String,
    ) -> Result<Event, DriverError> {
        let (base_branch, base_sha) =
            default_branch_head(&self.access.api, &self.access.repo).await?;
        let known_epic = self.epic;
        let (api, repo, label) = (
            &self.access.api,
            &self.access.repo,
            &self.shared.config.epic_label,
        );
        let scope = epic_scope::start_scope(api, repo, labelled, known_epic, label).await?;
        let repository_settings = repo_settings::read_repository_settings(
            api,
            repo,
            base_sha.as_str(),
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
            branch_head: branch_head(api, repo, &branch).await?,
            settings: self.state.settings.clone(),
            repository_settings,
            // Frozen now: the text the operator started the run on.
            issue_text: Some(scope.issue_text),
            started_by: Some(labeled_by),
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
    ) -> Result<BTreeMap<IssueNumber, String>, DriverError> {
        let mut bodies = BTreeMap::new();
        for intent in intents {
            let number = match intent {
                EffectIntent::AdoptPr { pr, .. } => pr.as_issue(),
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

    /// The files each `post_review` intent's round changed, with their
    /// patches, read at the round's bound SHAs (so the read is the same
    /// whenever it is made): what the review's inline comments are placed on.
    pub(super) async fn diffs_for(
        &self,
        intents: &[EffectIntent],
    ) -> Result<ReviewDiffs, DriverError> {
        let mut diffs = ReviewDiffs::new();
        // A verdict that arrives while the installation is suspended is
        // committed with no diff lines (GitHub would refuse the read): its
        // review then lists every finding in its body. The round's summary
        // comment is the record either way, and the verdict is kept.
        let suspended = self.ensure_not_suspended().is_err();
        for intent in intents {
            let EffectIntent::PostReview { binding, .. } = intent else {
                continue;
            };
            let range = (binding.merge_base_sha.clone(), binding.head_sha.clone());
            if suspended {
                diffs.insert(range, Vec::new());
                continue;
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = diffs.entry(range) {
                let files = self
                    .access
                    .api
                    .compare_files(
                        &self.access.repo,
                        &binding.merge_base_sha,
                        &binding.head_sha,
                    )
                    .await?;
                slot.insert(files);
            }
        }
        Ok(diffs)
    }
}

/// Reads everything [`GitHubFacts`] holds for `state`'s issue and branch.
/// `protected_paths` are path prefixes a PR must not change unnoticed;
/// `clean_review` is the journal's record of the run's clean review comment.
pub(in crate::driver) async fn read_facts(
    api: &GitHubApi,
    repo: &RepoName,
    state: &RunState,
    protected_paths: &[String],
    clean_review: Option<&CleanReviewRecord>,
) -> Result<GitHubFacts, GitHubError> {
    let issue = api.issue(repo, state.issue).await?;
    let branch_head = branch_head(api, repo, &state.branch).await?;
    let on_branch = api
        .pull_requests_by_head(repo, repo.owner(), &state.branch)
        .await?;
    let mut ours = None;
    let mut adoptable = Vec::new();
    for pr in &on_branch {
        let marked = carries_our_marker(pr, &issue.html_url);
        if state.pr == Some(pr.number) || (state.pr.is_none() && marked) {
            ours = Some(pr.number);
        } else if pr.state == "open" && !marked {
            adoptable.push(pr.number);
        }
    }
    // A bound PR is read directly: it may have moved to another head.
    let number = state.pr.or(ours);
    let pr = match number {
        Some(number) => Some(pr_facts(api, repo, number, protected_paths, clean_review).await?),
        None => None,
    };
    Ok(GitHubFacts {
        issue_open: issue.state == "open",
        branch_head,
        pr,
        adoptable_prs: adoptable,
        issue_text: Some(issue.text_digest()),
    })
}

/// The repository's default branch and its head now.
pub(in crate::driver) async fn default_branch_head(
    api: &GitHubApi,
    repo: &RepoName,
) -> Result<(String, CommitSha), GitHubError> {
    let repository: crate::github::Repository = api.get_json(&repo.api_path("")).await?;
    let head = branch_head(api, repo, &repository.default_branch)
        .await?
        .ok_or_else(|| GitHubError::UnexpectedAnswer {
            path: repo.api_path(""),
            detail: format!(
                "the default branch {} has no head",
                repository.default_branch
            ),
        })?;
    Ok((repository.default_branch, head))
}

/// The branch's head SHA, `None` when the branch does not exist.
pub(in crate::driver) async fn branch_head(
    api: &GitHubApi,
    repo: &RepoName,
    branch: &str,
) -> Result<Option<CommitSha>, GitHubError> {
    #[derive(serde::Deserialize)]
    struct Object {
        sha: CommitSha,
    }
    #[derive(serde::Deserialize)]
    struct Reference {
        object: Object,
    }
    let path = repo.api_path(&format!("/git/ref/heads/{branch}"));
    match api.get_json::<Reference>(&path).await {
        Ok(reference) => Ok(Some(reference.object.sha)),
        Err(GitHubError::Status { status: 404, .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

/// Whether `pr` carries an `ai-implementation` marker naming the issue
/// whose `html_url` is `issue_url`. The writer names the issue by its URL,
/// so a marker is matched by the whole URL: the same number in another
/// repository is another issue.
fn carries_our_marker(pr: &PullRequest, issue_url: &str) -> bool {
    let body = pr.body.as_deref().unwrap_or_default();
    let wanted = issue_url.trim_end_matches('/');
    scan(body, MarkerName::Implementation)
        .into_result()
        .is_ok_and(|found| {
            found.iter().any(|m| {
                m.payload
                    .get("issue")
                    .and_then(Value::as_str)
                    .is_some_and(|named| named.trim_end_matches('/').eq_ignore_ascii_case(wanted))
            })
        })
}

/// One PR's facts: state, head and base, merge base, checks, mergeability,
/// and whether `clean_review` (if any) is intact at the PR's revision now.
pub(in crate::driver) async fn pr_facts(
    api: &GitHubApi,
    repo: &RepoName,
    number: PullNumber,
    protected_paths: &[String],
    clean_review: Option<&CleanReviewRecord>,
) -> Result<PrFacts, GitHubError> {
    let pr = api.pull_request(repo, number).await?;
    let merged = pr.merged.unwrap_or(false) || pr.merged_at.is_some();
    let state = match (pr.state.as_str(), merged) {
        (_, true) => PrState::Merged,
        ("open", _) => PrState::Open,
        _ => PrState::Closed,
    };
    let comparison = api
        .compare(repo, &pr.base.ref_name, pr.head.sha.as_str())
        .await?;
    let checks = checks_state(api, repo, &pr.head.sha).await?;
    let files = api.pull_request_files(repo, number).await?;
    let protected_paths_changed = files.iter().any(|file| {
        is_protected(&file.filename, protected_paths)
            || file
                .previous_filename
                .as_deref()
                .is_some_and(|old| is_protected(old, protected_paths))
    });
    let merge_base_sha = comparison.merge_base_commit.sha;
    let repository: crate::github::Repository = api.get_json(&repo.api_path("")).await?;
    let mergeable_state = mergeable_state(pr.mergeable_state.as_deref());
    // GitHub says `blocked` without a cause: only then are the review
    // rules and the reviews worth their two reads.
    let (reviews, required_checks_missing) = match mergeable_state {
        MergeableState::Blocked => (
            review_requirement(api, repo, &pr).await?,
            required_checks_missing(api, repo, &pr).await?,
        ),
        _ => (None, Vec::new()),
    };
    let clean_review_intact = match clean_review {
        Some(record)
            if record.binding.pr == number
                && record.binding.head_sha == pr.head.sha
                && record.binding.base_ref == pr.base.ref_name
                && record.binding.merge_base_sha == merge_base_sha =>
        {
            comment_intact(api, repo, record).await?
        }
        _ => false,
    };
    Ok(PrFacts {
        number,
        state,
        head_sha: pr.head.sha.clone(),
        base_ref: pr.base.ref_name.clone(),
        merge_base_sha,
        draft: pr.draft.unwrap_or(false),
        merge_commit: if merged {
            pr.merge_commit_sha.clone()
        } else {
            None
        },
        checks,
        mergeable: pr.mergeable,
        mergeable_state,
        clean_review_intact,
        protected_paths_changed,
        title: pr.title.clone(),
        merge_methods: AllowedMergeMethods {
            merge: repository.allow_merge_commit,
            squash: repository.allow_squash_merge,
            rebase: repository.allow_rebase_merge,
        },
        reviews,
        // A read without the count (a listing's shape) claims what was listed.
        changed_files: pr.changed_files.unwrap_or(files.len() as u64),
        listed_files: files.len() as u64,
        required_checks_missing,
    })
}

/// The checks the base branch's rules require (`required_status_checks`
/// rules) that have not reported at the head at all: neither a check run
/// nor a commit status carries the name yet. GitHub shows such a PR as
/// `blocked` with nothing pending, though the check may simply not have
/// started; the gate waits for it rather than refusing.
async fn required_checks_missing(
    api: &GitHubApi,
    repo: &RepoName,
    pr: &PullRequest,
) -> Result<Vec<String>, GitHubError> {
    let rules = api.branch_rules(repo, &pr.base.ref_name).await?;
    let required: std::collections::BTreeSet<String> = rules
        .iter()
        .filter(|rule| rule.kind == "required_status_checks")
        .filter_map(|rule| {
            rule.parameters
                .as_ref()?
                .get("required_status_checks")?
                .as_array()
        })
        .flatten()
        .filter_map(|check| Some(check.get("context")?.as_str()?.to_owned()))
        .collect();
    if required.is_empty() {
        return Ok(Vec::new());
    }
    let runs = api.check_runs(repo, &pr.head.sha).await?;
    let statuses = api.combined_status(repo, &pr.head.sha).await?;
    let reported: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|run| run.name.as_str())
        .chain(statuses.statuses.iter().map(|st| st.context.as_str()))
        .collect();
    Ok(required
        .into_iter()
        .filter(|name| !reported.contains(name.as_str()))
        .collect())
}

/// The strictest approving-review rule on the PR's base and how many
/// approvals stand at its head now, counting each reviewer's latest
/// approving or rejecting review, and only reviewers with write access
/// (GitHub ignores the others' approvals). `None`: no rule requires one.
async fn review_requirement(
    api: &GitHubApi,
    repo: &RepoName,
    pr: &PullRequest,
) -> Result<Option<ReviewRequirement>, GitHubError> {
    let rules = api.branch_rules(repo, &pr.base.ref_name).await?;
    let review_rules: Vec<&serde_json::Map<String, Value>> = rules
        .iter()
        .filter(|rule| rule.kind == "pull_request")
        .filter_map(|rule| rule.parameters.as_ref()?.as_object())
        .collect();
    let required = review_rules
        .iter()
        .filter_map(|p| p.get("required_approving_review_count")?.as_u64())
        .max()
        .unwrap_or(0);
    if required == 0 {
        return Ok(None);
    }
    let only_at_head = review_rules.iter().any(|p| {
        p.get("dismiss_stale_reviews_on_push")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    });
    let mut latest: BTreeMap<String, &crate::github::PullRequestReview> = BTreeMap::new();
    let reviews = api.pull_request_reviews(repo, pr.number).await?;
    for review in &reviews {
        let Some(user) = &review.user else { continue };
        if matches!(
            review.state.as_str(),
            "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED"
        ) {
            latest.insert(user.login.clone(), review);
        }
    }
    let mut approvals = 0u32;
    for (login, review) in latest {
        let current = !only_at_head || review.commit_id.as_deref() == Some(pr.head.sha.as_str());
        if review.state == "APPROVED" && current && writes(api, repo, &login).await? {
            approvals += 1;
        }
    }
    Ok(Some(ReviewRequirement {
        required: u32::try_from(required).unwrap_or(u32::MAX),
        approvals,
    }))
}

async fn writes(api: &GitHubApi, repo: &RepoName, login: &str) -> Result<bool, GitHubError> {
    use crate::commands::Permission;
    let permission = api.collaborator_permission(repo, login).await?;
    Ok(matches!(
        permission,
        Permission::Write | Permission::Maintain | Permission::Admin
    ))
}

/// All check runs and commit statuses of `sha`, combined.
async fn checks_state(
    api: &GitHubApi,
    repo: &RepoName,
    sha: &CommitSha,
) -> Result<ChecksState, GitHubError> {
    let runs = latest_per_name(api.check_runs(repo, sha).await?);
    let statuses = api.combined_status(repo, sha).await?;
    let failed_run = runs.iter().any(|run| {
        run.status == "completed"
            && !matches!(
                run.conclusion.as_deref(),
                Some("success" | "neutral" | "skipped")
            )
    });
    if failed_run || statuses.state == "failure" || statuses.state == "error" {
        return Ok(ChecksState::Failed);
    }
    let pending_run = runs.iter().any(|run| run.status != "completed");
    // A commit without statuses reports `pending` with none counted.
    let pending_status = statuses.state == "pending" && statuses.total_count > 0;
    Ok(if pending_run || pending_status {
        ChecksState::Pending
    } else {
        ChecksState::Success
    })
}

/// A re-run check supersedes the earlier runs of its name, as on GitHub's
/// checks tab: a failure fixed by a re-run no longer counts, a re-run in
/// progress counts as running.
fn latest_per_name(runs: Vec<crate::github::CheckRun>) -> Vec<crate::github::CheckRun> {
    let mut latest: std::collections::BTreeMap<String, crate::github::CheckRun> =
        std::collections::BTreeMap::new();
    for run in runs {
        match latest.get(&run.name) {
            Some(kept) if kept.id > run.id => {}
            _ => {
                latest.insert(run.name.clone(), run);
            }
        }
    }
    latest.into_values().collect()
}

fn mergeable_state(text: Option<&str>) -> MergeableState {
    match text {
        Some("clean") => MergeableState::Clean,
        Some("has_hooks") => MergeableState::HasHooks,
        Some("behind") => MergeableState::Behind,
        Some("blocked") => MergeableState::Blocked,
        Some("dirty") => MergeableState::Dirty,
        Some("draft") => MergeableState::Draft,
        Some("unstable") => MergeableState::Unstable,
        _ => MergeableState::Unknown,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn check(
        id: u64,
        name: &str,
        status: &str,
        conclusion: Option<&str>,
    ) -> crate::github::CheckRun {
        crate::github::CheckRun {
            id,
            name: name.into(),
            status: status.into(),
            conclusion: conclusion.map(Into::into),
            head_sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            external_id: None,
            output: Default::default(),
            html_url: None,
        }
    }

    #[test]
    fn a_rerun_check_supersedes_the_earlier_runs_of_its_name() {
        let runs = vec![
            check(1, "ci", "completed", Some("failure")),
            check(3, "ci", "completed", Some("success")),
            check(2, "lint", "completed", Some("success")),
            check(4, "lint", "in_progress", None),
        ];
        let latest = latest_per_name(runs);
        let by_name: Vec<(&str, u64)> = latest.iter().map(|r| (r.name.as_str(), r.id)).collect();
        assert_eq!(by_name, [("ci", 3), ("lint", 4)]);
    }

    fn pr_with_body(body: &str) -> PullRequest {
        serde_json::from_value(serde_json::json!({
            "number": 2,
            "state": "open",
            "title": "t",
            "body": body,
            "html_url": "https://github.com/acme/widgets/pull/2",
            "user": {"login": "bot", "id": 1, "type": "Bot"},
            "head": {"ref": "autoforge/7", "sha": "a".repeat(40), "repo": null},
            "base": {"ref": "main", "sha": "b".repeat(40), "repo": null},
            "merged_at": null,
            "merge_commit_sha": null,
        }))
        .unwrap()
    }

    fn marked(issue: &str) -> PullRequest {
        pr_with_body(&format!(
            "Closes #7\n\n<!-- ai-implementation: {{\"issue\":\"{issue}\",\"run\":3,\"write\":\"00ff\"}} -->\n"
        ))
    }

    #[test]
    fn our_marker_is_matched_by_the_issues_url_and_not_by_its_number_alone() {
        let url = "https://github.com/Acme/Widgets/issues/7";
        assert!(carries_our_marker(
            &marked("https://github.com/acme/widgets/issues/7"),
            url
        ));
        assert!(!carries_our_marker(
            &marked("https://github.com/other/widgets/issues/7"),
            url
        ));
        assert!(!carries_our_marker(
            &marked("https://github.com/acme/widgets/issues/70"),
            url
        ));
        assert!(!carries_our_marker(&pr_with_body("Closes #7"), url));
    }

    #[test]
    fn unknown_or_missing_mergeable_states_are_unknown() {
        assert_eq!(mergeable_state(Some("dirty")), MergeableState::Dirty);
        assert_eq!(mergeable_state(Some("weird")), MergeableState::Unknown);
        assert_eq!(mergeable_state(None), MergeableState::Unknown);
    }
}
