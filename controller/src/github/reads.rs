//! Typed reads the SPEC needs. Listings are complete (see `listing.rs`);
//! single reads retry transient failures; a 404 is turned into `None` only
//! where "absent" is a legitimate answer (parent issue, file, permission).

use super::client::{Conditional, GitHubApi};
use super::error::GitHubError;
use super::models::{
    Account, BranchRule, CheckRun, CollaboratorPermission, CombinedStatus, Comparison, FileContent,
    HookDelivery, Installation, Issue, IssueComment, IssueEvent, PullRequest, PullRequestFile,
    PullRequestReview, Repository, ReviewComment,
};
use super::paths::{RepoName, encode_component, encode_path};
use crate::commands::Permission;
use autoforge_journal::{CommitSha, IssueNumber, PullNumber};
use base64::Engine;

impl GitHubApi {
    pub async fn issue(&self, repo: &RepoName, number: IssueNumber) -> Result<Issue, GitHubError> {
        self.get_json(&repo.api_path(&format!("/issues/{number}")))
            .await
    }

    /// The issue, answered from the ETag cache when unchanged (no rate cost).
    pub async fn issue_if_changed(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Conditional<Issue>, GitHubError> {
        self.get_conditional(&repo.api_path(&format!("/issues/{number}")))
            .await
    }

    /// Open issues (and PRs, which the issues API includes) carrying
    /// `label`, for the poller: conditional, so an unchanged set is free.
    pub async fn open_issues_with_label(
        &self,
        repo: &RepoName,
        label: &str,
    ) -> Result<Conditional<Vec<Issue>>, GitHubError> {
        let path = repo.api_path(&format!(
            "/issues?state=open&labels={}",
            encode_component(label)
        ));
        self.get_all_if_changed(&path).await
    }

    /// Every comment of an issue or PR conversation, conditionally: the
    /// poller's cheap "anything new?" question.
    pub async fn issue_comments_if_changed(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Conditional<Vec<IssueComment>>, GitHubError> {
        self.get_all_if_changed(&repo.api_path(&format!("/issues/{number}/comments")))
            .await
    }

    /// Every comment of an issue or PR conversation, oldest first.
    pub async fn issue_comments(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Vec<IssueComment>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/issues/{number}/comments")))
            .await
    }

    pub async fn issue_comment(
        &self,
        repo: &RepoName,
        comment_id: u64,
    ) -> Result<IssueComment, GitHubError> {
        self.get_json(&repo.api_path(&format!("/issues/comments/{comment_id}")))
            .await
    }

    pub async fn issue_events(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Vec<IssueEvent>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/issues/{number}/events")))
            .await
    }

    /// Who added `label` most recently, from the issue's complete event list.
    pub async fn latest_labeler(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        label: &str,
    ) -> Result<Option<Account>, GitHubError> {
        let events = self.issue_events(repo, number).await?;
        Ok(latest_labeler(&events, label))
    }

    pub async fn sub_issues(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Vec<Issue>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/issues/{number}/sub_issues")))
            .await
    }

    /// The parent issue (EPIC) of a sub-issue, if it has one.
    pub async fn parent_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<Option<Issue>, GitHubError> {
        absent_on_404(
            self.get_json(&repo.api_path(&format!("/issues/{number}/parent")))
                .await,
        )
    }

    pub async fn pull_request(
        &self,
        repo: &RepoName,
        number: PullNumber,
    ) -> Result<PullRequest, GitHubError> {
        Ok(self
            .pull_request_if_changed(repo, number)
            .await?
            .into_inner())
    }

    /// The pull request, conditionally. An open PR whose mergeability
    /// GitHub is still computing (`mergeable: null`) is not kept in the
    /// cache: that answer is provisional, so the next read asks afresh
    /// rather than be told "unchanged" about it.
    pub async fn pull_request_if_changed(
        &self,
        repo: &RepoName,
        number: PullNumber,
    ) -> Result<Conditional<PullRequest>, GitHubError> {
        let path = repo.api_path(&format!("/pulls/{number}"));
        let read: Conditional<PullRequest> = self.get_conditional(&path).await?;
        let pr = match &read {
            Conditional::Modified(pr) | Conditional::NotModified(pr) => pr,
        };
        if !mergeability_settled(pr) {
            self.forget_cached(&path);
        }
        Ok(read)
    }

    /// Every PR (any state) whose head is `head_owner:branch`.
    pub async fn pull_requests_by_head(
        &self,
        repo: &RepoName,
        head_owner: &str,
        branch: &str,
    ) -> Result<Vec<PullRequest>, GitHubError> {
        let head = encode_component(&format!("{head_owner}:{branch}"));
        self.get_all(&repo.api_path(&format!("/pulls?state=all&head={head}")))
            .await
    }

    /// Status and merge base of `head` relative to `base` (refs or SHAs).
    pub async fn compare(
        &self,
        repo: &RepoName,
        base: &str,
        head: &str,
    ) -> Result<Comparison, GitHubError> {
        // One commit per page: we read the summary, not the commit list.
        let path = repo.api_path(&format!(
            "/compare/{}...{}?per_page=1",
            encode_component(base),
            encode_component(head)
        ));
        self.get_json(&path).await
    }

    pub async fn pull_request_files(
        &self,
        repo: &RepoName,
        number: PullNumber,
    ) -> Result<Vec<PullRequestFile>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/pulls/{number}/files")))
            .await
    }

    /// Every review of pull request `number`, oldest first.
    pub async fn pull_request_reviews(
        &self,
        repo: &RepoName,
        number: PullNumber,
    ) -> Result<Vec<PullRequestReview>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/pulls/{number}/reviews")))
            .await
    }

