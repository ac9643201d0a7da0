//! How a run page is arranged: one section per issue the run worked on
//! (an EPIC run moves from issue to issue), each with its review rounds,
//! launches, validations and GitHub writes; the intervals the run spent
//! blocked; and the commands an operator could give now. Pure: built from
//! a loaded [`RunDetail`], so the pages and the SVG timeline share it.

use chrono::{DateTime, Utc};

use super::view::{EffectRow, LaunchRow, ReviewMark, RunDetail, TimelineEntry, ValidationRow};

/// What the run did for one issue.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueSection<'a> {
    /// `None` when the journal does not say which issue it was.
    pub issue: Option<i64>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub rounds: Vec<Round<'a>>,
    pub launches: Vec<&'a LaunchRow>,
    pub validations: Vec<&'a ValidationRow>,
    pub effects: Vec<&'a EffectRow>,
    /// When its pull request was merged (the `merge_pr` write).
    pub merged_at: Option<DateTime<Utc>>,
}

/// One review round, as its comment recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Round<'a> {
    pub mark: &'a ReviewMark,
    pub at: DateTime<Utc>,
    pub link: Option<&'a str>,
    pub stage: &'a str,
}

impl Round<'_> {
    pub fn outcome(&self) -> &'static str {
        if self.mark.needs_fix {
            "needs a fix round"
        } else {
            "clean"
        }
    }
}

/// A stretch of time the run spent in `BLOCKED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Still blocked.
    pub open: bool,
}

/// A run page's arrangement.
#[derive(Debug, Clone, PartialEq)]
pub struct Story<'a> {
    pub start: DateTime<Utc>,
    /// The last change of a finished run, else now.
    pub end: DateTime<Utc>,
    pub sections: Vec<IssueSection<'a>>,
    pub blocks: Vec<Block>,
    /// The timeline without bookkeeping transitions.
    pub transitions: Vec<&'a TimelineEntry>,
    /// How many bookkeeping transitions were folded away.
    pub folded: usize,
}

/// Whether `entry` moved an EPIC run on to its next issue.
fn starts_next_issue(entry: &TimelineEntry) -> bool {
    entry.from.as_deref() == Some("UPDATE_EPIC") && entry.to.as_deref() == Some("IMPLEMENT")
}

/// The issue an implementation write names (`ai-implementation:issue=N`).
fn implemented_issue(effect: &EffectRow) -> Option<i64> {
    effect
        .identity
        .strip_prefix("ai-implementation:issue=")?
        .parse()
        .ok()
}

pub fn arrange(detail: &RunDetail, now: DateTime<Utc>) -> Story<'_> {
    let run = &detail.summary;
    let start = run.created_at;
    let end = if run.active {
        now.max(run.updated_at)
    } else {
        run.updated_at
    };
    let mut starts = vec![start];
    starts.extend(
        detail
            .timeline
            .iter()
            .filter(|e| starts_next_issue(e))
            .map(|e| e.at),
    );
    let bounds: Vec<(DateTime<Utc>, DateTime<Utc>)> = starts
        .iter()
        .enumerate()
        .map(|(i, from)| (*from, starts.get(i + 1).copied().unwrap_or(end)))
        .collect();
    let last = bounds.len() - 1;
    // An item belongs to the section whose start it follows.
    let section_of = |at: DateTime<Utc>| starts.iter().rposition(|s| *s <= at).unwrap_or(0);
    let mut sections: Vec<IssueSection<'_>> = bounds
        .iter()
        .map(|(from, to)| IssueSection {
            issue: None,
            from: *from,
            to: *to,
            rounds: Vec::new(),
            launches: Vec::new(),
            validations: Vec::new(),
            effects: Vec::new(),
            merged_at: None,
        })
        .collect();
    for launch in &detail.launches {
        sections[section_of(launch.started_at)]
            .launches
            .push(launch);
    }
    for record in &detail.validations {
        sections[section_of(record.recorded_at)]
            .validations
            .push(record);
    }
    for effect in &detail.effects {
        let section = &mut sections[section_of(effect.created_at)];
        section.effects.push(effect);
        if section.issue.is_none() {
            section.issue = implemented_issue(effect);
        }
        if let Some(mark) = &effect.review {
            section.rounds.push(Round {
                mark,
                at: effect.created_at,
                link: effect.link.as_deref(),
                stage: &effect.stage,
            });
        }
        if effect.kind == "merge_pr" && effect.stage == "observed" {
            section.merged_at = Some(effect.updated_at);
        }
    }
    if sections[last].issue.is_none() {
        sections[last].issue = Some(run.issue);
    }
    Story {
        start,
        end,
        blocks: blocks(&detail.timeline, end),
        transitions: detail.timeline.iter().filter(|e| !e.no_op).collect(),
        folded: detail.timeline.iter().filter(|e| e.no_op).count(),
        sections,
    }
}

/// The stretches between entering `BLOCKED` and leaving it.
fn blocks(timeline: &[TimelineEntry], end: DateTime<Utc>) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut since: Option<DateTime<Utc>> = None;
    for entry in timeline.iter().filter(|e| e.kind == "transition") {
        let into = entry.to.as_deref() == Some("BLOCKED");
        match (since, into) {
            (None, true) => since = Some(entry.at),
            (Some(from), false) => {
                blocks.push(Block {
                    from,
                    to: entry.at,
                    open: false,
                });
                since = None;
            }
            _ => {}
        }
    }
    if let Some(from) = since {
        blocks.push(Block {
            from,
            to: end,
            open: true,
        });
    }
    blocks
}

/// The comment commands the run would accept now, each with its command
/// line twin where there is one (SPEC §2).
pub fn accepted_commands(detail: &RunDetail) -> Vec<(&'static str, Option<String>)> {
    let run = &detail.summary;
    if !run.active {
        return Vec::new();
    }
    let id = run.id;
    let mut commands = vec![("/autoforge status", None)];
    if run.phase == "BLOCKED" {
        commands.push((
            "/autoforge unblock <reason>",
            Some(format!("autoforge unblock {id} --reason TEXT")),
        ));
    }
    if detail.awaiting.as_deref() == Some("operator_retry") {
        commands.push(("/autoforge retry", None));
    }
    if run.phase == "READY_FOR_MERGE" {
        commands.push(("/autoforge merge", None));
    }
    commands.push(("/autoforge stop", Some(format!("autoforge stop {id}"))));
    commands
}

/// What a run waiting for `awaiting` (the run document's tag) waits for,
/// in words; an unknown tag is shown as it is.
pub fn awaiting_words(awaiting: &str) -> &str {
    match awaiting {
        "start" => "its first read of GitHub",
        "agent" => "an agent launch (running, or about to start)",
        "validation" => "the validation commands",
        "effects" => "its GitHub writes to be read back",
        "facts" => "a fresh read of GitHub",
        "merge_outcome" => "the merge's outcome",
        "next_issue_check" => "the EPIC's next issue",
        "operator_retry" => "an operator's /autoforge retry",
        "nothing" => "an operator: nothing runs until one acts",
        other => other,
    }
}
