//! Unit tests of the sighting planners and keys.

#![allow(clippy::unwrap_used)]
use super::decisions::{plan_commands, plan_human_review, plan_removal};
use super::keys::predates;
use super::*;
use crate::commands::{
    ActorKind, AllowedBy, OperatorDecision, Permission, RefusalReason, parse_commands,
};
use crate::intake::entries::{ChangeEntries, Entry};
use crate::intake::signal::RunSignal;
use autoforge_journal::RunId;

fn alice() -> Actor {
    Actor {
        login: "alice".into(),
        kind: ActorKind::User,
    }
}

#[test]
fn accepted_commands_become_signals_and_every_command_a_decision() {
    let commands = parse_commands("/autoforge retry\n/autoforge frobnicate\n");
    let decision = OperatorDecision::Allowed {
        by: AllowedBy::Permission(Permission::Admin),
    };
    let change = plan_commands(
        "k".into(),
        RunId(1),
        autoforge_journal::testing::issue(4),
        9,
        &alice(),
        &decision,
        &commands,
    )
    .unwrap();
    let decisions: Vec<_> = change
        .entries
        .iter()
        .filter_map(|s| match s {
            Entry::Decision(d) => Some((d.command.as_str(), d.accepted)),
            _ => None,
        })
        .collect();
    assert_eq!(decisions, [("retry", true), ("malformed", false)]);
    let signals: Vec<String> = change
        .entries
        .iter()
        .filter_map(|s| match s {
            Entry::Signal { signal, .. } => Some(signal.to_json()["kind"].to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(signals, ["\"command\"", "\"command_refused\""]);
}

#[test]
fn a_refused_actor_gets_a_decision_and_a_refusal_to_answer_but_no_command() {
    let commands = parse_commands("/autoforge stop\n");
    let decision = OperatorDecision::Refused {
        reason: RefusalReason::BotAccount,
    };
    let change = plan_commands(
        "k".into(),
        RunId(1),
        autoforge_journal::testing::issue(4),
        9,
        &alice(),
        &decision,
        &commands,
    )
    .unwrap();
    assert_eq!(change.entries.len(), 2);
    assert!(matches!(&change.entries[0], Entry::Decision(d) if !d.accepted));
    let Entry::Signal { signal, .. } = &change.entries[1] else {
        panic!("the refusal is queued for the run to answer");
    };
    assert!(
        matches!(signal, RunSignal::CommandRefused { verb, comment_id: 9, on_issue, .. } if verb == "stop" && on_issue.get() == 4),
        "{signal:?}"
    );
}

fn signals_of(change: &ChangeEntries) -> Vec<&RunSignal> {
    change
        .entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::Signal { signal, .. } => Some(signal),
            _ => None,
        })
        .collect()
}

#[test]
fn an_operators_label_removal_stops_the_run_once_per_run() {
    let allowed = OperatorDecision::Allowed {
        by: AllowedBy::Permission(Permission::Maintain),
    };
    let change = plan_removal(
        "trigger-removed:a/b#4".into(),
        RunId(3),
        autoforge_journal::testing::issue(4),
        Some(&alice()),
        "event-9",
        Some(allowed),
    )
    .unwrap();
    assert_eq!(change.key, "trigger-removed:a/b#4:run-3");
    assert!(matches!(
        signals_of(&change)[..],
        [RunSignal::TriggerLabelRemoved { issue, by }] if by == "alice" && issue.get() == 4
    ));
}

#[test]
fn a_label_removal_by_someone_else_is_answered_once_per_removal_and_stops_nothing() {
    let refused = OperatorDecision::Refused {
        reason: RefusalReason::InsufficientPermission {
            login: "alice".into(),
            actual: Permission::Triage,
            required: Permission::Write,
        },
    };
    let change = plan_removal(
        "trigger-removed:a/b#4".into(),
        RunId(3),
        autoforge_journal::testing::issue(4),
        Some(&alice()),
        "event-9",
        Some(refused),
    )
    .unwrap();
    assert_eq!(change.key, "trigger-removed:a/b#4:event-9");
    let signals = signals_of(&change);
    assert!(
        matches!(
            signals[..],
            [RunSignal::TriggerRemovalRefused { issue, by: Some(by), removal, reason }]
                if issue.get() == 4 && by == "alice" && removal == "event-9" && reason.contains("`triage`")
        ),
        "{signals:?}"
    );
    assert!(!signals[0].stops_the_run());
}

#[test]
fn a_removal_nobody_is_named_for_does_not_count() {
    let change = plan_removal(
        "k".into(),
        RunId(3),
        autoforge_journal::testing::issue(4),
        None,
        "unlabeled-run-3",
        None,
    )
    .unwrap();
    assert!(matches!(
        signals_of(&change)[..],
        [RunSignal::TriggerRemovalRefused { by: None, .. }]
    ));
}

#[test]
fn the_controllers_own_label_removal_is_recorded_without_an_answer() {
    let own = OperatorDecision::Refused {
        reason: RefusalReason::TheAppItself,
    };
    let change = plan_removal(
        "k".into(),
        RunId(3),
        autoforge_journal::testing::issue(4),
        Some(&alice()),
        "event-9",
        Some(own),
    )
    .unwrap();
    assert!(change.entries.is_empty());
}

#[test]
fn a_removal_is_ordered_against_the_runs_labelling_by_event_id() {
    let start = "trigger:a/b#4:event-120";
    assert!(predates("event-119", start));
    assert!(!predates("event-121", start));
    // Known only by a delivery: no order, so it counts as it always did.
    assert!(!predates("delivery-abc", start));
    assert!(!predates("event-119", "trigger:a/b#4:delivery-abc"));
}

#[test]
fn a_review_requesting_changes_has_one_key_however_often_it_is_delivered() {
    let sighting = |delivery: &str| Sighting::PrReviewed {
        repository: "a/b".into(),
        pr: autoforge_journal::testing::pull(3),
        head_sha: "abc".into(),
        delivery: delivery.into(),
        changes_requested: Some(ReviewBy {
            review_id: 77,
            author: alice(),
        }),
    };
    assert_eq!(sighting("d-1").key(), sighting("d-2").key());
    assert_eq!(sighting("d-1").key(), "review:a/b#3:review-77");
}

#[test]
fn only_an_operators_review_signals_a_human_round() {
    let by = ReviewBy {
        review_id: 77,
        author: alice(),
    };
    let pr = autoforge_journal::testing::pull(3);
    let base = || ChangeEntries::new("k", "review");
    let allowed = OperatorDecision::Allowed {
        by: AllowedBy::Permission(Permission::Write),
    };
    let refused = OperatorDecision::Refused {
        reason: RefusalReason::InsufficientPermission {
            login: "alice".into(),
            actual: Permission::Read,
            required: Permission::Write,
        },
    };
    let rounds = |change: &ChangeEntries| {
        signals_of(change)
            .iter()
            .filter(|s| matches!(s, RunSignal::HumanReview { review_id: 77, .. }))
            .count()
    };
    assert_eq!(
        rounds(&plan_human_review(base(), RunId(1), pr, &by, &allowed)),
        1
    );
    let change = plan_human_review(base(), RunId(1), pr, &by, &refused);
    assert_eq!(rounds(&change), 0);
    assert!(change.entries.iter().any(|e| matches!(
        e,
        Entry::Audit { kind, detail, .. }
            if kind == "human_review_decided" && detail["accepted"] == false
    )));
}

#[test]
fn one_comment_version_has_one_key_whoever_sees_it() {
    let sighting = Sighting::Commands {
        repository: "a/b".into(),
        issue: autoforge_journal::testing::issue(1),
        comment_id: 5,
        updated_at: "2026-01-01T00:00:00Z".into(),
        body_digest: body_digest("/autoforge retry"),
        actor: alice(),
        commands: vec![],
    };
    assert_eq!(
        sighting.key(),
        comment_key(
            "a/b",
            5,
            "2026-01-01T00:00:00Z",
            &body_digest("/autoforge retry")
        )
    );
    assert_ne!(body_digest("a"), body_digest("b"));
}
