//! FIX and UPDATE_EPIC results: exact finding coverage, commit and follow-up
//! rules, the roadmap requirement and the re-request's closed field set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::agents::result::HandedOverFollowUp;
use autoforge::agents::result::{
    BLOCK_END, BLOCK_START, CapturedOutput, CrossCheckError, FixObservations, Observations,
    ReRequest, ResultError, UpdateEpicObservations, cross_check, parse_result,
    parse_update_epic_rerequest,
};
use autoforge::machine::{AgentPhase, AgentResult, PhaseResult, ResolutionKind};
use autoforge::publish::{IssueRef, PolicyViolation};
use serde_json::{Value, json};

const REVIEWED: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const NEW_HEAD: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const MIDDLE: &str = "cccccccccccccccccccccccccccccccccccccccc";
const RATIONALE: &str = "The limit is enforced by the caller in src/api.rs, so no check is needed.";

fn captured(value: &Value) -> CapturedOutput {
    CapturedOutput::complete(format!("{BLOCK_START}\n{value}\n{BLOCK_END}"))
}

fn issue(number: u64) -> IssueRef {
    IssueRef {
        owner: "acme".into(),
        repo: "widgets".into(),
        number: autoforge_journal::testing::issue(number),
    }
}

fn fix_result(resolutions: Value, head: &str) -> Value {
    json!({
        "phase": "FIX",
        "status": "success",
        "previous_head_sha": REVIEWED,
        "head_sha": head,
        "resolutions": resolutions
    })
}

fn fix_observations(head: &str) -> FixObservations {
    FixObservations {
        run_issue: issue(12),
        round: 2,
        reviewed_head_sha: autoforge_journal::testing::sha(REVIEWED),
        worktree_head: autoforge_journal::testing::sha(head),
        head_descends_from_reviewed: true,
        open_finding_ids: vec!["R2-F1".into(), "R2-F2".into()],
        new_commits: vec![
            autoforge_journal::testing::sha(MIDDLE),
            autoforge_journal::testing::sha(NEW_HEAD),
        ],
        handed_over_follow_ups: vec![HandedOverFollowUp {
            url: "https://github.com/acme/widgets/issues/40".into(),
            for_finding: None,
        }],
    }
}

fn check_fix(
    resolutions: Value,
    head: &str,
    observed: FixObservations,
) -> Result<AgentResult, ResultError> {
    let result = parse_result(AgentPhase::Fix, &captured(&fix_result(resolutions, head)))?;
    cross_check(&result, &Observations::Fix(observed))
}

#[test]
fn a_complete_fix_result_parses_into_typed_resolutions() {
    let resolutions = json!([
        {"finding_id": "R2-F1", "resolution": "fixed", "commit_sha": MIDDLE},
        {"finding_id": "R2-F2", "resolution": "follow_up_created",
         "follow_up_issue": {"title": "Speed up the scan", "body": "Out of scope here."}}
    ]);
    let parsed = parse_result(
        AgentPhase::Fix,
        &captured(&fix_result(resolutions, NEW_HEAD)),
    )
    .unwrap();
    let result =
        cross_check(&parsed, &Observations::Fix(fix_observations(NEW_HEAD))).expect("consistent");
    let AgentResult::Success {
        result: PhaseResult::Fix(fix),
    } = &result
    else {
        panic!("wrong variant");
    };
    assert!(matches!(
        fix.resolutions[1].kind,
        ResolutionKind::FollowUpNew { .. }
    ));
}

#[test]
fn a_missing_resolution_for_one_finding_is_refused() {
    let resolutions = json!([{"finding_id": "R2-F1", "resolution": "fixed"}]);
    assert_eq!(
        check_fix(resolutions, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::MissingResolution { id: "R2-F2".into() })
    );
}

#[test]
fn a_duplicate_or_unknown_resolution_is_refused() {
    let dup = json!([
        {"finding_id": "R2-F1", "resolution": "fixed"},
        {"finding_id": "R2-F1", "resolution": "fixed"}
    ]);
    assert!(matches!(
        check_fix(dup, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::DuplicateId { .. })
    ));
    let unknown = json!([{"finding_id": "R2-F9", "resolution": "fixed"}]);
    assert!(matches!(
        check_fix(unknown, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::UnknownFinding { index: 0, .. })
    ));
}

