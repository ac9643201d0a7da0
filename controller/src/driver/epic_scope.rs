//! Which issues an EPIC holds, and where a run starts (SPEC §1, §2).
//!
//! An EPIC is an issue with GitHub sub-issues, or one carrying the EPIC
//! label whose body lists its issues (a task list or `#n` references).
//! Labelling an EPIC starts the run on its first open child in the EPIC's
//! order; labelling a child makes the run know its EPIC, found through the
//! sub-issue parent or an open EPIC-labelled issue that lists the child.
//!
//! Only issues of the run's own repository count: a sub-issue elsewhere is
//! another controller's business, and pull requests are never children.
//! Nor does the managed roadmap section count: the EPIC agent writes it,
//! and an issue it names there must not become the EPIC's by that alone.

use autoforge_journal::IssueNumber;
use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::effects::markers::{ROADMAP_START, RoadmapMarkers, scan_roadmap};
use crate::github::{GitHubApi, GitHubError, Issue, RepoName};

/// Where a labelled issue's run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartScope {
    /// The issue the run works on first.
    pub issue: IssueNumber,
    pub epic: Option<IssueNumber>,
    /// The text digest of `issue` as read here (`Issue::text_digest`),
    /// which the run freezes.
    pub issue_text: String,
}

/// `#n` references and `owner/repo#n` / issue URLs of this repository, in
/// the order they appear.
static REFERENCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#|/(?P<url>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/issues/|(?:^|[\s(\[])#)(?P<n>[0-9]{1,9})\b").ok()
});

/// Issue numbers `body` refers to, first mention first, each once.
pub fn referenced_issues(body: &str, repo: &RepoName) -> Vec<IssueNumber> {
    let Some(pattern) = REFERENCE.as_ref() else {
        return Vec::new();
    };
    let ours = repo.to_string();
    let mut seen = BTreeSet::new();
    pattern
        .captures_iter(body)
        .filter(|c| {
            let elsewhere = c.name("slug").or_else(|| c.name("url"));
            elsewhere.is_none_or(|m| m.as_str().eq_ignore_ascii_case(&ours))
        })
        .filter_map(|c| c.name("n")?.as_str().parse::<IssueNumber>().ok())
        .filter(|n| seen.insert(*n))
        .collect()
}

/// The EPIC body as people wrote it: without the managed roadmap section,
/// and without anything after a start line that opens no proper section.
fn outside_roadmap(body: &str) -> String {
    match scan_roadmap(body) {
        RoadmapMarkers::Absent => body.to_owned(),
        RoadmapMarkers::Section { start, end, .. } => format!("{}{}", &body[..start], &body[end..]),
        RoadmapMarkers::Malformed(_) => body
            .find(ROADMAP_START)
            .map_or(body, |at| &body[..at])
            .to_owned(),
    }
}

/// The issues an EPIC body lists, its managed roadmap section left out.
fn listed_issues(body: &str, repo: &RepoName) -> Vec<IssueNumber> {
    referenced_issues(&outside_roadmap(body), repo)
}

fn in_repo(issue: &Issue, repo: &RepoName) -> bool {
    let marker = format!("/{repo}/issues/");
    issue
        .html_url
        .to_ascii_lowercase()
        .contains(&marker.to_ascii_lowercase())
}

