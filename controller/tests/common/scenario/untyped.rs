//! The untyped calls scenarios used before the handles existed: issues as
//! numbers, JSON for a pull request and its comments, phase names as
//! strings. Each is a thin view of a typed call in `handles.rs`, kept only
//! for the scenario files that still use them (`scenario_review.rs`,
//! `scenario_trust.rs`, `scenario_installations.rs`, written against them
//! in parallel), so those merge unchanged; new scenarios use the handles,
//! and this file goes once the last caller has moved.

use serde_json::Value;

use autoforge_journal::{IssueNumber, PullNumber, testing};

use super::handles::Thread;
use super::{Person, RunRef, Running};

impl Running {
    /// An open issue written by the owner; its number. Use
    /// [`Running::new_issue`].
    pub async fn open_issue(&self, title: &str) -> IssueNumber {
        self.new_issue(title).await.number
    }

    /// An EPIC (issue #1) with `children` sub-issues, in order; their
    /// numbers. Use [`Running::new_epic`].
    pub async fn open_epic(&self, children: usize) -> (IssueNumber, Vec<IssueNumber>) {
        let (epic, opened) = self.new_epic(children).await;
        (epic.number, opened.iter().map(|c| c.number).collect())
    }

    /// Every PR, open or closed, as GitHub's JSON. Use
    /// [`Running::pull_requests`].
    pub async fn pulls(&self) -> Vec<Value> {
        super::handles::array(self.get("/pulls?state=all").await)
    }

    /// A person merges PR `pr` at its current head. Use `Pull::merge_as`.
    pub async fn merge_as(&self, person: &Person, pr: PullNumber) {
        self.pull_numbered(pr).merge_as(person).await;
    }

    /// A person replaces the body of an issue. Use `Issue::edit_body_as`.
    pub async fn edit_issue_body(&self, person: &Person, issue: impl Thread, body: &str) {
        let issue = self.issue(testing::issue(issue.number()));
        issue.edit_body_as(person, body).await;
    }

    /// The comments on a thread, as GitHub's JSON. Use [`Running::comments_on`].
    pub async fn comments(&self, thread: impl Thread) -> Vec<Value> {
        let path = format!("/issues/{}/comments", thread.number());
        super::handles::array(self.get(&path).await)
    }

    /// The one PR of the scenario, as GitHub's JSON. Use [`Running::pull`].
    pub async fn the_pull(&self) -> Value {
        let number = self.pull().await.number;
        self.get(&format!("/pulls/{number}")).await
    }

    /// The comments on `thread` that carry the marker spelled `name`, as
    /// GitHub's JSON. Use [`Running::comments_with`].
    pub async fn comments_with_marker(&self, thread: impl Thread, name: &str) -> Vec<Value> {
        let opener = format!("<!-- {name}");
        let mut comments = self.comments(thread).await;
        comments.retain(|c| c["body"].as_str().unwrap_or_default().contains(&opener));
        comments
    }

    /// PR `pr` is merged, by one merge request. Use `Pull::assert_merged_once`.
    pub async fn assert_pr_merged_once(&self, pr: PullNumber) {
        self.pull_numbered(pr).assert_merged_once().await;
    }

    /// How many merge requests fakehub answered for `pr`. Use
    /// `Pull::merge_requests`.
    pub fn merge_requests(&self, pr: PullNumber) -> usize {
        self.pull_numbered(pr).merge_requests()
    }
}

impl RunRef<'_> {
    /// The phases the run went through, by name. Use [`RunRef::phase_history`].
    pub async fn phases(&self) -> Vec<String> {
        let history = self.phase_history().await;
        history.iter().map(|p| p.as_str().to_owned()).collect()
    }
}
