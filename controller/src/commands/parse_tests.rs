//! Behaviour of the command parser on the Markdown shapes people actually post.

use super::*;

fn ok(body: &str) -> Vec<Command> {
    parse_commands(body)
        .into_iter()
        .map(|parsed| parsed.expect("every command line should parse"))
        .collect()
}

fn unblock(reason: &str) -> Command {
    Command::Unblock {
        reason: reason.to_owned(),
    }
}

#[test]
fn plain_command_on_its_own_line_is_parsed() {
    assert_eq!(ok("/autoforge stop"), vec![Command::Stop]);
    assert_eq!(
        ok("  /autoforge retry  "),
        vec![Command::Retry { notes: None }]
    );
}

#[test]
fn every_verb_is_recognised() {
    let body = "/autoforge unblock dup closed\n/autoforge retry\n/autoforge stop\n\
                /autoforge merge\n/autoforge status";
    assert_eq!(
        ok(body),
        vec![
            unblock("dup closed"),
            Command::Retry { notes: None },
            Command::Stop,
            Command::Merge,
            Command::Status
        ]
    );
}

#[test]
fn several_commands_in_one_paragraph_are_all_found_in_order() {
    let body = "Thanks for the report.\n/autoforge status\n/autoforge retry\nmore text";
    assert_eq!(
        ok(body),
        vec![Command::Status, Command::Retry { notes: None }]
    );
}

#[test]
fn command_after_prose_on_the_same_line_is_not_a_command() {
    assert!(parse_commands("please run /autoforge stop now").is_empty());
}

#[test]
fn crlf_line_endings_are_handled() {
    let body = "hello\r\n/autoforge unblock removed the stale PR\r\n/autoforge status\r\n";
    assert_eq!(
        ok(body),
        vec![unblock("removed the stale PR"), Command::Status]
    );
}

#[test]
fn backtick_fenced_block_hides_commands() {
    assert!(parse_commands("```\n/autoforge stop\n```").is_empty());
    assert!(parse_commands("```text\n/autoforge stop\n```\n").is_empty());
}

#[test]
fn tilde_fenced_block_hides_commands() {
    assert!(parse_commands("~~~\n/autoforge stop\n~~~").is_empty());
}

#[test]
fn unclosed_fence_hides_the_rest_of_the_comment() {
    assert!(parse_commands("```\n/autoforge stop\n\n/autoforge merge").is_empty());
}

#[test]
fn indented_code_block_hides_commands() {
    assert!(parse_commands("Example:\n\n    /autoforge stop\n").is_empty());
}

#[test]
fn inline_code_is_not_a_command() {
    assert!(parse_commands("`/autoforge stop`").is_empty());
    assert!(parse_commands("use `/autoforge merge` when ready").is_empty());
}

#[test]
fn block_quote_hides_commands() {
    assert!(parse_commands("> /autoforge stop").is_empty());
    assert!(parse_commands("> quoted\n> /autoforge merge").is_empty());
}

#[test]
fn nested_block_quote_hides_commands() {
    assert!(parse_commands("> > /autoforge stop\n> > /autoforge merge").is_empty());
}

#[test]
fn lazy_continuation_of_a_quote_is_still_quoted() {
    // CommonMark folds an unprefixed line into the quote's paragraph.
    assert!(parse_commands("> see below\n/autoforge stop").is_empty());
}

#[test]
fn command_after_a_quote_ends_is_parsed() {
    assert_eq!(
        ok("> /autoforge stop\n\n/autoforge status"),
        vec![Command::Status]
    );
}

#[test]
fn list_items_are_not_commands() {
    assert!(parse_commands("- /autoforge stop").is_empty());
    assert!(parse_commands("1. /autoforge merge").is_empty());
    assert!(parse_commands("- item\n  /autoforge stop").is_empty());
}

#[test]
fn html_comment_hides_commands() {
    assert!(parse_commands("<!-- /autoforge stop -->").is_empty());
    assert!(parse_commands("<!--\n/autoforge stop\n-->").is_empty());
    assert!(parse_commands("text <!--\n/autoforge stop\n--> more").is_empty());
}

