//! Whole-machine properties of `autoforge::machine::decide`:
//!
//! - an exhaustive sweep: every phase × a representative of every event
//!   variant (and every operator command) yields a legal edge, a stay, or a
//!   typed refusal that leaves the state byte-identical;
//! - proptest sequences of plausible events: every edge is legal, terminal
//!   phases never change, counters stay inside their bounds, every phase
//!   change edits the status comment, every merge and push leaves as a
//!   journalled intent for what was reviewed or validated, work without an
//!   operator is bounded by the launch budget, and `decide` is deterministic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::machine::*;
use autoforge_journal::{IssueNumber, PullNumber, testing};
use proptest::prelude::*;
use std::collections::BTreeSet;

const PR: PullNumber = testing::pull(12);
const EPIC: IssueNumber = testing::issue(3);

fn sha(n: u32) -> autoforge_journal::CommitSha {
    autoforge_journal::testing::sha(&format!("{n:040x}"))
}

/// The plan mode goes with the merge mode, so every property also runs
/// through PLAN: posted (auto), approved or replanned (on-command), or not
/// at all (never).
fn settings(merge_mode: MergeMode) -> RunSettings {
    let plan_mode = match merge_mode {
        MergeMode::Never => PlanMode::Off,
        MergeMode::OnCommand => PlanMode::Approve,
        MergeMode::Auto => PlanMode::Post,
    };
    RunSettings {
        merge_mode,
        plan_mode,
        max_review_rounds: 2,
        max_launches: 10,
        max_validation_failures: 2,
        max_corrections: 1,
        max_retries: 2,
        max_merge_checks: 3,
        ..RunSettings::default()
    }
}

fn started(settings: &RunSettings, epic: bool) -> Event {
    Event::Started {
        repository: "acme/widgets".into(),
        issue: autoforge_journal::testing::issue(7),
        epic: epic.then_some(EPIC),
        base_branch: "main".into(),
        base_sha: sha(1),
        branch_head: None,
        settings: settings.clone(),
        repository_settings: RepositorySettingsRead::default(),
        issue_text: None,
        started_by: None,
    }
}

/// The revision the run believes in, used to build "not moved" facts.
fn believed(state: &RunState) -> RoundBinding {
    let fallback = RoundBinding {
        pr: state.pr.unwrap_or(PR),
        head_sha: sha(2),
        base_ref: "main".into(),
        merge_base_sha: sha(1),
    };
    state
        .review
        .clean
        .clone()
        .or_else(|| state.review.binding.clone())
        .unwrap_or(fallback)
}

fn pr_facts(state: &RunState, flavor: u8) -> PrFacts {
    let b = believed(state);
    let (pr_state, head) = match flavor % 8 {
        0..=3 => (PrState::Open, b.head_sha.clone()),
        4 => (PrState::Open, sha(100 + u32::from(flavor))),
        5 => (PrState::Merged, b.head_sha.clone()),
        6 => (PrState::Merged, sha(150 + u32::from(flavor))),
        _ => (PrState::Closed, b.head_sha.clone()),
    };
    let checks = match (flavor / 8) % 4 {
        2 => ChecksState::Pending,
        3 => ChecksState::Failed,
        _ => ChecksState::Success,
    };
    PrFacts {
        number: state.pr.unwrap_or(PR),
        state: pr_state,
        head_sha: head,
        base_ref: b.base_ref,
        merge_base_sha: b.merge_base_sha,
        draft: false,
        merge_commit: (pr_state == PrState::Merged).then(|| sha(999)),
        checks,
        mergeable: Some(true),
        mergeable_state: MergeableState::Clean,
        clean_review_intact: !flavor.is_multiple_of(29),
        protected_paths_changed: false,
        title: "Add the widget".into(),
        merge_methods: AllowedMergeMethods::default(),
        reviews: None,
        changed_files: 1,
        listed_files: 1,
        required_checks_missing: Vec::new(),
    }
}

