//! The running launch on the status comment (SPEC §15): a `LaunchRunning`
//! heartbeat of the launch the run waits for edits the comment when what
//! it shows (role, profile, whole minutes, KiB of output) changed; the
//! launch's end edits it once more without the line.

use super::turn::Turn;
use crate::machine::decision::{Decision, EffectIntent, Refusal, StatusSnapshot};
use crate::machine::event::Event;
use crate::machine::state::{Awaiting, RunState, RunningLine};

/// Decides a heartbeat of launch `launch`.
pub(super) fn launch_running(
    state: &RunState,
    event: &Event,
    (launch, profile): (u32, &str),
    (elapsed_seconds, output_bytes): (u64, u64),
) -> Decision {
    let Awaiting::Agent { launch: running } = &state.awaiting else {
        return Turn::unexpected(state, event);
    };
    if running.id != launch {
        return Turn::refuse(
            state,
            Refusal::StaleLaunch {
                expected: Some(running.id),
                got: launch,
            },
        );
    }
    let line = RunningLine {
        launch,
        role: running.role,
        profile: profile.to_owned(),
        minutes: elapsed_seconds / 60,
        output_kib: output_bytes / 1024,
    };
    let mut turn = Turn::new(state);
    if state.running_shown.as_ref() == Some(&line) {
        return turn.finish();
    }
    turn.state.running_shown = Some(line);
    turn.effect(EffectIntent::EditStatusComment {
        issue: turn.state.issue,
        run_id: turn.state.run_id.clone(),
        status: StatusSnapshot::of(&turn.state),
    });
    turn.finish()
}

/// After the launch the comment showed as running: the line goes, with an
/// edit of its own when the decision does not edit the comment anyway.
pub(super) fn ended(before: &RunState, mut decision: Decision) -> Decision {
    if before.running_shown.is_none() || decision.refusal.is_some() {
        return decision;
    }
    decision.next.running_shown = None;
    let issue = decision.next.issue;
    let edits = decision.effects.iter().any(
        |effect| matches!(effect, EffectIntent::EditStatusComment { issue: edited, .. } if *edited == issue),
    );
    if !edits {
        decision.effects.push(EffectIntent::EditStatusComment {
            issue,
            run_id: decision.next.run_id.clone(),
            status: StatusSnapshot::of(&decision.next),
        });
    }
    decision
}
