//! The bodies no other module renders: the run's status comment, the
//! reply to an operator command, the notices and the check run's output. Their visible text is checked with the
//! published-text policy like every other body; the marker is added after.

use crate::inline_code::code_span;
use crate::machine::{
    AgentPhase, CheckShows, IssueFinished, MergeMode, Notice, Phase, Reply, RunningLine,
    StatusSnapshot,
};
use crate::publish::{PolicyViolation, check_body};

/// The commands that make sense next, by phase and what the run waits for.
fn next_commands(status: &StatusSnapshot) -> &'static str {
    match status.phase {
        Phase::Blocked if status.blocked_from == Some(Phase::Initializing) => {
            "remove and add the trigger label again to start a new run; `/autoforge status`"
        }
        Phase::Blocked => "`/autoforge unblock <reason>`, `/autoforge stop`, `/autoforge status`",
        Phase::Done | Phase::Failed | Phase::Stopped => "none: the run is finished",
        Phase::ReadyForMerge if status.merge_mode == MergeMode::OnCommand => {
            "`/autoforge merge`, `/autoforge stop`, `/autoforge status`"
        }
        Phase::ReadyForMerge if status.merge_mode == MergeMode::Never => {
            "`/autoforge stop`, `/autoforge status`; a person merges the pull request"
        }
        _ if status.waiting_for == "operator_retry" => {
            "`/autoforge retry`, `/autoforge stop`, `/autoforge status`"
        }
        Phase::Plan if status.waiting_for == "plan_approval" => {
            "`/autoforge approve [answers]` (see the plan comment), `/autoforge replan <notes>`, \
             `/autoforge stop`, `/autoforge status`"
        }
        _ => "`/autoforge stop`, `/autoforge status`",
    }
}

/// The status comment's visible text (SPEC §15). A blocked or failure
/// reason can carry outside text (an agent's message, a repository's file
/// names); when the comment would then break the published-text policy,
/// the reasons are left out instead of blocking every later status update.
pub fn status_text(status: &StatusSnapshot) -> Result<String, PolicyViolation> {
    if let Some(finished) = &status.finished {
        return finished_text(finished);
    }
    match status_lines(status, true) {
        Ok(text) => Ok(text),
        Err(_) if status.blocked_reason.is_some() || status.failure.is_some() => {
            status_lines(status, false)
        }
        Err(violation) => Err(violation),
    }
}

const REASON_WITHHELD: &str =
    "the reason is not shown here because it cannot be published; `autoforge runs show` has it";

fn status_lines(status: &StatusSnapshot, with_reasons: bool) -> Result<String, PolicyViolation> {
    let mut lines = vec![
        "### autoforge status".to_owned(),
        String::new(),
        format!("- Phase: **{}**", status.phase),
        format!("- Review round: {}", status.round),
    ];
    if let Some(pr) = status.pr {
        lines.push(format!("- Pull request: #{pr}"));
    }
    if let Some(validation) = &status.last_validation {
        let short = code_span(validation.sha.abbreviated(12));
        lines.push(match (validation.passed, validation.failed_index) {
            (true, _) => format!("- Last validation: passed on {short}"),
            (false, Some(index)) => format!(
                "- Last validation: failed on {short} (command {})",
                u64::from(index) + 1
            ),
            (false, None) => format!("- Last validation: failed on {short}"),
        });
    }
    let shown = |reason: &str| {
        if with_reasons {
            reason.replace('\n', " ")
        } else {
            REASON_WITHHELD.to_owned()
        }
    };
    if let Some(running) = &status.running {
        lines.push(running_line(running));
    }
    lines.extend(spend_lines(status));
    if let Some(wait) = &status.merge_wait {
        lines.push(format!("- Waiting: {wait}"));
    }
    if let Some(reason) = &status.blocked_reason {
        lines.push(format!("- Blocked: {}", shown(reason)));
    }
    if let Some(failure) = &status.failure {
        lines.push(format!("- Failed: {}", shown(failure)));
    }
    lines.push(format!(
        "- Commands: {}; comment `/autoforge help` for what each does",
        next_commands(status)
    ));
    let text = lines.join("\n");
    check_body("status comment", &text)?;
    Ok(text)
}

/// "- Running: implementer `claude` for 12 min, 40 KB output".
fn running_line(running: &RunningLine) -> String {
    let role = match running.role {
        AgentPhase::Plan => "planner",
        AgentPhase::Implement => "implementer",
        AgentPhase::Review => "reviewer",
        AgentPhase::Fix => "fixer",
        AgentPhase::UpdateEpic => "EPIC updater",
    };
    let time = match running.minutes {
        0 => "less than a minute".to_owned(),
        minutes => format!("{minutes} min"),
    };
    format!(
        "- Running: {role} {} for {time}, {} KB output",
        code_span(&running.profile),
        running.output_kib
    )
}

