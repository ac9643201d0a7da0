//! When the run's `autoforge` check run is written: what it should show is
//! derived from the state alone, and a write is intended only when that
//! differs from what it was last told to show (kept in
//! [`RunState::check_run`]). A wait the run re-enters, or a wake-up by our
//! own check's webhook, changes nothing and so writes nothing.

use crate::machine::decision::{CheckRunView, CheckShows, EffectIntent, StatusSnapshot};
use crate::machine::phase::Phase;
use crate::machine::state::{Awaiting, FactsPurpose, RunState};
use autoforge_journal::CommitSha;

/// The intents that bring the check runs up to date with `state`, which is
/// updated to remember what they show.
pub(super) fn update(state: &mut RunState) -> Vec<EffectIntent> {
    if !state.settings.check_run {
        return Vec::new();
    }
    let Some(wanted) = wanted(state) else {
        return Vec::new();
    };
    if state.check_run.as_ref() == Some(&wanted) {
        return Vec::new();
    }
    let mut intents = Vec::new();
    let superseded = state.check_run.as_ref().filter(|shown| {
        shown.pr == wanted.pr
            && shown.head_sha != wanted.head_sha
            && matches!(shown.shows, CheckShows::InProgress { .. })
    });
    if let Some(old) = superseded {
        intents.push(intent(
            state,
            CheckRunView {
                pr: old.pr,
                head_sha: old.head_sha.clone(),
                shows: CheckShows::Superseded {
                    by: wanted.head_sha.clone(),
                },
            },
        ));
    }
    intents.push(intent(state, wanted.clone()));
    state.check_run = Some(wanted);
    intents
}

fn intent(state: &RunState, view: CheckRunView) -> EffectIntent {
    EffectIntent::CheckRun {
        issue: state.issue,
        view,
        status: StatusSnapshot::of(state),
    }
}

/// What the check should show now, or `None` when there is no bound PR
/// head yet or the head is being re-read (a REVIEW about to bind a new
/// round): then whatever it shows stays.
fn wanted(state: &RunState) -> Option<CheckRunView> {
    let pr = state.pr?;
    let binding = state.review.binding.as_ref().filter(|b| b.pr == pr)?;
    let rebinding = state.phase == Phase::Review
        && state.awaiting
            == (Awaiting::Facts {
                purpose: FactsPurpose::BindRound,
            });
    if rebinding {
        return None;
    }
    let head = &binding.head_sha;
    Some(CheckRunView {
        pr,
        head_sha: head.clone(),
        shows: shows(state, head),
    })
}

fn shows(state: &RunState, head: &CommitSha) -> CheckShows {
    let round = state.review.round;
    match state.phase {
        Phase::Review => CheckShows::InProgress {
            phase: Phase::Review,
            round: round + 1,
        },
        Phase::Initializing | Phase::Plan | Phase::Implement | Phase::Fix => {
            CheckShows::InProgress {
                phase: state.phase,
                round,
            }
        }
        Phase::ReadyForMerge | Phase::Merge | Phase::UpdateEpic | Phase::Done => {
            let clean = state
                .review
                .clean
                .as_ref()
                .is_some_and(|c| c.head_sha == *head);
            let validated = state
                .last_validation
                .as_ref()
                .is_some_and(|v| v.sha == *head && v.passed);
            match (clean, validated) {
                (true, true) => CheckShows::Success,
                (true, false) => CheckShows::Neutral {
                    reason: "the review at this head is clean, but the controller did not \
                             validate this head (it was pushed by someone else)"
                        .to_owned(),
                },
                (false, _) => CheckShows::Neutral {
                    reason: "no clean review is recorded at this head".to_owned(),
                },
            }
        }
        Phase::Blocked => CheckShows::Neutral {
            reason: state
                .blocked
                .as_ref()
                .map_or_else(|| "the run is blocked".to_owned(), |b| b.reason.clone()),
        },
        Phase::Failed => CheckShows::Failure {
            reason: state
                .failure
                .clone()
                .unwrap_or_else(|| "the run failed".to_owned()),
        },
        Phase::Stopped => CheckShows::Cancelled,
    }
}
