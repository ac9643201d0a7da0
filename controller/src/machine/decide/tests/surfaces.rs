//! What the surfaces see of a run: status labels (when enabled) and the
//! last validation in the status snapshot.

use super::*;

fn labels_on() -> RunSettings {
    RunSettings {
        status_labels: true,
        ..RunSettings::default()
    }
}

fn label_intents(decision: &Decision) -> Vec<(Vec<String>, Vec<String>)> {
    decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            EffectIntent::SetLabels { issue, add, remove } => {
                assert_eq!(*issue, ISSUE);
                Some((add.clone(), remove.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn status_labels_are_off_by_default() {
    let run = Run::default_run();
    assert!(label_intents(&run.last).is_empty());
}

#[test]
fn starting_labels_the_issue_running_and_later_running_phases_write_no_label() {
    let mut run = Run::start(labels_on(), None);
    let set = label_intents(&run.last);
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].0, ["autoforge:running"]);
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    run.github(facts(None));
    run.observed(vec![
        EffectReadBack::Pushed { sha: sha(2) },
        EffectReadBack::PullRequest { number: PR },
    ]);
    assert_eq!(run.state.phase, Phase::Review);
    assert!(label_intents(&run.last).is_empty(), "IMPLEMENT → REVIEW");
}

#[test]
fn ready_blocked_and_stopped_each_change_the_label() {
    let mut run = Run::to_ready(labels_on(), None);
    assert_eq!(label_intents(&run.last)[0].0, ["autoforge:ready"]);

    let mut blocked = Run::to_review(labels_on(), None);
    blocked.bind(&sha(2));
    blocked.finish_agent(AgentOutcome::Result {
        result: AgentResult::Blocked {
            message: "stuck".into(),
        },
    });
    assert_eq!(blocked.state.phase, Phase::Blocked);
    let set = label_intents(&blocked.last);
    assert_eq!(set[0].0, ["autoforge:blocked"]);
    assert!(set[0].1.contains(&"autoforge:running".to_owned()));

    run.apply(Event::LabelRemoved);
    let set = label_intents(&run.last);
    assert!(set[0].0.is_empty());
    assert_eq!(set[0].1.len(), 4);
}

#[test]
fn the_status_comment_of_the_transition_a_validation_causes_shows_it() {
    let mut run = Run::start(RunSettings::default(), None);
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    assert_eq!(
        run.state.last_validation,
        Some(LastValidation {
            sha: sha(2),
            passed: true,
            failed_index: None,
        })
    );
    run.github(facts(None));
    run.observed(vec![
        EffectReadBack::Pushed { sha: sha(2) },
        EffectReadBack::PullRequest { number: PR },
    ]);
    let status = run
        .last
        .effects
        .iter()
        .find_map(|effect| match effect {
            EffectIntent::EditStatusComment { status, .. } => Some(status.clone()),
            _ => None,
        })
        .expect("the REVIEW entry edits the status comment");
    assert_eq!(status.last_validation, run.state.last_validation);
}

#[test]
fn a_validation_of_another_commit_is_not_remembered() {
    let mut run = Run::start(RunSettings::default(), None);
    run.implement(&sha(2));
    let before = run.state.clone();
    run.refuse(Event::ValidationFinished {
        sha: sha(9),
        passed: false,
        failed_index: Some(0),
        summary: "stale".into(),
        protected_paths: Vec::new(),
    });
    assert_eq!(run.state, before);
    assert_eq!(run.state.last_validation, None);
}

fn started_with(read: RepositorySettingsRead) -> Decision {
    let state = RunState::new("run-1", ISSUE, RunSettings::default());
    let started = Event::Started {
        repository: "acme/widgets".to_owned(),
        issue: ISSUE,
        epic: None,
        base_branch: "main".to_owned(),
        base_sha: sha(1),
        branch_head: None,
        settings: RunSettings::default(),
        repository_settings: read,
        issue_text: None,
        started_by: None,
    };
    decide(&state, &started).expect("legal")
}

#[test]
fn repository_settings_are_frozen_into_the_run_and_may_turn_status_labels_on() {
    let mut chosen = crate::machine::RepositorySettings::default();
    chosen.labels.status = Some(true);
    chosen.validation.commands = Some(vec![crate::machine::ValidationCommand::Shell(
        "make check".into(),
    )]);
    let decision = started_with(RepositorySettingsRead::Valid {
        settings: chosen.clone(),
    });
    assert_eq!(decision.next.phase, Phase::Implement);
    assert_eq!(decision.next.repository_settings, chosen);
    assert!(decision.next.settings.status_labels);
    assert!(
        decision
            .effects
            .iter()
            .any(|e| e.kind() == EffectKind::SetLabels)
    );
}

#[test]
fn unusable_repository_settings_block_the_run_with_the_reason_and_unblock_is_refused() {
    let decision = started_with(RepositorySettingsRead::Invalid {
        reason: "unknown key `x` in `(file)`".into(),
    });
    assert_eq!(decision.next.phase, Phase::Blocked);
    let blocked = decision.next.blocked.clone().expect("blocked");
    assert_eq!(blocked.from, Phase::Initializing);
    assert!(
        blocked.reason.contains("unknown key `x`"),
        "{}",
        blocked.reason
    );
    let mut run = Run {
        state: decision.next.clone(),
        last: decision,
    };
    let refusal = run.refuse(command(OperatorRequest::Unblock {
        reason: "fixed it".into(),
        facts: Box::new(facts(None)),
    }));
    assert!(
        matches!(refusal, Refusal::Unblock(UnblockRefusal::NeverStarted)),
        "{refusal:?}"
    );
}