/// What the agents spent: the run's total, and in an EPIC's run this
/// issue's part of the EPIC's total.
fn spend_lines(status: &StatusSnapshot) -> Vec<String> {
    let format_cost = crate::machine::budget::format_cost;
    let mut lines = Vec::new();
    match status.epic {
        Some(epic) => {
            if status.tokens > 0 {
                lines.push(format!(
                    "- Tokens reported by the agents: {} on this issue, {} on the EPIC #{epic}",
                    status.issue_tokens, status.tokens
                ));
            }
            if status.cost_micros > 0 {
                lines.push(format!(
                    "- Estimated agent cost: {} on this issue, {} on the EPIC #{epic}",
                    format_cost(status.issue_cost_micros),
                    format_cost(status.cost_micros)
                ));
            }
        }
        None => {
            if status.tokens > 0 {
                lines.push(format!(
                    "- Tokens reported by the agents: {}",
                    status.tokens
                ));
            }
            if status.cost_micros > 0 {
                lines.push(format!(
                    "- Estimated agent cost: {}",
                    format_cost(status.cost_micros)
                ));
            }
        }
    }
    lines
}

/// The status comment of an issue an EPIC's run has finished with: what
/// became of it and where the run went, and no commands (they would act on
/// the run's current issue, not on this one).
fn finished_text(finished: &IssueFinished) -> Result<String, PolicyViolation> {
    let how = match finished.merged_in {
        Some(pr) => format!("merged in #{pr}"),
        None => "closed".to_owned(),
    };
    let text = [
        "### autoforge status".to_owned(),
        String::new(),
        format!("- Finished: {how}"),
        format!(
            "- The run of EPIC #{} went on to #{}; its status is there.",
            finished.epic, finished.next_issue
        ),
        "- Commands: none here: this issue is finished".to_owned(),
    ]
    .join("\n");
    check_body("status comment", &text)?;
    Ok(text)
}

/// The visible text of a command reply.
pub fn reply_text(reply: &Reply) -> Result<String, PolicyViolation> {
    let text = match reply {
        Reply::Accepted { command, detail } => {
            format!(
                "Accepted {}: {detail}",
                code_span(&format!("/autoforge {command}"))
            )
        }
        Reply::Refused { command, reason } => {
            let refused = format!(
                "Refused {}: {reason}",
                code_span(&format!("/autoforge {command}"))
            );
            // A parse error quotes the commenter's word: if that cannot be
            // published, the reply still goes out, without the reason (the
            // recorded decision keeps it). `command` is a known verb or
            // `malformed`, never the commenter's text.
            if check_body("command reply", &refused).is_ok() {
                refused
            } else {
                format!(
                    "Refused {}: {REASON_WITHHELD}",
                    code_span(&format!("/autoforge {command}"))
                )
            }
        }
        Reply::Status { status } => status_text(status)?,
    };
    check_body("command reply", &text)?;
    Ok(text)
}

/// A notice's visible text: the controller's own wording, logins in code
/// spans (the published-text policy allows no mention) except the one
/// mention a block notice exists for, added after the check.
pub fn notice_text(notice: &Notice) -> Result<String, PolicyViolation> {
    let text = match notice {
        Notice::Blocked { operator, reason } => {
            let told = format!(
                "The run is blocked: {reason}\n\nThe status comment says what can be done next."
            );
            let body = if check_body("notice", &told).is_ok() {
                told
            } else {
                format!("The run is blocked; {REASON_WITHHELD}.")
            };
            check_body("notice", &body)?;
            return Ok(match mentionable(operator) {
                Some(login) => format!("@{login} {body}"),
                None => body,
            });
        }
        Notice::LabelRemovalRefused { actor, reason } => {
            let who = actor
                .as_deref()
                .map_or_else(|| "Someone".to_owned(), code_span);
            format!(
                "{who} removed the trigger label, but the run goes on: {reason}. \
                 Only an operator's removal (or `/autoforge stop`) stops it."
            )
        }
    };
    check_body("notice", &text)?;
    Ok(text)
}

