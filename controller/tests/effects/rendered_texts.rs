//! The texts the controller writes to GitHub, pinned as snapshots: the
//! review comment, the status comment, command replies, notices, the EPIC progress
//! comment, a follow-up issue's body and the check run's output, each rendered by the product's
//! own function from fixed inputs. A change to any of them shows up as a
//! snapshot diff to review, not as a silent change on every repository.

use autoforge::effects::{
    Answering, answer_text, check_run_text, notice_text, reply_text, status_text,
};
use autoforge::machine::{CheckShows, Classification, Finding, ReviewSections};
use autoforge::machine::{LastValidation, MergeMode, Notice, Phase, Reply, StatusSnapshot};
use autoforge::publish::bodies::{compose_follow_up_body, compose_progress_comment};
use autoforge::publish::{ReviewRender, render_review_comment};

const HEAD: &str = "1111111111111111111111111111111111111111";
const MERGE_BASE: &str = "2222222222222222222222222222222222222222";
const ISSUE_URL: &str = "https://github.com/octo/widgets/issues/3";
const PR_URL: &str = "https://github.com/octo/widgets/pull/7";

fn sections() -> ReviewSections {
    ReviewSections {
        spec: "Meets the issue.".into(),
        standards: "One helper is named after its caller.".into(),
        assessment: "Sound; one rename.".into(),
        observations: "None.".into(),
        verification: "Ran `cargo test`.".into(),
        summary: "One nit, one follow-up.".into(),
    }
}

fn findings() -> Vec<Finding> {
    vec![
        Finding {
            id: "R2-F1".into(),
            classification: Classification::Nit,
            title: "Rename the helper".into(),
            location: "src/count.rs:4".into(),
            required_resolution: "Call it `count_words`.".into(),
        },
        Finding {
            id: "R2-F2".into(),
            classification: Classification::NonBlocked,
            title: "Count words in other scripts".into(),
            location: "src/count.rs:9".into(),
            required_resolution: "Split on Unicode word boundaries.".into(),
        },
    ]
}

fn status(phase: Phase) -> StatusSnapshot {
    StatusSnapshot {
        phase,
        round: 2,
        pr: Some(autoforge_journal::testing::pull(7)),
        blocked_reason: None,
        failure: None,
        waiting_for: "nothing".into(),
        last_validation: Some(LastValidation {
            sha: autoforge_journal::testing::sha(HEAD),
            passed: true,
            failed_index: None,
        }),
        merge_mode: MergeMode::OnCommand,
        blocked_from: None,
        merge_wait: None,
        tokens: 0,
        cost_micros: 0,
        epic: None,
        issue_tokens: 0,
        issue_cost_micros: 0,
        running: None,
        finished: None,
    }
}

#[test]
fn review_comment_with_findings() {
    let findings = findings();
    let sections = sections();
    let text = render_review_comment(&ReviewRender {
        round: 2,
        reviewed_head_sha: HEAD,
        base_ref: "main",
        merge_base_sha: MERGE_BASE,
        needs_fix_round: true,
        findings: &findings,
        sections: &sections,
    })
    .expect("a publishable review comment");
    insta::assert_snapshot!(text);
}

#[test]
fn review_comment_of_a_clean_round() {
    let sections = sections();
    let text = render_review_comment(&ReviewRender {
        round: 3,
        reviewed_head_sha: HEAD,
        base_ref: "main",
        merge_base_sha: MERGE_BASE,
        needs_fix_round: false,
        findings: &[],
        sections: &sections,
    })
    .expect("a publishable review comment");
    insta::assert_snapshot!(text);
}

#[test]
fn status_comment_with_what_the_agents_spent() {
    let mut spent = status(Phase::Review);
    spent.tokens = 1_234_567;
    spent.cost_micros = 4_560_000;
    let text = status_text(&spent).expect("a publishable status");
    insta::assert_snapshot!(text);
}

#[test]
fn status_comment_ready_for_merge() {
    let text = status_text(&status(Phase::ReadyForMerge)).expect("a publishable status");
    insta::assert_snapshot!(text);
}

