//! Cross-checks of a parsed result against what the controller observed.
//!
//! Fields that name things the controller can read itself (the issue, HEAD,
//! the round) are only ever compared, never used as targets: a disagreement
//! is a correction, not a retarget. Ancestry facts arrive as data computed by
//! the workspace code, which keeps this module free of git.
//!
//! A result that passes is returned as the machine's [`AgentResult`], with
//! the references the checks resolved (follow-up and next-issue URLs become
//! issue numbers); what served only a check is left behind.

use std::collections::BTreeSet;

use super::ParsedResult;
use super::error::{CrossCheckError, ResultError};
use super::wire::{
    Parsed, WireEpic, WireFix, WireImplement, WireResolution, WireResolutionKind, WireReview,
};
use crate::machine::{
    AgentResult, EpicResult, FixResult, ImplementResult, PhaseResult, PlanResult, Resolution,
    ResolutionKind, ReviewResult, is_human_finding,
};
use crate::publish::IssueRef;
use autoforge_journal::CommitSha;

/// What the controller saw around an IMPLEMENT launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImplementObservations {
    pub run_issue: IssueRef,
    /// The worktree HEAD read after the agent exited.
    pub worktree_head: CommitSha,
    /// The default-branch head the launch started from.
    pub base_sha: CommitSha,
    /// Whether `worktree_head` descends from `base_sha`.
    pub head_descends_from_base: bool,
}

/// What the controller bound a REVIEW round to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewObservations {
    pub round: u32,
    pub reviewed_head_sha: CommitSha,
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
    pub reviewed_head_sha: CommitSha,
    pub worktree_head: CommitSha,
    /// Whether `worktree_head` descends from `reviewed_head_sha` (true when
    /// they are equal).
    pub head_descends_from_reviewed: bool,
    pub open_finding_ids: Vec<String>,
    /// Commits in `reviewed_head_sha..worktree_head`.
    pub new_commits: Vec<CommitSha>,
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
    /// A plan is checked against nothing the controller observed but
    /// itself: its question ids must be unique.
    Plan,
    Implement(ImplementObservations),
    Review(ReviewObservations),
    Fix(FixObservations),
    UpdateEpic(UpdateEpicObservations),
}

/// Compares `parsed` with the controller's own observations and, when they
/// agree, returns it as the machine's result. Failure and blocked results
/// name nothing to compare and always pass.
pub fn cross_check(
    parsed: &ParsedResult,
    observed: &Observations,
) -> Result<AgentResult, ResultError> {
    let success = |result| AgentResult::Success { result };
    let outcome = match (&parsed.0, observed) {
        (Parsed::Failure { message }, _) => Ok(AgentResult::Failure {
            message: message.clone(),
        }),
        (Parsed::Blocked { message }, _) => Ok(AgentResult::Blocked {
            message: message.clone(),
        }),
        (Parsed::Plan(r), Observations::Plan) => plan(r).map(|r| success(PhaseResult::Plan(r))),
        (Parsed::Implement(r), Observations::Implement(o)) => {
            implement(r, o).map(|r| success(PhaseResult::Implement(r)))
        }
        (Parsed::Review(r), Observations::Review(o)) => {
            review(r, o).map(|r| success(PhaseResult::Review(r)))
        }
        (Parsed::Fix(r), Observations::Fix(o)) => fix(r, o).map(|r| success(PhaseResult::Fix(r))),
        (Parsed::UpdateEpic(r), Observations::UpdateEpic(o)) => {
            update_epic(r, o).map(|r| success(PhaseResult::UpdateEpic(r)))
        }
        _ => Err(CrossCheckError::ObservationsOfAnotherPhase),
    };
    outcome.map_err(ResultError::from)
}

fn plan(r: &PlanResult) -> Result<PlanResult, CrossCheckError> {
    for (index, question) in r.questions.iter().enumerate() {
        if r.questions[..index].iter().any(|q| q.id == question.id) {
            return Err(CrossCheckError::DuplicateId {
                field: "questions",
                id: question.id.clone(),
            });
        }
    }
    Ok(r.clone())
}

fn implement(
    r: &WireImplement,
    o: &ImplementObservations,
) -> Result<ImplementResult, CrossCheckError> {
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
            expected: o.worktree_head.to_string(),
        });
    }
    if o.worktree_head == o.base_sha {
        return Err(CrossCheckError::NothingCommitted {
            base: o.base_sha.to_string(),
        });
    }
    if !o.head_descends_from_base {
        return Err(CrossCheckError::NotADescendant {
            head: r.head_sha.clone(),
            ancestor: o.base_sha.to_string(),
        });
    }
    // From here on the reported head is the observed one.
    Ok(ImplementResult {
        head_sha: o.worktree_head.clone(),
        pr_title: r.pr_title.clone(),
        pr_body: r.pr_body.clone(),
        tests: r.tests.clone(),
    })
}