    /// One review of pull request `number`.
    pub async fn pull_request_review(
        &self,
        repo: &RepoName,
        number: PullNumber,
        review_id: u64,
    ) -> Result<PullRequestReview, GitHubError> {
        self.get_json(&repo.api_path(&format!("/pulls/{number}/reviews/{review_id}")))
            .await
    }

    /// The files `head` changes since `base` (both SHAs, so the answer
    /// never changes), with their patches: what an inline review comment
    /// can be placed on. GitHub lists at most 300 files, on the first page.
    pub async fn compare_files(
        &self,
        repo: &RepoName,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<Vec<PullRequestFile>, GitHubError> {
        // One commit per page: the files come with the first page whatever
        // its size, and the commit list is not needed.
        let path = repo.api_path(&format!("/compare/{base}...{head}?per_page=1"));
        let comparison: Comparison = self.get_json(&path).await?;
        Ok(comparison.files)
    }

    /// The inline comments of review `review` on pull request `number`.
    pub async fn review_comments(
        &self,
        repo: &RepoName,
        number: PullNumber,
        review: u64,
    ) -> Result<Vec<ReviewComment>, GitHubError> {
        self.get_all(&repo.api_path(&format!("/pulls/{number}/reviews/{review}/comments")))
            .await
    }

    /// The rules every active ruleset applies to `branch`. Readable with
    /// the metadata permission, unlike classic branch protection.
    pub async fn branch_rules(
        &self,
        repo: &RepoName,
        branch: &str,
    ) -> Result<Vec<BranchRule>, GitHubError> {
        let path = repo.api_path(&format!("/rules/branches/{}", encode_path(branch)));
        self.get_all(&path).await
    }

    pub async fn check_runs(
        &self,
        repo: &RepoName,
        sha: &CommitSha,
    ) -> Result<Vec<CheckRun>, GitHubError> {
        let path = repo.api_path(&format!(
            "/commits/{}/check-runs",
            encode_component(sha.as_str())
        ));
        self.get_all_in(&path, "check_runs").await
    }

    /// The check runs named `name` on `sha` (the effect executor's
    /// read-back of its own check).
    pub async fn check_runs_named(
        &self,
        repo: &RepoName,
        sha: &CommitSha,
        name: &str,
    ) -> Result<Vec<CheckRun>, GitHubError> {
        let path = repo.api_path(&format!(
            "/commits/{}/check-runs?check_name={}&filter=all",
            encode_component(sha.as_str()),
            encode_component(name)
        ));
        self.get_all_in(&path, "check_runs").await
    }

    pub async fn combined_status(
        &self,
        repo: &RepoName,
        sha: &CommitSha,
    ) -> Result<CombinedStatus, GitHubError> {
        let path = repo.api_path(&format!(
            "/commits/{}/status?per_page=100",
            encode_component(sha.as_str())
        ));
        let status: CombinedStatus = self.get_json(&path).await?;
        if status.total_count > status.statuses.len() as u64 {
            return Err(GitHubError::InconsistentListing {
                path,
                detail: format!(
                    "{} statuses exist, one page holds {}",
                    status.total_count,
                    status.statuses.len()
                ),
            });
        }
        Ok(status)
    }

    /// The login's permission on the repository, asked at decision time.
    /// An unknown user (404) has none.
    pub async fn collaborator_permission(
        &self,
        repo: &RepoName,
        login: &str,
    ) -> Result<Permission, GitHubError> {
        let path = repo.api_path(&format!(
            "/collaborators/{}/permission",
            encode_component(login)
        ));
        let Some(answer) = absent_on_404(self.get_json::<CollaboratorPermission>(&path).await)?
        else {
            return Ok(Permission::None);
        };
        answer
            .level()
            .map_err(|unknown| GitHubError::UnexpectedAnswer {
                path,
                detail: unknown.to_string(),
            })
    }

    /// A file's bytes at `git_ref`; `None` if it does not exist there.
    pub async fn file_contents(
        &self,
        repo: &RepoName,
        file_path: &str,
        git_ref: &str,
    ) -> Result<Option<FileContent>, GitHubError> {
        #[derive(serde::Deserialize)]
        struct Contents {
            #[serde(rename = "type")]
            kind: String,
            sha: String,
            encoding: Option<String>,
            content: Option<String>,
        }
        let path = repo.api_path(&format!(
            "/contents/{}?ref={}",
            encode_path(file_path.trim_start_matches('/')),
            encode_component(git_ref)
        ));
        let Some(contents) = absent_on_404(self.get_json::<Contents>(&path).await)? else {
            return Ok(None);
        };
        let not_a_file = |detail: String| GitHubError::UnexpectedAnswer {
            path: path.clone(),
            detail,
        };
        if contents.kind != "file" || contents.encoding.as_deref() != Some("base64") {
            return Err(not_a_file(format!(
                "expected a base64 file, got type `{}`",
                contents.kind
            )));
        }
        let encoded: String = contents
            .content
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| not_a_file(format!("content is not base64: {e}")))?;
        Ok(Some(FileContent {
            sha: contents.sha,
            bytes,
        }))
    }

