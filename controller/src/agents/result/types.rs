//! The typed phase results, as they stand after the schema accepted them.
//!
//! Deserialisation happens only after the schema check, so these structs
//! deny unknown fields merely as a second line of defence; the diagnostics
//! an agent sees come from the schema and the cross-checks.

use serde::Deserialize;

/// The agent phases that return a CONTROL_RESULT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Implement,
    Review,
    Fix,
    UpdateEpic,
}

impl Phase {
    /// The `phase` value of the result, also the SPEC's phase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Implement => "IMPLEMENT",
            Self::Review => "REVIEW",
            Self::Fix => "FIX",
            Self::UpdateEpic => "UPDATE_EPIC",
        }
    }

    /// Every phase, for tests and tables.
    pub const ALL: [Phase; 4] = [Self::Implement, Self::Review, Self::Fix, Self::UpdateEpic];
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed, schema-valid, policy-clean result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseResult {
    Implement(ImplementResult),
    Review(ReviewResult),
    Fix(FixResult),
    UpdateEpic(UpdateEpicResult),
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
pub struct ImplementResult {
    pub issue_url: String,
    pub head_sha: String,
    pub pr_title: String,
    pub pr_body: String,
    #[serde(default)]
    pub tests: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Classification {
    #[serde(rename = "blocked")]
    Blocked,
    #[serde(rename = "non-blocked")]
    NonBlocked,
    #[serde(rename = "nit")]
    Nit,
}

impl Classification {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blocked => "blocked",
            Self::NonBlocked => "non-blocked",
            Self::Nit => "nit",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub id: String,
    pub classification: Classification,
    pub title: String,
    pub location: String,
    pub required_resolution: String,
}

/// The Markdown sections of a review, in the order they are rendered.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReviewSections {
    pub spec: String,
    pub standards: String,
    pub assessment: String,
    pub observations: String,
    pub verification: String,
    pub summary: String,
}

impl ReviewSections {
    /// `(field name, heading, text)` in rendering order.
    pub fn iter(&self) -> [(&'static str, &'static str, &str); 6] {
        [
            ("spec", "Spec", &self.spec),
            ("standards", "Standards", &self.standards),
            ("assessment", "Assessment", &self.assessment),
            ("observations", "Observations", &self.observations),
            ("verification", "Verification", &self.verification),
            ("summary", "Summary", &self.summary),
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReviewResult {
    pub round: u32,
    pub reviewed_head_sha: String,
    pub needs_fix_round: bool,
    pub findings: Vec<Finding>,
    #[serde(flatten)]
    pub sections: ReviewSections,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewFollowUp {
    pub title: String,
    pub body: String,
}

/// How one finding was resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolutionKind {
    Fixed {
        commit_sha: Option<String>,
    },
    /// Deferred to an issue already listed to the fixer.
    FollowUpExisting {
        url: String,
    },
    /// Deferred to an issue the controller creates.
    FollowUpNew(NewFollowUp),
    NoChange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub finding_id: String,
    pub kind: ResolutionKind,
    /// Required (≥ the minimum) for `no_change_with_rationale`, optional else.
    pub rationale: Option<String>,
}

/// The wire shape of a resolution; the schema guarantees the combinations,
/// [`Resolution`] is what callers use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResolution {
    pub finding_id: String,
    pub resolution: String,
    pub commit_sha: Option<String>,
    pub follow_up_issue_url: Option<String>,
    pub follow_up_issue: Option<NewFollowUp>,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixResult {
    pub previous_head_sha: String,
    pub head_sha: String,
    pub resolutions: Vec<Resolution>,
    pub tests: Vec<String>,
}

/// An UPDATE_EPIC result. On a full request `progress` is always present;
/// on a re-request it is always absent. `roadmap_section` is `None` when
/// absent, null or blank; `next_issue_url` is `None` for "EPIC complete".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateEpicResult {
    pub progress: Option<String>,
    pub roadmap_section: Option<String>,
    pub next_issue_url: Option<String>,
}

impl RawResolution {
    pub(super) fn into_resolution(self) -> Option<Resolution> {
        let kind = match self.resolution.as_str() {
            "fixed" => ResolutionKind::Fixed {
                commit_sha: self.commit_sha,
            },
            "follow_up_created" => match (self.follow_up_issue_url, self.follow_up_issue) {
                (Some(url), None) => ResolutionKind::FollowUpExisting { url },
                (None, Some(issue)) => ResolutionKind::FollowUpNew(issue),
                _ => return None,
            },
            "no_change_with_rationale" => ResolutionKind::NoChange,
            _ => return None,
        };
        Some(Resolution {
            finding_id: self.finding_id,
            kind,
            rationale: self.rationale,
        })
    }
}