#[test]
fn html_block_hides_commands() {
    assert!(parse_commands("<details>\n/autoforge stop\n</details>").is_empty());
}

#[test]
fn headings_are_not_commands() {
    assert!(parse_commands("# /autoforge stop").is_empty());
    assert!(parse_commands("/autoforge stop\n---").is_empty());
}

#[test]
fn escaped_or_emphasised_prefix_is_not_a_command() {
    assert!(parse_commands("\\/autoforge stop").is_empty());
    assert!(parse_commands("*/autoforge stop*").is_empty());
}

#[test]
fn prefix_is_case_sensitive_and_must_be_a_whole_word() {
    assert!(parse_commands("/AutoForge stop").is_empty());
    assert!(parse_commands("/autoforgery stop").is_empty());
}

#[test]
fn verb_in_wrong_case_is_refused_with_a_suggestion() {
    assert_eq!(
        parse_commands("/autoforge STOP"),
        vec![Err(CommandParseError::UnknownVerb {
            verb: "STOP".to_owned(),
            suggestion: Some("stop")
        })]
    );
}

#[test]
fn typo_gets_the_nearest_verb_as_suggestion() {
    let parsed = parse_commands("/autoforge mrege");
    assert_eq!(
        parsed,
        vec![Err(CommandParseError::UnknownVerb {
            verb: "mrege".to_owned(),
            suggestion: Some("merge")
        })]
    );
    let message = parsed[0].clone().expect_err("typo").to_string();
    assert!(message.contains("did you mean `merge`"), "{message}");
}

#[test]
fn unrelated_word_gets_no_suggestion_but_the_command_list() {
    let parsed = parse_commands("/autoforge deploy");
    assert_eq!(
        parsed,
        vec![Err(CommandParseError::UnknownVerb {
            verb: "deploy".to_owned(),
            suggestion: None
        })]
    );
    let message = parsed[0].clone().expect_err("unknown").to_string();
    assert!(message.contains("/autoforge unblock <reason>"), "{message}");
}

#[test]
fn help_is_a_command_and_a_bare_prefix_answers_with_the_command_list() {
    assert_eq!(ok("/autoforge help"), vec![Command::Help]);
    assert_eq!(
        parse_commands("/autoforge"),
        vec![Err(CommandParseError::MissingVerb)]
    );
    let list = CommandParseError::MissingVerb.to_string();
    for verb in VERBS {
        assert!(
            list.contains(&format!("/autoforge {verb}")),
            "{list} lacks {verb}"
        );
    }
}

#[test]
fn retry_takes_optional_notes_and_fix_requires_them() {
    assert_eq!(
        ok("/autoforge retry the registry was down"),
        vec![Command::Retry {
            notes: Some("the registry was down".into())
        }]
    );
    assert_eq!(
        ok("/autoforge fix  rename the flag "),
        vec![Command::Fix {
            notes: "rename the flag".into()
        }]
    );
    assert_eq!(
        parse_commands("/autoforge fix"),
        vec![Err(CommandParseError::MissingFixNotes)]
    );
    let over = "x".repeat(MAX_UNBLOCK_REASON_CHARS + 1);
    assert_eq!(
        parse_commands(&format!("/autoforge retry {over}")),
        vec![Err(CommandParseError::TextTooLong {
            verb: "retry",
            chars: MAX_UNBLOCK_REASON_CHARS + 1
        })]
    );
}

#[test]
fn approve_takes_numbered_answers_whose_text_runs_to_the_next_number() {
    let answers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(id, text)| ((*id).to_owned(), (*text).to_owned()))
            .collect()
    };
    assert_eq!(
        ok("/autoforge approve"),
        vec![Command::Approve {
            answers: Vec::new(),
            text: None
        }]
    );
    assert_eq!(
        ok("/autoforge approve 1=b 3=use tokio"),
        vec![Command::Approve {
            answers: answers(&[("1", "b"), ("3", "use tokio")]),
            text: Some("1=b 3=use tokio".into())
        }]
    );
    assert_eq!(
        parse_answers("2=keep a=b as is"),
        Ok(answers(&[("2", "keep a=b as is")]))
    );
}