#[test]
fn fixed_requires_that_head_moved_and_a_named_commit_is_new() {
    let resolutions = json!([
        {"finding_id": "R2-F1", "resolution": "fixed"},
        {"finding_id": "R2-F2", "resolution": "no_change_with_rationale", "rationale": RATIONALE}
    ]);
    assert!(matches!(
        check_fix(resolutions, REVIEWED, fix_observations(REVIEWED)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FixedWithoutCommit { index: 0, .. })
    ));
    let old_commit = json!([
        {"finding_id": "R2-F1", "resolution": "fixed", "commit_sha": REVIEWED},
        {"finding_id": "R2-F2", "resolution": "no_change_with_rationale", "rationale": RATIONALE}
    ]);
    assert!(matches!(
        check_fix(old_commit, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::CommitNotNew { index: 0, .. })
    ));
}

#[test]
fn a_head_that_does_not_descend_from_the_reviewed_head_is_refused() {
    let resolutions = json!([
        {"finding_id": "R2-F1", "resolution": "fixed"},
        {"finding_id": "R2-F2", "resolution": "fixed"}
    ]);
    let mut observed = fix_observations(NEW_HEAD);
    observed.head_descends_from_reviewed = false;
    assert!(matches!(
        check_fix(resolutions, NEW_HEAD, observed).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::NotADescendant { .. })
    ));
}

#[test]
fn resolution_ids_of_another_round_are_refused() {
    let resolutions = json!([{"finding_id": "R1-F1", "resolution": "fixed"}]);
    assert!(matches!(
        check_fix(resolutions, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FindingOfAnotherRound {
            index: 0,
            round: 2,
            ..
        })
    ));
}

#[test]
fn follow_up_urls_must_be_listed_and_never_the_runs_issue() {
    let own = json!([
        {"finding_id": "R2-F1", "resolution": "follow_up_created",
         "follow_up_issue_url": "https://github.com/acme/widgets/issues/12"},
        {"finding_id": "R2-F2", "resolution": "fixed"}
    ]);
    assert!(matches!(
        check_fix(own, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FollowUpIsRunIssue { .. })
    ));
    let unlisted = json!([
        {"finding_id": "R2-F1", "resolution": "follow_up_created",
         "follow_up_issue_url": "https://github.com/acme/widgets/issues/41"},
        {"finding_id": "R2-F2", "resolution": "fixed"}
    ]);
    assert!(matches!(
        check_fix(unlisted, NEW_HEAD, fix_observations(NEW_HEAD)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FollowUpNotListed { .. })
    ));
    let listed = json!([
        {"finding_id": "R2-F1", "resolution": "follow_up_created",
         "follow_up_issue_url": "https://github.com/Acme/Widgets/issues/40"},
        {"finding_id": "R2-F2", "resolution": "fixed"}
    ]);
    check_fix(listed, NEW_HEAD, fix_observations(NEW_HEAD)).expect("listed issue is accepted");
}

#[test]
fn a_finding_with_an_existing_follow_up_must_be_deferred_to_it() {
    let mut observed = fix_observations(NEW_HEAD);
    observed.handed_over_follow_ups[0].for_finding = Some("R2-F2".into());
    let resolutions = json!([
        {"finding_id": "R2-F1", "resolution": "fixed"},
        {"finding_id": "R2-F2", "resolution": "fixed"}
    ]);
    assert!(matches!(
        check_fix(resolutions, NEW_HEAD, observed).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::FollowUpMustBeReused { index: 1, .. })
    ));
}

#[test]
fn inconsistent_resolution_fields_are_refused_by_the_schema() {
    let short = json!([{"finding_id": "R2-F1", "resolution": "no_change_with_rationale", "rationale": "no"}]);
    let both = json!([{"finding_id": "R2-F1", "resolution": "follow_up_created",
        "follow_up_issue_url": "https://github.com/acme/widgets/issues/40",
        "follow_up_issue": {"title": "t", "body": "b"}}]);
    let fixed_with_url = json!([{"finding_id": "R2-F1", "resolution": "fixed",
        "follow_up_issue_url": "https://github.com/acme/widgets/issues/40"}]);
    for resolutions in [short, both, fixed_with_url] {
        let err = parse_result(
            AgentPhase::Fix,
            &captured(&fix_result(resolutions, NEW_HEAD)),
        )
        .unwrap_err();
        assert!(matches!(err, ResultError::Schema { .. }), "{err}");
    }
}

fn epic_result(progress: &str, roadmap: Value, next: Value) -> Value {
    json!({
        "phase": "UPDATE_EPIC",
        "status": "success",
        "progress": progress,
        "roadmap_section": roadmap,
        "next_issue_url": next
    })
}

