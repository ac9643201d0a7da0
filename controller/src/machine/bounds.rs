//! The run's bounds (SPEC §3) and the counters held against them.
//!
//! Run settings are frozen into the run state at INITIALIZING so a config edit
//! never changes the rules for a run in flight: the number an agent is told
//! for a bound is the number it is held to.

use serde::{Deserialize, Serialize};

/// `merge.mode` (SPEC §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeMode {
    /// Stop at READY_FOR_MERGE; a human merges and the controller notices.
    #[default]
    Never,
    /// Merge after an operator's `/autoforge merge`.
    OnCommand,
    /// Merge as soon as the pre-merge gate passes.
    Auto,
}

impl std::fmt::Display for MergeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MergeMode::Never => "never",
            MergeMode::OnCommand => "on-command",
            MergeMode::Auto => "auto",
        })
    }
}

/// `plan.mode` (SPEC §4 PLAN): whether a plan is written before the code,
/// and whether the run waits for an operator to approve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanMode {
    /// No PLAN phase: IMPLEMENT starts at once.
    #[default]
    Off,
    /// The plan is posted and IMPLEMENT starts straight away.
    Post,
    /// The plan is posted and the run waits for `/autoforge approve`.
    Approve,
}

impl std::fmt::Display for PlanMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlanMode::Off => "off",
            PlanMode::Post => "post",
            PlanMode::Approve => "approve",
        })
    }
}

/// `merge.method`: how GitHub is asked to merge (its `merge_method`).
/// The `Default` is GitHub's own when a request names no method.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MergeMethod {
    /// A merge commit with both heads as parents.
    #[default]
    Merge,
    /// One new commit on the base holding the whole change.
    Squash,
    /// The PR's commits replayed onto the base, no merge commit.
    Rebase,
}

impl MergeMethod {
    /// Tried in this order when neither the operator nor the repository
    /// chose a method. Squash first: one commit per issue, titled after the
    /// PR, keeps the base history readable and the agents' intermediate
    /// commits out of it; then a merge commit, which keeps every commit
    /// reachable and signed as pushed; rebase last, because it rewrites the
    /// reviewed commits into new ones nobody reviewed by SHA.
    pub const PREFERRED: [MergeMethod; 3] =
        [MergeMethod::Squash, MergeMethod::Merge, MergeMethod::Rebase];

    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }

    /// The repository setting that allows it, as GitHub names it.
    pub fn repository_setting(self) -> &'static str {
        match self {
            MergeMethod::Merge => "allow_merge_commit",
            MergeMethod::Squash => "allow_squash_merge",
            MergeMethod::Rebase => "allow_rebase_merge",
        }
    }
}

impl std::fmt::Display for MergeMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Run settings, copied from the configuration when the run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettings {
    pub merge_mode: MergeMode,
    /// The operator's `merge.method`; `None` lets the repository's allowed
    /// methods decide ([`MergeMethod::PREFERRED`]).
    #[serde(default)]
    pub merge_method: Option<MergeMethod>,
    /// Review rounds per PR.
    pub max_review_rounds: u32,
    /// Agent launches per run, corrections and retries included.
    pub max_launches: u32,
    /// Validation failures per phase entry before the run blocks.
    pub max_validation_failures: u32,
    /// Correction relaunches per launch.
    pub max_corrections: u32,
    /// Automatic retries of a crash, timeout, non-zero exit or transient
    /// GitHub failure before the run waits for `/autoforge retry`.
    pub max_retries: u32,
    /// Inconclusive pre-merge checks (pending checks, unknown mergeability)
    /// tolerated per phase entry before the run blocks.
    pub max_merge_checks: u32,
    /// Stagnation: identical findings fingerprint this many rounds in a row.
    pub stagnation_identical_rounds: u32,
    /// Stagnation: equal finding counts with a recurring resolution this
    /// many rounds in a row.
    pub stagnation_unchanged_count_rounds: u32,
    /// Roadmap splice cadence in merges (`epic.update_every`).
    pub epic_update_every: u32,
    /// Next-issue picks the EPIC agent may have rejected before the run blocks.
    pub max_next_issue_rejections: u32,
    /// Roadmap sections voided by a concurrent EPIC edit before the run blocks.
    pub max_roadmap_rerequests: u32,
    /// Keep one `autoforge:<status>` label on the run's issue (SPEC §15).
    #[serde(default)]
    pub status_labels: bool,
    /// Tokens the run's agents may report in total (`limits.tokens_per_run`);
    /// `None` is no limit.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Estimated cost the run's agents may reach, in millionths of the
    /// price tables' unit (`limits.cost_per_run`); `None` is no limit.
    #[serde(default)]
    pub max_cost_micros: Option<u64>,
    /// Show the run in an `autoforge` check run on the PR head. Only a
    /// GitHub App can write check runs, so the driver turns it on for one.
    #[serde(default)]
    pub check_run: bool,
    /// `plan.mode`, or the repository file's choice; runs recorded before
    /// the PLAN phase existed read as `off`.
    #[serde(default)]
    pub plan_mode: PlanMode,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            merge_mode: MergeMode::Never,
            merge_method: None,
            max_review_rounds: 8,
            max_launches: 60,
            max_validation_failures: 3,
            max_corrections: 1,
            max_retries: 3,
            max_merge_checks: 60,
            stagnation_identical_rounds: 2,
            stagnation_unchanged_count_rounds: 3,
            epic_update_every: 1,
            max_next_issue_rejections: 2,
            max_roadmap_rerequests: 2,
            status_labels: false,
            max_tokens: None,
            max_cost_micros: None,
            check_run: false,
            plan_mode: PlanMode::Off,
        }
    }
}