/// The check run's title and summary for `shows`, with the run's status
/// for the details. Like the status comment, a reason that breaks the
/// published-text policy is withheld rather than stopping the check.
pub fn check_run_text(
    shows: &CheckShows,
    status: &StatusSnapshot,
) -> Result<(String, String), PolicyViolation> {
    match check_lines(shows, status, true) {
        Ok(text) => Ok(text),
        Err(_) if !matches!(shows, CheckShows::InProgress { .. }) => {
            check_lines(shows, status, false)
        }
        Err(violation) => Err(violation),
    }
}

fn check_lines(
    shows: &CheckShows,
    status: &StatusSnapshot,
    with_reasons: bool,
) -> Result<(String, String), PolicyViolation> {
    let shown = |reason: &str| {
        if with_reasons {
            reason.replace('\n', " ")
        } else {
            REASON_WITHHELD.to_owned()
        }
    };
    let (title, mut lines) = match shows {
        CheckShows::InProgress { phase, round } => (
            format!("{phase} (round {round})"),
            vec![format!("The run is in **{phase}** (review round {round}).")],
        ),
        CheckShows::Success => (
            "Reviewed clean and validated".to_owned(),
            vec!["The review at this head is clean and its validation passed.".to_owned()],
        ),
        CheckShows::Neutral { reason } if status.phase == Phase::Blocked => (
            "Blocked".to_owned(),
            vec![format!("The run is blocked: {}", shown(reason))],
        ),
        CheckShows::Neutral { reason } => (
            "Reviewed, not validated".to_owned(),
            vec![format!("Not a success: {}", shown(reason))],
        ),
        CheckShows::Failure { reason } => (
            "Failed".to_owned(),
            vec![format!("The run failed: {}", shown(reason))],
        ),
        CheckShows::Cancelled => (
            "Stopped".to_owned(),
            vec!["The run was stopped before it finished.".to_owned()],
        ),
        CheckShows::Superseded { by } => {
            let newer = code_span(by.abbreviated(12));
            let text = format!("A newer head of the pull request ({newer}) took over.");
            check_body("check run", &text)?;
            return Ok(("Superseded by a newer head".to_owned(), text));
        }
    };
    if let Some(validation) = &status.last_validation {
        let short = code_span(validation.sha.abbreviated(12));
        let verdict = if validation.passed {
            "passed"
        } else {
            "failed"
        };
        lines.push(format!("Last validation: {verdict} on {short}."));
    }
    lines.push(format!("Commands: {}.", next_commands(status)));
    let summary = lines.join("\n\n");
    check_body("check run", &summary)?;
    Ok((title, summary))
}

