//! UPDATE_EPIC (SPEC §4, §9): the progress comment once, the roadmap splice
//! when due, then verify the agent's next-issue pick (open, in the run's
//! repository, one of the EPIC's own issues); one re-request, then
//! BLOCKED. A run without an EPIC is done after its merge.

use super::turn::{Turn, TurnResult};
use crate::machine::agent_result::{EpicResult, PhaseResult};
use crate::machine::decision::{
    Decision, EffectIntent, IssueFinished, LaunchInputs, MachineError, StatusSnapshot,
};
use crate::machine::event::{EffectReadBack, Event, NextIssueFacts};
use crate::machine::phase::{AgentPhase, Cause, Phase};
use crate::machine::state::{Awaiting, EffectStep, RunState};
use autoforge_journal::IssueNumber;

pub(super) fn enter(turn: &mut Turn) -> TurnResult {
    let (issue, pr) = (turn.state.issue, turn.state.pr);
    let Some(epic) = turn.state.epic.as_mut() else {
        return turn.enter(Phase::Done, Cause::Ordinary);
    };
    epic.finished_issue = Some(issue);
    epic.finished_pr = pr;
    epic.progress_posted = false;
    launch(turn, None, false)
}

/// Whether this update must splice the roadmap: every `update_every`
/// merges, and always when the EPIC completes with merges uncounted.
fn roadmap_due(state: &RunState, complete: bool) -> bool {
    state.epic.as_ref().is_some_and(|e| {
        e.merges_since_roadmap >= state.settings.epic_update_every.max(1)
            || (complete && e.merges_since_roadmap > 0)
    })
}

fn launch(turn: &mut Turn, rerequest: Option<String>, force_due: bool) -> TurnResult {
    let due = force_due || roadmap_due(&turn.state, false);
    let s = &turn.state;
    let Some(epic) = s.epic.as_ref() else {
        return turn.block("UPDATE_EPIC without an EPIC");
    };
    let inputs = LaunchInputs::UpdateEpic {
        epic: epic.epic,
        finished_issue: epic.finished_issue.unwrap_or(s.issue),
        finished_pr: epic.finished_pr,
        merges_since_roadmap: epic.merges_since_roadmap,
        roadmap_due: due,
        want_progress: !epic.progress_posted,
        rerequest,
    };
    turn.launch(AgentPhase::UpdateEpic, 0, inputs)
}

pub(super) fn on_result(turn: &mut Turn, result: &EpicResult) -> TurnResult {
    let Some(epic) = turn.state.epic.clone() else {
        return turn.block("UPDATE_EPIC without an EPIC");
    };
    if !epic.progress_posted && result.progress.is_none() {
        return turn.correct("progress is required");
    }
    let due = roadmap_due(&turn.state, result.next_issue.is_none());
    if due && result.roadmap_section.is_none() {
        return turn.correct("roadmap_section is required: a roadmap update is due");
    }
    turn.state.pending = Some(PhaseResult::UpdateEpic(result.clone()));
    let mut writes = false;
    if let (false, Some(text)) = (epic.progress_posted, &result.progress) {
        let (Some(issue), Some(pr)) = (epic.finished_issue, epic.finished_pr) else {
            return turn.block("the finished issue or its pull request is unknown");
        };
        let text = with_spend(text, &turn.state.counters, issue);
        turn.effect(EffectIntent::PostEpicProgress {
            epic: epic.epic,
            issue,
            pr,
            text,
        });
        writes = true;
    }
    if let (true, Some(section)) = (due, &result.roadmap_section) {
        turn.effect(EffectIntent::SpliceEpicRoadmap {
            epic: epic.epic,
            section: section.clone(),
        });
        writes = true;
    }
    if writes {
        turn.wait(Awaiting::Effects {
            step: EffectStep::EpicUpdate,
        });
        Ok(())
    } else {
        after_writes(turn)
    }
}

