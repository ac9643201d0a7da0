//! INITIALIZING/IMPLEMENT rules and the agent-outcome rules shared by all
//! agent phases (failure, blocked, crash, correction, budget).

use super::*;

#[test]
fn started_run_launches_implement_on_the_issue_branch() {
    let run = Run::default_run();
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(
        run.last.transitions,
        vec![(Phase::Initializing, Phase::Implement)]
    );
    assert_eq!(run.last.launches.len(), 1);
    let LaunchInputs::Implement { branch, issue, .. } = &run.last.launches[0].inputs else {
        panic!("implement inputs expected");
    };
    assert_eq!((branch.as_str(), *issue), ("autoforge/7", ISSUE));
    assert_eq!(run.status_edits(), 1);
}

#[test]
fn validated_candidate_is_pushed_then_pr_created_then_review_round_one() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    assert_eq!(run.last.validation, Some(ValidationRequest { sha: sha(2) }));
    assert!(
        run.last.effects.is_empty(),
        "nothing is written before validation"
    );
    run.validated(&sha(2), true);
    run.github(facts(None));
    let kinds: Vec<EffectKind> = run.last.effects.iter().map(EffectIntent::kind).collect();
    assert_eq!(kinds, vec![EffectKind::Push, EffectKind::CreatePr]);
    run.observed(vec![
        EffectReadBack::Pushed { sha: sha(2) },
        EffectReadBack::PullRequest { number: PR },
    ]);
    assert_eq!(run.state.phase, Phase::Review);
    assert_eq!(run.state.pr, Some(PR));
    assert_eq!(run.bind(&sha(2)), 1);
}

#[test]
fn single_unmarked_pr_on_the_branch_is_adopted() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    let mut f = facts(None);
    f.adoptable_prs = vec![autoforge_journal::testing::pull(40)];
    run.github(f);
    assert_eq!(
        run.last.effects[1],
        EffectIntent::AdoptPr {
            pr: autoforge_journal::testing::pull(40),
            issue: ISSUE
        }
    );
}

#[test]
fn two_adoptable_prs_block_the_run() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    let mut f = facts(None);
    f.adoptable_prs = vec![
        autoforge_journal::testing::pull(40),
        autoforge_journal::testing::pull(41),
    ];
    run.github(f);
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.last
            .effects
            .iter()
            .all(|e| e.kind() == EffectKind::EditStatusComment)
    );
}

#[test]
fn validation_failure_relaunches_implement_with_the_failure_and_pushes_nothing() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated(&sha(2), false);
    assert_eq!(run.state.phase, Phase::Implement);
    assert!(run.last.effects.is_empty());
    let LaunchInputs::Implement {
        validation_failure, ..
    } = &run.launch().inputs
    else {
        panic!("implement inputs expected");
    };
    assert_eq!(validation_failure.as_deref(), Some("command 0 failed"));
}

#[test]
fn third_validation_failure_in_a_phase_blocks() {
    let mut run = Run::default_run();
    for n in 2..5 {
        run.implement(&sha(n));
        run.validated(&sha(n), false);
    }
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("validation failed 3 times")
    );
}

#[test]
fn validation_of_another_commit_is_refused() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    let refusal = run.refuse(Event::ValidationFinished {
        sha: sha(9),
        passed: true,
        failed_index: None,
        summary: String::new(),
        protected_paths: Vec::new(),
    });
    assert_eq!(refusal, Refusal::StaleValidation { got: sha(9) });
}

#[test]
fn agent_failure_status_fails_the_run() {
    let mut run = Run::default_run();
    run.finish_agent(AgentOutcome::Result {
        result: AgentResult::Failure {
            message: "cannot".to_owned(),
        },
    });
    assert_eq!(run.state.phase, Phase::Failed);
    assert_eq!(run.state.failure.as_deref(), Some("cannot"));
}