fn epic_observations(due: bool) -> Observations {
    Observations::UpdateEpic(UpdateEpicObservations {
        epic: issue(1),
        finished_issue: issue(12),
        roadmap_due: due,
        merges_pending: true,
    })
}

#[test]
fn progress_may_not_contain_any_url() {
    let value = epic_result(
        "Merged `https://x.test/pr` today.",
        Value::Null,
        json!(null),
    );
    let err = parse_result(AgentPhase::UpdateEpic, &captured(&value)).unwrap_err();
    assert!(
        matches!(&err, ResultError::Policy(PolicyViolation::Url { field, .. }) if field == "progress"),
        "{err}"
    );
}

#[test]
fn a_due_roadmap_section_is_required() {
    let value = epic_result(
        "Merged #13.",
        Value::Null,
        json!("https://github.com/acme/widgets/issues/14"),
    );
    let result = parse_result(AgentPhase::UpdateEpic, &captured(&value)).unwrap();
    assert_eq!(
        cross_check(&result, &epic_observations(true)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::RoadmapRequired)
    );
    cross_check(&result, &epic_observations(false)).expect("not due");
}

#[test]
fn completing_the_epic_with_pending_merges_requires_the_final_roadmap() {
    let value = epic_result("All done: #13.", json!(""), Value::Null);
    let result = parse_result(AgentPhase::UpdateEpic, &captured(&value)).unwrap();
    assert_eq!(
        cross_check(&result, &epic_observations(false)).unwrap_err(),
        ResultError::CrossCheck(CrossCheckError::RoadmapRequired)
    );
}

#[test]
fn a_well_formed_next_issue_is_left_to_the_machine_to_verify() {
    // Another repository's issue, the EPIC itself, the finished issue:
    // well-formed picks the machine rejects (asked again once, then BLOCKED).
    for url in [
        "https://github.com/other/widgets/issues/3",
        "https://github.com/acme/widgets/issues/1",
        "https://github.com/acme/widgets/issues/12",
    ] {
        let value = epic_result("Merged #13.", json!("- [x] #12"), json!(url));
        let result = parse_result(AgentPhase::UpdateEpic, &captured(&value)).unwrap();
        cross_check(&result, &epic_observations(true)).expect(url);
    }
}

#[test]
fn a_rerequest_refuses_progress_and_unasked_fields() {
    let asked = ReRequest {
        next_issue: true,
        roadmap: false,
    };
    let with_progress = json!({"phase": "UPDATE_EPIC", "status": "success",
        "progress": null, "next_issue_url": null});
    assert_eq!(
        parse_update_epic_rerequest(&captured(&with_progress), asked).unwrap_err(),
        ResultError::UnaskedFields { count: 1 }
    );
    let missing = json!({"phase": "UPDATE_EPIC", "status": "success"});
    assert_eq!(
        parse_update_epic_rerequest(&captured(&missing), asked).unwrap_err(),
        ResultError::MissingField {
            field: "next_issue_url"
        }
    );
    let ok = json!({"phase": "UPDATE_EPIC", "status": "success",
        "next_issue_url": "https://github.com/acme/widgets/issues/14"});
    let parsed = parse_update_epic_rerequest(&captured(&ok), asked).unwrap();
    // A re-request that does not ask for the roadmap cannot require it.
    let AgentResult::Success {
        result: PhaseResult::UpdateEpic(result),
    } = cross_check(&parsed, &epic_observations(false)).unwrap()
    else {
        panic!("wrong variant");
    };
    assert_eq!(result.progress, None);
    assert_eq!(
        result.next_issue,
        Some(autoforge_journal::testing::issue(14))
    );
    assert_eq!(
        result.next_issue_repository.as_deref(),
        Some("acme/widgets")
    );
}

#[test]
fn a_blank_progress_report_is_refused_not_dropped() {
    // The progress comment is posted once per merge; whitespace must not
    // turn the required report into a silently skipped one.
    let value = epic_result(" \n\t", Value::Null, Value::Null);
    let err = parse_result(AgentPhase::UpdateEpic, &captured(&value)).unwrap_err();
    // The schema says so first; the code's own blank check stays behind it.
    assert!(
        matches!(&err, ResultError::Schema { violations }
            if violations.iter().any(|v| v.path == "/progress" && v.keyword == "pattern")),
        "{err}"
    );
}
