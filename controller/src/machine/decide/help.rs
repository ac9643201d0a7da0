//! `/autoforge help`: the commands the run accepts in its current phase and
//! what each does, worded for the reply. Only what would be accepted now is
//! listed, so the reply doubles as "what can I do here".

use crate::machine::bounds::MergeMode;
use crate::machine::phase::Phase;
use crate::machine::state::{Awaiting, RunState};

/// `(usage, what it does)` of every command `state` accepts now, in the
/// order the reply lists them.
pub(crate) fn accepted_now(state: &RunState) -> Vec<(&'static str, &'static str)> {
    let mut commands = Vec::new();
    let phase = state.phase;
    let blocked_from = state.blocked.as_ref().map(|b| b.from);
    if phase == Phase::Blocked && blocked_from != Some(Phase::Initializing) {
        commands.push((
            "`/autoforge unblock <reason>`",
            "leave BLOCKED; the controller picks the phase from GitHub as it is now, \
             and the next agent is shown your reason",
        ));
    }
    if matches!(state.awaiting, Awaiting::OperatorRetry { .. }) {
        commands.push((
            "`/autoforge retry [notes]`",
            "try the failed step again; the next agent is shown your notes",
        ));
    }
    if phase == Phase::Plan && state.awaiting == Awaiting::PlanApproval {
        commands.push((
            "`/autoforge approve [answers]`",
            "approve the posted plan and start IMPLEMENT; answer its questions by number \
             (`/autoforge approve 1=b 3=use tokio`), the others take their default",
        ));
        commands.push((
            "`/autoforge replan <notes>`",
            "ask for a new plan; the planner is shown your notes",
        ));
    }
    let gate_blocked = matches!(blocked_from, Some(Phase::ReadyForMerge | Phase::Merge));
    let fixable = match phase {
        Phase::Review | Phase::Fix => true,
        Phase::ReadyForMerge => state.awaiting != Awaiting::MergeOutcome,
        Phase::Blocked => gate_blocked,
        _ => false,
    };
    if fixable && state.pr.is_some() {
        commands.push((
            "`/autoforge fix <notes>`",
            "start a human round: your notes become a finding the fixer must resolve \
             (a review requesting changes does the same with each of its comments)",
        ));
    }
    if phase == Phase::ReadyForMerge && state.settings.merge_mode == MergeMode::OnCommand {
        commands.push((
            "`/autoforge merge`",
            "approve the merge; the pre-merge gate checks the pull request first",
        ));
    }
    if !phase.is_terminal() {
        commands.push((
            "`/autoforge stop`",
            "stop the run; a running agent is killed",
        ));
    }
    commands.push(("`/autoforge status`", "reply with the run's status"));
    commands.push(("`/autoforge help`", "this list"));
    commands
}

/// The reply's text: the phase, then one line per accepted command.
pub(crate) fn help_text(state: &RunState) -> String {
    let lines: Vec<String> = accepted_now(state)
        .into_iter()
        .map(|(usage, does)| format!("- {usage}: {does}"))
        .collect();
    format!(
        "the run is in {}; commands accepted now:\n\n{}",
        state.phase,
        lines.join("\n")
    )
}