#[test]
fn agent_blocked_status_blocks_with_its_message() {
    let mut run = Run::default_run();
    run.finish_agent(AgentOutcome::Result {
        result: AgentResult::Blocked {
            message: "need access".to_owned(),
        },
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("need access")
    );
}

#[test]
fn crash_keeps_the_phase_and_retries_up_to_the_bound_then_waits_for_retry() {
    let mut run = Run::default_run();
    for attempt in 1..=3 {
        run.finish_agent(AgentOutcome::Crashed {
            detail: "signal 9".to_owned(),
        });
        assert_eq!(run.state.phase, Phase::Implement);
        assert_eq!(run.last.launches.len(), 1, "retry {attempt} relaunches");
    }
    run.finish_agent(AgentOutcome::TimedOut);
    assert_eq!(run.state.phase, Phase::Implement);
    assert!(run.last.launches.is_empty());
    assert!(matches!(run.state.awaiting, Awaiting::OperatorRetry { .. }));
    run.apply(command(OperatorRequest::Retry { notes: None }));
    assert_eq!(run.last.launches.len(), 1);
    assert_eq!(run.state.counters.retries, 0);
}

#[test]
fn retry_without_a_parked_failure_is_refused_with_a_reply() {
    let mut run = Run::default_run();
    let decision =
        decide(&run.state, &command(OperatorRequest::Retry { notes: None })).expect("legal");
    assert!(matches!(
        decision.effects[..],
        [EffectIntent::PostCommandReply {
            reply: Reply::Refused { .. },
            ..
        }]
    ));
    assert_eq!(
        run.refuse(command(OperatorRequest::Retry { notes: None })),
        Refusal::NothingToRetry
    );
}

#[test]
fn malformed_result_gets_one_correction_then_blocks() {
    let mut run = Run::default_run();
    let first = run.launch().id;
    run.finish_agent(AgentOutcome::Malformed {
        diagnosis: "no CONTROL_RESULT block".to_owned(),
    });
    let correction = run.launch().correction_of.expect("a correction");
    assert_eq!(correction.of_launch, first);
    run.finish_agent(AgentOutcome::Malformed {
        diagnosis: "still none".to_owned(),
    });
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn exhausted_launch_budget_blocks_instead_of_launching() {
    let settings = RunSettings {
        max_launches: 2,
        max_retries: 5,
        ..RunSettings::default()
    };
    let mut run = Run::start(settings, None);
    run.finish_agent(AgentOutcome::NonZeroExit { code: 1 });
    assert_eq!(run.state.counters.launches, 2);
    run.finish_agent(AgentOutcome::NonZeroExit { code: 1 });
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(run.last.launches.is_empty());
    assert!(
        run.state
            .blocked
            .as_ref()
            .expect("reason")
            .reason
            .contains("launch budget")
    );
}

#[test]
fn result_of_an_older_launch_is_refused() {
    let mut run = Run::default_run();
    let stale = run.launch().id;
    run.finish_agent(AgentOutcome::TimedOut);
    let refusal = run.refuse(Event::AgentFinished {
        launch: stale,
        outcome: AgentOutcome::TimedOut,
        tokens: None,
        cost_micros: None,
    });
    assert_eq!(
        refusal,
        Refusal::StaleLaunch {
            expected: Some(stale + 1),
            got: stale
        }
    );
}

#[test]
fn a_result_for_another_phase_gets_a_correction() {
    let mut run = Run::default_run();
    run.succeed(PhaseResult::UpdateEpic(EpicResult {
        progress: None,
        roadmap_section: None,
        next_issue: None,
        next_issue_repository: None,
    }));
    assert!(run.launch().correction_of.is_some());
}

#[test]
fn closing_the_issue_during_implement_blocks() {
    let mut run = Run::default_run();
    let issue = run.state.issue;
    run.apply(Event::IssueClosed { issue });
    assert_eq!(run.state.phase, Phase::Blocked);
}

#[test]
fn a_late_close_of_another_issue_of_the_run_leaves_the_current_one_at_work() {
    let mut run = Run::default_run();
    let before = run.state.clone();
    let earlier = autoforge_journal::testing::issue(run.state.issue.get() + 7);
    run.apply(Event::IssueClosed { issue: earlier });
    assert_eq!(run.state, before);
}

#[test]
fn transient_failure_while_reading_github_keeps_the_step() {
    let mut run = Run::default_run();
    run.implement(&sha(2));
    run.validated(&sha(2), true);
    let awaiting = run.state.awaiting.clone();
    run.apply(Event::TransientFailure {
        detail: "502".to_owned(),
    });
    assert_eq!(
        (run.state.phase, &run.state.awaiting),
        (Phase::Implement, &awaiting)
    );
    assert_eq!(run.state.counters.retries, 1);
}

#[test]
fn retries_start_afresh_once_the_step_moves_on() {
    let mut run = Run::default_run();
    run.finish_agent(AgentOutcome::Crashed {
        detail: "x".to_owned(),
    });
    assert_eq!(run.state.counters.retries, 1);
    run.implement(&sha(2));
    assert_eq!(run.state.counters.retries, 0);
}

#[test]
fn implement_starts_from_the_base_without_earlier_work() {
    let run = Run::default_run();
    let LaunchInputs::Implement {
        start_sha,
        base_sha,
        ..
    } = run.launch().inputs
    else {
        panic!("implement inputs")
    };
    assert_eq!(start_sha, base_sha);
}

#[test]
fn run_state_round_trips_through_json() {
    let mut run = Run::to_review(
        RunSettings::default(),
        Some(autoforge_journal::testing::issue(3)),
    );
    run.round(&sha(2), vec![finding(1, 1, "a")], &sha(3));
    run.bind(&sha(3));
    let json = serde_json::to_string(&run.state).expect("serialise");
    let back: RunState = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back, run.state);
    assert!(json.contains("\"phase\":\"REVIEW\""));
}

#[test]
fn a_retried_correction_keeps_its_diagnosis() {
    let mut run = Run::default_run();
    run.finish_agent(AgentOutcome::Malformed {
        diagnosis: "no block".to_owned(),
    });
    let correction = run.launch().correction_of;
    run.finish_agent(AgentOutcome::Crashed {
        detail: "x".to_owned(),
    });
    assert_eq!(run.launch().correction_of, correction);
    assert_eq!(run.state.counters.corrections, 1);
}

#[test]
fn starting_on_the_epic_itself_blocks() {
    let state = RunState::new("run-1", ISSUE, RunSettings::default());
    let started = Event::Started {
        repository: "acme/widgets".to_owned(),
        issue: autoforge_journal::testing::issue(3),
        epic: Some(autoforge_journal::testing::issue(3)),
        base_branch: "main".to_owned(),
        base_sha: sha(1),
        branch_head: None,
        settings: RunSettings::default(),
        repository_settings: RepositorySettingsRead::default(),
        issue_text: None,
        started_by: None,
    };
    let decision = decide(&state, &started).expect("legal");
    assert_eq!(decision.next.phase, Phase::Blocked);
    assert!(decision.launches.is_empty());
}

#[test]
fn earlier_work_on_the_issue_branch_is_where_the_implementer_starts() {
    let state = RunState::new("run-1", ISSUE, RunSettings::default());
    let started = Event::Started {
        repository: "acme/widgets".to_owned(),
        issue: ISSUE,
        epic: None,
        base_branch: "main".to_owned(),
        base_sha: sha(1),
        branch_head: Some(sha(7)),
        settings: RunSettings::default(),
        repository_settings: RepositorySettingsRead::default(),
        issue_text: None,
        started_by: None,
    };
    let decision = decide(&state, &started).expect("legal");
    let launch = decision
        .launches
        .first()
        .expect("the implementer is launched");
    match &launch.inputs {
        LaunchInputs::Implement {
            base_sha,
            start_sha,
            ..
        } => {
            assert_eq!(base_sha, &sha(1));
            assert_eq!(start_sha, &sha(7), "continues the branch's work");
        }
        other => panic!("not an implement launch: {other:?}"),
    }
}

#[test]
fn a_run_whose_agents_spent_the_token_budget_blocks_before_the_next_launch() {
    let settings = RunSettings {
        max_tokens: Some(1_000),
        ..RunSettings::default()
    };
    let mut run = Run::start(settings, None);
    let launch = run.launch().id;
    // Under the budget: the timed-out launch is retried.
    run.apply(Event::AgentFinished {
        launch,
        outcome: AgentOutcome::TimedOut,
        tokens: Some(600),
        cost_micros: None,
    });
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(run.state.counters.tokens, 600);
    let retry = run.launch().id;
    assert_ne!(retry, launch, "retried");
    // Over it: no further launch, an actionable reason instead.
    run.apply(Event::AgentFinished {
        launch: retry,
        outcome: AgentOutcome::TimedOut,
        tokens: Some(500),
        cost_micros: None,
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(run.last.launches.is_empty());
    let reason = &run.state.blocked.as_ref().expect("blocked").reason;
    assert!(
        reason.contains("1100 tokens") && reason.contains("tokens_per_run"),
        "{reason}"
    );
}

#[test]
fn launches_without_a_token_report_never_touch_an_unset_budget() {
    let mut run = Run::default_run();
    let launch = run.launch().id;
    run.apply(Event::AgentFinished {
        launch,
        outcome: AgentOutcome::TimedOut,
        tokens: None,
        cost_micros: None,
    });
    assert_eq!(run.state.counters.tokens, 0);
    assert_eq!(run.state.phase, Phase::Implement);
}

#[test]
fn a_run_whose_agents_reached_the_cost_budget_blocks_before_the_next_launch() {
    let settings = RunSettings {
        max_cost_micros: Some(2_000_000),
        ..RunSettings::default()
    };
    let mut run = Run::start(settings, None);
    let launch = run.launch().id;
    run.apply(Event::AgentFinished {
        launch,
        outcome: AgentOutcome::TimedOut,
        tokens: Some(10),
        cost_micros: Some(1_500_000),
    });
    assert_eq!(
        run.state.phase,
        Phase::Implement,
        "under the budget: retried"
    );
    assert_eq!(run.state.counters.cost_micros, 1_500_000);
    let retry = run.launch().id;
    run.apply(Event::AgentFinished {
        launch: retry,
        outcome: AgentOutcome::TimedOut,
        tokens: None,
        cost_micros: Some(600_000),
    });
    assert_eq!(run.state.phase, Phase::Blocked);
    assert!(run.last.launches.is_empty());
    let reason = &run.state.blocked.as_ref().expect("blocked").reason;
    assert!(
        reason.contains("2.10 (estimated cost)") && reason.contains("limits.cost_per_run"),
        "{reason}"
    );
}
