//! UPDATE_EPIC rules: progress once, roadmap cadence, next-issue checks.

use super::*;

const EPIC: IssueNumber = testing::issue(3);

fn merged(head: &CommitSha) -> PrFacts {
    let mut pr = pr_at(head, &sha(1));
    pr.state = PrState::Merged;
    pr
}

fn to_update_epic(update_every: u32) -> Run {
    let settings = RunSettings {
        epic_update_every: update_every,
        ..RunSettings::default()
    };
    let mut run = Run::to_ready(settings, Some(EPIC));
    run.github(facts(Some(merged(&sha(2)))));
    assert_eq!(run.state.phase, Phase::UpdateEpic);
    run
}

fn epic_result(
    progress: Option<&str>,
    roadmap: Option<&str>,
    next: Option<IssueNumber>,
) -> PhaseResult {
    PhaseResult::UpdateEpic(EpicResult {
        progress: progress.map(str::to_owned),
        roadmap_section: roadmap.map(str::to_owned),
        next_issue: next,
        next_issue_repository: None,
    })
}

fn next_issue(issue: IssueNumber, open: bool) -> Event {
    Event::NextIssue(NextIssueFacts {
        issue,
        repository: "Acme/Widgets".into(),
        open,
        base_sha: sha(50),
        branch_head: None,
        issue_text: None,
        epic_issues: vec![
            autoforge_journal::testing::issue(2),
            issue,
            autoforge_journal::testing::issue(9),
        ],
    })
}

#[test]
fn update_posts_progress_and_splices_when_due_then_implements_the_next_issue() {
    let mut run = to_update_epic(1);
    let LaunchInputs::UpdateEpic {
        roadmap_due,
        want_progress,
        ..
    } = run.launch().inputs
    else {
        panic!("epic inputs")
    };
    assert!(roadmap_due && want_progress);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(
        kinds,
        vec![EffectKind::PostComment, EffectKind::SpliceEpicRoadmap]
    );
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    assert_eq!(
        run.state.epic.as_ref().expect("epic").merges_since_roadmap,
        0
    );
    run.apply(next_issue(autoforge_journal::testing::issue(8), true));
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(
        (run.state.issue, run.state.branch.as_str(), run.state.pr),
        (testing::issue(8), "autoforge/8", None)
    );
    assert_eq!(run.state.review, ReviewState::default());
    assert_eq!(run.state.base_sha, Some(sha(50)));
}

