//! The wire shapes of a phase result, private to the parser: what the
//! schema accepted, before the cross-checks resolve it into the machine's
//! result types.
//!
//! They differ from those types only where the wire does: fields that
//! exist for a cross-check (`issue_url`, `needs_fix_round`), URLs that are
//! resolved to issue numbers, `tests` of a fix, the flat resolution object.
//! Deserialisation happens only after the schema check, so unknown fields
//! are denied merely as a second line of defence; the diagnostics an agent
//! sees come from the schema and the cross-checks.

use serde::Deserialize;

use crate::machine::{Finding, FollowUpDraft, PlanResult, ReviewSections};

/// A schema-valid, policy-clean result as the agent wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Parsed {
    /// A plan has no wire-only fields: it is the machine's type already.
    Plan(PlanResult),
    Implement(WireImplement),
    Review(WireReview),
    Fix(WireFix),
    UpdateEpic(WireEpic),
    /// `status: "failure"`: the run goes to `FAILED` with this message.
    Failure {
        message: String,
    },
    /// `status: "blocked"`: the run goes to `BLOCKED` with this message.
    Blocked {
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireImplement {
    pub issue_url: String,
    pub head_sha: String,
    pub pr_title: String,
    pub pr_body: String,
    #[serde(default)]
    pub tests: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(super) struct WireReview {
    pub round: u32,
    pub reviewed_head_sha: String,
    pub needs_fix_round: bool,
    pub findings: Vec<Finding>,
    #[serde(flatten)]
    pub sections: ReviewSections,
}

/// How the fixer says it resolved one finding, before the cross-checks
/// resolve a follow-up URL into its issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WireResolutionKind {
    Fixed {
        commit_sha: Option<String>,
    },
    /// Deferred to an issue already listed to the fixer.
    FollowUpExisting {
        url: String,
    },
    /// Deferred to an issue the controller creates.
    FollowUpNew(FollowUpDraft),
    NoChange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WireResolution {
    pub finding_id: String,
    pub kind: WireResolutionKind,
    /// Required (≥ the minimum) for `no_change_with_rationale`, optional else.
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WireFix {
    pub previous_head_sha: String,
    pub head_sha: String,
    pub resolutions: Vec<WireResolution>,
    pub tests: Vec<String>,
}

/// An UPDATE_EPIC result. On a full request `progress` is always present;
/// on a re-request it is always absent. `roadmap_section` is `None` when
/// absent, null or blank; `next_issue_url` is `None` for "EPIC complete".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WireEpic {
    pub progress: Option<String>,
    pub roadmap_section: Option<String>,
    pub next_issue_url: Option<String>,
}

/// The serde shape of one resolution; the schema guarantees the
/// combinations, [`WireResolution`] is what the checks read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResolution {
    pub finding_id: String,
    pub resolution: String,
    pub commit_sha: Option<String>,
    pub follow_up_issue_url: Option<String>,
    pub follow_up_issue: Option<FollowUpDraft>,
    pub rationale: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFix {
    pub previous_head_sha: String,
    pub head_sha: String,
    pub resolutions: Vec<RawResolution>,
    #[serde(default)]
    pub tests: Vec<String>,
}

impl RawResolution {
    /// `None` when the fields do not form one of the schema's combinations.
    pub(super) fn into_resolution(self) -> Option<WireResolution> {
        let kind = match self.resolution.as_str() {
            "fixed" => WireResolutionKind::Fixed {
                commit_sha: self.commit_sha,
            },
            "follow_up_created" => match (self.follow_up_issue_url, self.follow_up_issue) {
                (Some(url), None) => WireResolutionKind::FollowUpExisting { url },
                (None, Some(issue)) => WireResolutionKind::FollowUpNew(issue),
                _ => return None,
            },
            "no_change_with_rationale" => WireResolutionKind::NoChange,
            _ => return None,
        };
        Some(WireResolution {
            finding_id: self.finding_id,
            kind,
            rationale: self.rationale,
        })
    }
}