fn review(r: &WireReview, o: &ReviewObservations) -> Result<ReviewResult, CrossCheckError> {
    if r.round != o.round {
        return Err(CrossCheckError::RoundMismatch {
            found: r.round,
            expected: o.round,
        });
    }
    if r.reviewed_head_sha != o.reviewed_head_sha {
        return Err(CrossCheckError::ReviewedHeadMismatch {
            found: r.reviewed_head_sha.clone(),
            expected: o.reviewed_head_sha.to_string(),
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
    Ok(ReviewResult {
        round: r.round,
        reviewed_head_sha: o.reviewed_head_sha.clone(),
        findings: r.findings.clone(),
        sections: r.sections.clone(),
    })
}

fn fix(r: &WireFix, o: &FixObservations) -> Result<FixResult, CrossCheckError> {
    if r.previous_head_sha != o.reviewed_head_sha {
        return Err(CrossCheckError::PreviousHeadMismatch {
            found: r.previous_head_sha.clone(),
            expected: o.reviewed_head_sha.to_string(),
        });
    }
    if r.head_sha != o.worktree_head {
        return Err(CrossCheckError::HeadMismatch {
            field: "head_sha",
            found: r.head_sha.clone(),
            expected: o.worktree_head.to_string(),
        });
    }
    let moved = r.head_sha != o.reviewed_head_sha;
    if moved && !o.head_descends_from_reviewed {
        return Err(CrossCheckError::NotADescendant {
            head: r.head_sha.clone(),
            ancestor: o.reviewed_head_sha.to_string(),
        });
    }
    let mut seen = BTreeSet::new();
    let mut resolutions = Vec::with_capacity(r.resolutions.len());
    for (index, res) in r.resolutions.iter().enumerate() {
        let id = res.finding_id.as_str();
        // A person's finding (`H<n>-F<k>`) is numbered by its human round,
        // not the review round; being open is its whole check.
        if !is_human_finding(id) && finding_round(id) != Some(o.round) {
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
        resolutions.push(Resolution {
            finding_id: res.finding_id.clone(),
            kind: check_resolution(index, res, moved, o)?,
        });
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
    Ok(FixResult {
        previous_head_sha: o.reviewed_head_sha.clone(),
        head_sha: o.worktree_head.clone(),
        resolutions,
    })
}

/// Checks one resolution and resolves it: a deferral to an existing issue
/// becomes that issue's number, a rationale travels with "no change".
fn check_resolution(
    index: usize,
    res: &WireResolution,
    moved: bool,
    o: &FixObservations,
) -> Result<ResolutionKind, CrossCheckError> {
    let id = || res.finding_id.clone();
    let reserved = o
        .handed_over_follow_ups
        .iter()
        .find(|h| h.for_finding.as_deref() == Some(res.finding_id.as_str()));
    match &res.kind {
        WireResolutionKind::FollowUpExisting { url } => {
            let named = IssueRef::parse_url(url, false);
            if named.as_ref().is_some_and(|n| n.same_as(&o.run_issue)) {
                return Err(CrossCheckError::FollowUpIsRunIssue { index, id: id() });
            }
            let listed = named.as_ref().and_then(|named| {
                o.handed_over_follow_ups
                    .iter()
                    .find(|h| IssueRef::parse_url(&h.url, false).is_some_and(|b| named.same_as(&b)))
            });
            let (Some(named), Some(listed)) = (named.as_ref(), listed) else {
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
            Ok(ResolutionKind::FollowUpExisting {
                issue: named.number,
            })
        }
        _ if reserved.is_some() => Err(CrossCheckError::FollowUpMustBeReused { index, id: id() }),
        WireResolutionKind::Fixed { commit_sha } => {
            if !moved {
                return Err(CrossCheckError::FixedWithoutCommit { index, id: id() });
            }
            let Some(sha) = commit_sha else {
                return Ok(ResolutionKind::Fixed { commit_sha: None });
            };
            match o.new_commits.iter().find(|c| *c == sha.as_str()) {
                Some(commit) => Ok(ResolutionKind::Fixed {
                    commit_sha: Some(commit.clone()),
                }),
                None => Err(CrossCheckError::CommitNotNew {
                    index,
                    id: id(),
                    sha: sha.clone(),
                }),
            }
        }
        WireResolutionKind::FollowUpNew(draft) => Ok(ResolutionKind::FollowUpNew {
            draft: draft.clone(),
        }),
        // The schema requires the rationale of "no change".
        WireResolutionKind::NoChange => Ok(ResolutionKind::NoChangeWithRationale {
            rationale: res.rationale.clone().unwrap_or_default(),
        }),
    }
}

fn update_epic(r: &WireEpic, o: &UpdateEpicObservations) -> Result<EpicResult, CrossCheckError> {
    let final_roadmap = r.next_issue_url.is_none() && o.merges_pending;
    if (o.roadmap_due || final_roadmap) && r.roadmap_section.is_none() {
        return Err(CrossCheckError::RoadmapRequired);
    }
    // Only the shape is checked here. Whether the pick is eligible (same
    // repository, open, not the EPIC or the finished issue) is the
    // machine's next-issue verification (SPEC §4 UPDATE_EPIC): a rejected
    // pick is asked again once, a second rejection blocks the run — a
    // correction relaunch here would bypass that bound.
    let next = match &r.next_issue_url {
        None => None,
        Some(url) => Some(IssueRef::parse_url(url, false).ok_or_else(|| {
            CrossCheckError::NextIssueOtherRepository {
                repository: repo_name(&o.epic),
            }
        })?),
    };
    Ok(EpicResult {
        progress: r.progress.clone(),
        roadmap_section: r.roadmap_section.clone(),
        next_issue: next.as_ref().map(|issue| issue.number),
        next_issue_repository: next.as_ref().map(repo_name),
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::agents::result::ParsedResult;
    use crate::machine::FollowUpDraft;

    fn issue(number: u64) -> IssueRef {
        IssueRef {
            owner: "o".into(),
            repo: "r".into(),
            number: autoforge_journal::testing::issue(number),
        }
    }

    fn success(parsed: Parsed, observed: &Observations) -> PhaseResult {
        match cross_check(&ParsedResult(parsed), observed).unwrap() {
            AgentResult::Success { result } => result,
            other => panic!("not a success: {other:?}"),
        }
    }

    #[test]
    fn fix_deferrals_become_issue_numbers_and_rationales_travel_with_no_change() {
        let resolution = |id: &str, kind, rationale: Option<&str>| WireResolution {
            finding_id: id.into(),
            kind,
            rationale: rationale.map(str::to_owned),
        };
        let parsed = Parsed::Fix(WireFix {
            previous_head_sha: "a".repeat(40),
            head_sha: "b".repeat(40),
            resolutions: vec![
                resolution(
                    "R1-F1",
                    WireResolutionKind::FollowUpExisting {
                        url: "https://github.com/o/r/issues/12".into(),
                    },
                    None,
                ),
                resolution("R1-F2", WireResolutionKind::NoChange, Some("because")),
                resolution(
                    "R1-F3",
                    WireResolutionKind::FollowUpNew(FollowUpDraft {
                        title: "t".into(),
                        body: "b".into(),
                    }),
                    None,
                ),
            ],
            tests: vec![],
        });
        let observed = Observations::Fix(FixObservations {
            run_issue: issue(1),
            round: 1,
            reviewed_head_sha: autoforge_journal::testing::sha(&"a".repeat(40)),
            worktree_head: autoforge_journal::testing::sha(&"b".repeat(40)),
            head_descends_from_reviewed: true,
            open_finding_ids: vec!["R1-F1".into(), "R1-F2".into(), "R1-F3".into()],
            new_commits: vec![autoforge_journal::testing::sha(&"b".repeat(40))],
            handed_over_follow_ups: vec![HandedOverFollowUp {
                url: "https://github.com/o/r/issues/12".into(),
                for_finding: None,
            }],
        });
        let PhaseResult::Fix(converted) = success(parsed, &observed) else {
            panic!("not a fix result");
        };
        assert_eq!(
            converted.resolutions[0].kind,
            ResolutionKind::FollowUpExisting {
                issue: autoforge_journal::testing::issue(12)
            }
        );
        assert_eq!(
            converted.resolutions[1].kind,
            ResolutionKind::NoChangeWithRationale {
                rationale: "because".into()
            }
        );
        assert!(matches!(
            converted.resolutions[2].kind,
            ResolutionKind::FollowUpNew { .. }
        ));
    }

    #[test]
    fn an_epic_pick_becomes_its_issue_number_and_null_means_complete() {
        let pick = |url: Option<&str>| {
            Parsed::UpdateEpic(WireEpic {
                progress: Some("done".into()),
                roadmap_section: None,
                next_issue_url: url.map(str::to_owned),
            })
        };
        let observed = Observations::UpdateEpic(UpdateEpicObservations {
            epic: issue(1),
            finished_issue: issue(2),
            roadmap_due: false,
            merges_pending: false,
        });
        let epic = |parsed| match success(parsed, &observed) {
            PhaseResult::UpdateEpic(result) => result,
            other => panic!("not an epic result: {other:?}"),
        };
        let next = epic(pick(Some("https://github.com/o/r/issues/5")));
        assert_eq!(next.next_issue, Some(autoforge_journal::testing::issue(5)));
        assert_eq!(next.next_issue_repository.as_deref(), Some("o/r"));
        assert_eq!(epic(pick(None)).next_issue, None);
        assert!(cross_check(&ParsedResult(pick(Some("not a url"))), &observed).is_err());
    }
}