fn github_facts(state: &RunState, flavor: u8) -> GitHubFacts {
    let pr = (state.pr.is_some() || flavor.is_multiple_of(3)).then(|| pr_facts(state, flavor));
    let adoptable_prs = match flavor % 5 {
        0 => vec![testing::pull(40), testing::pull(41)],
        1 => vec![testing::pull(40)],
        _ => Vec::new(),
    };
    GitHubFacts {
        issue_open: !flavor.is_multiple_of(11),
        branch_head: None,
        pr,
        adoptable_prs,
        issue_text: None,
    }
}

const RESOLUTIONS: [&str; 4] = [
    "handle the error",
    "add a test",
    "rename the type",
    "document the flag",
];

fn phase_result(state: &RunState, flavor: u8) -> PhaseResult {
    let f = u32::from(flavor);
    let binding = believed(state);
    let round = match &state.awaiting {
        Awaiting::Agent { launch } => launch.round,
        _ => 1,
    };
    match state.phase {
        Phase::Review => {
            let count = f % 3;
            let findings = (1..=count)
                .map(|n| Finding {
                    id: format!("R{round}-F{n}"),
                    classification: Classification::Nit,
                    title: "t".into(),
                    location: "l".into(),
                    required_resolution: RESOLUTIONS[((f / 3 + n) % 4) as usize].into(),
                })
                .collect();
            PhaseResult::Review(ReviewResult {
                round: if flavor.is_multiple_of(13) {
                    round + 1
                } else {
                    round
                },
                reviewed_head_sha: binding.head_sha,
                findings,
                sections: ReviewSections::default(),
            })
        }
        Phase::Fix => {
            let moved = flavor.is_multiple_of(2);
            let head = if moved {
                sha(200 + f)
            } else {
                binding.head_sha.clone()
            };
            let resolutions = state
                .review
                .open_findings
                .iter()
                .enumerate()
                .map(|(i, finding)| {
                    let kind = match (f + i as u32) % 4 {
                        0 if moved => ResolutionKind::Fixed { commit_sha: None },
                        1 => ResolutionKind::FollowUpNew {
                            draft: FollowUpDraft {
                                title: "later".into(),
                                body: "b".into(),
                            },
                        },
                        2 => ResolutionKind::FollowUpExisting {
                            issue: autoforge_journal::testing::issue(90),
                        },
                        _ => ResolutionKind::NoChangeWithRationale {
                            rationale: "r".repeat(40),
                        },
                    };
                    Resolution {
                        finding_id: finding.id.clone(),
                        kind,
                    }
                })
                .collect();
            PhaseResult::Fix(FixResult {
                previous_head_sha: binding.head_sha,
                head_sha: head,
                resolutions,
            })
        }
        Phase::Plan => PhaseResult::Plan(PlanResult {
            summary: "plan".into(),
            steps: vec!["step".into()],
            files: Vec::new(),
            risks: Vec::new(),
            questions: (1..=f % 3)
                .map(|n| PlanQuestion {
                    id: n.to_string(),
                    question: "q".into(),
                    default: "d".into(),
                })
                .collect(),
        }),
        Phase::UpdateEpic => PhaseResult::UpdateEpic(EpicResult {
            progress: Some("progress".into()),
            roadmap_section: Some("roadmap".into()),
            next_issue: match flavor % 3 {
                0 => None,
                1 => Some(testing::issue(8 + u64::from(flavor % 5))),
                _ => Some(EPIC),
            },
            next_issue_repository: flavor.is_multiple_of(7).then(|| "other/gadgets".into()),
        }),
        _ => PhaseResult::Implement(ImplementResult {
            head_sha: sha(10 + f),
            pr_title: "title".into(),
            pr_body: "body".into(),
            tests: Vec::new(),
        }),
    }
}