#[test]
fn status_comment_blocked() {
    let mut blocked = status(Phase::Blocked);
    blocked.blocked_reason = Some("validation failed 3 times in FIX".into());
    blocked.blocked_from = Some(Phase::Fix);
    blocked.last_validation = Some(LastValidation {
        sha: autoforge_journal::testing::sha(HEAD),
        passed: false,
        failed_index: Some(1),
    });
    insta::assert_snapshot!(status_text(&blocked).expect("a publishable status"));
}

/// The status comment of a run the machine itself blocked because its
/// validated candidate changes protected paths (the reason as `decide`
/// words it, not a hand-written one).
#[test]
fn status_comment_blocked_by_a_protected_candidate() {
    use autoforge::machine::{
        AgentOutcome, AgentResult, Event, ImplementResult, PhaseResult, RepositorySettingsRead,
        RunSettings, RunState, decide,
    };
    let settings = RunSettings::default();
    let mut state = RunState::new(
        "run-1",
        autoforge_journal::testing::issue(3),
        settings.clone(),
    );
    let events = [
        Event::Started {
            repository: "octo/widgets".into(),
            issue: autoforge_journal::testing::issue(3),
            epic: None,
            base_branch: "main".into(),
            base_sha: autoforge_journal::testing::sha(MERGE_BASE),
            branch_head: None,
            settings,
            repository_settings: RepositorySettingsRead::default(),
            issue_text: None,
            started_by: None,
        },
        Event::AgentFinished {
            launch: 1,
            outcome: AgentOutcome::Result {
                result: AgentResult::Success {
                    result: PhaseResult::Implement(ImplementResult {
                        head_sha: autoforge_journal::testing::sha(HEAD),
                        pr_title: "Count words".into(),
                        pr_body: "Counts words.".into(),
                        tests: Vec::new(),
                    }),
                },
            },
            tokens: None,
            cost_micros: None,
        },
        Event::ValidationFinished {
            sha: autoforge_journal::testing::sha(HEAD),
            passed: true,
            failed_index: None,
            summary: "every validation command passed".into(),
            protected_paths: vec![
                ".github/workflows/a.yml".into(),
                ".github/workflows/b.yml".into(),
                ".github/workflows/c.yml".into(),
                ".github/workflows/d.yml".into(),
            ],
        },
    ];
    for event in &events {
        let decision = decide(&state, event).expect("a legal decision");
        assert_eq!(decision.refusal, None, "{}", event.name());
        state = decision.next;
    }
    assert_eq!(state.phase, Phase::Blocked);
    let status = StatusSnapshot::of(&state);
    insta::assert_snapshot!(status_text(&status).expect("a publishable status"));
}

#[test]
fn command_replies() {
    let accepted = reply_text(&Reply::Accepted {
        command: "merge".into(),
        detail: "merging the reviewed head".into(),
    })
    .expect("a publishable reply");
    let refused = reply_text(&Reply::Refused {
        command: "merge".into(),
        reason: "the run is not ready for merge".into(),
    })
    .expect("a publishable reply");
    let status = reply_text(&Reply::Status {
        status: status(Phase::Review),
    })
    .expect("a publishable reply");
    insta::assert_snapshot!(format!("{accepted}\n\n---\n\n{refused}\n\n---\n\n{status}"));
}

#[test]
fn label_removal_notices() {
    let named = notice_text(&Notice::LabelRemovalRefused {
        actor: Some("tia".into()),
        reason: "`tia` has `triage` permission; operators need at least `write`".into(),
    })
    .expect("a publishable notice");
    let unknown = notice_text(&Notice::LabelRemovalRefused {
        actor: None,
        reason: "who removed it is not known, so it cannot count as an operator's".into(),
    })
    .expect("a publishable notice");
    insta::assert_snapshot!(format!("{named}\n\n---\n\n{unknown}"));
}

