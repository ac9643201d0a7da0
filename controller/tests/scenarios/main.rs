//! Whole-loop scenarios written in the scenario language over the real
//! `autoforge serve`.

#[path = "../common/mod.rs"]
mod common;

mod scenario_answers;
mod scenario_check_run;
mod scenario_commands;
mod scenario_context;
mod scenario_epic;
mod scenario_epic_finished;
mod scenario_epic_scope;
mod scenario_happy;
mod scenario_help;
mod scenario_human_round;
mod scenario_inline_review;
mod scenario_installations;
mod scenario_merge;
mod scenario_merge_rules;
mod scenario_own_pr;
mod scenario_plan;
mod scenario_progress;
mod scenario_protected;
mod scenario_relabel;
mod scenario_relaunch;
mod scenario_review;
mod scenario_trust;
mod scenario_validation;
mod scenario_waiting_cost;
mod scenario_waiting_gaps;
