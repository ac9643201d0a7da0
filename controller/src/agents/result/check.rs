//! Cross-checks of a parsed result against what the controller observed.
//!
//! Fields that name things the controller can read itself (the issue, HEAD,
//! the round) are only ever compared, never used as targets: a disagreement
//! is a correction, not a retarget. Ancestry facts arrive as data computed by
//! the workspace code, which keeps this module free of git.

use std::collections::BTreeSet;

use super::error::{CrossCheckError, ResultError};
use super::types::{
    FixResult, ImplementResult, PhaseResult, ResolutionKind, ReviewResult, UpdateEpicResult,
};
use crate::publish::IssueRef;

/// What the controller saw around an IMPLEMENT launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImplementObservations {
    pub run_issue: IssueRef,
    /// The worktree HEAD read after the agent exited.
    pub worktree_head: String,
    /// The default-branch head the launch started from.
    pub base_sha: String,
    /// Whether `worktree_head` descends from `base_sha`.
    pub head_descends_from_base: bool,
}

/// What the controller bound a REVIEW round to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewObservations {
    pub round: u32,
    pub reviewed_head_sha: String,
    /// Index of the first validation command of the reviewed HEAD that did
    /// not pass, if any.
    pub failed_validation_index: Option<usize>,
}

/// An open issue handed to the fixer as a possible follow-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedOverFollowUp {
    pub url: String,
    /// The open finding this issue already is the follow-up of, if any; that
    /// finding must then be deferred to it.
    pub for_finding: Option<String>,
}

/// What the controller saw around a FIX launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixObservations {
    pub run_issue: IssueRef,
    /// The round whose findings are being fixed.
    pub round: u32,
    pub reviewed_head_sha: String,
    pub worktree_head: String,
    /// Whether `worktree_head` descends from `reviewed_head_sha` (true when
    /// they are equal).
    pub head_descends_from_reviewed: bool,
    pub open_finding_ids: Vec<String>,
    /// Commits in `reviewed_head_sha..worktree_head`.
    pub new_commits: Vec<String>,
    pub handed_over_follow_ups: Vec<HandedOverFollowUp>,
}

/// What the controller knows around an UPDATE_EPIC launch. For a re-request
/// that does not ask for the roadmap, pass `roadmap_due` and `merges_pending`
/// as `false`: the section cannot be required when it was not asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateEpicObservations {
    pub epic: IssueRef,
    pub finished_issue: IssueRef,
    /// A roadmap update is due (every `epic.update_every` merges).
    pub roadmap_due: bool,
    /// Merges not yet counted into a roadmap update.
    pub merges_pending: bool,
}

/// The observations of one launch, by phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observations {
    Implement(ImplementObservations),
    Review(ReviewObservations),
    Fix(FixObservations),
    UpdateEpic(UpdateEpicObservations),
}

/// Compares `result` with the controller's own observations. Failure and
/// blocked results name nothing to compare and always pass.
pub fn cross_check(result: &PhaseResult, observed: &Observations) -> Result<(), ResultError> {
    let outcome = match (result, observed) {
        (PhaseResult::Failure { .. } | PhaseResult::Blocked { .. }, _) => Ok(()),
        (PhaseResult::Implement(r), Observations::Implement(o)) => implement(r, o),
        (PhaseResult::Review(r), Observations::Review(o)) => review(r, o),
        (PhaseResult::Fix(r), Observations::Fix(o)) => fix(r, o),
        (PhaseResult::UpdateEpic(r), Observations::UpdateEpic(o)) => update_epic(r, o),
        _ => Err(CrossCheckError::ObservationsOfAnotherPhase),
    };
    outcome.map_err(ResultError::from)
}

fn implement(r: &ImplementResult, o: &ImplementObservations) -> Result<(), CrossCheckError> {
    let named = IssueRef::parse_url(&r.issue_url, false);
    if !named.is_some_and(|n| n.same_as(&o.run_issue)) {
        return Err(CrossCheckError::WrongIssue {
            expected: o.run_issue.to_string(),
        });
    }
    if r.head_sha != o.worktree_head {
        return Err(CrossCheckError::HeadMismatch {
            field: "head_sha",
            found: r.head_sha.clone(),
            expected: o.worktree_head.clone(),
        });
    }
    if r.head_sha == o.base_sha {
        return Err(CrossCheckError::NothingCommitted {
            base: o.base_sha.clone(),
        });
    }
    if !o.head_descends_from_base {
        return Err(CrossCheckError::NotADescendant {
            head: r.head_sha.clone(),
            ancestor: o.base_sha.clone(),
        });
    }
    Ok(())
}

fn review(r: &ReviewResult, o: &ReviewObservations) -> Result<(), CrossCheckError> {
    if r.round != o.round {
        return Err(CrossCheckError::RoundMismatch {
            found: r.round,
            expected: o.round,
        });
    }
    if r.reviewed_head_sha != o.reviewed_head_sha {
        return Err(CrossCheckError::ReviewedHeadMismatch {
            found: r.reviewed_head_sha.clone(),
            expected: o.reviewed_head_sha.clone(),
        });
    }
    let mut seen = BTreeSet::new();
    for (index, finding) in r.findings.iter().enumerate() {
        if finding_round(&finding.id) != Some(o.round) {
            return Err(CrossCheckError::FindingOfAnotherRound {
                field: "findings",
                index,
                id: finding.id.clone(),
                round: o.round,
            });
        }
        if !seen.insert(finding.id.as_str()) {
            return Err(CrossCheckError::DuplicateId {
                field: "findings",
                id: finding.id.clone(),
            });
        }
    }
    if r.needs_fix_round == r.findings.is_empty() {
        return Err(CrossCheckError::VerdictMismatch {
            found: r.needs_fix_round,
            findings: r.findings.len(),
        });
    }
    if let (false, Some(index)) = (r.needs_fix_round, o.failed_validation_index) {
        return Err(CrossCheckError::CleanVerdictWithFailedValidation { index });
    }
    Ok(())
}