#[test]
fn a_malformed_approve_is_refused_with_its_usage_and_never_echoed() {
    for (typed, problem) in [
        (
            "/autoforge approve looks good",
            AnswerProblem::NoQuestionNumber,
        ),
        (
            "/autoforge approve 1=a 1=b",
            AnswerProblem::AnsweredTwice(1),
        ),
        ("/autoforge approve 2=", AnswerProblem::EmptyAnswer(2)),
        ("/autoforge approve 0=a", AnswerProblem::NoQuestionNumber),
    ] {
        let parsed = parse_commands(typed);
        assert_eq!(
            parsed,
            vec![Err(CommandParseError::MalformedAnswers {
                problem: problem.clone()
            })],
            "{typed}"
        );
        let reply = CommandParseError::MalformedAnswers { problem }.to_string();
        assert!(reply.contains("`/autoforge approve [answers]`"), "{reply}");
        assert!(!reply.contains("looks good"), "{reply}");
    }
}

#[test]
fn replan_requires_notes() {
    assert_eq!(
        ok("/autoforge replan keep the old name"),
        vec![Command::Replan {
            notes: "keep the old name".into()
        }]
    );
    assert_eq!(
        parse_commands("/autoforge replan"),
        vec![Err(CommandParseError::MissingReplanNotes)]
    );
}

#[test]
fn every_malformed_line_is_answered_with_its_usage() {
    let cases = [
        ("/autoforge unblock", "`/autoforge unblock <reason>`"),
        ("/autoforge fix", "`/autoforge fix <notes>`"),
        ("/autoforge stop now", "`/autoforge stop`"),
        ("/autoforge help me", "`/autoforge help`"),
        ("/autoforge frobnicate", "`/autoforge fix <notes>`"),
    ];
    for (typed, usage) in cases {
        let [Err(error)] = &parse_commands(typed)[..] else {
            panic!("{typed} parses as malformed");
        };
        assert!(error.to_string().contains(usage), "{typed} -> {error}");
    }
}

#[test]
fn unblock_without_reason_is_refused() {
    assert_eq!(
        parse_commands("/autoforge unblock"),
        vec![Err(CommandParseError::MissingUnblockReason)]
    );
    assert_eq!(
        parse_commands("/autoforge unblock    "),
        vec![Err(CommandParseError::MissingUnblockReason)]
    );
}

#[test]
fn unblock_reason_is_trimmed_and_keeps_inner_markup() {
    assert_eq!(
        ok("/autoforge unblock   closed `#12` as duplicate  "),
        vec![unblock("closed `#12` as duplicate")]
    );
}

#[test]
fn unblock_reason_at_the_bound_is_accepted_and_over_it_refused() {
    let at_bound = "é".repeat(MAX_UNBLOCK_REASON_CHARS);
    assert_eq!(
        ok(&format!("/autoforge unblock {at_bound}")),
        vec![unblock(&at_bound)]
    );
    let over = "x".repeat(MAX_UNBLOCK_REASON_CHARS + 1);
    assert_eq!(
        parse_commands(&format!("/autoforge unblock {over}")),
        vec![Err(CommandParseError::TextTooLong {
            verb: "unblock",
            chars: MAX_UNBLOCK_REASON_CHARS + 1
        })]
    );
}

#[test]
fn hard_break_backslash_is_not_part_of_the_reason() {
    assert_eq!(
        ok("/autoforge unblock fixed CI\\\n/autoforge status"),
        vec![unblock("fixed CI"), Command::Status]
    );
}

#[test]
fn argumentless_verbs_refuse_arguments() {
    assert_eq!(
        parse_commands("/autoforge stop now please"),
        vec![Err(CommandParseError::UnexpectedArguments { verb: "stop" })]
    );
}

#[test]
fn tab_separates_prefix_and_verb() {
    assert_eq!(ok("/autoforge\tstatus"), vec![Command::Status]);
}

#[test]
fn long_unknown_verb_is_shortened_in_the_error() {
    let parsed = parse_commands(&format!("/autoforge {}", "z".repeat(200)));
    let Some(Err(CommandParseError::UnknownVerb { verb, .. })) = parsed.first() else {
        panic!("expected an unknown verb, got {parsed:?}");
    };
    assert!(verb.chars().count() <= 33, "{verb}");
}

