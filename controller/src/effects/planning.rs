//! What every kind's planner shares: the [`PlanContext`] the caller gives,
//! the [`PlanError`] that keeps an intent out of the journal, and the
//! [`Draft`] of one row — its fresh `write` nonce, its identity, and the
//! marker stamping that ties the object it writes to the row.

use std::collections::BTreeMap;

use autoforge_journal::{CommitSha, EffectKind, IssueNumber, NewEffect, PullNumber, RunId};
use serde::Serialize;
use serde_json::{Map, Value};

use super::markers::{self, MarkerName};
use super::row::{Marked, Row};
use crate::github::{PullRequestFile, RepoName};
use crate::publish::{IssueRef, PolicyViolation};

/// What `plan` needs besides the intent.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    pub run_id: RunId,
    pub repo: &'a RepoName,
    /// `https://github.com` or the GHES host: URLs inside markers.
    pub html_base: &'a str,
    pub default_branch: &'a str,
    /// Bodies read when the phase began, by issue or PR number: the base
    /// that `adopt_pr`, `append_issue_markers` and `splice_epic_roadmap`
    /// append to, and whose digest guards the write.
    pub bodies: &'a BTreeMap<IssueNumber, String>,
    /// The files each reviewed range changes, with their patches, read
    /// just before planning: what `post_review` places its inline comments
    /// on. Keyed by a round binding's (merge base, head).
    pub diffs: &'a ReviewDiffs,
}

/// The diffs `post_review` is planned on, by (merge base, head).
pub type ReviewDiffs = BTreeMap<(CommitSha, CommitSha), Vec<PullRequestFile>>;

/// No diffs read: for planning anything but `post_review`.
pub static NO_DIFFS: ReviewDiffs = BTreeMap::new();

/// Why an intent cannot become a journal row. Nothing is journalled.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Policy(#[from] PolicyViolation),
    #[error("marker: {0}")]
    Marker(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("the body of #{0} as read at phase start was not provided")]
    MissingBody(IssueNumber),
    #[error("the diff of {head} since {merge_base} was not read before planning")]
    MissingDiff {
        merge_base: CommitSha,
        head: CommitSha,
    },
    /// A row type that does not encode as a JSON object (a defect here).
    #[error("the journal row cannot be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

impl PlanContext<'_> {
    pub(crate) fn issue_url(&self, number: IssueNumber) -> String {
        format!(
            "{}/{}/issues/{number}",
            self.html_base.trim_end_matches('/'),
            self.repo
        )
    }

    pub(crate) fn pr_url(&self, number: PullNumber) -> String {
        format!(
            "{}/{}/pull/{number}",
            self.html_base.trim_end_matches('/'),
            self.repo
        )
    }

    pub(crate) fn issue_ref(&self, number: IssueNumber) -> IssueRef {
        IssueRef {
            owner: self.repo.owner().to_owned(),
            repo: self.repo.name().to_owned(),
            number,
        }
    }

    pub(crate) fn diff_of(
        &self,
        merge_base: &CommitSha,
        head: &CommitSha,
    ) -> Result<&[PullRequestFile], PlanError> {
        self.diffs
            .get(&(merge_base.clone(), head.clone()))
            .map(Vec::as_slice)
            .ok_or_else(|| PlanError::MissingDiff {
                merge_base: merge_base.clone(),
                head: head.clone(),
            })
    }

    pub(crate) fn body_of(&self, number: IssueNumber) -> Result<&str, PlanError> {
        self.bodies
            .get(&number)
            .map(String::as_str)
            .ok_or(PlanError::MissingBody(number))
    }
}

/// One row being planned: the context, the row's identity, and its fresh
/// `write` nonce (32 lowercase hex digits, see [`super::markers`]).
pub(crate) struct Draft<'a> {
    pub ctx: &'a PlanContext<'a>,
    pub identity: String,
    pub write: String,
}

impl<'a> Draft<'a> {
    pub(crate) fn new(ctx: &'a PlanContext<'a>, identity: String) -> Self {
        Draft {
            ctx,
            identity,
            write: uuid::Uuid::new_v4().simple().to_string(),
        }
    }

    pub(crate) fn run(&self) -> i64 {
        self.ctx.run_id.0
    }

    /// `body` with its one `name` marker carrying this row's run and nonce.
    pub(crate) fn stamp(&self, body: &str, name: MarkerName) -> Result<String, PlanError> {
        markers::stamp(body, name, self.run(), &self.write).map_err(PlanError::Marker)
    }

    /// A `name` marker carrying `key`, the run (when `with_run`) and this
    /// row's nonce, for bodies the executor lays out itself.
    pub(crate) fn marker(
        &self,
        name: MarkerName,
        key: &Map<String, Value>,
        with_run: bool,
    ) -> Result<String, PlanError> {
        let mut payload = key.clone();
        if with_run {
            payload.insert("run".into(), Value::from(self.run()));
        }
        payload.insert("write".into(), Value::from(self.write.as_str()));
        markers::render(name, &payload).map_err(PlanError::Marker)
    }

    /// The completion of a row recognised by a `name` marker carrying `key`.
    pub(crate) fn marked(&self, name: MarkerName, key: Map<String, Value>) -> Marked {
        Marked {
            marker: name,
            key,
            write: self.write.clone(),
        }
    }

    /// The journal row.
    pub(crate) fn finish<P: Serialize, Q: Serialize, C: Serialize>(
        self,
        kind: EffectKind,
        row: Row<P, Q, C>,
    ) -> Result<NewEffect, PlanError> {
        Ok(row.into_new_effect(kind, self.identity)?)
    }
}

/// A marker identity key as the JSON object markers are matched against.
pub(crate) fn identity_key<K: Serialize>(key: &K) -> Result<Map<String, Value>, PlanError> {
    match serde_json::to_value(key)? {
        Value::Object(map) => Ok(map),
        other => Err(PlanError::Marker(format!(
            "an identity key must be an object, not {other}"
        ))),
    }
}

/// What separates a body from a block appended to it: exactly one blank line.
pub(crate) fn blank_line_after(body: &str) -> &'static str {
    if body.is_empty() || body.ends_with("\n\n") {
        ""
    } else if body.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    }
}
