//! The two bodies no other module renders: the run's status comment and
//! the reply to an operator command. Their visible text is checked with the
//! published-text policy like every other body; the marker is added after.

use crate::machine::{Reply, StatusSnapshot};
use crate::publish::review::code_span;
use crate::publish::{PolicyViolation, check_body};

/// The commands that make sense next, by what the run waits for.
fn next_commands(status: &StatusSnapshot) -> &'static str {
    match status.phase.as_str() {
        "BLOCKED" => "`/autoforge unblock <reason>`, `/autoforge stop`, `/autoforge status`",
        "DONE" | "FAILED" | "STOPPED" => "none: the run is finished",
        "READY_FOR_MERGE" => "`/autoforge merge`, `/autoforge stop`, `/autoforge status`",
        _ if status.waiting_for == "operator_retry" => {
            "`/autoforge retry`, `/autoforge stop`, `/autoforge status`"
        }
        _ => "`/autoforge stop`, `/autoforge status`",
    }
}

/// The status comment's visible text (SPEC §15).
pub fn status_text(status: &StatusSnapshot) -> Result<String, PolicyViolation> {
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
        let short = code_span(validation.sha.get(..12).unwrap_or(&validation.sha));
        lines.push(match (validation.passed, validation.failed_index) {
            (true, _) => format!("- Last validation: passed on {short}"),
            (false, Some(index)) => format!(
                "- Last validation: failed on {short} (command {})",
                u64::from(index) + 1
            ),
            (false, None) => format!("- Last validation: failed on {short}"),
        });
    }
    if let Some(reason) = &status.blocked_reason {
        lines.push(format!("- Blocked: {}", reason.replace('\n', " ")));
    }
    if let Some(failure) = &status.failure {
        lines.push(format!("- Failed: {}", failure.replace('\n', " ")));
    }
    lines.push(format!("- Commands: {}", next_commands(status)));
    let text = lines.join("\n");
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
            format!(
                "Refused {}: {reason}",
                code_span(&format!("/autoforge {command}"))
            )
        }
        Reply::Status { status } => status_text(status)?,
    };
    check_body("command reply", &text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::machine::Phase;

    fn snapshot(phase: Phase) -> StatusSnapshot {
        StatusSnapshot {
            phase,
            round: 2,
            pr: Some(7),
            blocked_reason: Some("two PRs\nhold one identity".into()),
            failure: None,
            waiting_for: "nothing".into(),
            last_validation: Some(crate::machine::LastValidation {
                sha: "0123456789abcdef0123456789abcdef01234567".into(),
                passed: false,
                failed_index: Some(1),
            }),
        }
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
