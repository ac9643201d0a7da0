//! The crash matrix's cells, generated from the production lists: every
//! family of objects below is crashed at every point of `Point::ALL`, and
//! every kind of `EffectKind::ALL` has a family or a reason why it cannot
//! be crashed. A new crash point is run for every family without a change
//! here; a new effect kind fails
//! `every_crash_point_of_every_effect_kind_is_crashed_or_impossible` until
//! it gets a family (or a reason).
//!
//! A family's test runs its cells concurrently, at most [`CELLS_AT_ONCE`]
//! across the whole binary: a cell spends most of its time waiting (for
//! the crashed lease to expire, for polls), so a few at a time keep two
//! cores busy without starving any cell of its deadlines. Each cell has
//! its own thread and runtime, as a test of its own would: its fakehub is
//! served from that runtime, and the harness blocks in places (waiting for
//! a child, git), which must not stall another cell's fakehub.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::effects::crashpoint::Point;
use autoforge_journal::EffectKind;
use tokio::sync::Semaphore;

use super::crash_serve::{Scenario, cell};

use EffectKind as K;
use Scenario as S;

/// One family of objects the matrix crashes around.
#[derive(Debug, Clone, Copy)]
pub(super) struct Family {
    /// What the family is, for failure messages.
    pub object: &'static str,
    pub kind: EffectKind,
    /// Only effects whose identity starts with this crash, when the
    /// scenario writes several kinds of object with one effect kind.
    pub identity_prefix: Option<&'static str>,
    pub scenario: Scenario,
}

impl Family {
    /// The `AUTOFORGE_CRASH_AT` value of the family's cell at `point`.
    pub fn crash_spec(&self, point: Point) -> String {
        let mut spec = format!("{}:{}", point.as_str(), self.kind.as_str());
        if let Some(prefix) = self.identity_prefix {
            spec.push(':');
            spec.push_str(prefix);
        }
        spec
    }
}

/// Cells no scenario can reach, each with the reason: a whole kind
/// (`None`) or one point of it.
const IMPOSSIBLE: &[(EffectKind, Option<Point>, &str)] = &[];

/// Cells that may run at once across the binary.
pub(super) const CELLS_AT_ONCE: usize = 4;
static CELL_SLOTS: Semaphore = Semaphore::const_new(CELLS_AT_ONCE);

fn impossible(kind: EffectKind, point: Point) -> Option<&'static str> {
    IMPOSSIBLE
        .iter()
        .find(|(k, p, _)| *k == kind && p.is_none_or(|p| p == point))
        .map(|(_, _, reason)| *reason)
}

