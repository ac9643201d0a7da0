//! Translation of one stored delivery into an [`Classified`].
//!
//! Pure: the dispatcher passes the event name and raw body from the inbox
//! plus the configured trigger label and the App's slug. Unhandled events
//! and actions are cleanly [`Classified::Ignored`]; a handled action whose
//! payload lacks a field we read is a [`ClassifyError`], because guessing
//! would silently drop a label or a command.

use super::classified::{Classified, IgnoreReason, RepoIssue, RepoPull, ReviewBy};
use super::payload::{
    Account, ActionOnly, CheckRunEvent, CheckSuiteEvent, Comment, InstallationEvent,
    IssueCommentEvent, IssuesEvent, PullRequestEvent, PullRequestReviewEvent, StatusEvent,
};
use crate::commands::{Actor, ActorKind, is_own_login};
use serde::de::DeserializeOwned;

/// What classification needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct ClassifyContext<'a> {
    /// `labels.trigger` (default `autoforge`); compared case-insensitively,
    /// as GitHub treats label names.
    pub trigger_label: &'a str,
    /// The App's slug; comments made through the App are never input.
    pub app_slug: &'a str,
    /// The controller's own login (`<slug>[bot]`, or the token's user with a
    /// personal token); its comments are never input either.
    pub own_login: &'a str,
    /// Whether the controller is a GitHub App. Every delivery of an App's
    /// installation names the installation; one that names none came from
    /// a repository or organisation hook, and nothing can be read for it.
    pub is_app: bool,
}

/// A handled delivery whose payload does not have the shape we read.
#[derive(Debug, thiserror::Error)]
#[error("the `{event}.{action}` payload does not have the expected shape: {source}")]
pub struct ClassifyError {
    pub event: String,
    pub action: String,
    #[source]
    pub source: serde_json::Error,
}

/// Classifies the delivery `event` (the `X-GitHub-Event` value) with raw `body`.
pub fn classify(
    event: &str,
    body: &[u8],
    context: &ClassifyContext<'_>,
) -> Result<Classified, ClassifyError> {
    let action = parse::<ActionOnly>(event, "?", body)?
        .action
        .unwrap_or_default();
    let classifier = Classifier {
        event,
        action: &action,
        body,
        context,
    };
    match event {
        "issues" => classifier.issues(),
        "issue_comment" => classifier.issue_comment(),
        "pull_request" => classifier.pull_request(),
        "check_run" | "check_suite" => classifier.check(),
        "status" => classifier.status(),
        "installation" | "installation_repositories" => classifier.installation(),
        "ping" => Ok(ignored(IgnoreReason::Ping)),
        "pull_request_review" => classifier.review(),
        other => Ok(ignored(IgnoreReason::UnhandledEvent {
            event: other.to_owned(),
        })),
    }
}

struct Classifier<'a> {
    event: &'a str,
    action: &'a str,
    body: &'a [u8],
    context: &'a ClassifyContext<'a>,
}

