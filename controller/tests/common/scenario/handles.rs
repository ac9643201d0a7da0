//! The typed handles a scenario holds instead of JSON and strings.
//!
//! [`Issue`] and [`Pull`] name one thread of the scenario's repository and
//! read what fakehub holds for it *now* (so an assertion sees GitHub's
//! state, not a copy taken earlier); a [`Comment`] is one comment as read.
//! The controller's own words are reused, not redefined: [`Phase`] is the
//! machine's run phase, [`Role`] its `AgentPhase`, and [`Marker`] the
//! executor's marker names.

use std::fmt;

use autoforge_journal::{IssueNumber, PullNumber, testing};
use reqwest::Method;
use serde_json::{Value, json};

use super::{OWNER, Person, REPO, Running};

pub use autoforge::effects::markers::MarkerName as Marker;
pub use autoforge::machine::{AgentPhase as Role, Phase};

/// A role as a scenario names it. `Role` is the word to use; a role name
/// (`"review"`) is still accepted while older scenarios move over, and an
/// unknown one fails the test rather than matching nothing.
pub trait AsRole {
    fn role(&self) -> Role;
}

impl AsRole for Role {
    fn role(&self) -> Role {
        *self
    }
}

impl AsRole for &str {
    fn role(&self) -> Role {
        Role::ALL
            .into_iter()
            .find(|role| role.role_name() == *self)
            .unwrap_or_else(|| panic!("no agent role is called {self:?}"))
    }
}

/// Something with a comment thread: an issue, a pull request, or a thread
/// number a scenario read from GitHub's JSON.
pub trait Thread {
    fn number(&self) -> u64;
}

impl Thread for u64 {
    fn number(&self) -> u64 {
        *self
    }
}

impl Thread for IssueNumber {
    fn number(&self) -> u64 {
        self.get()
    }
}

impl Thread for PullNumber {
    fn number(&self) -> u64 {
        self.get()
    }
}

impl Thread for Issue<'_> {
    fn number(&self) -> u64 {
        self.number.get()
    }
}

impl Thread for Pull<'_> {
    fn number(&self) -> u64 {
        self.number.get()
    }
}

/// One comment on a thread, as fakehub returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub body: String,
}

impl Comment {
    fn from_json(value: &Value) -> Comment {
        Comment {
            id: value["id"].as_u64().expect("a comment id"),
            author: value["user"]["login"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            body: value["body"].as_str().unwrap_or_default().to_owned(),
        }
    }

    /// Whether the body holds the opening of the hidden marker (`<!-- name`).
    pub fn carries(&self, marker: Marker) -> bool {
        carries(&self.body, marker)
    }
}

/// Whether `text` holds the opening of `marker`'s HTML comment.
fn carries(text: &str, marker: Marker) -> bool {
    text.contains(&format!("<!-- {}", marker.as_str()))
}

/// An issue of the scenario's repository.
#[derive(Clone, Copy)]
pub struct Issue<'s> {
    s: &'s Running,
    pub number: IssueNumber,
}

/// A pull request of the scenario's repository.
#[derive(Clone, Copy)]
pub struct Pull<'s> {
    s: &'s Running,
    pub number: PullNumber,
}

impl Running {
    /// Issue `number` of the repository (no request is made).
    pub fn issue(&self, number: IssueNumber) -> Issue<'_> {
        Issue { s: self, number }
    }

    /// Pull request `number` of the repository (no request is made).
    pub fn pull_numbered(&self, number: PullNumber) -> Pull<'_> {
        Pull { s: self, number }
    }

    /// The comments on a thread, oldest first.
    pub async fn comments_on(&self, thread: impl Thread) -> Vec<Comment> {
        let path = format!("/issues/{}/comments", thread.number());
        array(self.get(&path).await)
            .iter()
            .map(Comment::from_json)
            .collect()
    }

    /// The comments on a thread that carry `marker`.
    pub async fn comments_with(&self, thread: impl Thread, marker: Marker) -> Vec<Comment> {
        let mut comments = self.comments_on(thread).await;
        comments.retain(|c| c.carries(marker));
        comments
    }

    /// Every pull request, open or closed.
    pub async fn pull_requests(&self) -> Vec<Pull<'_>> {
        array(self.get("/pulls?state=all").await)
            .iter()
            .map(|pr| {
                self.pull_numbered(testing::pull(pr["number"].as_u64().expect("a PR number")))
            })
            .collect()
    }

    /// The one pull request of the scenario; fails unless there is exactly one.
    pub async fn pull(&self) -> Pull<'_> {
        let pulls = self.pull_requests().await;
        assert_eq!(pulls.len(), 1, "exactly one PR: {pulls:?}");
        pulls[0]
    }
}

