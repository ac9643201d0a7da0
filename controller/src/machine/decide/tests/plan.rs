//! The PLAN phase through `decide`: post, approve with answers, replan,
//! and the refusals that leave the run as it was.

use super::*;

fn planning(mode: PlanMode) -> Run {
    Run::start(
        RunSettings {
            plan_mode: mode,
            ..RunSettings::default()
        },
        None,
    )
}

fn a_plan(questions: &[(&str, &str)]) -> PlanResult {
    PlanResult {
        summary: "Add a flag.".to_owned(),
        steps: vec!["Parse it.".to_owned(), "Use it.".to_owned()],
        files: vec!["src/cli.rs".to_owned()],
        risks: Vec::new(),
        questions: questions
            .iter()
            .map(|(id, default)| PlanQuestion {
                id: (*id).to_owned(),
                question: format!("question {id}?"),
                default: (*default).to_owned(),
            })
            .collect(),
    }
}

fn answer(id: &str, text: &str) -> PlanAnswer {
    PlanAnswer {
        id: id.to_owned(),
        text: text.to_owned(),
    }
}

fn approve(answers: Vec<PlanAnswer>) -> Event {
    command(OperatorRequest::Approve { answers })
}

fn comment_posted() -> EffectReadBack {
    EffectReadBack::Comment {
        url: "https://github.com/acme/widgets/issues/7#issuecomment-9".to_owned(),
    }
}

/// Plans, posts the plan comment and waits for approval.
fn posted(run: &mut Run, plan: PlanResult) {
    run.succeed(PhaseResult::Plan(plan));
    run.observed(vec![comment_posted()]);
}

fn plan_comments(decision: &Decision) -> Vec<u32> {
    decision
        .effects
        .iter()
        .filter_map(|e| match e {
            EffectIntent::PostPlanComment { version, .. } => Some(*version),
            _ => None,
        })
        .collect()
}

fn implement_plan(run: &Run) -> Option<ApprovedPlan> {
    match run.launch().inputs {
        LaunchInputs::Implement { plan, .. } => plan.map(|p| *p),
        other => panic!("not an implement launch: {other:?}"),
    }
}

#[test]
fn with_plan_mode_off_the_run_starts_in_implement() {
    let run = planning(PlanMode::Off);
    assert_eq!(run.state.phase, Phase::Implement);
    assert_eq!(implement_plan(&run), None);
}

#[test]
fn a_planning_run_starts_with_a_read_only_plan_launch() {
    let run = planning(PlanMode::Approve);
    assert_eq!(run.state.phase, Phase::Plan);
    assert_eq!(run.last.transitions, [(Phase::Initializing, Phase::Plan)]);
    let launch = run.launch();
    assert_eq!(launch.role, AgentPhase::Plan);
    assert!(
        matches!(launch.inputs, LaunchInputs::Plan { version: 1, .. }),
        "{:?}",
        launch.inputs
    );
}

#[test]
fn the_repository_file_chooses_its_own_plan_mode() {
    let state = RunState::new("run-1", ISSUE, RunSettings::default());
    let chosen = RepositorySettings {
        plan: RepositoryPlan {
            mode: Some(PlanMode::Post),
        },
        ..RepositorySettings::default()
    };
    let started = Event::Started {
        repository: "acme/widgets".to_owned(),
        issue: ISSUE,
        epic: None,
        base_branch: "main".to_owned(),
        base_sha: sha(1),
        branch_head: None,
        settings: RunSettings::default(),
        repository_settings: RepositorySettingsRead::Valid { settings: chosen },
        issue_text: None,
        started_by: None,
    };
    let decision = decide(&state, &started).expect("legal");
    assert_eq!(decision.next.phase, Phase::Plan);
    assert_eq!(decision.next.settings.plan_mode, PlanMode::Post);
}

#[test]
fn under_approve_the_plan_is_posted_and_the_run_waits() {
    let mut run = planning(PlanMode::Approve);
    run.succeed(PhaseResult::Plan(a_plan(&[("1", "a")])));
    assert_eq!(plan_comments(&run.last), [1]);
    let awaits = run.last.effects.iter().any(|e| {
        matches!(
            e,
            EffectIntent::PostPlanComment {
                awaits_approval: true,
                ..
            }
        )
    });
    assert!(awaits, "{:?}", run.last.effects);
    run.observed(vec![comment_posted()]);
    assert_eq!(run.state.phase, Phase::Plan);
    assert_eq!(run.state.awaiting, Awaiting::PlanApproval);
    assert!(run.last.launches.is_empty(), "nothing runs while it waits");
}