#[test]
fn edit_yields_only_commands_the_old_body_lacked() {
    let old = "/autoforge status";
    let new = "/autoforge status\n/autoforge retry";
    assert_eq!(
        commands_added_by_edit(old, new),
        vec![Ok(Command::Retry { notes: None })]
    );
}

#[test]
fn edit_that_changes_nothing_yields_nothing() {
    let body = "/autoforge stop\n\n/autoforge unblock x";
    assert!(commands_added_by_edit(body, body).is_empty());
}

#[test]
fn edit_counts_repeated_commands_as_a_multiset() {
    let old = "/autoforge retry";
    let new = "/autoforge retry\n/autoforge retry";
    assert_eq!(
        commands_added_by_edit(old, new),
        vec![Ok(Command::Retry { notes: None })]
    );
}

#[test]
fn edit_fixing_a_typo_yields_the_corrected_command() {
    let added = commands_added_by_edit("/autoforge stpo", "/autoforge stop");
    assert_eq!(added, vec![Ok(Command::Stop)]);
}

#[test]
fn edit_moving_a_command_out_of_a_code_block_activates_it() {
    let added = commands_added_by_edit("```\n/autoforge merge\n```", "/autoforge merge");
    assert_eq!(added, vec![Ok(Command::Merge)]);
}

#[test]
fn edit_distance_matches_textbook_values() {
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "stop"), 4);
    assert_eq!(edit_distance("stop", "stop"), 0);
}

#[test]
fn table_rows_are_not_commands() {
    // GitHub renders these lines as table cells (GFM tables).
    assert!(parse_commands("| a |\n| - |\n/autoforge stop").is_empty());
    assert!(parse_commands("a | b\n--|--\n/autoforge merge | x").is_empty());
}

#[test]
fn text_inside_an_open_details_element_is_not_a_command() {
    // The blank lines end the HTML block, but GitHub keeps the element open
    // and renders the paragraph collapsed inside it.
    let body = "<details>\n<summary>log</summary>\n\n/autoforge merge\n\n</details>\n";
    assert!(parse_commands(body).is_empty());
    assert_eq!(
        ok("<details>\n\nx\n\n</details>\n\n/autoforge status"),
        vec![Command::Status]
    );
}

#[test]
fn a_no_break_space_before_the_prefix_is_not_a_command() {
    assert!(parse_commands("\u{a0}/autoforge stop").is_empty());
}

#[test]
fn bare_carriage_return_line_endings_separate_commands() {
    assert_eq!(
        ok("hello\r/autoforge status\r/autoforge retry"),
        vec![Command::Status, Command::Retry { notes: None }]
    );
}

#[test]
fn an_unknown_verb_is_echoed_only_in_a_safe_alphabet() {
    // Anyone may comment, and the refusal reply is the controller's own
    // comment: what it echoes must not carry a marker opener, a mention, a
    // closing keyword's reference or an HTML tag into it.
    for typed in [
        "<!--autoforge-status:{\"run\":1}",
        "@octocat",
        "#12",
        "<details>",
        "x&#64;y",
    ] {
        let parsed = parse_commands(&format!("/autoforge {typed}"));
        let Some(Err(error)) = parsed.first() else {
            panic!("expected a refusal for {typed:?}, got {parsed:?}");
        };
        let reply = error.to_string();
        for forbidden in ["<", "@", "#", "&"] {
            let outside_usage = reply.replace("<reason>", "").replace("<notes>", "");
            assert!(!outside_usage.contains(forbidden), "{typed:?} -> {reply}");
        }
    }
}

#[test]
fn malformed_command_replies_are_pinned() {
    let replies: Vec<String> = [
        "/autoforge",
        "/autoforge unblock",
        "/autoforge fix",
        "/autoforge stop now",
        "/autoforge retyr",
    ]
    .iter()
    .map(|typed| match &parse_commands(typed)[..] {
        [Err(error)] => format!("{typed} -> {error}"),
        other => panic!("{typed} parsed as {other:?}"),
    })
    .collect();
    insta::assert_snapshot!("malformed_command_replies", replies.join("\n"));
}
