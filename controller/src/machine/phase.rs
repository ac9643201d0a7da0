//! The run phases of SPEC §3, the five of them an agent works in, and the
//! table of legal edges between phases.
//!
//! The table is the single authority on which phase may follow which; every
//! transition `decide` produces is checked against it and an illegal one is
//! an error, never silently turned into something else.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run stands. Serialised as the SCREAMING names of SPEC §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    Initializing,
    Plan,
    Implement,
    Review,
    Fix,
    ReadyForMerge,
    Merge,
    UpdateEpic,
    Done,
    Blocked,
    Failed,
    Stopped,
}

impl Phase {
    /// Every phase, in the order SPEC §3 lists them.
    pub const ALL: [Phase; 12] = [
        Phase::Initializing,
        Phase::Plan,
        Phase::Implement,
        Phase::Review,
        Phase::Fix,
        Phase::ReadyForMerge,
        Phase::Merge,
        Phase::UpdateEpic,
        Phase::Done,
        Phase::Blocked,
        Phase::Failed,
        Phase::Stopped,
    ];

    /// Terminal phases have no outgoing edge at all; a new run is needed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed | Phase::Stopped)
    }

    /// The phases a `/autoforge unblock` may lead to (SPEC §11).
    pub fn is_unblock_target(self) -> bool {
        matches!(
            self,
            Phase::Implement
                | Phase::Review
                | Phase::Fix
                | Phase::ReadyForMerge
                | Phase::UpdateEpic
        )
    }

    /// The SPEC §3 spelling, as it appears in status comments and the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initializing => "INITIALIZING",
            Phase::Plan => "PLAN",
            Phase::Implement => "IMPLEMENT",
            Phase::Review => "REVIEW",
            Phase::Fix => "FIX",
            Phase::ReadyForMerge => "READY_FOR_MERGE",
            Phase::Merge => "MERGE",
            Phase::UpdateEpic => "UPDATE_EPIC",
            Phase::Done => "DONE",
            Phase::Blocked => "BLOCKED",
            Phase::Failed => "FAILED",
            Phase::Stopped => "STOPPED",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A phase name that is not one of SPEC §3's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a run phase")]
pub struct UnknownPhase(pub String);

/// The SPEC §3 spelling back to the phase: how a stored run's phase column
/// is read.
impl std::str::FromStr for Phase {
    type Err = UnknownPhase;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Phase::ALL
            .into_iter()
            .find(|phase| phase.as_str() == name)
            .ok_or_else(|| UnknownPhase(name.to_owned()))
    }
}

/// The phases an agent works in (PLAN only when `plan.mode` is not off):
/// the `phase` its CONTROL_RESULT names and
/// the role a profile is routed to (SPEC §5, §13). Serialised in the role
/// spelling (`update_epic`), as the config and the journal write it.
///
/// It has two spellings and no `Display`, so every use says which it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentPhase {
    Plan,
    Implement,
    Review,
    Fix,
    UpdateEpic,
}

impl AgentPhase {
    /// Every agent phase, in the order a run meets them.
    pub const ALL: [AgentPhase; 5] = [
        Self::Plan,
        Self::Implement,
        Self::Review,
        Self::Fix,
        Self::UpdateEpic,
    ];

    /// The SPEC §3 spelling (`UPDATE_EPIC`), also the `phase` value of a
    /// CONTROL_RESULT.
    pub fn spec_name(self) -> &'static str {
        Phase::from(self).as_str()
    }

    /// The role spelling (`update_epic`) of the config file and the journal.
    pub fn role_name(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Implement => "implement",
            Self::Review => "review",
            Self::Fix => "fix",
            Self::UpdateEpic => "update_epic",
        }
    }
}

impl From<AgentPhase> for Phase {
    fn from(phase: AgentPhase) -> Self {
        match phase {
            AgentPhase::Plan => Phase::Plan,
            AgentPhase::Implement => Phase::Implement,
            AgentPhase::Review => Phase::Review,
            AgentPhase::Fix => Phase::Fix,
            AgentPhase::UpdateEpic => Phase::UpdateEpic,
        }
    }
}

impl Phase {
    /// The agent phase this run phase is, if an agent works in it.
    pub fn agent(self) -> Option<AgentPhase> {
        AgentPhase::ALL
            .into_iter()
            .find(|agent| Phase::from(*agent) == self)
    }
}

/// Whether `from -> to` is an edge of SPEC §3's table.
///
/// Staying in a phase is not an edge; the only self-loops are `REVIEW ->
/// REVIEW` (a stale round) and `PLAN -> PLAN` (a replan). Edges out of `BLOCKED` into working phases are legal here
/// but [`check_edge`] additionally requires that an unblock takes them.
pub fn legal_edge(from: Phase, to: Phase) -> bool {
    use Phase::*;
    if from.is_terminal() {
        return false;
    }
    if matches!(to, Blocked | Failed | Stopped) {
        // Any non-terminal phase may be parked, failed or stopped; a blocked
        // run being blocked again is not a transition.
        return from != to;
    }
    matches!(
        (from, to),
        (Initializing, Plan | Implement)
            | (Plan, Implement | Plan)
            | (Implement, Review)
            | (Review, Fix | ReadyForMerge | Review)
            | (Fix, Review)
            | (ReadyForMerge, Merge | Review | UpdateEpic | Fix)
            | (Merge, UpdateEpic | Review)
            | (UpdateEpic, Plan | Implement | Done)
            | (
                Blocked,
                Implement | Review | Fix | ReadyForMerge | UpdateEpic
            )
    )
}

