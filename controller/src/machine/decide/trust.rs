//! Changes made on GitHub by people who may not be operators: an edit of
//! the issue's text and a removal of the trigger label. The commands layer
//! has already said whether the person is an operator; here the run decides
//! what that means for it.
//!
//! The issue's title and body are frozen when the run starts (a digest in
//! [`RunState::issue_text`]): an operator's edit replaces them, any other
//! edit blocks the run, and an operator's unblock accepts the text as it is
//! then. So agents only ever work from text an operator stood behind.

use super::turn::Turn;
use crate::inline_code::code_span;
use crate::machine::decision::{Decision, EffectIntent, MachineError, Notice};
use crate::machine::event::{GitHubFacts, RefusedLabelRemoval};
use crate::machine::phase::Phase;
use crate::machine::state::RunState;
use autoforge_journal::IssueNumber;

/// A label removal that does not stop the run: one notice saying why.
pub(super) fn label_removal_refused(state: &RunState, refused: &RefusedLabelRemoval) -> Decision {
    let mut turn = Turn::new(state);
    turn.effect(EffectIntent::PostNotice {
        issue: refused.issue,
        event: refused.removal.clone(),
        notice: Notice::LabelRemovalRefused {
            actor: refused.actor.clone(),
            reason: refused.reason.clone(),
        },
    });
    turn.finish()
}

/// The issue's text is now `digest`.
pub(super) fn text_changed(
    state: &RunState,
    issue: IssueNumber,
    digest: &str,
    editor: Option<&str>,
    by_operator: bool,
) -> Result<Decision, MachineError> {
    let mut turn = Turn::new(state);
    if issue != state.issue || state.issue_text.as_deref() == Some(digest) {
        return Ok(turn.finish());
    }
    // A run recorded before texts were frozen adopts what it sees first;
    // an operator's edit is the operator's text.
    if state.issue_text.is_none() || by_operator {
        turn.state.issue_text = Some(digest.to_owned());
        return Ok(turn.finish());
    }
    turn.block(edit_reason(editor))?;
    Ok(turn.finish())
}

/// Fresh facts show a text the run never accepted (an edit whose webhook
/// was missed or is still on its way): who made it is not known, so it
/// counts as not an operator's. The driver asks this too, so that such a
/// read waits for run events stored while it was made (the edit's own
/// webhook may be among them).
pub fn unaccepted_text_in(state: &RunState, facts: &GitHubFacts) -> bool {
    match (&state.issue_text, &facts.issue_text) {
        (Some(accepted), Some(read)) => accepted != read && state.phase != Phase::Blocked,
        _ => false,
    }
}

/// The block reason for an edit the run did not accept.
pub(super) fn edit_reason(editor: Option<&str>) -> String {
    let who = editor.map_or_else(
        || "someone not known to be an operator".to_owned(),
        // In a code span: the published-text policy allows no mention.
        |login| format!("{}, who is not an operator,", code_span(login)),
    );
    format!(
        "the issue's title or body was edited by {who} after the run started; \
         the run works only from text an operator accepted: \
         `/autoforge unblock <reason>` accepts the text as it is now"
    )
}