/// Crashes at every point of `Point::ALL` for the family (but the
/// impossible cells); fails naming every cell that failed.
fn crash_at_every_point(family: &'static Family) {
    let cells: Vec<(String, std::thread::JoinHandle<()>)> = Point::ALL
        .into_iter()
        .filter(|point| impossible(family.kind, *point).is_none())
        .map(|point| {
            let name = family.crash_spec(point);
            let thread = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || run_cell(family, point))
                .expect("a thread for the cell");
            (name, thread)
        })
        .collect();
    let failures: Vec<String> = cells
        .into_iter()
        .filter_map(|(name, thread)| {
            let failed = thread.join().err()?;
            Some(format!(
                "{} at {name}: {}",
                family.object,
                panic_text(failed)
            ))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One cell on a runtime of its own, once a slot is free.
fn run_cell(family: &'static Family, point: Point) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the cell");
    runtime.block_on(async {
        let _slot = CELL_SLOTS.acquire().await.expect("the slots stay open");
        cell(family, point).await;
    });
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload
            .downcast::<&str>()
            .map(|text| (*text).to_owned())
            .unwrap_or_else(|_| "a panic without a message".to_owned()),
    }
}

/// One test per family, and [`FAMILIES`] listing exactly the families
/// that have one.
macro_rules! families {
    ($($test:ident => $family:ident),+ $(,)?) => {
        /// Every family a test crashes.
        const FAMILIES: &[Family] = &[$($family),+];
        $(
            #[test]
            fn $test() {
                crash_at_every_point(&$family);
            }
        )+
    };
}

const fn family(
    object: &'static str,
    kind: EffectKind,
    identity_prefix: Option<&'static str>,
    scenario: Scenario,
) -> Family {
    Family {
        object,
        kind,
        identity_prefix,
        scenario,
    }
}

const STATUS_COMMENT: Family = family(
    "status comment",
    K::EditStatusComment,
    None,
    S::StartAndStatusCommand,
);
const REACTION: Family = family("reaction", K::AddReaction, None, S::StartAndStatusCommand);
const COMMAND_REPLY: Family = family(
    "command reply",
    K::PostComment,
    None,
    S::StartAndStatusCommand,
);
const PUSH: Family = family("push", K::Push, None, S::PublishAndReview);
const PULL_REQUEST: Family = family("pull request", K::CreatePr, None, S::PublishAndReview);
const REVIEW_COMMENT: Family = family("review comment", K::PostComment, None, S::PublishAndReview);
const MERGE: Family = family("merge", K::MergePr, None, S::FullLoop);
const FOLLOW_UP_ISSUE: Family = family("follow-up issue", K::CreateIssue, None, S::FullLoop);
const ROADMAP_SPLICE: Family = family("roadmap splice", K::SpliceEpicRoadmap, None, S::FullLoop);
const EPIC_PROGRESS: Family = family(
    "EPIC progress comment",
    K::PostComment,
    Some("ai-epic-progress"),
    S::FullLoop,
);
const FOLLOW_UP_MARKERS: Family = family(
    "follow-up markers",
    K::AppendIssueMarkers,
    None,
    S::FollowUpReuse,
);
const ADOPTION: Family = family("adoption", K::AdoptPr, None, S::AdoptPersonsPr);
const CHECK_RUN: Family = family("check run", K::CheckRun, None, S::PublishAndReview);
const STATUS_LABELS: Family = family(
    "status labels",
    K::SetLabels,
    None,
    S::PublishWithStatusLabels,
);

const PLAN_COMMENT: Family = family(
    "plan comment",
    K::PostComment,
    Some("ai-plan"),
    S::PlanAndPublish,
);

const INLINE_REVIEW: Family = family("inline review", K::PostReview, None, S::InlineReviewRounds);

const ANSWER: Family = family(
    "answer outside a run",
    K::PostComment,
    Some("answer:"),
    S::AnswerWithoutRun,
);

families! {
    status_comment_survives_a_crash_at_every_point => STATUS_COMMENT,
    reaction_survives_a_crash_at_every_point => REACTION,
    command_reply_survives_a_crash_at_every_point => COMMAND_REPLY,
    push_survives_a_crash_at_every_point => PUSH,
    pull_request_survives_a_crash_at_every_point => PULL_REQUEST,
    review_comment_survives_a_crash_at_every_point => REVIEW_COMMENT,
    merge_survives_a_crash_at_every_point => MERGE,
    follow_up_issue_survives_a_crash_at_every_point => FOLLOW_UP_ISSUE,
    roadmap_splice_survives_a_crash_at_every_point => ROADMAP_SPLICE,
    epic_progress_survives_a_crash_at_every_point => EPIC_PROGRESS,
    follow_up_markers_survive_a_crash_at_every_point => FOLLOW_UP_MARKERS,
    adoption_survives_a_crash_at_every_point => ADOPTION,
    status_labels_survive_a_crash_at_every_point => STATUS_LABELS,
    check_run_survives_a_crash_at_every_point => CHECK_RUN,
    answer_survives_a_crash_at_every_point => ANSWER,
    inline_review_posted_once_across_a_crash_at_every_point => INLINE_REVIEW,
    plan_comment_posted_once_across_a_crash_at_every_point => PLAN_COMMENT,
}

#[test]
fn every_crash_point_of_every_effect_kind_is_crashed_or_impossible() {
    let mut unaccounted = Vec::new();
    for &kind in EffectKind::ALL {
        for point in Point::ALL {
            // A family's test runs every point but the impossible ones.
            let run = FAMILIES.iter().any(|f| f.kind == kind) && impossible(kind, point).is_none();
            let reason = impossible(kind, point);
            if !run && reason.is_none_or(str::is_empty) {
                unaccounted.push(format!("{}:{}", point.as_str(), kind.as_str()));
            }
        }
    }
    assert!(
        unaccounted.is_empty(),
        "cells neither crashed by a family nor listed as impossible with a reason: {unaccounted:?}"
    );
    for (kind, point, _) in IMPOSSIBLE {
        assert!(
            FAMILIES.iter().all(|f| f.kind != *kind) || point.is_some(),
            "{kind} is listed as impossible but a family crashes it"
        );
    }
}