fn agent_outcome(kind: u8, state: &RunState, flavor: u8) -> AgentOutcome {
    if kind == 1 {
        return AgentOutcome::Result {
            result: AgentResult::Success {
                result: phase_result(state, flavor),
            },
        };
    }
    match flavor % 8 {
        0 => AgentOutcome::Result {
            result: AgentResult::Failure {
                message: "gave up".into(),
            },
        },
        1 => AgentOutcome::Result {
            result: AgentResult::Blocked {
                message: "needs a human".into(),
            },
        },
        2 | 3 => AgentOutcome::Crashed {
            detail: "signal".into(),
        },
        4 => AgentOutcome::TimedOut,
        5 => AgentOutcome::NonZeroExit { code: 2 },
        _ => AgentOutcome::Malformed {
            diagnosis: "no block".into(),
        },
    }
}

fn operator(command: OperatorRequest) -> Event {
    Event::Operator(OperatorCommand {
        thread: autoforge_journal::testing::issue(7),
        comment_id: 1,
        actor: "op".into(),
        command,
    })
}

/// Number of event families [`event_for`] knows.
const FAMILIES: u8 = 19;

/// A plausible event for `state`: ids, SHAs and rounds mostly match what the
/// run awaits, so sequences make progress; `flavor` picks the variation.
fn event_for(state: &RunState, settings: &RunSettings, family: u8, flavor: u8) -> Event {
    let launch = match &state.awaiting {
        Awaiting::Agent { launch } => launch.id,
        _ => 1,
    };
    let awaited_sha = match &state.awaiting {
        Awaiting::Validation { sha } if !flavor.is_multiple_of(7) => sha.clone(),
        _ => sha(300),
    };
    match family % FAMILIES {
        0 => started(settings, flavor.is_multiple_of(2)),
        kind @ (1 | 2) => Event::AgentFinished {
            launch,
            outcome: agent_outcome(kind, state, flavor),
            tokens: None,
            cost_micros: None,
        },
        3 => Event::ValidationFinished {
            sha: awaited_sha,
            passed: !flavor.is_multiple_of(3),
            failed_index: None,
            summary: "summary".into(),
            protected_paths: if flavor.is_multiple_of(5) {
                vec![".github/workflows/ci.yml".into()]
            } else {
                Vec::new()
            },
        },
        4 => Event::EffectsObserved {
            observed: vec![
                EffectReadBack::PullRequest { number: PR },
                EffectReadBack::Comment {
                    url: "https://example.test/c".into(),
                },
            ]
            .into_iter()
            .chain(
                flavor
                    .is_multiple_of(2)
                    .then_some(EffectReadBack::RoadmapSpliced),
            )
            .chain((flavor % 16 == 1).then_some(EffectReadBack::RoadmapVoided))
            .collect(),
        },
        5 | 6 => Event::GitHubObserved {
            facts: github_facts(state, flavor),
        },
        7 => Event::MergeResult(MergeReport {
            pr: pr_facts(state, flavor),
        }),
        8 => {
            let issue = match &state.awaiting {
                Awaiting::NextIssueCheck { issue } => *issue,
                _ => autoforge_journal::testing::issue(8),
            };
            let repository = if flavor.is_multiple_of(9) {
                "other/repo"
            } else {
                "acme/widgets"
            };
            Event::NextIssue(NextIssueFacts {
                issue,
                repository: repository.into(),
                open: !flavor.is_multiple_of(4),
                base_sha: sha(1),
                branch_head: None,
                issue_text: None,
                epic_issues: if flavor.is_multiple_of(5) {
                    vec![testing::issue(issue.get() + 1)]
                } else {
                    vec![issue]
                },
            })
        }
        9 => Event::TransientFailure {
            detail: "502".into(),
        },
        10 => Event::IssueClosed {
            issue: if flavor.is_multiple_of(2) {
                state.issue
            } else {
                autoforge_journal::testing::issue(state.issue.get() + 1)
            },
        },
        11 => Event::EffectConflict {
            identity: "x".into(),
            reason: "refused".into(),
        },
        12 => operator(OperatorRequest::Retry {
            notes: flavor
                .is_multiple_of(2)
                .then(|| "the registry is back".into()),
        }),
        13 if flavor.is_multiple_of(2) => operator(OperatorRequest::Merge),
        13 => operator(OperatorRequest::Status),
        14 => operator(OperatorRequest::Unblock {
            reason: "go".into(),
            facts: Box::new(github_facts(state, flavor)),
        }),
        // Human rounds: a few sources only, so the same review arrives twice.
        15 if flavor.is_multiple_of(2) => operator(OperatorRequest::Fix {
            notes: "rename the flag".into(),
        }),
        15 => Event::HumanReview(HumanFeedback {
            source: format!("review-{}", flavor % 4),
            author: "olivia".into(),
            notes: vec![
                HumanNote {
                    location: Some("src/lib.rs:3".into()),
                    text: "handle the empty case".into(),
                },
                HumanNote {
                    location: None,
                    text: "please also document it".into(),
                },
            ],
        }),
        16 => operator(OperatorRequest::Help),
        17 if flavor.is_multiple_of(3) => operator(OperatorRequest::Replan {
            notes: "smaller steps".into(),
        }),
        17 => operator(OperatorRequest::Approve {
            answers: (1..=u32::from(flavor % 3))
                .map(|n| PlanAnswer {
                    id: n.to_string(),
                    text: "b".into(),
                })
                .collect(),
        }),
        _ if flavor < 8 => Event::LabelRemoved,
        _ if flavor < 16 => operator(OperatorRequest::Stop),
        _ => operator(OperatorRequest::Status),
    }
}