#[test]
fn with_status_labels_the_finished_issue_is_done_and_the_next_one_running() {
    let settings = RunSettings {
        status_labels: true,
        ..RunSettings::default()
    };
    let mut run = Run::to_ready(settings, Some(EPIC));
    run.github(facts(Some(merged(&sha(2)))));
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    run.apply(next_issue(autoforge_journal::testing::issue(8), true));
    assert_eq!(run.state.issue, autoforge_journal::testing::issue(8));
    let labels: Vec<(IssueNumber, Vec<String>)> = run
        .last
        .effects
        .iter()
        .filter_map(|e| match e {
            EffectIntent::SetLabels { issue, add, .. } => Some((*issue, add.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        vec![
            (ISSUE, vec!["autoforge:done".to_owned()]),
            (
                autoforge_journal::testing::issue(8),
                vec!["autoforge:running".to_owned()]
            ),
        ]
    );
}

#[test]
fn moving_on_tells_the_finished_issues_status_comment_where_the_run_went() {
    let mut run = Run::to_ready(RunSettings::default(), Some(EPIC));
    run.github(facts(Some(merged(&sha(2)))));
    let pr = run.state.pr.expect("the merged PR");
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(testing::issue(8)),
    ));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    run.apply(next_issue(testing::issue(8), true));
    let statuses: Vec<(IssueNumber, Option<crate::machine::IssueFinished>)> = run
        .last
        .effects
        .iter()
        .filter_map(|e| match e {
            EffectIntent::EditStatusComment { issue, status, .. } => {
                Some((*issue, status.finished.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses[0],
        (
            ISSUE,
            Some(crate::machine::IssueFinished {
                epic: EPIC,
                merged_in: Some(pr),
                next_issue: testing::issue(8),
            })
        )
    );
    assert!(
        statuses[1..]
            .iter()
            .all(|(issue, finished)| *issue == testing::issue(8) && finished.is_none()),
        "{statuses:?}"
    );
}

#[test]
fn merge_counter_resets_only_after_the_splice_read_back() {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![EffectReadBack::Comment { url: "u".into() }]);
    assert_eq!(
        run.state.epic.as_ref().expect("epic").merges_since_roadmap,
        1
    );
}

#[test]
fn roadmap_is_not_spliced_before_it_is_due() {
    let mut run = to_update_epic(2);
    run.succeed(epic_result(
        Some("progress"),
        Some("ignored"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(kinds, vec![EffectKind::PostComment]);
}

#[test]
fn completion_always_splices_with_merges_uncounted() {
    let mut run = to_update_epic(5);
    run.succeed(epic_result(Some("progress"), None, None));
    assert!(
        run.launch().correction_of.is_some(),
        "a missing due roadmap is malformed"
    );
    run.succeed(epic_result(Some("progress"), Some("final"), None));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    assert_eq!(run.state.phase, Phase::Done);
}

#[test]
fn rerequest_is_re_requested_once_without_progress() {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    run.apply(next_issue(autoforge_journal::testing::issue(8), false));
    assert_eq!(run.state.phase, Phase::UpdateEpic);
    let LaunchInputs::UpdateEpic {
        want_progress,
        rerequest,
        ..
    } = run.launch().inputs
    else {
        panic!("epic inputs")
    };
    assert!(!want_progress);
    assert!(rerequest.expect("reason").contains("not open"));
    run.succeed(epic_result(
        None,
        None,
        Some(autoforge_journal::testing::issue(9)),
    ));
    assert!(
        run.last.effects.is_empty(),
        "the progress comment is never reposted"
    );
}

#[test]
fn second_rerequest_blocks() {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(Some("progress"), Some("roadmap"), Some(EPIC)));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    assert_eq!(
        run.state.phase,
        Phase::UpdateEpic,
        "picking the EPIC is rejected without a read"
    );
    run.succeed(epic_result(None, None, Some(ISSUE)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn pick_in_another_repository_is_rejected() {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![EffectReadBack::RoadmapSpliced]);
    run.apply(Event::NextIssue(NextIssueFacts {
        issue: autoforge_journal::testing::issue(8),
        repository: "other/repo".into(),
        open: true,
        base_sha: sha(50),
        branch_head: None,
        issue_text: None,
        epic_issues: vec![autoforge_journal::testing::issue(8)],
    }));
    assert_eq!(run.state.counters.next_issue_rejections, 1);
}

#[test]
fn a_pick_named_by_another_repositorys_url_is_rejected_without_a_read_and_twice_blocks() {
    let foreign = |issue| {
        PhaseResult::UpdateEpic(EpicResult {
            progress: Some("progress".into()),
            roadmap_section: Some("roadmap".into()),
            next_issue: Some(issue),
            next_issue_repository: Some("other/gadgets".into()),
        })
    };
    let mut run = to_update_epic(1);
    run.succeed(foreign(autoforge_journal::testing::issue(3)));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    assert_eq!(run.state.phase, Phase::UpdateEpic, "asked again");
    assert_eq!(run.state.counters.next_issue_rejections, 1);
    let LaunchInputs::UpdateEpic { rerequest, .. } = run.launch().inputs else {
        panic!("epic inputs")
    };
    assert!(rerequest.expect("reason").contains("other/gadgets#3"));
    run.succeed(foreign(autoforge_journal::testing::issue(3)));
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn merge_already_counted_is_not_counted_again() {
    let settings = RunSettings {
        epic_update_every: 3,
        ..RunSettings::default()
    };
    let mut run = Run::to_ready(settings, Some(EPIC));
    // As after a crash between counting and persisting the next step.
    run.state.merged_prs = vec![PR];
    run.github(facts(Some(merged(&sha(2)))));
    assert_eq!(run.state.phase, Phase::UpdateEpic);
    assert_eq!(run.state.merged_prs, vec![PR]);
    assert_eq!(
        run.state.epic.as_ref().expect("epic").merges_since_roadmap,
        0
    );
}

#[test]
fn voided_roadmap_section_is_re_requested_without_progress() {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapVoided,
    ]);
    assert_eq!(
        run.state.epic.as_ref().expect("epic").merges_since_roadmap,
        1,
        "nothing was spliced"
    );
    let LaunchInputs::UpdateEpic {
        want_progress,
        roadmap_due,
        rerequest,
        ..
    } = run.launch().inputs
    else {
        panic!("epic inputs")
    };
    assert!(!want_progress && roadmap_due && rerequest.is_some());
    run.succeed(epic_result(
        None,
        Some("roadmap again"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(kinds, vec![EffectKind::SpliceEpicRoadmap]);
}

fn pick_with_members(issue: IssueNumber, members: Vec<IssueNumber>) -> Event {
    Event::NextIssue(NextIssueFacts {
        issue,
        repository: "acme/widgets".into(),
        open: true,
        base_sha: sha(50),
        branch_head: None,
        issue_text: None,
        epic_issues: members,
    })
}

/// UPDATE_EPIC with the progress and roadmap written and issue 8 picked.
fn picked_eight() -> Run {
    let mut run = to_update_epic(1);
    run.succeed(epic_result(
        Some("progress"),
        Some("roadmap"),
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.observed(vec![
        EffectReadBack::Comment { url: "u".into() },
        EffectReadBack::RoadmapSpliced,
    ]);
    assert_eq!(
        run.state.awaiting,
        Awaiting::NextIssueCheck {
            issue: autoforge_journal::testing::issue(8)
        }
    );
    run
}

#[test]
fn an_open_pick_outside_the_epic_is_rejected_and_the_agent_told_the_epics_issues() {
    let mut run = picked_eight();
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(8),
        vec![
            ISSUE,
            autoforge_journal::testing::issue(9),
            autoforge_journal::testing::issue(10),
        ],
    ));

    assert_eq!(run.state.phase, Phase::UpdateEpic);
    assert_eq!(
        run.state.issue, ISSUE,
        "no switch to an issue outside the EPIC"
    );
    assert_eq!(run.state.counters.next_issue_rejections, 1);
    let LaunchInputs::UpdateEpic { rerequest, .. } = run.launch().inputs else {
        panic!("epic inputs")
    };
    assert_eq!(
        rerequest.as_deref(),
        Some("#8 is not one of EPIC #3's issues; its issues are #7, #9, #10")
    );
    run.succeed(epic_result(
        None,
        None,
        Some(autoforge_journal::testing::issue(9)),
    ));
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(9),
        vec![
            ISSUE,
            autoforge_journal::testing::issue(9),
            autoforge_journal::testing::issue(10),
        ],
    ));
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(
        run.state.issue,
        autoforge_journal::testing::issue(9),
        "the member the agent picked next"
    );
}

#[test]
fn an_open_pick_among_the_epics_issues_is_accepted() {
    let mut run = picked_eight();
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(8),
        vec![ISSUE, autoforge_journal::testing::issue(8)],
    ));
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(run.state.issue, autoforge_journal::testing::issue(8));
    assert_eq!(run.state.counters.next_issue_rejections, 0);
}

#[test]
fn picks_outside_the_epic_twice_block_the_run() {
    let mut run = picked_eight();
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(8),
        vec![ISSUE],
    ));
    run.succeed(epic_result(
        None,
        None,
        Some(autoforge_journal::testing::issue(8)),
    ));
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(8),
        vec![ISSUE],
    ));
    assert_eq!(run.state.phase, Phase::Blocked);
    let reason = run.state.blocked.as_ref().expect("blocked").reason.clone();
    assert!(reason.contains("not one of EPIC #3's issues"), "{reason}");
}

#[test]
fn a_long_member_list_is_cut_short_in_the_rejection() {
    let mut run = picked_eight();
    run.apply(pick_with_members(
        autoforge_journal::testing::issue(8),
        (20..35).map(testing::issue).collect(),
    ));
    let LaunchInputs::UpdateEpic { rerequest, .. } = run.launch().inputs else {
        panic!("epic inputs")
    };
    let reason = rerequest.expect("a reason");
    assert!(reason.ends_with("#29, and 5 more"), "{reason}");
}

#[test]
fn a_next_issue_row_journalled_without_members_names_none_and_is_rejected() {
    let old = serde_json::json!({
        "event": "next_issue",
        "issue": 8,
        "repository": "acme/widgets",
        "open": true,
        "base_sha": sha(50),
    });
    let event: Event = serde_json::from_value(old).expect("an old row parses");
    let mut run = picked_eight();
    run.apply(event);
    assert_eq!(run.state.phase, Phase::UpdateEpic, "asked again, not taken");
    assert_eq!(run.state.counters.next_issue_rejections, 1);
}