/// The EPIC's issues in its order: its sub-issues, or (for an issue with
/// the EPIC label and no sub-issues) the issues its body refers to. Empty
/// for an issue that is no EPIC.
pub async fn epic_children(
    api: &GitHubApi,
    repo: &RepoName,
    epic: &Issue,
    epic_label: &str,
) -> Result<Vec<Issue>, GitHubError> {
    let subs: Vec<Issue> = api
        .sub_issues(repo, epic.number)
        .await?
        .into_iter()
        .filter(|i| in_repo(i, repo) && !i.is_pull_request())
        .collect();
    if !subs.is_empty() || !epic.has_label(epic_label) {
        return Ok(subs);
    }
    let body = epic.body.as_deref().unwrap_or_default();
    let mut children = Vec::new();
    for number in listed_issues(body, repo) {
        if number == epic.number {
            continue;
        }
        match api.issue(repo, number).await {
            Ok(issue) if !issue.is_pull_request() => children.push(issue),
            Ok(_) | Err(GitHubError::Status { status: 404, .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(children)
}

/// The numbers of EPIC `epic`'s issues, read now: the only issues its
/// next-issue pick may name.
pub async fn epic_issue_numbers(
    api: &GitHubApi,
    repo: &RepoName,
    epic: IssueNumber,
    epic_label: &str,
) -> Result<Vec<IssueNumber>, GitHubError> {
    let read = api.issue(repo, epic).await?;
    let children = epic_children(api, repo, &read, epic_label).await?;
    Ok(children.iter().map(|child| child.number).collect())
}

/// Where the run of `labelled` starts, and in which EPIC. `known_epic` is
/// the EPIC the run was created with, if the observer knew one.
pub async fn start_scope(
    api: &GitHubApi,
    repo: &RepoName,
    labelled: IssueNumber,
    known_epic: Option<IssueNumber>,
    epic_label: &str,
) -> Result<StartScope, GitHubError> {
    let issue = api.issue(repo, labelled).await?;
    let children = epic_children(api, repo, &issue, epic_label).await?;
    if !children.is_empty() || issue.has_label(epic_label) {
        // No open child left: the machine refuses a run on the EPIC itself
        // with a reason an operator can act on.
        let start = children.iter().find(|c| c.is_open()).unwrap_or(&issue);
        return Ok(StartScope {
            issue: start.number,
            epic: Some(labelled),
            issue_text: start.text_digest(),
        });
    }
    if known_epic.is_some() {
        return Ok(StartScope {
            issue: labelled,
            epic: known_epic,
            issue_text: issue.text_digest(),
        });
    }
    if let Some(parent) = api.parent_issue(repo, labelled).await?
        && in_repo(&parent, repo)
    {
        return Ok(StartScope {
            issue: labelled,
            epic: Some(parent.number),
            issue_text: issue.text_digest(),
        });
    }
    let labelled_epics = api.open_issues_with_label(repo, epic_label).await?;
    for candidate in labelled_epics.into_inner() {
        let body = candidate.body.as_deref().unwrap_or_default();
        if !candidate.is_pull_request()
            && candidate.number != labelled
            && listed_issues(body, repo).contains(&labelled)
        {
            return Ok(StartScope {
                issue: labelled,
                epic: Some(candidate.number),
                issue_text: issue.text_digest(),
            });
        }
    }
    Ok(StartScope {
        issue: labelled,
        epic: None,
        issue_text: issue.text_digest(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn numbers(issues: Vec<IssueNumber>) -> Vec<u64> {
        issues.into_iter().map(IssueNumber::get).collect()
    }

    #[test]
    fn task_list_references_of_this_repository_are_children_in_order() {
        let repo: RepoName = "alice/widgets".parse().unwrap();
        let body = "Plan:\n- [ ] #4\n- [x] alice/widgets#2\n- [ ] bob/other#9\n\
                    - [ ] https://github.com/alice/widgets/issues/7\nsee #4 again, not issue#5";
        assert_eq!(numbers(referenced_issues(body, &repo)), vec![4, 2, 7]);
    }

    #[test]
    fn issues_named_only_in_the_managed_roadmap_section_are_not_listed() {
        let repo: RepoName = "alice/widgets".parse().unwrap();
        let body = "- [ ] #4\n- [ ] #5\n\n<!-- ai-controller-roadmap:start -->\n\
                    next: #9\n<!-- ai-controller-roadmap:end -->\nlater #6";
        assert_eq!(numbers(listed_issues(body, &repo)), vec![4, 5, 6]);
        let unclosed = "- [ ] #4\n<!-- ai-controller-roadmap:start -->\nnext: #9";
        assert_eq!(numbers(listed_issues(unclosed, &repo)), vec![4]);
    }

    #[test]
    fn a_body_without_references_lists_nothing() {
        let repo: RepoName = "alice/widgets".parse().unwrap();
        assert!(referenced_issues("no list here, color #fff", &repo).is_empty());
    }
}