/// How a transition was caused; edges out of `BLOCKED` need an unblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An ordinary observation (agent result, GitHub read, effect outcome…).
    Ordinary,
    /// An operator's `/autoforge unblock`, already decided from GitHub facts.
    Unblock,
    /// An operator's human round (a review requesting changes, `/autoforge
    /// fix`): it may take a run the pre-merge gate blocked back to FIX.
    HumanRound,
}

/// A transition the table forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal phase transition {from} -> {to}")]
pub struct IllegalEdge {
    pub from: Phase,
    pub to: Phase,
}

/// Validates one transition, including the unblock-only rule for `BLOCKED`.
pub fn check_edge(from: Phase, to: Phase, cause: Cause) -> Result<(), IllegalEdge> {
    let unblock_only = from == Phase::Blocked && to.is_unblock_target();
    let human_round = cause == Cause::HumanRound && to == Phase::Fix;
    let allowed = legal_edge(from, to) && (!unblock_only || cause == Cause::Unblock || human_round);
    let unblock_elsewhere = cause == Cause::Unblock && from != Phase::Blocked;
    if allowed && !unblock_elsewhere {
        Ok(())
    } else {
        Err(IllegalEdge { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Phase::*;

    #[test]
    fn every_phase_reads_back_from_its_spec_name_and_nothing_else_does() {
        for phase in Phase::ALL {
            assert_eq!(phase.as_str().parse::<Phase>(), Ok(phase));
        }
        assert_eq!(
            "ready_for_merge".parse::<Phase>(),
            Err(UnknownPhase("ready_for_merge".to_owned()))
        );
    }

    #[test]
    fn terminal_phases_have_no_outgoing_edge() {
        for from in [Done, Failed, Stopped] {
            for to in Phase::ALL {
                assert!(!legal_edge(from, to), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn every_non_terminal_phase_may_block_fail_or_stop() {
        for from in Phase::ALL.into_iter().filter(|p| !p.is_terminal()) {
            for to in [Blocked, Failed, Stopped] {
                assert_eq!(legal_edge(from, to), from != to, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn table_matches_spec_exactly() {
        let forward = [
            (Initializing, Plan),
            (Initializing, Implement),
            (Plan, Implement),
            (Plan, Plan),
            (Implement, Review),
            (Review, Fix),
            (Review, ReadyForMerge),
            (Review, Review),
            (Fix, Review),
            (ReadyForMerge, Merge),
            (ReadyForMerge, Review),
            (ReadyForMerge, UpdateEpic),
            (ReadyForMerge, Fix),
            (Merge, UpdateEpic),
            (Merge, Review),
            (UpdateEpic, Plan),
            (UpdateEpic, Implement),
            (UpdateEpic, Done),
            (Blocked, Implement),
            (Blocked, Review),
            (Blocked, Fix),
            (Blocked, ReadyForMerge),
            (Blocked, UpdateEpic),
        ];
        for from in Phase::ALL {
            for to in Phase::ALL {
                let parked =
                    !from.is_terminal() && from != to && matches!(to, Blocked | Failed | Stopped);
                let expected = parked || forward.contains(&(from, to));
                assert_eq!(legal_edge(from, to), expected, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn leaving_blocked_for_work_requires_an_unblock() {
        assert!(check_edge(Blocked, Review, Cause::Ordinary).is_err());
        assert!(check_edge(Blocked, Review, Cause::Unblock).is_ok());
        assert!(check_edge(Blocked, Stopped, Cause::Ordinary).is_ok());
    }

    #[test]
    fn a_human_round_leaves_blocked_only_for_fix() {
        assert!(check_edge(Blocked, Fix, Cause::HumanRound).is_ok());
        assert!(check_edge(Blocked, Review, Cause::HumanRound).is_err());
        assert!(check_edge(ReadyForMerge, Fix, Cause::HumanRound).is_ok());
    }

    #[test]
    fn an_unblock_cannot_move_a_run_that_is_not_blocked() {
        assert_eq!(
            check_edge(Fix, Review, Cause::Unblock),
            Err(IllegalEdge {
                from: Fix,
                to: Review
            })
        );
    }

    #[test]
    fn agent_phases_are_the_run_phases_agents_work_in_and_keep_both_spellings() {
        let working: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|p| p.agent().is_some())
            .collect();
        assert_eq!(working, [Plan, Implement, Review, Fix, UpdateEpic]);
        for agent in AgentPhase::ALL {
            assert_eq!(Phase::from(agent).agent(), Some(agent));
            let json = serde_json::to_string(&agent).expect("serialise");
            assert_eq!(json, format!("\"{}\"", agent.role_name()));
        }
        assert_eq!(AgentPhase::UpdateEpic.spec_name(), "UPDATE_EPIC");
        assert_eq!(AgentPhase::UpdateEpic.role_name(), "update_epic");
    }

    #[test]
    fn phases_serialise_as_spec_names() {
        for phase in Phase::ALL {
            let json = serde_json::to_string(&phase).expect("serialise");
            assert_eq!(json, format!("\"{}\"", phase.as_str()));
            let back: Phase = serde_json::from_str(&json).expect("deserialise");
            assert_eq!(back, phase);
        }
    }
}
