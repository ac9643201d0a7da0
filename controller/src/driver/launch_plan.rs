//! What a PLAN launch is given (SPEC §4 PLAN): the issue (and its EPIC),
//! the repository at the base commit, read-only; and the section an
//! IMPLEMENT launch gets once a plan was approved: the plan and the answer
//! that stands for each of its questions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::agent_step::PhasePlan;
use super::error::DriverError;
use super::launch_context::ContextReader;
use super::launch_implement::issue_and_epic_context;
use super::{RepositoryAccess, Shared};
use crate::agents::context::ContextDoc;
use crate::agents::pipeline::Expectations;
use crate::agents::prompt::{PromptSet, TemplateId, Value};
use crate::inline_code::code_span;
use crate::machine::{AgentPhase, ApprovedPlan, PlanResult, RunState};
use crate::redact::Redactor;
use crate::workspace::CommitSha;

/// The plan of a PLAN launch for `state`'s issue, writing plan `version`.
pub(super) async fn plan_plan(
    shared: &Shared,
    access: &RepositoryAccess,
    state: &RunState,
    (base, version): (&CommitSha, u32),
    issue_url: &str,
    (issue_doc, reader): (ContextDoc, &mut ContextReader<'_>),
) -> Result<PhasePlan, DriverError> {
    let (context, epic_url) = issue_and_epic_context(shared, state, issue_doc, reader).await?;
    let values = BTreeMap::from([
        ("PLAN_VERSION", Value::trusted(version.to_string())),
        ("ISSUE_URL", Value::trusted(issue_url)),
        ("EPIC_URL", Value::trusted(epic_url)),
        ("REPOSITORY", Value::trusted(access.repo.to_string())),
        ("DEFAULT_BRANCH", Value::trusted(state.base_branch.clone())),
        ("BASE_SHA", Value::trusted(base.to_string())),
        ("ADDITIONAL_SECTIONS", Value::trusted(String::new())),
    ]);
    Ok(PhasePlan {
        phase: AgentPhase::Plan,
        fetch: vec![base.clone()],
        start: base.clone(),
        values,
        expectations: Expectations::Plan,
        context,
        rerequest: None,
    })
}

/// The plan as Markdown, for the implementer (inside an untrusted fence).
fn plan_markdown(plan: &PlanResult) -> String {
    let mut text = format!("Summary: {}\n\nSteps:\n", plan.summary.trim());
    for (index, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(text, "{}. {}", index + 1, step.trim());
    }
    let list = |title: &str, items: &[String]| {
        let mut block = format!("\n{title}:\n");
        if items.is_empty() {
            block.push_str("- (none)\n");
        }
        for item in items {
            let _ = writeln!(block, "- {}", item.trim());
        }
        block
    };
    text.push_str(&list("Files likely touched", &plan.files));
    text.push_str(&list("Risks", &plan.risks));
    text
}

/// Each question with the answer that stands. The operator's answers were
/// typed on GitHub, so they are redacted like operator guidance.
fn answers_markdown(approved: &ApprovedPlan, redactor: &Redactor) -> String {
    let resolved = approved.resolved();
    if resolved.is_empty() {
        return "(the plan asked no questions)".to_owned();
    }
    let mut text = String::new();
    for (question, answer, given) in resolved {
        let by = if given {
            "the operator's answer"
        } else {
            "default"
        };
        let _ = writeln!(
            text,
            "{}. {}\n   Answer ({by}): {}",
            question.id,
            question.question.trim(),
            redactor.redact(answer.trim())
        );
    }
    text
}

/// `approved_plan.md` for an IMPLEMENT launch that has a plan to follow.
pub(super) fn approved_plan_section(
    prompts: &PromptSet,
    redactor: &Redactor,
    approved: &ApprovedPlan,
) -> Result<String, DriverError> {
    let approval = match &approved.approved_by {
        Some(actor) => format!("the operator {} approved it", code_span(actor)),
        None => "the controller posted it on the issue (`plan.mode = \"post\"`: \
                 nobody was asked to approve it)"
            .to_owned(),
    };
    let values = BTreeMap::from([
        ("PLAN_VERSION", Value::trusted(approved.version.to_string())),
        ("PLAN_APPROVAL", Value::trusted(approval)),
        ("PLAN_TEXT", Value::untrusted(plan_markdown(&approved.plan))),
        (
            "PLAN_ANSWERS",
            Value::untrusted(answers_markdown(approved, redactor)),
        ),
    ]);
    prompts
        .render(TemplateId::ApprovedPlan, &values)
        .map(|s| s.trim_end().to_owned())
        .map_err(|e| DriverError::Agent(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{PlanAnswer, PlanQuestion};

    #[test]
    fn the_section_carries_the_plan_and_each_answer_with_who_gave_it() {
        let approved = ApprovedPlan {
            version: 2,
            plan: PlanResult {
                summary: "Add a flag.".into(),
                steps: vec!["Parse it".into(), "Use it".into()],
                files: vec!["src/cli.rs".into()],
                risks: vec![],
                questions: vec![
                    PlanQuestion {
                        id: "1".into(),
                        question: "Name?".into(),
                        default: "--dry-run".into(),
                    },
                    PlanQuestion {
                        id: "2".into(),
                        question: "Runtime?".into(),
                        default: "std".into(),
                    },
                ],
            },
            answers: vec![PlanAnswer {
                id: "2".into(),
                text: "use tokio".into(),
            }],
            approved_by: Some("alice".into()),
        };
        let prompts = PromptSet::embedded();
        let section =
            approved_plan_section(&prompts, &Redactor::new(), &approved).expect("renders");
        assert!(section.contains("plan 2"), "{section}");
        assert!(section.contains("`alice` approved it"), "{section}");
        assert!(section.contains("1. Parse it"), "{section}");
        assert!(section.contains("Answer (default): --dry-run"), "{section}");
        assert!(
            section.contains("Answer (the operator's answer): use tokio"),
            "{section}"
        );
        assert!(section.contains("```untrusted"), "{section}");
    }
}
