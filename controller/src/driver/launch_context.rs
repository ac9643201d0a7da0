//! What the read-context folder holds, read from GitHub and the mirror
//! right before a launch (SPEC §13): the issue with its conversation, the
//! pull request with its conversation and reviews, the checks of the bound
//! HEAD, the PR's follow-up issues with their state, the EPIC with its
//! issues, and the repository's agent instructions at the base commit.
//!
//! Every GitHub read here is an ordinary conditional read (the ETag cache
//! answers unchanged ones for free), one request per page. Who is an
//! operator is decided per author with the same check as commands, once
//! per login and launch.

use std::collections::HashMap;

use super::RepositoryAccess;
use super::epic_scope::epic_children;
use super::error::DriverError;
use crate::agents::context::{ContextDoc, ContextEntry, ContextFiles, DocSource, EntryAuthor};
use crate::commands::OperatorPolicy;
use crate::github::{Account, Issue};
use crate::machine::RoundBinding;
use crate::workspace::{CommitSha, Mirror};
use autoforge_journal::{IssueNumber, PullNumber};

/// How many follow-up issues are read back for their state; the rest are
/// listed by URL only.
const MAX_FOLLOW_UP_READS: usize = 30;

/// Files read from the base commit as the project's conventions.
const CONVENTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Bytes read of each convention file; the folder's own bound cuts further.
const MAX_CONVENTION_BYTES: usize = 256 * 1024;

/// Reads one launch's context; remembers each author's operator decision.
pub(super) struct ContextReader<'a> {
    access: &'a RepositoryAccess,
    policy: &'a OperatorPolicy,
    authors: HashMap<String, EntryAuthor>,
}

impl<'a> ContextReader<'a> {
    pub(super) fn new(access: &'a RepositoryAccess, policy: &'a OperatorPolicy) -> Self {
        Self {
            access,
            policy,
            authors: HashMap::new(),
        }
    }

    /// Whether `account` is an operator, the controller itself or neither.
    async fn author(&mut self, account: Option<&Account>) -> Result<EntryAuthor, DriverError> {
        let Some(account) = account else {
            return Ok(EntryAuthor::Other);
        };
        if let Some(known) = self.authors.get(&account.login) {
            return Ok(*known);
        }
        let decision = self
            .access
            .api
            .operator_decision(
                &self.access.repo,
                &account.actor(),
                self.policy,
                &self.access.login,
            )
            .await?;
        let author = if decision.is_the_app_itself() {
            EntryAuthor::Controller
        } else if decision.is_allowed() {
            EntryAuthor::Operator
        } else {
            EntryAuthor::Other
        };
        self.authors.insert(account.login.clone(), author);
        Ok(author)
    }

    /// The conversation of issue or PR `number`, oldest first.
    async fn conversation(
        &mut self,
        number: IssueNumber,
    ) -> Result<Vec<ContextEntry>, DriverError> {
        let comments = self
            .access
            .api
            .issue_comments(&self.access.repo, number)
            .await?;
        let mut entries = Vec::with_capacity(comments.len());
        for comment in comments {
            let author = self.author(comment.user.as_ref()).await?;
            entries.push(ContextEntry {
                facts: vec![
                    ("author".to_owned(), login_of(comment.user.as_ref())),
                    (
                        "association".to_owned(),
                        comment.author_association.unwrap_or_default(),
                    ),
                    ("created_at".to_owned(), comment.created_at),
                    ("url".to_owned(), comment.html_url),
                ],
                author,
                text: comment.body,
            });
        }
        Ok(entries)
    }

    /// `issue.md`: the accepted title and body (`issue` as read for the
    /// text check) and the comments.
    pub(super) async fn issue_doc(&mut self, issue: &Issue) -> Result<ContextDoc, DriverError> {
        let written_by = match self.author(issue.user.as_ref()).await? {
            EntryAuthor::Operator => "an operator of this repository",
            EntryAuthor::Controller => "this controller",
            EntryAuthor::Other => "someone who is not an operator",
        };
        let mut doc = ContextDoc::new(
            vec![
                ("number".to_owned(), issue.number.to_string()),
                ("title".to_owned(), issue.title.clone()),
                ("state".to_owned(), issue.state.clone()),
                ("author".to_owned(), login_of(issue.user.as_ref())),
                ("written_by".to_owned(), written_by.to_owned()),
            ],
            issue.body.clone().unwrap_or_default(),
        );
        doc.entry_noun = "comment";
        doc.entries = self.conversation(issue.number).await?;
        Ok(doc)
    }