/// `login` if it is a person's GitHub login (letters, digits and inner
/// hyphens, at most 39), which a mention can carry and nothing else can.
fn mentionable(login: &str) -> Option<&str> {
    let shape = !login.is_empty()
        && login.len() <= 39
        && !login.starts_with('-')
        && !login.ends_with('-')
        && login.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    shape.then_some(login)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn snapshot(phase: Phase) -> StatusSnapshot {
        StatusSnapshot {
            phase,
            round: 2,
            pr: Some(autoforge_journal::testing::pull(7)),
            blocked_reason: Some("two PRs\nhold one identity".into()),
            failure: None,
            waiting_for: "nothing".into(),
            last_validation: Some(crate::machine::LastValidation {
                sha: autoforge_journal::testing::sha("0123456789abcdef0123456789abcdef01234567"),
                passed: false,
                failed_index: Some(1),
            }),
            merge_mode: MergeMode::OnCommand,
            blocked_from: Some(Phase::Review),
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
    fn reported_tokens_are_shown_and_none_reported_shows_no_line() {
        let counted = StatusSnapshot {
            tokens: 12_345,
            ..snapshot(Phase::Review)
        };
        let text = status_text(&counted).unwrap();
        assert!(
            text.contains("- Tokens reported by the agents: 12345"),
            "{text}"
        );
        let none = status_text(&snapshot(Phase::Review)).unwrap();
        assert!(!none.contains("Tokens"), "{none}");
        assert!(!none.contains("cost"), "{none}");
        let priced = StatusSnapshot {
            tokens: 12_345,
            cost_micros: 1_250_000,
            ..snapshot(Phase::Review)
        };
        let text = status_text(&priced).unwrap();
        assert!(text.contains("- Estimated agent cost: 1.25"), "{text}");
    }

    #[test]
    fn a_running_launch_is_shown_with_its_role_profile_minutes_and_output() {
        let status = StatusSnapshot {
            running: Some(Box::new(RunningLine {
                launch: 2,
                role: AgentPhase::Implement,
                profile: "claude".into(),
                minutes: 12,
                output_kib: 40,
            })),
            ..snapshot(Phase::Implement)
        };
        let text = status_text(&status).unwrap();
        assert!(
            text.contains("- Running: implementer `claude` for 12 min, 40 KB output"),
            "{text}"
        );
        assert!(
            !status_text(&snapshot(Phase::Implement))
                .unwrap()
                .contains("Running")
        );
    }

    #[test]
    fn an_epic_runs_comment_shows_this_issues_spend_beside_the_epics() {
        let status = StatusSnapshot {
            tokens: 9_000,
            cost_micros: 3_000_000,
            epic: Some(autoforge_journal::testing::issue(1)),
            issue_tokens: 2_500,
            issue_cost_micros: 750_000,
            ..snapshot(Phase::Review)
        };
        let text = status_text(&status).unwrap();
        assert!(
            text.contains(
                "- Tokens reported by the agents: 2500 on this issue, 9000 on the EPIC #1"
            ),
            "{text}"
        );
        assert!(
            text.contains("- Estimated agent cost: 0.7500 on this issue, 3.00 on the EPIC #1"),
            "{text}"
        );
    }

    #[test]
    fn what_the_merge_gate_waits_for_is_shown() {
        let status = StatusSnapshot {
            blocked_reason: None,
            merge_wait: Some("waiting for an approving review (0 of 1 required)".into()),
            ..snapshot(Phase::ReadyForMerge)
        };
        let text = status_text(&status).unwrap();
        assert!(
            text.contains("- Waiting: waiting for an approving review (0 of 1 required)"),
            "{text}"
        );
    }

    #[test]
    fn status_names_phase_round_pr_reason_and_next_commands() {
        let text = status_text(&snapshot(Phase::Blocked)).unwrap();
        assert!(text.contains("**BLOCKED**"));
        assert!(text.contains("round: 2"));
        assert!(text.contains("#7"));
        assert!(text.contains("Blocked: two PRs hold one identity"));
        assert!(text.contains("/autoforge unblock"));
        assert!(
            text.contains("Last validation: failed on `0123456789ab` (command 2)"),
            "{text}"
        );
    }

    #[test]
    fn a_reason_that_cannot_be_published_is_withheld_not_fatal() {
        let mut status = snapshot(Phase::Blocked);
        status.blocked_reason = Some("the agent reported blocked: this fixes #12".into());
        let text = status_text(&status).unwrap();
        assert!(!text.contains("fixes #12"), "{text}");
        assert!(text.contains("Blocked: the reason is not shown"), "{text}");
        assert!(text.contains("**BLOCKED**"));
    }

    #[test]
    fn the_commands_offered_are_the_ones_that_would_be_accepted() {
        let ready = snapshot(Phase::ReadyForMerge);
        assert!(status_text(&ready).unwrap().contains("`/autoforge merge`"));
        let never = StatusSnapshot {
            merge_mode: MergeMode::Never,
            ..ready
        };
        let text = status_text(&never).unwrap();
        assert!(!text.contains("/autoforge merge"), "{text}");
        let before_start = StatusSnapshot {
            blocked_from: Some(Phase::Initializing),
            ..snapshot(Phase::Blocked)
        };
        let text = status_text(&before_start).unwrap();
        assert!(!text.contains("/autoforge unblock"), "{text}");
        assert!(text.contains("trigger label"), "{text}");
    }

    #[test]
    fn a_plan_waiting_for_approval_offers_approve_and_replan() {
        let mut waiting = snapshot(Phase::Plan);
        waiting.waiting_for = "plan_approval".into();
        let text = status_text(&waiting).unwrap();
        assert!(text.contains("- Phase: **PLAN**"), "{text}");
        assert!(text.contains("`/autoforge approve [answers]`"), "{text}");
        assert!(text.contains("`/autoforge replan <notes>`"), "{text}");
        let writing = status_text(&snapshot(Phase::Plan)).unwrap();
        assert!(!writing.contains("/autoforge approve"), "{writing}");
    }

    #[test]
    fn a_refusal_quoting_unpublishable_text_is_still_answered() {
        let reply = Reply::Refused {
            command: "malformed".into(),
            reason: "unknown command `<!--autoforge-status`; see the usage".into(),
        };
        let text = reply_text(&reply).unwrap();
        assert!(!text.contains("<!--"), "{text}");
        assert!(text.starts_with("Refused `/autoforge malformed`"), "{text}");
    }

    #[test]
    fn replies_quote_the_command_in_a_code_span() {
        let reply = Reply::Refused {
            command: "merge".into(),
            reason: "merge.mode is never".into(),
        };
        assert_eq!(
            reply_text(&reply).unwrap(),
            "Refused `/autoforge merge`: merge.mode is never"
        );
    }
}