impl Classifier<'_> {
    fn parse<T: DeserializeOwned>(&self) -> Result<T, ClassifyError> {
        parse(self.event, self.action, self.body)
    }

    fn unhandled(&self) -> Result<Classified, ClassifyError> {
        Ok(ignored(IgnoreReason::UnhandledAction {
            event: self.event.to_owned(),
            action: self.action.to_owned(),
        }))
    }

    fn issues(&self) -> Result<Classified, ClassifyError> {
        if !matches!(
            self.action,
            "labeled" | "unlabeled" | "closed" | "reopened" | "edited"
        ) {
            return self.unhandled();
        }
        let payload: IssuesEvent = self.parse()?;
        let issue = RepoIssue {
            repository: payload.repository.full_name,
            number: payload.issue.number,
        };
        match self.action {
            "labeled" | "unlabeled" => {
                let is_trigger = payload.label.as_ref().is_some_and(|label| {
                    label.name.eq_ignore_ascii_case(self.context.trigger_label)
                });
                if !is_trigger {
                    return Ok(ignored(IgnoreReason::OtherLabel));
                }
                if payload.issue.pull_request.is_some() {
                    return Ok(ignored(IgnoreReason::LabelOnPullRequest));
                }
                let sender = actor(payload.sender);
                Ok(if self.action == "labeled" {
                    Classified::TriggerLabelAdded {
                        issue,
                        issue_open: payload.issue.state == "open",
                        sender,
                    }
                } else {
                    Classified::TriggerLabelRemoved { issue, sender }
                })
            }
            "closed" => Ok(Classified::IssueClosed { issue }),
            "reopened" => Ok(Classified::IssueReopened { issue }),
            _ => {
                let changes = payload.changes.as_ref();
                Ok(Classified::IssueEdited {
                    issue,
                    title_changed: changes.is_some_and(|c| c.title.is_some()),
                    body_changed: changes.is_some_and(|c| c.body.is_some()),
                    editor: actor(payload.sender),
                })
            }
        }
    }

    fn issue_comment(&self) -> Result<Classified, ClassifyError> {
        if !matches!(self.action, "created" | "edited") {
            return self.unhandled();
        }
        let payload: IssueCommentEvent = self.parse()?;
        let via_app = payload
            .comment
            .performed_via_github_app
            .as_ref()
            .and_then(|app| app.slug.as_deref());
        if let Some(reason) = self.non_human(&payload.comment.user, via_app) {
            return Ok(ignored(reason));
        }
        let issue = RepoIssue {
            repository: payload.repository.full_name,
            number: payload.issue.number,
        };
        let on_pull_request = payload.issue.pull_request.is_some();
        let Comment { id, body, user, .. } = payload.comment;
        if self.action == "created" {
            return Ok(Classified::CommentCreated {
                issue,
                on_pull_request,
                comment_id: id,
                body,
                author: actor(user),
            });
        }
        if let Some(reason) = self.non_human(&payload.sender, None) {
            return Ok(ignored(reason));
        }
        match payload.changes.and_then(|changes| changes.body) {
            Some(previous) if previous.from != body => Ok(Classified::CommentEdited {
                issue,
                on_pull_request,
                comment_id: id,
                old_body: previous.from,
                new_body: body,
                author: actor(user),
                editor: actor(payload.sender),
            }),
            _ => Ok(ignored(IgnoreReason::CommentBodyUnchanged)),
        }
    }

    /// The controller itself (by its bot login, by acting through the App,
    /// or as the token's user) and any bot account never give commands.
    fn non_human(&self, account: &Account, via_app: Option<&str>) -> Option<IgnoreReason> {
        let slug = self.context.app_slug;
        let via_us =
            via_app.is_some_and(|name| !slug.is_empty() && name.eq_ignore_ascii_case(slug));
        if via_us || is_own_login(&account.login, self.context.own_login) {
            return Some(IgnoreReason::CommentByTheApp);
        }
        if account.kind == "Bot" || account.login.to_ascii_lowercase().ends_with("[bot]") {
            return Some(IgnoreReason::CommentByBot {
                login: account.login.clone(),
            });
        }
        None
    }

    fn pull_request(&self) -> Result<Classified, ClassifyError> {
        if !matches!(
            self.action,
            "synchronize" | "closed" | "reopened" | "edited"
        ) {
            return self.unhandled();
        }
        let payload: PullRequestEvent = self.parse()?;
        let pull = payload.pull_request;
        let pr = RepoPull {
            repository: payload.repository.full_name,
            number: pull.number,
        };
        match self.action {
            "synchronize" => Ok(Classified::PrSynchronize {
                pr,
                head_sha: pull.head.sha,
                head_ref: pull.head.ref_name,
            }),
            "closed" => {
                let merged = pull.merged.unwrap_or(false);
                Ok(Classified::PrClosed {
                    pr,
                    merged,
                    // Before a merge GitHub fills this with a test-merge commit.
                    merge_commit_sha: pull.merge_commit_sha.filter(|_| merged),
                    head_ref: pull.head.ref_name,
                })
            }
            "reopened" => Ok(Classified::PrReopened { pr }),
            _ => match payload.changes.and_then(|changes| changes.base) {
                Some(base) if base.ref_name.from != pull.base.ref_name => {
                    Ok(Classified::PrBaseChanged {
                        pr,
                        old_base: base.ref_name.from,
                        new_base: pull.base.ref_name,
                    })
                }
                _ => Ok(ignored(IgnoreReason::PrEditWithoutBaseChange)),
            },
        }
    }

    /// A review submitted or dismissed can lift (or restore) a required
    /// review's block on the merge gate.
    fn review(&self) -> Result<Classified, ClassifyError> {
        if !matches!(self.action, "submitted" | "dismissed") {
            return self.unhandled();
        }
        let payload: PullRequestReviewEvent = self.parse()?;
        // The controller's own inline review of a round tells the run
        // nothing it does not know: it wrote it.
        let own = payload
            .review
            .as_ref()
            .and_then(|review| review.user.as_ref())
            .and_then(|user| self.non_human(user, None));
        if let Some(why @ IgnoreReason::CommentByTheApp) = own {
            return Ok(ignored(why));
        }
        let changes_requested = payload
            .review
            .filter(|review| {
                self.action == "submitted" && review.state.eq_ignore_ascii_case("changes_requested")
            })
            .and_then(|review| {
                Some(ReviewBy {
                    review_id: review.id,
                    author: actor(review.user?),
                })
            });
        Ok(Classified::PrReviewed {
            pr: RepoPull {
                repository: payload.repository.full_name,
                number: payload.pull_request.number,
            },
            head_sha: payload.pull_request.head.sha,
            changes_requested,
        })
    }

    /// A finished check can concern a run only through one of its pull
    /// requests, and, with an App, only when it comes from an installation
    /// (GitHub's own delivery of the same check names it).
    fn check(&self) -> Result<Classified, ClassifyError> {
        if self.action != "completed" {
            return self.unhandled();
        }
        let (repository, target, installation) = if self.event == "check_run" {
            let payload: CheckRunEvent = self.parse()?;
            (payload.repository, payload.check_run, payload.installation)
        } else {
            let payload: CheckSuiteEvent = self.parse()?;
            (
                payload.repository,
                payload.check_suite,
                payload.installation,
            )
        };
        if self.context.is_app && installation.is_none() {
            return Ok(ignored(IgnoreReason::NoInstallation {
                event: self.event.to_owned(),
            }));
        }
        if target.pull_requests.is_empty() {
            return Ok(ignored(IgnoreReason::CheckWithoutPullRequest));
        }
        let ours = target
            .app
            .as_ref()
            .and_then(|app| app.slug.as_deref())
            .is_some_and(|slug| slug == self.context.app_slug);
        if self.context.is_app && ours {
            return Ok(ignored(IgnoreReason::OwnCheck));
        }
        Ok(Classified::CheckCompleted {
            repository: repository.full_name,
            head_sha: target.head_sha,
            pull_requests: target.pull_requests.iter().map(|pr| pr.number).collect(),
        })
    }

    /// A commit status that reached a final state wakes the runs whose
    /// pull request is at that commit, like a finished check run does;
    /// with an App, only one an installation sent.
    fn status(&self) -> Result<Classified, ClassifyError> {
        let payload: StatusEvent = self.parse()?;
        if self.context.is_app && payload.installation.is_none() {
            return Ok(ignored(IgnoreReason::NoInstallation {
                event: self.event.to_owned(),
            }));
        }
        if payload.state == "pending" {
            return Ok(ignored(IgnoreReason::PendingStatus));
        }
        Ok(Classified::StatusReported {
            repository: payload.repository.full_name,
            head_sha: payload.sha,
        })
    }

    fn installation(&self) -> Result<Classified, ClassifyError> {
        let payload: InstallationEvent = self.parse()?;
        let names = |repositories: Vec<super::payload::Repository>| {
            repositories
                .into_iter()
                .map(|repository| repository.full_name)
                .collect::<Vec<_>>()
        };
        let (mut added, mut removed) = (
            names(payload.repositories_added),
            names(payload.repositories_removed),
        );
        match (self.event, self.action) {
            ("installation", "created") => added.extend(names(payload.repositories)),
            ("installation", "deleted") => removed.extend(names(payload.repositories)),
            _ => {}
        }
        Ok(Classified::InstallationChanged {
            installation_id: payload.installation.id,
            action: self.action.to_owned(),
            repositories_added: added,
            repositories_removed: removed,
        })
    }
}