    /// `pull-request.md`: title, body, head and base as GitHub reports them
    /// now, next to the revision the launch is bound to, then the comments
    /// and the reviews.
    pub(super) async fn pull_request_doc(
        &mut self,
        number: PullNumber,
        bound_head: &CommitSha,
    ) -> Result<ContextDoc, DriverError> {
        let (api, repo) = (&self.access.api, &self.access.repo);
        let pr = api.pull_request(repo, number).await?;
        let mut doc = ContextDoc::new(
            vec![
                ("number".to_owned(), number.to_string()),
                ("title".to_owned(), pr.title.clone()),
                ("state".to_owned(), pr.state.clone()),
                ("head_ref_as_read".to_owned(), pr.head.ref_name.clone()),
                ("head_sha_as_read".to_owned(), pr.head.sha.to_string()),
                ("base_ref_as_read".to_owned(), pr.base.ref_name.clone()),
                ("base_sha_as_read".to_owned(), pr.base.sha.to_string()),
                ("bound_head_sha".to_owned(), bound_head.to_string()),
            ],
            pr.body.clone().unwrap_or_default(),
        );
        doc.entry_noun = "conversation entry";
        let mut entries = self.conversation(number.as_issue()).await?;
        for review in api.pull_request_reviews(repo, number).await? {
            let author = self.author(review.user.as_ref()).await?;
            entries.push(ContextEntry {
                facts: vec![
                    ("kind".to_owned(), "review".to_owned()),
                    ("author".to_owned(), login_of(review.user.as_ref())),
                    (
                        "association".to_owned(),
                        review.author_association.unwrap_or_default(),
                    ),
                    ("state".to_owned(), review.state),
                    ("commit".to_owned(), review.commit_id.unwrap_or_default()),
                    (
                        "submitted_at".to_owned(),
                        review.submitted_at.unwrap_or_default(),
                    ),
                ],
                author,
                text: review.body.unwrap_or_default(),
            });
        }
        // Comments and reviews interleaved in time, as GitHub shows them.
        entries.sort_by(|a, b| time_of(a).cmp(time_of(b)));
        doc.entries = entries;
        Ok(doc)
    }

    /// `checks.md`: every check run and commit status of `sha`.
    pub(super) async fn checks_doc(&self, sha: &CommitSha) -> Result<ContextDoc, DriverError> {
        let (api, repo) = (&self.access.api, &self.access.repo);
        let runs = api.check_runs(repo, sha).await?;
        let status = api.combined_status(repo, sha).await?;
        let mut doc = ContextDoc::new(
            vec![
                ("commit".to_owned(), sha.to_string()),
                ("check_runs".to_owned(), runs.len().to_string()),
                ("statuses".to_owned(), status.statuses.len().to_string()),
                ("combined_status".to_owned(), status.state.clone()),
            ],
            "",
        );
        doc.entry_noun = "check";
        for run in runs {
            let output = [run.output.title, run.output.summary]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n\n");
            doc.entries.push(ContextEntry {
                facts: vec![
                    ("kind".to_owned(), "check run".to_owned()),
                    ("name".to_owned(), run.name),
                    ("status".to_owned(), run.status),
                    ("conclusion".to_owned(), run.conclusion.unwrap_or_default()),
                    ("link".to_owned(), run.html_url.unwrap_or_default()),
                ],
                author: EntryAuthor::Other,
                text: output,
            });
        }
        for st in status.statuses {
            doc.entries.push(ContextEntry {
                facts: vec![
                    ("kind".to_owned(), "commit status".to_owned()),
                    ("context".to_owned(), st.context),
                    ("state".to_owned(), st.state),
                    ("link".to_owned(), st.target_url.unwrap_or_default()),
                ],
                author: EntryAuthor::Other,
                text: st.description.unwrap_or_default(),
            });
        }
        Ok(doc)
    }

    /// The read-context folder of a launch bound to a PR round (REVIEW and
    /// FIX): the issue, the PR and the checks of the bound HEAD, the
    /// previous review comment and the PR's follow-ups.
    pub(super) async fn pr_round_files(
        &mut self,
        issue: ContextDoc,
        binding: &RoundBinding,
        previous_review_comment: Option<ContextDoc>,
        follow_ups: &[(String, String)],
    ) -> Result<ContextFiles, DriverError> {
        Ok(ContextFiles {
            issue: Some(issue),
            pull_request: Some(self.pull_request_doc(binding.pr, &binding.head_sha).await?),
            checks: Some(self.checks_doc(&binding.head_sha).await?),
            previous_review_comment,
            follow_up_issues: self.follow_ups_doc(follow_ups).await?,
            ..ContextFiles::default()
        })
    }

