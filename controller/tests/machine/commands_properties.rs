//! Properties of the command parser over arbitrary comment bodies.
#![allow(clippy::unwrap_used)]

use autoforge::commands::{Command, commands_added_by_edit, parse_commands};
use proptest::prelude::*;

fn command_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/autoforge stop".to_owned()),
        Just("/autoforge retry".to_owned()),
        Just("/autoforge merge".to_owned()),
        Just("/autoforge status".to_owned()),
        "[a-z ]{1,40}".prop_map(|reason| format!("/autoforge unblock x{reason}")),
        "[a-z]{1,12}".prop_map(|verb| format!("/autoforge {verb}")),
    ]
}

proptest! {
    #[test]
    fn any_body_parses_without_panicking(body in "\\PC{0,400}") {
        let _ = parse_commands(&body);
    }

    #[test]
    fn commands_inside_a_fence_or_quote_are_never_found(
        lines in proptest::collection::vec(command_line(), 1..6),
        fence in prop_oneof![Just("```"), Just("~~~"), Just("````")],
    ) {
        let joined = lines.join("\n");
        let fenced = format!("{fence}\n{joined}\n{fence}");
        prop_assert!(parse_commands(&fenced).is_empty());
        let quoted: Vec<String> = lines.iter().map(|l| format!("> {l}")).collect();
        prop_assert!(parse_commands(&quoted.join("\n")).is_empty());
        let indented: Vec<String> = lines.iter().map(|l| format!("    {l}")).collect();
        let indented = format!("text\n\n{}", indented.join("\n"));
        prop_assert!(parse_commands(&indented).is_empty());
    }

    #[test]
    fn every_command_line_of_a_plain_paragraph_is_found(
        lines in proptest::collection::vec(command_line(), 1..6),
        crlf in any::<bool>(),
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        prop_assert_eq!(parse_commands(&lines.join(newline)).len(), lines.len());
    }

    #[test]
    fn an_edit_adds_exactly_the_new_lines(
        old in proptest::collection::vec(command_line(), 0..4),
        extra in proptest::collection::vec(command_line(), 0..4),
    ) {
        let new: Vec<String> = old.iter().chain(extra.iter()).cloned().collect();
        let added = commands_added_by_edit(&old.join("\n"), &new.join("\n"));
        prop_assert_eq!(added.len(), extra.len());
        prop_assert!(commands_added_by_edit(&new.join("\n"), &new.join("\n")).is_empty());
    }
}

#[test]
fn a_realistic_comment_yields_only_its_live_command() {
    let body = "Thanks! I checked the logs:\r\n\r\n```\r\n/autoforge merge\r\n```\r\n\r\n\
                > /autoforge stop\r\n\r\nClosed the duplicate PR.\r\n\
                /autoforge unblock duplicate PR #12 closed\r\n";
    assert_eq!(
        parse_commands(body),
        vec![Ok(Command::Unblock {
            reason: "duplicate PR #12 closed".to_owned()
        })]
    );
}