/// The family of the event the run is waiting for, so that a biased
/// selector drives runs deep into later phases.
fn awaited_family(state: &RunState, flavor: u8) -> u8 {
    match &state.awaiting {
        Awaiting::Start => 0,
        Awaiting::Agent { .. } if flavor.is_multiple_of(5) => 2,
        Awaiting::Agent { .. } => 1,
        Awaiting::Validation { .. } => 3,
        Awaiting::Effects { .. } => 4,
        Awaiting::Facts { .. } => 5,
        Awaiting::MergeOutcome => 7,
        Awaiting::NextIssueCheck { .. } => 8,
        Awaiting::OperatorRetry { .. } => 12,
        Awaiting::PlanApproval => 17,
        Awaiting::Nothing if state.phase == Phase::Blocked => 14,
        Awaiting::Nothing => 13,
    }
}

/// `selector` below 200 answers what the run awaits; otherwise `family`.
/// Families from 12 up are operator commands (and the label removal).
fn pick_event(
    state: &RunState,
    settings: &RunSettings,
    (selector, family, flavor): (u8, u8, u8),
) -> Event {
    let awaited = awaited_family(state, flavor);
    let family = if selector < 200 && (awaited < 12 || family >= 12) {
        awaited
    } else {
        family
    };
    event_for(state, settings, family, flavor)
}

fn json(state: &RunState) -> String {
    serde_json::to_string(state).expect("state serialises")
}

/// Human rounds: one per source, and no finding id is ever held twice.
fn human_round_properties(state: &RunState, event: &Event, decision: &Decision) {
    if let Event::HumanReview(feedback) = event
        && state.review.human_sources.contains(&feedback.source)
    {
        assert!(
            decision.refusal.is_some(),
            "the same review starts one human round"
        );
    }
    let review = &decision.next.review;
    let mut ids: Vec<&str> = review
        .open_findings
        .iter()
        .chain(&review.pending_human)
        .map(|f| f.id.as_str())
        .collect();
    let held = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), held, "a finding id is held once: {review:?}");
    assert!(
        review.human_rounds as usize >= review.human_sources.len(),
        "every source numbered a round"
    );
    if decision.next.phase == Phase::ReadyForMerge {
        assert!(
            review.pending_human.is_empty() && review.open_findings.is_empty(),
            "no human finding is skipped on the way to the merge gate"
        );
    }
}

