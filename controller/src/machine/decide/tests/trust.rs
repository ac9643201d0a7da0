//! The issue's frozen text and label removals that do not count, as seen
//! through `decide`.

use super::*;

const FROZEN: &str = "frozen-digest";

fn started_with_frozen_text() -> Run {
    let mut run = Run::default_run();
    // The default start records no digest (a run from before texts were
    // frozen); start this one the way the driver starts runs now.
    let state = RunState::new("run-1", ISSUE, RunSettings::default());
    let started = Event::Started {
        repository: "acme/widgets".to_owned(),
        issue: ISSUE,
        epic: None,
        base_branch: "main".to_owned(),
        base_sha: sha(1),
        branch_head: None,
        settings: RunSettings::default(),
        repository_settings: RepositorySettingsRead::default(),
        issue_text: Some(FROZEN.to_owned()),
        started_by: Some("olivia".to_owned()),
    };
    run.last = decide(&state, &started).expect("legal");
    run.state = run.last.next.clone();
    run
}

fn edited(digest: &str, editor: Option<&str>, by_operator: bool) -> Event {
    Event::IssueTextChanged {
        issue: ISSUE,
        digest: digest.to_owned(),
        editor: editor.map(str::to_owned),
        by_operator,
    }
}

#[test]
fn the_text_is_frozen_when_the_run_starts() {
    let run = started_with_frozen_text();
    assert_eq!(run.state.issue_text.as_deref(), Some(FROZEN));
    assert_eq!(run.state.phase, Phase::Implement);
}

#[test]
fn an_edit_by_someone_who_is_not_an_operator_blocks_naming_the_editor() {
    let mut run = started_with_frozen_text();
    run.apply(edited("other", Some("mallory"), false));
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = &run.state.blocked.as_ref().expect("blocked").reason;
    assert!(
        reason.contains("`mallory`, who is not an operator,"),
        "{reason}"
    );
    assert!(reason.contains("/autoforge unblock"), "{reason}");
    // The frozen text stays the accepted one.
    assert_eq!(run.state.issue_text.as_deref(), Some(FROZEN));
}

#[test]
fn an_operators_edit_becomes_the_text_the_run_works_from() {
    let mut run = started_with_frozen_text();
    let phase = run.state.phase;
    let decision = run.apply(edited("newer", Some("olivia"), true)).clone();
    assert_eq!(run.state.phase, phase);
    assert!(decision.effects.is_empty());
    assert_eq!(run.state.issue_text.as_deref(), Some("newer"));
}

#[test]
fn an_edit_back_to_the_frozen_text_changes_nothing() {
    let mut run = started_with_frozen_text();
    let before = run.state.clone();
    run.apply(edited(FROZEN, Some("mallory"), false));
    assert_eq!(run.state, before);
}

#[test]
fn an_edit_of_another_issue_changes_nothing() {
    let mut run = started_with_frozen_text();
    let before = run.state.clone();
    run.apply(Event::IssueTextChanged {
        issue: testing::issue(ISSUE.get() + 1),
        digest: "other".into(),
        editor: Some("mallory".into()),
        by_operator: false,
    });
    assert_eq!(run.state, before);
}

#[test]
fn a_run_from_before_frozen_texts_adopts_the_first_text_it_sees() {
    let mut run = Run::default_run();
    assert_eq!(run.state.issue_text, None);
    run.apply(edited("first", Some("mallory"), false));
    assert_eq!(run.state.issue_text.as_deref(), Some("first"));
    assert_ne!(run.state.phase, Phase::Blocked);
}

#[test]
fn fresh_facts_with_an_unaccepted_text_block_as_an_unknown_edit() {
    let mut run = started_with_frozen_text();
    run.state.awaiting = Awaiting::Facts {
        purpose: FactsPurpose::Publish,
    };
    let mut read = facts(None);
    read.issue_text = Some("edited-while-the-webhook-was-lost".into());
    run.apply(Event::GitHubObserved { facts: read });
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = &run.state.blocked.as_ref().expect("blocked").reason;
    assert!(reason.contains("not known to be an operator"), "{reason}");
}

#[test]
fn an_operators_unblock_accepts_the_text_as_it_is_then() {
    let mut run = started_with_frozen_text();
    run.apply(edited("edited", Some("mallory"), false));
    let mut read = facts(None);
    read.issue_text = Some("edited-again".into());
    run.apply(command(OperatorRequest::Unblock {
        reason: "the edit is fine".into(),
        facts: Box::new(read),
    }));
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(run.state.issue_text.as_deref(), Some("edited-again"));
}

#[test]
fn a_label_removal_that_does_not_count_is_answered_once_and_changes_nothing_else() {
    let mut run = started_with_frozen_text();
    let before = run.state.clone();
    let decision = run
        .apply(Event::LabelRemovalRefused(RefusedLabelRemoval {
            issue: ISSUE,
            actor: Some("mallory".into()),
            reason: "`mallory` has `read` permission".into(),
            removal: "event-41".into(),
        }))
        .clone();
    assert_eq!(run.state, before);
    assert_eq!(
        decision.effects,
        [EffectIntent::PostNotice {
            issue: ISSUE,
            event: "event-41".into(),
            notice: Notice::LabelRemovalRefused {
                actor: Some("mallory".into()),
                reason: "`mallory` has `read` permission".into(),
            },
        }]
    );
    assert_eq!(
        decision.effects[0].identity(),
        "autoforge-notice:event=event-41"
    );
}

#[test]
fn each_block_tells_the_operator_who_started_the_run_once() {
    let mut run = started_with_frozen_text();
    assert_eq!(run.state.started_by.as_deref(), Some("olivia"));
    let decision = run.apply(edited("other", Some("mallory"), false)).clone();
    let notices: Vec<_> = decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            EffectIntent::PostNotice { event, notice, .. } => Some((event.clone(), notice.clone())),
            _ => None,
        })
        .collect();
    let reason = run.state.blocked.as_ref().expect("blocked").reason.clone();
    assert_eq!(
        notices,
        [(
            "run-run-1-block-1".to_owned(),
            Notice::Blocked {
                operator: "olivia".into(),
                reason
            }
        )]
    );
    assert!(
        decision
            .effects
            .iter()
            .any(|e| matches!(e, EffectIntent::EditStatusComment { .. })),
        "the status comment is edited too"
    );
    // A second edit while blocked adds no second notice.
    let again = run.apply(edited("third", Some("mallory"), false));
    assert!(again.effects.is_empty(), "{:?}", again.effects);
    assert_eq!(run.state.blocks, 1);
}
