//! Optional status labels (SPEC §15, `status_labels = true`): the run's
//! issue carries exactly one of `autoforge:running`, `autoforge:blocked`,
//! `autoforge:ready` or `autoforge:done`, and none once the run failed or
//! was stopped. Only a phase change that changes the label writes anything.

use super::decision::EffectIntent;
use super::phase::Phase;
use autoforge_journal::IssueNumber;

/// Every label this module manages, so a change removes the others.
pub const STATUS_LABELS: [&str; 4] = [
    "autoforge:running",
    "autoforge:blocked",
    "autoforge:ready",
    "autoforge:done",
];

/// The label a phase shows; `None` before the run started and after it
/// failed or was stopped (a finished-but-not-done run carries no claim).
pub fn status_label(phase: Phase) -> Option<&'static str> {
    match phase {
        Phase::Plan
        | Phase::Implement
        | Phase::Review
        | Phase::Fix
        | Phase::Merge
        | Phase::UpdateEpic => Some("autoforge:running"),
        Phase::Blocked => Some("autoforge:blocked"),
        Phase::ReadyForMerge => Some("autoforge:ready"),
        Phase::Done => Some("autoforge:done"),
        Phase::Initializing | Phase::Failed | Phase::Stopped => None,
    }
}

/// The `set_labels` intent for a change from `from` to `to`, or `None`
/// when both phases show the same label.
pub fn label_change(issue: IssueNumber, from: Phase, to: Phase) -> Option<EffectIntent> {
    let (before, after) = (status_label(from), status_label(to));
    (before != after).then(|| set_exactly(issue, after))
}

/// The writes when an EPIC run leaves `finished` for `next` (now in
/// `phase`): the finished issue is done, the next one shows its phase.
pub fn issue_switch(finished: IssueNumber, next: IssueNumber, phase: Phase) -> Vec<EffectIntent> {
    vec![
        set_exactly(finished, status_label(Phase::Done)),
        set_exactly(next, status_label(phase)),
    ]
}

/// `label` present (if any) and every other status label absent.
fn set_exactly(issue: IssueNumber, label: Option<&str>) -> EffectIntent {
    let add: Vec<String> = label.into_iter().map(str::to_owned).collect();
    let remove = STATUS_LABELS
        .iter()
        .filter(|other| Some(**other) != label)
        .map(|other| (*other).to_owned())
        .collect();
    EffectIntent::SetLabels { issue, add, remove }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_between_running_phases_changes_no_label() {
        assert_eq!(
            label_change(
                autoforge_journal::testing::issue(3),
                Phase::Implement,
                Phase::Review
            ),
            None
        );
        assert_eq!(
            label_change(
                autoforge_journal::testing::issue(3),
                Phase::Review,
                Phase::Fix
            ),
            None
        );
    }

    #[test]
    fn blocking_swaps_running_for_blocked_and_removes_every_other_status_label() {
        let Some(EffectIntent::SetLabels { issue, add, remove }) = label_change(
            autoforge_journal::testing::issue(3),
            Phase::Review,
            Phase::Blocked,
        ) else {
            panic!("blocking changes the label");
        };
        assert_eq!(issue, autoforge_journal::testing::issue(3));
        assert_eq!(add, ["autoforge:blocked"]);
        assert_eq!(
            remove,
            ["autoforge:running", "autoforge:ready", "autoforge:done"]
        );
    }

    #[test]
    fn moving_to_the_next_issue_marks_the_finished_one_done() {
        let writes = issue_switch(
            autoforge_journal::testing::issue(3),
            autoforge_journal::testing::issue(8),
            Phase::Implement,
        );
        let EffectIntent::SetLabels { issue, add, .. } = &writes[0] else {
            panic!("{writes:?}");
        };
        assert_eq!(
            (*issue, add.as_slice()),
            (
                autoforge_journal::testing::issue(3),
                ["autoforge:done".to_owned()].as_slice()
            )
        );
        let EffectIntent::SetLabels { issue, add, .. } = &writes[1] else {
            panic!("{writes:?}");
        };
        assert_eq!(
            (*issue, add.as_slice()),
            (
                autoforge_journal::testing::issue(8),
                ["autoforge:running".to_owned()].as_slice()
            )
        );
    }

    #[test]
    fn stopping_removes_every_status_label() {
        let Some(EffectIntent::SetLabels { add, remove, .. }) = label_change(
            autoforge_journal::testing::issue(3),
            Phase::Implement,
            Phase::Stopped,
        ) else {
            panic!("stopping clears the label");
        };
        assert!(add.is_empty());
        assert_eq!(remove.len(), STATUS_LABELS.len());
    }
}