/// Checks one step; returns the decision for callers that track more.
fn checked_step(state: &RunState, event: &Event) -> Decision {
    let decision = decide(state, event)
        .unwrap_or_else(|e| panic!("{e} on {} in {}", event.name(), state.phase));
    let again = decide(state, event).expect("deterministic");
    assert_eq!(decision, again, "decide is deterministic");

    if let Some(refusal) = &decision.refusal {
        assert_eq!(
            json(&decision.next),
            json(state),
            "refusal {refusal} changed the state"
        );
        assert!(
            decision.transitions.is_empty()
                && decision.launches.is_empty()
                && decision.validation.is_none()
        );
        let replies_only = decision.effects.iter().all(|e| {
            matches!(
                e,
                EffectIntent::PostCommandReply {
                    reply: Reply::Refused { .. },
                    ..
                }
            )
        });
        assert!(replies_only, "a refusal writes nothing but a reply");
    }
    if state.phase.is_terminal() {
        assert_eq!(decision.next, *state, "terminal phases never change");
    }
    let mut at = state.phase;
    for &(from, to) in &decision.transitions {
        assert_eq!(from, at, "transitions chain");
        assert!(legal_edge(from, to), "illegal edge {from} -> {to}");
        if from == Phase::Blocked && to.is_unblock_target() {
            let human_round = to == Phase::Fix
                && matches!(
                    event,
                    Event::HumanReview(_)
                        | Event::Operator(OperatorCommand {
                            command: OperatorRequest::Fix { .. },
                            ..
                        })
                );
            assert!(
                human_round
                    || matches!(
                        event,
                        Event::Operator(OperatorCommand {
                            command: OperatorRequest::Unblock { .. },
                            ..
                        })
                    )
            );
        }
        at = to;
    }
    assert_eq!(
        at, decision.next.phase,
        "the last edge ends in the next phase"
    );

    human_round_properties(state, event, &decision);

    let status_edits_on = |issue: IssueNumber| {
        decision
            .effects
            .iter()
            .filter(
                |e| matches!(e, EffectIntent::EditStatusComment { issue: on, .. } if *on == issue),
            )
            .count()
    };
    // A new merge wait is shown too, without a phase change.
    let wait_shown = decision.transitions.is_empty()
        && decision.next.merge_wait.is_some()
        && decision.next.merge_wait != state.merge_wait;
    assert_eq!(
        status_edits_on(decision.next.issue),
        usize::from(!decision.transitions.is_empty() || wait_shown),
        "status edit on every phase change and every new merge wait"
    );
    // An EPIC's run moving on closes the finished issue's status once; no
    // other issue's status comment is ever edited.
    let all_edits = decision
        .effects
        .iter()
        .filter(|e| e.kind() == EffectKind::EditStatusComment)
        .count();
    let finished_edits = if decision.next.issue == state.issue {
        0
    } else {
        status_edits_on(state.issue)
    };
    assert!(
        finished_edits <= 1,
        "the finished issue's status is closed once"
    );
    assert_eq!(
        all_edits,
        status_edits_on(decision.next.issue) + finished_edits,
        "status edits only on the run's issue and the one it finished"
    );
    if decision.next.phase == Phase::Stopped && state.phase != Phase::Stopped {
        // Besides the status update, only the stop command's own answer
        // (reaction and reply) and the status labels may be written.
        let others = decision.effects.iter().all(|e| {
            matches!(
                e.kind(),
                EffectKind::EditStatusComment | EffectKind::AddReaction | EffectKind::SetLabels
            ) || matches!(
                e,
                EffectIntent::PostCommandReply {
                    reply: Reply::Accepted { .. },
                    ..
                }
            )
        });
        assert!(others, "stopping writes only the status update");
    }
    check_bounds(&decision.next);
    check_launches(state, &decision);
    decision
}