#[test]
fn block_notices() {
    let told = notice_text(&Notice::Blocked {
        operator: "olivia".into(),
        reason: "the agent reported blocked: two wishes contradict each other".into(),
    })
    .expect("a publishable notice");
    // A reason that cannot be published is withheld; a login that is not a
    // person's is not mentioned.
    let withheld = notice_text(&Notice::Blocked {
        operator: "ci[bot]".into(),
        reason: "see @someone at https://example.com".into(),
    })
    .expect("a publishable notice");
    insta::assert_snapshot!(format!("{told}\n\n---\n\n{withheld}"));
}

#[test]
fn answers_outside_a_run() {
    let trigger = answer_text(&Answering::TriggerRefused {
        actor: "tia".into(),
        reason: "`tia` has `triage` permission; operators need at least `write`".into(),
        trigger_label: "autoforge".into(),
    })
    .expect("a publishable answer");
    let no_run = answer_text(&Answering::NoRun {
        commands: vec!["status".into()],
        trigger_label: "autoforge".into(),
    })
    .expect("a publishable answer");
    let refused = answer_text(&Answering::CommandsRefused {
        commands: vec!["stop".into(), "retry".into()],
        reason: "`tia` has `triage` permission; operators need at least `write`".into(),
    })
    .expect("a publishable answer");
    insta::assert_snapshot!(format!("{trigger}\n\n---\n\n{no_run}\n\n---\n\n{refused}"));
}

#[test]
fn status_comment_of_an_issue_the_epic_run_finished() {
    let finished = autoforge::machine::IssueFinished {
        epic: autoforge_journal::testing::issue(1),
        merged_in: Some(autoforge_journal::testing::pull(4)),
        next_issue: autoforge_journal::testing::issue(3),
    };
    let merged = status_text(&StatusSnapshot {
        finished: Some(finished.clone()),
        ..status(Phase::UpdateEpic)
    })
    .expect("a publishable status");
    let closed = status_text(&StatusSnapshot {
        finished: Some(autoforge::machine::IssueFinished {
            merged_in: None,
            ..finished
        }),
        ..status(Phase::UpdateEpic)
    })
    .expect("a publishable status");
    insta::assert_snapshot!(format!("{merged}\n\n---\n\n{closed}"));
}

#[test]
fn epic_progress_comment() {
    let text = compose_progress_comment(
        "Word counting is merged; sentence counting is next.",
        ISSUE_URL,
        PR_URL,
    )
    .expect("a publishable progress comment");
    insta::assert_snapshot!(text);
}

#[test]
fn follow_up_issue_body() {
    let text = compose_follow_up_body(
        "Count words in scripts without spaces between them.",
        "R2-F2",
        PR_URL,
    )
    .expect("a publishable follow-up body");
    insta::assert_snapshot!(text);
}

/// The `autoforge` check run's title and summary in each state it shows.
#[test]
fn check_run_outputs() {
    let mut blocked = status(Phase::Blocked);
    blocked.blocked_reason = Some("the review cap of 8 rounds is reached".into());
    blocked.blocked_from = Some(Phase::Review);
    let mut failed = status(Phase::Failed);
    failed.failure = Some("the agent reported failure: the issue asks for two things".into());
    let cases = [
        (
            CheckShows::InProgress {
                phase: Phase::Fix,
                round: 2,
            },
            status(Phase::Fix),
        ),
        (CheckShows::Success, status(Phase::ReadyForMerge)),
        (
            CheckShows::Neutral {
                reason: "the review cap of 8 rounds is reached".into(),
            },
            blocked,
        ),
        (
            CheckShows::Failure {
                reason: "the agent reported failure: the issue asks for two things".into(),
            },
            failed,
        ),
        (CheckShows::Cancelled, status(Phase::Stopped)),
        (
            CheckShows::Superseded {
                by: autoforge_journal::testing::sha(MERGE_BASE),
            },
            status(Phase::Review),
        ),
    ];
    let rendered: Vec<String> = cases
        .iter()
        .map(|(shows, status)| {
            let (title, summary) = check_run_text(shows, status).expect("a publishable check");
            format!("# {title}\n{summary}")
        })
        .collect();
    insta::assert_snapshot!(rendered.join("\n\n----\n\n"));
}