/// Counters held against [`RunSettings`]. Which ones reset when is part of the
/// contract, so each field says it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Agent launches in the whole run; never reset.
    pub launches: u32,
    /// Tokens the run's launches reported; never reset.
    #[serde(default)]
    pub tokens: u64,
    /// Estimated cost of the run's launches, in millionths of the price
    /// unit; never reset.
    #[serde(default)]
    pub cost_micros: u64,
    /// Tokens of the launches for the run's current issue: an EPIC's run
    /// starts it afresh when it moves on to the next issue.
    #[serde(default)]
    pub issue_tokens: u64,
    /// Estimated cost of the launches for the current issue.
    #[serde(default)]
    pub issue_cost_micros: u64,
    /// Validation failures since the current phase was entered.
    pub validation_failures: u32,
    /// Correction relaunches of the current launch.
    pub corrections: u32,
    /// Automatic retries of the current step.
    pub retries: u32,
    /// Inconclusive merge-gate reads since READY_FOR_MERGE or MERGE began.
    pub merge_checks: u32,
    /// Rejected next-issue picks in the current UPDATE_EPIC.
    pub next_issue_rejections: u32,
    /// Roadmap sections voided in the current UPDATE_EPIC.
    pub roadmap_rerequests: u32,
}

impl Counters {
    /// What a phase entry resets; launches are per run and never reset.
    pub fn reset_for_phase_entry(&mut self) {
        self.validation_failures = 0;
        self.corrections = 0;
        self.retries = 0;
        self.merge_checks = 0;
        self.next_issue_rejections = 0;
        self.roadmap_rerequests = 0;
    }
}

/// Whether one more launch stays inside the run's budget.
pub fn launch_allowed(settings: &RunSettings, counters: &Counters) -> bool {
    counters.launches < settings.max_launches
}

/// Whether the next review round would still be inside the cap.
pub fn round_allowed(settings: &RunSettings, completed_rounds: u32) -> bool {
    completed_rounds < settings.max_review_rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_spec_bounds() {
        let s = RunSettings::default();
        assert_eq!(
            (
                s.max_review_rounds,
                s.max_launches,
                s.max_validation_failures,
                s.max_corrections
            ),
            (8, 60, 3, 1)
        );
        assert_eq!(s.merge_mode, MergeMode::Never);
    }

    #[test]
    fn launch_budget_is_exhausted_at_the_configured_count() {
        let s = RunSettings {
            max_launches: 2,
            ..RunSettings::default()
        };
        let mut c = Counters::default();
        assert!(launch_allowed(&s, &c));
        c.launches = 2;
        assert!(!launch_allowed(&s, &c));
    }

    #[test]
    fn phase_entry_keeps_the_run_wide_launch_count() {
        let mut c = Counters {
            launches: 7,
            validation_failures: 2,
            retries: 1,
            ..Counters::default()
        };
        c.reset_for_phase_entry();
        assert_eq!(
            c,
            Counters {
                launches: 7,
                ..Counters::default()
            }
        );
    }
}
