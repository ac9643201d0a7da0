//! The untyped reads scenarios used before the handles existed: JSON for a
//! pull request and its comments, phase names as strings. Each is a thin
//! view of a typed read in `handles.rs`, kept only for the scenario files
//! that still call them (`scenario_review.rs`), so they merge unchanged;
//! new scenarios use the handles, and this file goes once the last caller
//! has moved.

use serde_json::Value;

use super::handles::{Marker, Thread};
use super::{RunRef, Running};

impl Running {
    /// The one PR of the scenario, as GitHub's JSON. Use [`Running::pull`].
    pub async fn the_pull(&self) -> Value {
        let number = self.pull().await.number;
        self.get(&format!("/pulls/{number}")).await
    }

    /// The comments on `thread` that carry the marker spelled `name`, as
    /// GitHub's JSON. Use [`Running::comments_with`].
    pub async fn comments_with_marker(&self, thread: impl Thread, name: &str) -> Vec<Value> {
        let marker = Marker::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .unwrap_or_else(|| panic!("no controller marker is called {name:?}"));
        let path = format!("/issues/{}/comments", thread.number());
        let comments = super::handles::array(self.get(&path).await);
        comments
            .into_iter()
            .filter(|c| super::handles::carries(c["body"].as_str().unwrap_or_default(), marker))
            .collect()
    }

    /// PR `pr` is merged, by one merge request. Use `Pull::assert_merged_once`.
    pub async fn assert_pr_merged_once(&self, pr: u64) {
        self.pull_numbered(pr).assert_merged_once().await;
    }

    /// How many merge requests fakehub answered for `pr`. Use
    /// `Pull::merge_requests`.
    pub fn merge_requests(&self, pr: u64) -> usize {
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