pub(super) fn on_event(state: &RunState, event: &Event) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    match (&state.awaiting, event) {
        (
            Awaiting::Effects {
                step: EffectStep::EpicUpdate,
            },
            Event::EffectsObserved { observed },
        ) => {
            if let Some(epic) = turn.state.epic.as_mut() {
                // The progress comment was part of this group if not yet posted.
                epic.progress_posted = true;
                // The merge counter resets only after the splice read-back.
                if observed.contains(&EffectReadBack::RoadmapSpliced) {
                    epic.merges_since_roadmap = 0;
                }
            }
            if observed.contains(&EffectReadBack::RoadmapVoided) {
                roadmap_voided(&mut turn)?;
            } else {
                after_writes(&mut turn)?;
            }
        }
        (Awaiting::NextIssueCheck { issue }, Event::NextIssue(facts)) if facts.issue == *issue => {
            verify(&mut turn, facts)?;
        }
        _ => return Ok(Turn::unexpected(state, event)),
    }
    Ok(turn.finish())
}

fn after_writes(turn: &mut Turn) -> TurnResult {
    let Some(PhaseResult::UpdateEpic(result)) = turn.state.pending.take() else {
        return turn.block("no EPIC update is pending");
    };
    match result.next_issue {
        None => turn.enter(Phase::Done, Cause::Ordinary),
        Some(issue) => match result
            .next_issue_repository
            .as_ref()
            .filter(|repo| !repo.eq_ignore_ascii_case(&turn.state.repository))
            .map(|repo| {
                format!(
                    "{repo}#{issue} is in another repository than {}",
                    turn.state.repository
                )
            })
            .or_else(|| pure_rejection(&turn.state, issue))
        {
            Some(reason) => reject(turn, reason),
            None => {
                turn.wait(Awaiting::NextIssueCheck { issue });
                Ok(())
            }
        },
    }
}

/// What can be refused without reading GitHub.
fn pure_rejection(state: &RunState, issue: IssueNumber) -> Option<String> {
    let epic = state.epic.as_ref()?;
    if issue == epic.epic {
        return Some(format!("#{issue} is the EPIC itself"));
    }
    if Some(issue) == epic.finished_issue {
        return Some(format!("#{issue} is the issue that was just finished"));
    }
    None
}

/// How many of the EPIC's issues a rejection lists before it counts.
const LISTED: usize = 10;

/// A pick that is none of the EPIC's own issues: any other open issue of
/// the repository is not the EPIC agent's to start.
fn outside_epic(state: &RunState, facts: &NextIssueFacts) -> Option<String> {
    let epic = state.epic.as_ref()?.epic;
    if facts.epic_issues.contains(&facts.issue) {
        return None;
    }
    if facts.epic_issues.is_empty() {
        return Some(format!(
            "#{} is not one of EPIC #{epic}'s issues; the EPIC lists none",
            facts.issue
        ));
    }
    let mut listed: Vec<String> = facts
        .epic_issues
        .iter()
        .take(LISTED)
        .map(|n| format!("#{n}"))
        .collect();
    if facts.epic_issues.len() > LISTED {
        listed.push(format!("and {} more", facts.epic_issues.len() - LISTED));
    }
    Some(format!(
        "#{} is not one of EPIC #{epic}'s issues; its issues are {}",
        facts.issue,
        listed.join(", ")
    ))
}

fn verify(turn: &mut Turn, facts: &NextIssueFacts) -> TurnResult {
    let reason = if !facts
        .repository
        .eq_ignore_ascii_case(&turn.state.repository)
    {
        Some(format!(
            "#{} is not in {}",
            facts.issue, turn.state.repository
        ))
    } else if !facts.open {
        Some(format!("#{} is not open", facts.issue))
    } else {
        pure_rejection(&turn.state, facts.issue).or_else(|| outside_epic(&turn.state, facts))
    };
    if let Some(reason) = reason {
        return reject(turn, reason);
    }
    mark_finished(turn, facts.issue);
    turn.state.switch_to_issue(facts.issue);
    turn.state.base_sha = Some(facts.base_sha.clone());
    turn.state.prior_branch_head.clone_from(&facts.branch_head);
    turn.state.issue_text.clone_from(&facts.issue_text);
    if let Some(epic) = turn.state.epic.as_mut() {
        epic.finished_issue = None;
        epic.finished_pr = None;
    }
    let first = super::plan::first_phase(&turn.state);
    turn.enter(first, Cause::Ordinary)
}

