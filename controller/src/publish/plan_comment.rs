//! The plan comment the controller renders from a PLAN result (SPEC §4
//! PLAN): one per plan version on the run's issue, with the `ai-plan`
//! marker.
//!
//! Heading, layout, the question numbers and the how-to-answer lines are
//! the controller's; the summary, steps, files, risks and questions are the
//! planner's, each in a block or list item of its own and checked field by
//! field when the result was parsed. The whole body is checked again here,
//! because a fence or raw HTML in one field changes how the rest renders.

use serde_json::json;

use super::marker::render_marker;
use super::policy::{self, GITHUB_BODY_MAX_CHARS, PolicyViolation};
use crate::inline_code::code_span;
use crate::machine::PlanResult;

/// The name the whole-body checks report.
const BODY_FIELD: &str = "plan comment";

/// Everything a plan comment is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct PlanRender<'a> {
    pub version: u32,
    pub plan: &'a PlanResult,
    /// `plan.mode = "approve"`: the comment says how to approve or replan.
    pub awaits_approval: bool,
}

fn bullets(items: &[String]) -> String {
    if items.is_empty() {
        return "None.".to_owned();
    }
    items
        .iter()
        .map(|item| format!("- {}", item.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The closing lines: what happens next, and under approve the commands
/// (in code spans, so the comment itself never reads as one).
fn next_steps(render: &PlanRender<'_>) -> String {
    if !render.awaits_approval {
        return "The implementer starts from this plan now; its questions take the \
                suggested defaults."
            .to_owned();
    }
    let example = match render.plan.questions.first() {
        Some(q) => format!(
            " To answer questions, name them by number, e.g. {}; a question you \
             leave out takes its suggested default.",
            code_span(&format!("/autoforge approve {}=<answer>", q.id))
        ),
        None => String::new(),
    };
    format!(
        "The run waits for an operator. Reply with {} to start the implementation \
         from this plan, or with {} to ask for a new one.{example}",
        code_span("/autoforge approve"),
        code_span("/autoforge replan <notes>"),
    )
}

/// Renders the comment and checks it as a whole: the content rules before
/// the marker, then GitHub's limit on everything.
pub fn render_plan_comment(render: &PlanRender<'_>) -> Result<String, PolicyViolation> {
    let plan = render.plan;
    policy::check_html_closed("summary", &plan.summary)?;
    for (index, text) in plan.steps.iter().chain(&plan.risks).enumerate() {
        policy::check_html_closed(&format!("plan item {}", index + 1), text)?;
    }
    let steps: Vec<String> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| format!("{}. {}", i + 1, step.trim()))
        .collect();
    let files: Vec<String> = plan.files.iter().map(|f| code_span(f.trim())).collect();
    let mut parts = vec![
        format!("# Implementation plan — version {}", render.version),
        plan.summary.trim_end().to_owned(),
        "## Steps".to_owned(),
        steps.join("\n"),
        "## Files likely touched".to_owned(),
        bullets(&files),
        "## Risks".to_owned(),
        bullets(&plan.risks),
        "## Open questions".to_owned(),
    ];
    if plan.questions.is_empty() {
        parts.push("None.".to_owned());
    }
    for question in &plan.questions {
        policy::check_html_closed(&format!("question {}", question.id), &question.question)?;
        parts.push(format!(
            "**Question {}.** {}\n\nSuggested default: {}",
            question.id,
            question.question.trim(),
            code_span(question.default.trim())
        ));
    }
    parts.push(next_steps(render));
    let body = parts.join("\n\n");
    policy::check_body(BODY_FIELD, &body)?;
    let marker = render_marker("ai-plan", &json!({ "version": render.version }));
    let comment = format!("{body}\n\n{marker}");
    policy::check_size(BODY_FIELD, &comment, GITHUB_BODY_MAX_CHARS)?;
    Ok(comment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::PlanQuestion;

    fn plan() -> PlanResult {
        PlanResult {
            summary: "Add a `--dry-run` flag that prints what would change.".into(),
            steps: vec![
                "Parse the flag in the CLI.".into(),
                "Skip every write when it is set.".into(),
            ],
            files: vec!["src/cli.rs".into(), "src/apply.rs".into()],
            risks: vec!["A write path that forgets the flag.".into()],
            questions: vec![
                PlanQuestion {
                    id: "1".into(),
                    question: "Should the flag also skip network reads?".into(),
                    default: "no".into(),
                },
                PlanQuestion {
                    id: "2".into(),
                    question: "Which runtime for the preview?".into(),
                    default: "std threads".into(),
                },
            ],
        }
    }

    #[test]
    fn a_plan_waiting_for_approval_says_how_to_approve_it() {
        let plan = plan();
        let comment = render_plan_comment(&PlanRender {
            version: 2,
            plan: &plan,
            awaits_approval: true,
        })
        .expect("renders");
        insta::assert_snapshot!(comment);
    }

    #[test]
    fn a_posted_plan_says_the_implementer_starts_from_it() {
        let mut plan = plan();
        plan.questions.clear();
        plan.risks.clear();
        let comment = render_plan_comment(&PlanRender {
            version: 1,
            plan: &plan,
            awaits_approval: false,
        })
        .expect("renders");
        insta::assert_snapshot!(comment);
    }

    #[test]
    fn a_plan_field_that_breaks_the_policy_is_refused() {
        let mut plan = plan();
        plan.summary = "Ping @someone about it".into();
        let refused = render_plan_comment(&PlanRender {
            version: 1,
            plan: &plan,
            awaits_approval: false,
        });
        assert!(refused.is_err(), "{refused:?}");
    }
}