impl Issue<'_> {
    async fn read(&self) -> Value {
        self.s.get(&format!("/issues/{}", self.number)).await
    }

    /// The body as GitHub holds it now.
    pub async fn body(&self) -> String {
        self.read().await["body"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The comments on the issue carrying `marker`.
    pub async fn comments_with(&self, marker: Marker) -> Vec<Comment> {
        self.s.comments_with(*self, marker).await
    }

    /// Exactly one comment on the issue carries `marker`.
    pub async fn assert_one_comment_with(&self, marker: Marker) {
        assert_one(self.number, marker, self.comments_with(marker).await);
    }

    /// A person replaces the issue's body.
    pub async fn edit_body_as(&self, person: &Person, body: &str) {
        let path = format!("/repos/{OWNER}/{REPO}/issues/{}", self.number);
        self.s
            .world
            .rest_as(person, Method::PATCH, &path, json!({ "body": body }))
            .await;
    }
}

impl Pull<'_> {
    async fn read(&self) -> Value {
        self.s.get(&format!("/pulls/{}", self.number)).await
    }

    /// The head commit as GitHub holds it now.
    pub async fn head_sha(&self) -> String {
        let read = self.read().await;
        read["head"]["sha"].as_str().expect("a head sha").to_owned()
    }

    /// Whether GitHub shows the pull request merged.
    pub async fn is_merged(&self) -> bool {
        self.read().await["merged"] == true
    }

    /// How many merge requests fakehub answered for it.
    pub fn merge_requests(&self) -> usize {
        self.s.world.merge_requests(self.number)
    }

    /// Merged, by exactly one merge request.
    pub async fn assert_merged_once(&self) {
        let read = self.read().await;
        assert_eq!(
            read["merged"], true,
            "PR #{} is merged: {read}",
            self.number
        );
        assert_eq!(
            self.merge_requests(),
            1,
            "PR #{} merged by one request",
            self.number
        );
    }

    /// The comments on the pull request carrying `marker`.
    pub async fn comments_with(&self, marker: Marker) -> Vec<Comment> {
        self.s.comments_with(*self, marker).await
    }

    /// Exactly one comment on the pull request carries `marker`.
    pub async fn assert_one_comment_with(&self, marker: Marker) {
        assert_one(self.number, marker, self.comments_with(marker).await);
    }

    /// A person merges it at its current head, as a human would.
    pub async fn merge_as(&self, person: &Person) {
        let head = self.head_sha().await;
        let path = format!("/repos/{OWNER}/{REPO}/pulls/{}/merge", self.number);
        self.s
            .world
            .rest_as(person, Method::PUT, &path, json!({ "sha": head }))
            .await;
    }

    /// Turns it into a draft or back. GitHub does this through GraphQL
    /// only, which fakehub does not serve, so the flag is set in fakehub's
    /// world directly.
    pub fn set_draft(&self, draft: bool) {
        let mut world = self.s.world.hub.shared().lock();
        let repo = world.repo_id_by_name(OWNER, REPO).expect("the repository");
        let issue = world.issue_mut(repo, self.number.get()).expect("the PR");
        issue.pull.as_mut().expect("a pull request").draft = draft;
    }
}

fn assert_one(thread: impl fmt::Display, marker: Marker, found: Vec<Comment>) {
    assert_eq!(
        found.len(),
        1,
        "one {} comment on #{thread}: {found:?}",
        marker.as_str()
    );
}

/// Reads a JSON array, or an empty one.
pub(super) fn array(value: Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

impl PartialEq for Issue<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.number == other.number
    }
}

impl PartialEq for Pull<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.number == other.number
    }
}

impl fmt::Debug for Issue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "issue #{}", self.number)
    }
}

/// The number, as GitHub's paths spell it.
impl fmt::Display for Issue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number)
    }
}

/// The number, as GitHub's paths spell it.
impl fmt::Display for Pull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number)
    }
}

impl fmt::Debug for Pull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PR #{}", self.number)
    }
}