    /// Installations of the App (needs the App handle).
    pub async fn installations(&self) -> Result<Vec<Installation>, GitHubError> {
        self.get_all("/app/installations").await
    }

    /// Repositories this installation can access (needs an installation handle).
    pub async fn installation_repositories(&self) -> Result<Vec<Repository>, GitHubError> {
        self.get_all_in("/installation/repositories", "repositories")
            .await
    }

    /// Recent deliveries of the App's webhook, newest first (App handle),
    /// page by page down to the page holding `known` (the newest delivery
    /// an earlier pass saw): older pages are not read. Without `known`
    /// (a fresh process) only the first page, the newest deliveries.
    pub async fn hook_deliveries_since(
        &self,
        known: Option<u64>,
    ) -> Result<Vec<HookDelivery>, GitHubError> {
        let mut listed = Vec::new();
        self.walk_until("/app/hook/deliveries", |page_path, response| {
            let page: Vec<HookDelivery> = super::client::decode(page_path, &response.body)?;
            let reached = known.is_none_or(|id| page.iter().any(|d| d.id <= id));
            listed.extend(page);
            Ok(reached)
        })
        .await?;
        Ok(listed)
    }
}

/// Whether GitHub has finished computing a PR's mergeability: a closed or
/// merged PR has nothing to compute, an open one answers `true`/`false`.
pub fn mergeability_settled(pr: &PullRequest) -> bool {
    pr.state != "open" || pr.mergeable.is_some()
}

/// The actor of the newest `labeled` event for `label` (names compare
/// case-insensitively, as GitHub's do). Events come oldest first.
pub fn latest_labeler(events: &[IssueEvent], label: &str) -> Option<Account> {
    events
        .iter()
        .rev()
        .find(|event| {
            event.event == "labeled"
                && event
                    .label
                    .as_ref()
                    .is_some_and(|l| l.name.eq_ignore_ascii_case(label))
        })
        .and_then(|event| event.actor.clone())
}

fn absent_on_404<T>(result: Result<T, GitHubError>) -> Result<Option<T>, GitHubError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::github::models::Label;

    fn event(id: u64, kind: &str, label: &str, login: &str) -> IssueEvent {
        IssueEvent {
            id,
            event: kind.to_owned(),
            actor: Some(Account {
                login: login.to_owned(),
                id,
                kind: "User".to_owned(),
            }),
            label: Some(Label {
                name: label.to_owned(),
            }),
            created_at: "2026-01-01T00:00:00Z".to_owned(),
        }
    }

    #[test]
    fn newest_labeled_event_for_the_label_names_the_actor() {
        let events = vec![
            event(1, "labeled", "autoforge", "alice"),
            event(2, "unlabeled", "autoforge", "bob"),
            event(3, "labeled", "Autoforge", "carol"),
            event(4, "labeled", "bug", "dave"),
        ];
        let actor = latest_labeler(&events, "autoforge").expect("labeled");
        assert_eq!(actor.login, "carol");
    }

    #[test]
    fn no_labeled_event_means_no_actor() {
        let events = vec![event(1, "unlabeled", "autoforge", "bob")];
        assert_eq!(latest_labeler(&events, "autoforge"), None);
    }
}
