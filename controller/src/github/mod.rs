//! The GitHub client: App and token auth, typed reads with retries, rate
//! limits and conditional requests, and the thin write calls that only the
//! effect executor may use.

mod backoff;
mod client;
mod error;
mod etag;
mod git_token;
mod listing;
mod models;
mod operators;
mod pagination;
mod paths;
pub mod permissions;
mod ratelimit;
mod reads;
// Crate-private: GitHub is written through `effects` only. The feature is
// for integration tests, which play the humans on fakehub with these calls.
#[cfg(feature = "test-github-writes")]
pub mod writes;
#[cfg(not(feature = "test-github-writes"))]
pub(crate) mod writes;

#[cfg(test)]
mod http_tests;

#[cfg(test)]
mod conditional_tests;

#[cfg(test)]
mod conformance_tests;

#[cfg(test)]
mod permissions_tests;

pub use backoff::BackoffPolicy;
pub use client::{ClientOptions, Conditional, GitHubApi, GitHubAuth, GitHubClient};
pub use error::GitHubError;
pub use etag::{CachedAnswer, EtagCache};
pub use models::{
    Account, AppRef, BranchRule, BranchTip, CheckRun, CheckRunOutput, CollaboratorPermission,
    CombinedStatus, CommitRef, CommitStatus, Comparison, FileContent, HookDelivery, Installation,
    Issue, IssueComment, IssueEvent, Label, MergeResult, PullRequest, PullRequestFile,
    PullRequestReview, Reaction, RepoRef, Repository, ReviewComment,
};
pub use pagination::{LinkError, MAX_PAGES, next_link, relative_next_path};
pub use paths::{InvalidRepoName, RepoName, encode_component, encode_path};
pub use ratelimit::{Admission, RateGates, RateLimitState, RateScope, RequestKind};
pub use reads::latest_labeler;