/// The status comment of the issue the run just finished says so, before
/// the run moves to `next`: it would otherwise go on offering commands for
/// a phase the run has left.
fn mark_finished(turn: &mut Turn, next: IssueNumber) {
    let Some(epic) = turn.state.epic.as_ref() else {
        return;
    };
    let Some(done) = epic.finished_issue.filter(|done| *done != next) else {
        return;
    };
    let mut status = StatusSnapshot::of(&turn.state);
    status.finished = Some(IssueFinished {
        epic: epic.epic,
        merged_in: epic.finished_pr,
        next_issue: next,
    });
    turn.effect(EffectIntent::EditStatusComment {
        issue: done,
        run_id: turn.state.run_id.clone(),
        status,
    });
}

/// The EPIC body changed under the splice: ask for the section again
/// (never the progress comment, which is already posted), bounded.
fn roadmap_voided(turn: &mut Turn) -> TurnResult {
    turn.state.pending = None;
    turn.state.counters.roadmap_rerequests += 1;
    let max = turn.state.settings.max_roadmap_rerequests;
    if turn.state.counters.roadmap_rerequests >= max {
        return turn.block(format!(
            "the EPIC body changed under the roadmap splice {max} times"
        ));
    }
    let reason =
        "the EPIC body changed outside the roadmap section; send the section again".to_owned();
    launch(turn, Some(reason), true)
}

/// One re-request with only the missing pick; the second rejection blocks.
fn reject(turn: &mut Turn, reason: String) -> TurnResult {
    turn.state.counters.next_issue_rejections += 1;
    let max = turn.state.settings.max_next_issue_rejections;
    if turn.state.counters.next_issue_rejections >= max {
        return turn.block(format!(
            "the EPIC agent's next-issue pick was rejected {max} times: {reason}"
        ));
    }
    launch(turn, Some(reason), false)
}

/// The EPIC agent's progress report with the controller's own line of what
/// the EPIC's run has spent on agents so far (its launches cover every
/// issue of the EPIC) and how much of it went to the finished issue (its
/// EPIC update included), when any launch reported usage.
fn with_spend(text: &str, counters: &crate::machine::Counters, issue: IssueNumber) -> String {
    let spend = |tokens: u64, cost: u64| {
        let mut spent = Vec::new();
        if tokens > 0 {
            spent.push(format!("{tokens} tokens"));
        }
        if cost > 0 {
            spent.push(format!(
                "an estimated cost of {}",
                crate::machine::budget::format_cost(cost)
            ));
        }
        spent.join(", ")
    };
    let epic = spend(counters.tokens, counters.cost_micros);
    if epic.is_empty() {
        return text.to_owned();
    }
    let on_issue = spend(counters.issue_tokens, counters.issue_cost_micros);
    let on_issue = if on_issue.is_empty() {
        String::new()
    } else {
        format!("; on #{issue}, this update included: {on_issue}")
    };
    format!(
        "{}\n\n_Agents on this EPIC so far: {epic}{on_issue}._",
        text.trim_end()
    )
}

#[cfg(test)]
mod spend_tests {
    use super::with_spend;
    use crate::machine::Counters;

    #[test]
    fn the_progress_report_ends_with_what_the_epic_spent_on_agents() {
        let issue = autoforge_journal::testing::issue(4);
        let none = Counters::default();
        assert_eq!(with_spend("Merged.\n", &none, issue), "Merged.\n");
        let spent = Counters {
            tokens: 42_000,
            cost_micros: 1_230_000,
            issue_tokens: 9_000,
            issue_cost_micros: 400_000,
            ..Counters::default()
        };
        assert_eq!(
            with_spend("Merged.\n", &spent, issue),
            "Merged.\n\n_Agents on this EPIC so far: 42000 tokens, an estimated cost of 1.23; \
             on #4, this update included: 9000 tokens, an estimated cost of 0.4000._"
        );
    }
}