fn check_bounds(next: &RunState) {
    let (s, c) = (&next.settings, &next.counters);
    assert!(c.launches <= s.max_launches, "launch budget");
    assert!(next.review.round <= s.max_review_rounds, "review cap");
    assert!(c.retries <= s.max_retries, "retry bound");
    assert!(c.corrections <= s.max_corrections, "correction bound");
    assert!(
        c.validation_failures < s.max_validation_failures.max(1),
        "validation bound"
    );
    assert!(
        c.merge_checks < s.max_merge_checks.max(1),
        "merge-check bound"
    );
    assert!(
        c.next_issue_rejections < s.max_next_issue_rejections.max(1),
        "next-issue bound"
    );
    assert!(
        c.roadmap_rerequests < s.max_roadmap_rerequests.max(1),
        "roadmap re-request bound"
    );
    if let Some(carried) = &next.review.prior_findings {
        // A reviewer reports at most two findings here and each human round
        // two notes: carried findings are one round's, never accumulated.
        let (human, reviewer): (Vec<_>, Vec<_>) = carried
            .findings
            .iter()
            .partition(|f| autoforge::machine::is_human_finding(&f.id));
        assert!(
            reviewer.len() <= 2,
            "carried findings are replaced, never accumulated"
        );
        assert!(
            human.len() <= 2 * next.review.human_rounds as usize,
            "carried human findings come from the run's human rounds"
        );
        let mut ids: Vec<&str> = human.iter().map(|f| f.id.as_str()).collect();
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "a human finding is carried once");
    }
}

fn check_launches(state: &RunState, decision: &Decision) {
    assert!(decision.launches.len() <= 1);
    if let Some(launch) = decision.launches.first() {
        assert_eq!(
            launch.id,
            state.counters.launches + 1,
            "launch ids are the run's ordinals"
        );
        assert_eq!(decision.next.counters.launches, launch.id);
        assert!(matches!(&decision.next.awaiting, Awaiting::Agent { launch: l } if **l == *launch));
    } else {
        assert_eq!(decision.next.counters.launches, state.counters.launches);
    }
}

/// Write-specific invariants that need the history of the run.
#[derive(Default)]
struct Journal {
    validated: BTreeSet<autoforge_journal::CommitSha>,
    operator_free_changes: u32,
}

impl Journal {
    fn observe(&mut self, state: &RunState, event: &Event, decision: &Decision) {
        // A candidate that changes a protected path is never pushed: only
        // a clean validation makes a commit pushable.
        if let Event::ValidationFinished {
            sha,
            passed: true,
            protected_paths,
            ..
        } = event
            && decision.refusal.is_none()
            && protected_paths.is_empty()
        {
            self.validated.insert(sha.clone());
        }
        if let Event::NextIssue(facts) = event
            && decision.next.issue == facts.issue
            && state.issue != facts.issue
        {
            assert!(
                facts.epic_issues.contains(&facts.issue),
                "a pick outside the EPIC was taken: {facts:?}"
            );
        }
        for effect in &decision.effects {
            match effect {
                EffectIntent::Push { sha, .. } => {
                    assert!(
                        self.validated.contains(sha),
                        "only validated commits are pushed"
                    );
                }
                EffectIntent::MergePr { sha, pr, .. } => {
                    let clean = decision
                        .next
                        .review
                        .clean
                        .as_ref()
                        .expect("a merge needs a clean review");
                    assert_eq!(
                        (sha, *pr),
                        (&clean.head_sha, clean.pr),
                        "merge pins the reviewed head"
                    );
                    assert_eq!(decision.next.phase, Phase::Merge);
                }
                _ => {}
            }
        }
        if decision.next.merged_prs.len() > state.merged_prs.len() {
            let clean = state
                .review
                .clean
                .as_ref()
                .expect("counted merges were reviewed");
            let merged_head = match event {
                Event::MergeResult(report) => Some(&report.pr.head_sha),
                Event::GitHubObserved { facts } => facts.pr.as_ref().map(|p| &p.head_sha),
                _ => None,
            };
            assert_eq!(
                merged_head,
                Some(&clean.head_sha),
                "a merge counts only at the reviewed head"
            );
        }
        if !matches!(event, Event::Operator(_)) && decision.next != *state {
            self.operator_free_changes += 1;
        }
    }
}

