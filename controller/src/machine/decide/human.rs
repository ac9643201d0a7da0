//! Human rounds (SPEC §8a): an operator's review requesting changes, or
//! `/autoforge fix <notes>`, becomes findings `H<n>-F<k>` that the next FIX
//! resolves exactly like a reviewer's.
//!
//! Where the run is decides when the round starts:
//! - READY_FOR_MERGE (gate not yet merging) and BLOCKED from it: straight
//!   to FIX; the clean verdict no longer stands.
//! - REVIEW and FIX (an agent round in progress, or about to launch): the
//!   findings wait in `pending_human` and join the findings of the round's
//!   end, so the running agent is never cut short and no work is lost.
//! - Anywhere else (no PR yet, merging, an EPIC update): refused.
//!
//! Findings that wait are never skipped on the way to the merge gate: an
//! unblock at the reviewed head goes to FIX for them. Only a merge someone
//! else made while they waited drops them (the merge decided).
//!
//! Each source (review id, command comment) starts at most one round.

use super::turn::Turn;
use crate::machine::agent_result::{Classification, Finding};
use crate::machine::decision::{Decision, MachineError, Refusal};
use crate::machine::event::HumanFeedback;
use crate::machine::phase::{Cause, Phase};
use crate::machine::state::{Awaiting, RunState, is_human_finding};

/// Upper bound on one note's text in a finding; longer text is cut with a
/// mark, as the fixer's prompt has room for a bounded amount of it.
pub(crate) const MAX_NOTE_CHARS: usize = 4_000;

/// What a human round did to the run, for the command's reply.
pub(super) enum Taken {
    /// The run went to FIX with human round `round`.
    Started { round: u32 },
    /// An agent round is in progress; the findings join its end.
    Queued { round: u32 },
}

/// Takes `feedback` into the run as a human round, or says why not.
pub(super) fn take(turn: &mut Turn, feedback: &HumanFeedback) -> Result<Taken, Refusal> {
    let s = &turn.state;
    if s.review.human_sources.contains(&feedback.source) {
        return Err(Refusal::HumanFeedbackSeen {
            origin: feedback.source.clone(),
        });
    }
    let start = match (s.phase, &s.awaiting, &s.blocked) {
        (Phase::ReadyForMerge, Awaiting::MergeOutcome, _) | (Phase::Merge, _, _) => {
            return Err(not_available("the pull request is being merged"));
        }
        (Phase::ReadyForMerge, _, _) => true,
        (Phase::Blocked, _, Some(blocked))
            if matches!(blocked.from, Phase::ReadyForMerge | Phase::Merge) =>
        {
            true
        }
        (Phase::Review | Phase::Fix, _, _) => false,
        (Phase::Blocked, _, _) => {
            return Err(not_available(
                "the run is blocked before its pull request was reviewed clean; unblock it first",
            ));
        }
        (phase, _, _) => {
            return Err(not_available(&format!(
                "the run is in {phase}, with no reviewed pull request to fix"
            )));
        }
    };
    if s.pr.is_none() || s.review.binding.is_none() {
        return Err(not_available(
            "no reviewed pull request is bound to the run",
        ));
    }
    let review = &mut turn.state.review;
    review.human_rounds += 1;
    let round = review.human_rounds;
    review.human_sources.push(feedback.source.clone());
    let findings = findings_of(round, feedback);
    if !start {
        review.pending_human.extend(findings);
        return Ok(Taken::Queued { round });
    }
    review.pending_human.extend(findings);
    let pending = std::mem::take(&mut review.pending_human);
    review.open_findings = pending;
    review.clean = None;
    turn.state.merge_approved = false;
    turn.state.merge_wait = None;
    turn.state.blocked = None;
    let cause = if turn.state.phase == Phase::Blocked {
        Cause::HumanRound
    } else {
        Cause::Ordinary
    };
    turn.enter(Phase::Fix, cause)
        .map_err(|edge| not_available(&edge.to_string()))?;
    Ok(Taken::Started { round })
}

fn not_available(reason: &str) -> Refusal {
    Refusal::HumanRoundNotAvailable {
        reason: reason.to_owned(),
    }
}

/// One finding per note, numbered in the order the person wrote them.
fn findings_of(round: u32, feedback: &HumanFeedback) -> Vec<Finding> {
    feedback
        .notes
        .iter()
        .filter(|note| !note.text.trim().is_empty())
        .enumerate()
        .map(|(index, note)| {
            let (title, location) = match &note.location {
                Some(at) => (format!("Review comment by {}", feedback.author), at.clone()),
                None => (
                    format!("Requested by {}", feedback.author),
                    "(the whole pull request)".to_owned(),
                ),
            };
            Finding {
                id: format!("H{round}-F{}", index + 1),
                classification: Classification::Blocked,
                title,
                location,
                required_resolution: bounded(note.text.trim()),
            }
        })
        .collect()
}

fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_NOTE_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_NOTE_CHARS).collect();
    cut.push_str(" […]");
    cut
}

/// An operator's review seen by the driver: a human round, or a refusal
/// that leaves the state as it was (a review has no reply to carry it).
pub(super) fn review(state: &RunState, feedback: &HumanFeedback) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match take(&mut turn, feedback) {
        Ok(_) => Ok(turn.finish()),
        Err(refusal) => Ok(Turn::refuse(state, refusal)),
    }
}

/// At the end of an AI round whose revision still stands: the human
/// findings that waited join the round's own findings.
pub(super) fn join_pending(state: &mut RunState) -> bool {
    let pending = std::mem::take(&mut state.review.pending_human);
    let any = !pending.is_empty();
    state.review.open_findings.extend(pending);
    any
}

/// The human findings among `findings` (kept for the next reviewer).
pub(super) fn human_only(findings: &[Finding]) -> Vec<Finding> {
    findings
        .iter()
        .filter(|f| is_human_finding(&f.id))
        .cloned()
        .collect()
}