fn parse<T: DeserializeOwned>(event: &str, action: &str, body: &[u8]) -> Result<T, ClassifyError> {
    serde_json::from_slice(body).map_err(|source| ClassifyError {
        event: event.to_owned(),
        action: action.to_owned(),
        source,
    })
}

fn ignored(why: IgnoreReason) -> Classified {
    Classified::Ignored { why }
}

fn actor(account: Account) -> Actor {
    let kind = if account.kind == "Bot" {
        ActorKind::Bot
    } else {
        ActorKind::User
    };
    Actor {
        login: account.login,
        kind,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CONTEXT: ClassifyContext<'static> = ClassifyContext {
        trigger_label: "autoforge",
        app_slug: "autoforge",
        own_login: "autoforge[bot]",
        is_app: true,
    };

    /// A `status` delivery in GitHub's documented shape (the fields read).
    fn status(state: &str, installation: bool) -> Vec<u8> {
        let mut payload = serde_json::json!({
            "id": 6805126730_u64,
            "sha": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
            "name": "Codertocat/Hello-World",
            "context": "ci/build",
            "state": state,
            "commit": {"sha": "6113728f27ae82c7b1a177c8d03f9e96e0adf246"},
            "branches": [],
            "repository": {"full_name": "Codertocat/Hello-World"},
            "sender": {"login": "Codertocat", "type": "User"},
        });
        if installation {
            payload["installation"] = serde_json::json!({"id": 7});
        }
        serde_json::to_vec(&payload).unwrap()
    }

    #[test]
    fn a_final_commit_status_is_reported_for_its_commit() {
        for state in ["success", "failure", "error"] {
            assert_eq!(
                classify("status", &status(state, true), &CONTEXT).unwrap(),
                Classified::StatusReported {
                    repository: "Codertocat/Hello-World".into(),
                    head_sha: "6113728f27ae82c7b1a177c8d03f9e96e0adf246".into(),
                }
            );
        }
    }

    #[test]
    fn a_pending_status_or_one_without_an_installation_is_ignored() {
        assert_eq!(
            classify("status", &status("pending", true), &CONTEXT).unwrap(),
            Classified::Ignored {
                why: IgnoreReason::PendingStatus
            }
        );
        assert!(matches!(
            classify("status", &status("success", false), &CONTEXT).unwrap(),
            Classified::Ignored {
                why: IgnoreReason::NoInstallation { .. }
            }
        ));
    }
}