#[test]
fn under_post_implement_starts_once_the_plan_comment_is_read_back() {
    let mut run = planning(PlanMode::Post);
    posted(&mut run, a_plan(&[("1", "a")]));
    assert_eq!(run.state.phase, Phase::Implement);
    let plan = implement_plan(&run).expect("the implementer gets the plan");
    assert_eq!(plan.version, 1);
    assert_eq!(plan.approved_by, None);
    assert!(plan.answers.is_empty(), "every question at its default");
}

#[test]
fn approve_with_answers_starts_implement_with_the_plan_and_the_answers() {
    let mut run = planning(PlanMode::Approve);
    posted(&mut run, a_plan(&[("1", "a"), ("2", "std"), ("3", "no")]));
    let decision = run.apply(approve(vec![answer("1", "b"), answer("3", "use tokio")]));
    assert_eq!(decision.transitions, [(Phase::Plan, Phase::Implement)]);
    let replied = decision.effects.iter().any(|e| {
        matches!(e, EffectIntent::PostCommandReply { reply: Reply::Accepted { command, .. }, .. } if command == "approve")
    });
    assert!(replied, "{:?}", decision.effects);
    let plan = implement_plan(&run).expect("the implementer gets the plan");
    assert_eq!(plan.approved_by.as_deref(), Some("op"));
    let resolved: Vec<(&str, &str, bool)> = plan
        .resolved()
        .into_iter()
        .map(|(q, a, given)| (q.id.as_str(), a, given))
        .collect();
    assert_eq!(
        resolved,
        [
            ("1", "b", true),
            ("2", "std", false),
            ("3", "use tokio", true)
        ]
    );
}

#[test]
fn an_answer_to_a_question_the_plan_does_not_ask_is_refused() {
    let mut run = planning(PlanMode::Approve);
    posted(&mut run, a_plan(&[("1", "a")]));
    let refusal = run.refuse(approve(vec![answer("4", "x")]));
    assert!(refusal.to_string().contains("no question 4"), "{refusal}");
    assert_eq!(run.state.awaiting, Awaiting::PlanApproval);
}

#[test]
fn approve_while_the_plan_is_being_written_is_refused() {
    let mut run = planning(PlanMode::Approve);
    let refusal = run.refuse(approve(Vec::new()));
    assert!(
        matches!(refusal, Refusal::PlanNotAvailable { .. }),
        "{refusal}"
    );
    let mut implementing = planning(PlanMode::Off);
    let refusal = implementing.refuse(approve(Vec::new()));
    assert!(refusal.to_string().contains("IMPLEMENT"), "{refusal}");
}

#[test]
fn replan_writes_a_new_version_with_the_notes_and_approve_then_uses_it() {
    let mut run = planning(PlanMode::Approve);
    posted(&mut run, a_plan(&[("1", "a")]));
    let decision = run.apply(command(OperatorRequest::Replan {
        notes: "keep the old flag name".to_owned(),
    }));
    assert_eq!(decision.transitions, [(Phase::Plan, Phase::Plan)]);
    let launch = run.launch();
    assert!(
        matches!(launch.inputs, LaunchInputs::Plan { version: 2, .. }),
        "{:?}",
        launch.inputs
    );
    let guidance = run.state.operator_guidance.clone().expect("notes kept");
    assert_eq!(guidance.command, "replan");
    assert_eq!(guidance.text, "keep the old flag name");
    let second = PlanResult {
        summary: "Keep the old name.".to_owned(),
        ..a_plan(&[])
    };
    run.succeed(PhaseResult::Plan(second));
    assert_eq!(plan_comments(&run.last), [2]);
    assert_eq!(run.state.operator_guidance, None, "the planner answered");
    run.observed(vec![comment_posted()]);
    run.apply(approve(Vec::new()));
    let plan = implement_plan(&run).expect("the implementer gets the plan");
    assert_eq!(plan.version, 2);
    assert_eq!(plan.plan.summary, "Keep the old name.");
}

#[test]
fn help_lists_approve_and_replan_only_while_a_plan_waits() {
    let mut run = planning(PlanMode::Approve);
    let before = crate::machine::decide::help::help_text(&run.state);
    assert!(!before.contains("/autoforge approve"), "{before}");
    posted(&mut run, a_plan(&[]));
    let waiting = crate::machine::decide::help::help_text(&run.state);
    assert!(
        waiting.contains("`/autoforge approve [answers]`"),
        "{waiting}"
    );
    assert!(waiting.contains("`/autoforge replan <notes>`"), "{waiting}");
}