fn fix(r: &FixResult, o: &FixObservations) -> Result<(), CrossCheckError> {
    if r.previous_head_sha != o.reviewed_head_sha {
        return Err(CrossCheckError::PreviousHeadMismatch {
            found: r.previous_head_sha.clone(),
            expected: o.reviewed_head_sha.clone(),
        });
    }
    if r.head_sha != o.worktree_head {
        return Err(CrossCheckError::HeadMismatch {
            field: "head_sha",
            found: r.head_sha.clone(),
            expected: o.worktree_head.clone(),
        });
    }
    let moved = r.head_sha != o.reviewed_head_sha;
    if moved && !o.head_descends_from_reviewed {
        return Err(CrossCheckError::NotADescendant {
            head: r.head_sha.clone(),
            ancestor: o.reviewed_head_sha.clone(),
        });
    }
    let mut seen = BTreeSet::new();
    for (index, res) in r.resolutions.iter().enumerate() {
        let id = res.finding_id.as_str();
        if finding_round(id) != Some(o.round) {
            return Err(CrossCheckError::FindingOfAnotherRound {
                field: "resolutions",
                index,
                id: id.into(),
                round: o.round,
            });
        }
        if !o.open_finding_ids.iter().any(|f| f == id) {
            return Err(CrossCheckError::UnknownFinding {
                index,
                id: id.into(),
            });
        }
        if !seen.insert(id) {
            return Err(CrossCheckError::DuplicateId {
                field: "resolutions",
                id: id.into(),
            });
        }
        check_resolution(index, res, moved, o)?;
    }
    if let Some(missing) = o
        .open_finding_ids
        .iter()
        .find(|f| !seen.contains(f.as_str()))
    {
        return Err(CrossCheckError::MissingResolution {
            id: missing.clone(),
        });
    }
    Ok(())
}

fn check_resolution(
    index: usize,
    res: &super::types::Resolution,
    moved: bool,
    o: &FixObservations,
) -> Result<(), CrossCheckError> {
    let id = || res.finding_id.clone();
    let reserved = o
        .handed_over_follow_ups
        .iter()
        .find(|h| h.for_finding.as_deref() == Some(res.finding_id.as_str()));
    match &res.kind {
        ResolutionKind::FollowUpExisting { url } => {
            let named = IssueRef::parse_url(url, false);
            if named.as_ref().is_some_and(|n| n.same_as(&o.run_issue)) {
                return Err(CrossCheckError::FollowUpIsRunIssue { index, id: id() });
            }
            let listed = o.handed_over_follow_ups.iter().find(|h| {
                let handed = IssueRef::parse_url(&h.url, false);
                matches!((&named, handed), (Some(a), Some(b)) if a.same_as(&b))
            });
            let Some(listed) = listed else {
                return Err(CrossCheckError::FollowUpNotListed { index, id: id() });
            };
            // An issue that already is another finding's follow-up cannot
            // take this one; the reserved issue of this finding must be it.
            if listed
                .for_finding
                .as_deref()
                .is_some_and(|f| f != res.finding_id)
                || reserved.is_some_and(|r| r.url != listed.url)
            {
                return Err(CrossCheckError::FollowUpMustBeReused { index, id: id() });
            }
            Ok(())
        }
        _ if reserved.is_some() => Err(CrossCheckError::FollowUpMustBeReused { index, id: id() }),
        ResolutionKind::Fixed { commit_sha } => {
            if !moved {
                return Err(CrossCheckError::FixedWithoutCommit { index, id: id() });
            }
            match commit_sha {
                Some(sha) if !o.new_commits.iter().any(|c| c == sha) => {
                    Err(CrossCheckError::CommitNotNew {
                        index,
                        id: id(),
                        sha: sha.clone(),
                    })
                }
                _ => Ok(()),
            }
        }
        ResolutionKind::FollowUpNew(_) | ResolutionKind::NoChange => Ok(()),
    }
}

fn update_epic(r: &UpdateEpicResult, o: &UpdateEpicObservations) -> Result<(), CrossCheckError> {
    let final_roadmap = r.next_issue_url.is_none() && o.merges_pending;
    if (o.roadmap_due || final_roadmap) && r.roadmap_section.is_none() {
        return Err(CrossCheckError::RoadmapRequired);
    }
    // Only the shape is checked here. Whether the pick is eligible (same
    // repository, open, not the EPIC or the finished issue) is the
    // machine's next-issue verification (SPEC §4 UPDATE_EPIC): a rejected
    // pick is asked again once, a second rejection blocks the run — a
    // correction relaunch here would bypass that bound.
    if let Some(url) = &r.next_issue_url
        && IssueRef::parse_url(url, false).is_none()
    {
        return Err(CrossCheckError::NextIssueOtherRepository {
            repository: repo_name(&o.epic),
        });
    }
    Ok(())
}

fn repo_name(issue: &IssueRef) -> String {
    format!("{}/{}", issue.owner, issue.repo)
}

/// The round of a well-formed `R<round>-F<n>` id.
fn finding_round(id: &str) -> Option<u32> {
    let rest = id.strip_prefix('R')?;
    let (round, n) = rest.split_once("-F")?;
    n.parse::<u32>().ok()?;
    round.parse().ok()
}