    /// `follow-up-issues.md`: each `(finding id, issue URL)` with the
    /// issue's state and title as read now; `None` when there are none.
    pub(super) async fn follow_ups_doc(
        &self,
        follow_ups: &[(String, String)],
    ) -> Result<Option<ContextDoc>, DriverError> {
        if follow_ups.is_empty() {
            return Ok(None);
        }
        let mut doc = ContextDoc::new(
            vec![("follow_up_issues".to_owned(), follow_ups.len().to_string())],
            "",
        );
        doc.entry_noun = "follow-up issue";
        for (finding, url) in follow_ups.iter().take(MAX_FOLLOW_UP_READS) {
            let number = url
                .rsplit('/')
                .next()
                .and_then(|n| n.parse::<IssueNumber>().ok());
            let issue = match number {
                Some(n) => Some(self.access.api.issue(&self.access.repo, n).await?),
                None => None,
            };
            let (state, title) = issue.map_or_else(
                || ("(not read)".to_owned(), String::new()),
                |i| (i.state, i.title),
            );
            doc.entries.push(ContextEntry {
                facts: vec![
                    ("finding".to_owned(), finding.clone()),
                    ("url".to_owned(), url.clone()),
                    ("state".to_owned(), state),
                ],
                author: EntryAuthor::Other,
                text: title,
            });
        }
        doc.entries_left_out = follow_ups.len().saturating_sub(MAX_FOLLOW_UP_READS);
        Ok(Some(doc))
    }

    /// `epic.md` and `epic-issues.md` of EPIC `epic`.
    pub(super) async fn epic_docs(
        &self,
        epic: IssueNumber,
        epic_label: &str,
    ) -> Result<EpicContext, DriverError> {
        let (api, repo) = (&self.access.api, &self.access.repo);
        let issue = api.issue(repo, epic).await?;
        let children = epic_children(api, repo, &issue, epic_label).await?;
        Ok(epic_context(&issue, &children))
    }
}

/// An EPIC as agents see it.
pub(super) struct EpicContext {
    pub epic: ContextDoc,
    pub issues: ContextDoc,
    pub url: String,
}

/// The two EPIC documents of `epic` and the issues it references.
pub(super) fn epic_context(epic: &Issue, children: &[Issue]) -> EpicContext {
    let listed: Vec<String> = children
        .iter()
        .map(|c| format!("#{} [{}] {}", c.number, c.state, c.title))
        .collect();
    EpicContext {
        epic: ContextDoc::new(
            vec![
                ("number".to_owned(), epic.number.to_string()),
                ("title".to_owned(), epic.title.clone()),
                ("state".to_owned(), epic.state.clone()),
            ],
            epic.body.clone().unwrap_or_default(),
        ),
        issues: ContextDoc::new(
            vec![("issues".to_owned(), children.len().to_string())],
            listed.join("\n"),
        ),
        url: epic.html_url.clone(),
    }
}

/// `project-conventions.md`: `AGENTS.md` and `CLAUDE.md` as committed at
/// `base` (the default branch as fetched), never as an agent's candidate
/// branch has them; `None` when the base has neither.
pub(super) async fn conventions_doc(
    mirror: &Mirror,
    base: &CommitSha,
) -> Result<Option<ContextDoc>, DriverError> {
    let mut body = String::new();
    let mut found = Vec::new();
    for name in CONVENTION_FILES {
        let text = mirror
            .file_at(base, name, MAX_CONVENTION_BYTES)
            .await
            .map_err(|e| DriverError::Workspace(e.to_string()))?;
        if let Some(text) = text {
            body.push_str(&format!("=== {name} ===\n{text}\n"));
            found.push(name);
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    let mut doc = ContextDoc::new(
        vec![
            ("commit".to_owned(), base.to_string()),
            ("files".to_owned(), found.join(", ")),
        ],
        body,
    );
    doc.source = DocSource::ProjectConventions;
    Ok(Some(doc))
}

fn login_of(account: Option<&Account>) -> String {
    account.map_or_else(|| "(deleted account)".to_owned(), |a| a.login.clone())
}

/// An entry's timestamp fact (RFC 3339 sorts as text).
fn time_of(entry: &ContextEntry) -> &str {
    entry
        .facts
        .iter()
        .find(|(name, _)| name == "created_at" || name == "submitted_at")
        .map_or("", |(_, value)| value.as_str())
}