fn run_sequence(mode: MergeMode, epic: bool, events: &[(u8, u8, u8)]) -> RunState {
    let settings = settings(mode);
    let mut state = RunState::new("run-p", testing::issue(7), settings.clone());
    let mut journal = Journal::default();
    let first = started(&settings, epic);
    let decision = checked_step(&state, &first);
    state = decision.next;
    for &choice in events {
        let event = pick_event(&state, &settings, choice);
        let decision = checked_step(&state, &event);
        journal.observe(&state, &event, &decision);
        state = decision.next;
    }
    // Without operator commands every state change is tied to a launch:
    // each launch leads to a bounded number of steps (validation, reads,
    // effects, retries, merge checks), so the launch budget bounds the run.
    // At most eight awaited steps follow one launch (validation, reads,
    // effects, re-reads), each retried at most `max_retries` times.
    let per_launch = 8 * (settings.max_retries + 1) + settings.max_merge_checks + 8;
    assert!(
        journal.operator_free_changes <= per_launch * (state.counters.launches + 1),
        "{} changes for {} launches",
        journal.operator_free_changes,
        state.counters.launches
    );
    state
}

fn mode_strategy() -> impl Strategy<Value = MergeMode> {
    prop_oneof![
        Just(MergeMode::Never),
        Just(MergeMode::OnCommand),
        Just(MergeMode::Auto)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_never_break_an_invariant(
        mode in mode_strategy(),
        epic in any::<bool>(),
        events in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..300),
    ) {
        run_sequence(mode, epic, &events);
    }

    #[test]
    fn runs_without_operator_commands_stop_within_the_launch_budget(
        mode in mode_strategy(),
        epic in any::<bool>(),
        events in prop::collection::vec((any::<u8>(), 0u8..12, any::<u8>()), 400..600),
    ) {
        let state = run_sequence(mode, epic, &events);
        prop_assert!(state.counters.launches <= state.settings.max_launches);
    }
}

/// Deterministic pseudo-random numbers for the state corpus (no clock).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 56) as u8
    }
}

/// States in every phase, reached by driving the machine itself.
fn corpus() -> Vec<RunState> {
    let mut states = Vec::new();
    for seed in 0..240u64 {
        let mut rng = Lcg(seed);
        let mode = [MergeMode::Never, MergeMode::OnCommand, MergeMode::Auto][(seed % 3) as usize];
        let settings = settings(mode);
        let mut state = RunState::new("run-c", testing::issue(7), settings.clone());
        states.push(state.clone());
        state = decide(&state, &started(&settings, seed % 2 == 0))
            .expect("legal")
            .next;
        for _ in 0..120 {
            let choice = (rng.next(), rng.next(), rng.next());
            let event = pick_event(&state, &settings, choice);
            state = decide(&state, &event).expect("legal").next;
            states.push(state.clone());
        }
    }
    states
}

#[test]
fn every_phase_and_event_yields_a_legal_edge_a_stay_or_a_refusal() {
    let states = corpus();
    let reached: BTreeSet<Phase> = states.iter().map(|s| s.phase).collect();
    assert_eq!(
        reached,
        Phase::ALL.into_iter().collect(),
        "the corpus reaches every phase"
    );
    let mut fed = std::collections::BTreeMap::<Phase, BTreeSet<String>>::new();
    let mut per_shape = std::collections::BTreeMap::<String, u32>::new();
    for state in &states {
        // A few states per (phase, awaited step) shape keep the sweep fast.
        let awaiting = serde_json::to_value(&state.awaiting).expect("serialise");
        let shape = format!(
            "{}/{}/{}",
            state.phase, awaiting["awaiting"], awaiting["purpose"]
        );
        let count = per_shape.entry(shape).or_default();
        *count += 1;
        if *count > 4 {
            continue;
        }
        for family in 0..=FAMILIES {
            for flavor in [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 13, 16, 17, 24, 29] {
                let event = event_for(state, &state.settings, family, flavor);
                let name = match &event {
                    Event::Operator(command) => {
                        format!("{:?}", std::mem::discriminant(&command.command))
                    }
                    other => other.name().to_owned(),
                };
                fed.entry(state.phase).or_default().insert(name);
                checked_step(state, &event);
            }
        }
    }
    // 12 event variants besides operator commands (the human review
    // included), plus 9 commands.
    for phase in Phase::ALL {
        assert_eq!(
            fed[&phase].len(),
            21,
            "every event variant and command was fed in {phase}"
        );
    }
}
