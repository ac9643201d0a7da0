//! Markdown-aware extraction of `/autoforge` command lines from a comment body.
//!
//! Rules (decided here, documented for operators in the status comment help):
//! - A command is a line of a *top-level paragraph* whose first non-blank
//!   characters are exactly `/autoforge` followed by a space, a tab or the end
//!   of the line. The prefix is case-sensitive: `/AutoForge` is plain text.
//! - Lines inside fenced (backtick or tilde) or indented code, inline code,
//!   block quotes (at any nesting), list items, headings, table cells, HTML
//!   blocks, HTML comments and anything inside an open `<details>` element
//!   are never commands: text that is quoted, shown or hidden was not typed
//!   as an instruction.
//! - Several commands may share one paragraph, one per line (soft breaks).
//! - Verbs are lowercase and case-sensitive; a near miss (including a case
//!   difference) is an error that suggests the intended verb, so a typo is
//!   answered instead of silently ignored or loosely obeyed.
//! - `unblock` needs a reason and `fix` and `replan` need notes, each of at
//!   most [`MAX_UNBLOCK_REASON_CHARS`] characters; `retry` takes optional
//!   notes under the same bound, `approve` optional answers (see
//!   [`parse_answers`]). Longer texts are refused, never clipped. The other
//!   verbs take no arguments.
//! - Every refusal of a malformed line carries the usage of what was typed
//!   (or the whole command list), so the reply shows how to write it.

use pulldown_cmark::{Event, Options, Parser, Tag};
use std::collections::BTreeSet;
use std::fmt;

/// The literal that opens every command line.
pub const COMMAND_PREFIX: &str = "/autoforge";

/// Upper bound on an operator's text (an unblock reason, retry or fix
/// notes), in Unicode scalar values.
pub const MAX_UNBLOCK_REASON_CHARS: usize = 500;

/// The verbs an operator can use, in the order the help text lists them.
pub const VERBS: [&str; 9] = [
    "unblock", "retry", "fix", "approve", "replan", "stop", "merge", "status", "help",
];

/// The most answers one `/autoforge approve` may carry (a plan asks at most
/// ten questions).
pub const MAX_ANSWERS: usize = 10;

/// One well-formed operator command.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Command {
    /// Leave `BLOCKED`; the controller picks the phase from live GitHub.
    Unblock { reason: String },
    /// Re-enter the current phase after a transient failure; the notes, if
    /// any, are handed to the next launch as the operator's guidance.
    Retry { notes: Option<String> },
    /// Start a human round: the notes become a finding for the next FIX.
    Fix { notes: String },
    /// Approve the posted plan; `answers` are `(question id, answer)` in
    /// the order typed, `text` the line's argument as typed (it travels to
    /// the run as it is and is parsed again there).
    Approve {
        answers: Vec<(String, String)>,
        text: Option<String>,
    },
    /// Ask for a new plan; the notes go to the planner.
    Replan { notes: String },
    /// Stop the run.
    Stop,
    /// Operator approval to merge (`merge.mode = "on-command"`).
    Merge,
    /// Reply with the run's status.
    Status,
    /// Reply with the commands accepted now and what each does.
    Help,
}

impl Command {
    /// The verb as typed in a comment.
    pub fn verb(&self) -> &'static str {
        match self {
            Command::Unblock { .. } => "unblock",
            Command::Retry { .. } => "retry",
            Command::Fix { .. } => "fix",
            Command::Approve { .. } => "approve",
            Command::Replan { .. } => "replan",
            Command::Stop => "stop",
            Command::Merge => "merge",
            Command::Status => "status",
            Command::Help => "help",
        }
    }

    /// The operator's text the command carries (unblock reason, notes).
    pub fn text(&self) -> Option<&str> {
        match self {
            Command::Unblock { reason } => Some(reason),
            Command::Retry { notes } => notes.as_deref(),
            Command::Fix { notes } | Command::Replan { notes } => Some(notes),
            Command::Approve { text, .. } => text.as_deref(),
            Command::Stop | Command::Merge | Command::Status | Command::Help => None,
        }
    }
}

/// How `verb` is written, for the reply to a malformed line.
pub fn usage_of(verb: &str) -> Option<&'static str> {
    Some(match verb {
        "unblock" => "`/autoforge unblock <reason>`",
        "retry" => "`/autoforge retry [notes]`",
        "fix" => "`/autoforge fix <notes>`",
        "approve" => "`/autoforge approve [answers]`",
        "replan" => "`/autoforge replan <notes>`",
        "stop" => "`/autoforge stop`",
        "merge" => "`/autoforge merge`",
        "status" => "`/autoforge status`",
        "help" => "`/autoforge help`",
        _ => return None,
    })
}

/// Why a `/autoforge` line is not a valid command. The text is meant for the
/// reply comment, so it never echoes the offending reason text back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum CommandParseError {
    #[error("`/autoforge` needs a command; {}", usage())]
    MissingVerb,
    #[error("unknown command `{verb}`{}; {}", suggestion_text(.suggestion.as_deref()), usage())]
    UnknownVerb {
        verb: String,
        suggestion: Option<&'static str>,
    },
    #[error(
        "`/autoforge unblock` needs a reason, e.g. `/autoforge unblock closed the duplicate PR`; usage: `/autoforge unblock <reason>`"
    )]
    MissingUnblockReason,
    #[error(
        "`/autoforge fix` needs notes saying what to change, e.g. `/autoforge fix rename the flag to --dry-run`; usage: `/autoforge fix <notes>`"
    )]
    MissingFixNotes,
    #[error(
        "`/autoforge replan` needs notes saying what the new plan should change, e.g. `/autoforge replan keep the old flag name`; usage: `/autoforge replan <notes>`"
    )]
    MissingReplanNotes,
    #[error(
        "{problem}; answers name a question of the plan by number, e.g. `/autoforge approve 1=b 3=use tokio`, and a question left out takes its default; usage: `/autoforge approve [answers]`"
    )]
    MalformedAnswers { problem: AnswerProblem },
    #[error(
        "the text after `/autoforge {verb}` has {chars} characters; at most {MAX_UNBLOCK_REASON_CHARS} are allowed; usage: {}", usage_of(verb).unwrap_or_default()
    )]
    TextTooLong { verb: &'static str, chars: usize },
    #[error("`/autoforge {verb}` takes no arguments; usage: {}", usage_of(verb).unwrap_or_default())]
    UnexpectedArguments { verb: &'static str },
}

/// What is wrong with the answers of an approve, without echoing them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AnswerProblem {
    #[error("the text after `/autoforge approve` does not start with `<number>=`")]
    NoQuestionNumber,
    #[error("question {0} is answered twice")]
    AnsweredTwice(u32),
    #[error("the answer to question {0} is empty")]
    EmptyAnswer(u32),
    #[error("at most {MAX_ANSWERS} questions can be answered")]
    TooMany,
}

/// `1=b 3=use tokio` as `[("1", "b"), ("3", "use tokio")]`: a word
/// `<n>=…` (n from 1 to 99) starts the answer to question n, the words up
/// to the next such word are its text. Empty text is no answers.
pub fn parse_answers(text: &str) -> Result<Vec<(String, String)>, AnswerProblem> {
    let mut answers: Vec<(String, String)> = Vec::new();
    for word in text.split_whitespace() {
        match question_of(word) {
            Some((id, first)) => {
                if answers.iter().any(|(seen, _)| *seen == id.to_string()) {
                    return Err(AnswerProblem::AnsweredTwice(id));
                }
                if answers.len() == MAX_ANSWERS {
                    return Err(AnswerProblem::TooMany);
                }
                answers.push((id.to_string(), first.to_owned()));
            }
            None => {
                let Some((_, answer)) = answers.last_mut() else {
                    return Err(AnswerProblem::NoQuestionNumber);
                };
                if !answer.is_empty() {
                    answer.push(' ');
                }
                answer.push_str(word);
            }
        }
    }
    for (id, answer) in &answers {
        if answer.is_empty() {
            return Err(AnswerProblem::EmptyAnswer(id.parse().unwrap_or_default()));
        }
    }
    Ok(answers)
}

/// `(n, rest)` of a word `n=rest` whose `n` is a question number.
fn question_of(word: &str) -> Option<(u32, &str)> {
    let (number, rest) = word.split_once('=')?;
    let plain = !number.is_empty()
        && number.len() <= 2
        && !number.starts_with('0')
        && number.bytes().all(|b| b.is_ascii_digit());
    plain
        .then(|| number.parse().ok().map(|n| (n, rest)))
        .flatten()
}

fn suggestion_text(suggestion: Option<&str>) -> String {
    suggestion
        .map(|verb| format!(" (did you mean `{verb}`?)"))
        .unwrap_or_default()
}

fn usage() -> String {
    let all: Vec<&str> = VERBS.iter().filter_map(|verb| usage_of(verb)).collect();
    format!("commands: {}", all.join(", "))
}

/// Every command line of `body`, in order of appearance, each parsed or
/// refused. Text that is not a command line is not represented at all.
pub fn parse_commands(body: &str) -> Vec<Result<Command, CommandParseError>> {
    command_lines(body).into_iter().map(parse_line).collect()
}

/// Finds the raw text of every command line. pulldown-cmark tells us which
/// text belongs to a top-level paragraph; the raw source line tells us whether
/// that text is the first thing on its line (so list markers, quote markers,
/// escapes and emphasis in front of the prefix disqualify it).
fn command_lines(body: &str) -> Vec<&str> {
    let mut open_blocks: Vec<bool> = Vec::new();
    let mut seen_line_starts = BTreeSet::new();
    let mut lines = Vec::new();
    // GitHub keeps a `<details>` element open past the blank line that ends
    // its HTML block, so the paragraphs after it render collapsed inside it.
    let mut details_depth: usize = 0;
    // Tables as GitHub parses them: a row line must not read as a paragraph.
    let options = Options::ENABLE_TABLES;
    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        match event {
            Event::Start(tag) => open_blocks.push(matches!(tag, Tag::Paragraph)),
            Event::End(_) => {
                open_blocks.pop();
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let html = html.to_ascii_lowercase();
                let opened = count_tags(&html, "<details");
                let closed = count_tags(&html, "</details");
                details_depth = (details_depth + opened).saturating_sub(closed);
            }
            Event::Text(text) if open_blocks.first() == Some(&true) && details_depth == 0 => {
                if !text.starts_with(COMMAND_PREFIX) {
                    continue;
                }
                let line_start = body[..range.start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
                if !body[line_start..range.start].trim().is_empty()
                    || !seen_line_starts.insert(line_start)
                {
                    continue;
                }
                let line_end = body[line_start..]
                    .find(['\n', '\r'])
                    .map_or(body.len(), |i| line_start + i);
                let line = body[line_start..line_end].trim();
                // A trailing backslash is a Markdown hard break, not part of the text.
                let line = line.strip_suffix('\\').unwrap_or(line).trim_end();
                if is_prefix_word(line) {
                    lines.push(line);
                }
            }
            _ => {}
        }
    }
    lines
}

/// How many `name` tags (`<details`, `</details`) open in lowercase `html`,
/// as whole tag names.
fn count_tags(html: &str, name: &str) -> usize {
    html.match_indices(name)
        .filter(|(at, _)| {
            html[at + name.len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_ascii_whitespace() || c == '>' || c == '/')
        })
        .count()
}

/// `/autoforge` must stand alone: `/autoforgery` is ordinary text.
fn is_prefix_word(line: &str) -> bool {
    line.strip_prefix(COMMAND_PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

fn parse_line(line: &str) -> Result<Command, CommandParseError> {
    let rest = line
        .strip_prefix(COMMAND_PREFIX)
        .unwrap_or_default()
        .trim_start();
    let (verb, args) = match rest.split_once([' ', '\t']) {
        Some((verb, args)) => (verb, args.trim()),
        None => (rest, ""),
    };
    let no_args = |command: Command| {
        if args.is_empty() {
            Ok(command)
        } else {
            Err(CommandParseError::UnexpectedArguments {
                verb: command.verb(),
            })
        }
    };
    match verb {
        "" => Err(CommandParseError::MissingVerb),
        "help" => no_args(Command::Help),
        "unblock" => bounded_text("unblock", args)
            .and_then(|reason| reason.ok_or(CommandParseError::MissingUnblockReason))
            .map(|reason| Command::Unblock { reason }),
        "fix" => bounded_text("fix", args)
            .and_then(|notes| notes.ok_or(CommandParseError::MissingFixNotes))
            .map(|notes| Command::Fix { notes }),
        "retry" => bounded_text("retry", args).map(|notes| Command::Retry { notes }),
        "replan" => bounded_text("replan", args)
            .and_then(|notes| notes.ok_or(CommandParseError::MissingReplanNotes))
            .map(|notes| Command::Replan { notes }),
        "approve" => bounded_text("approve", args).and_then(|text| {
            let answers = parse_answers(text.as_deref().unwrap_or_default())
                .map_err(|problem| CommandParseError::MalformedAnswers { problem })?;
            Ok(Command::Approve { answers, text })
        }),
        "stop" => no_args(Command::Stop),
        "merge" => no_args(Command::Merge),
        "status" => no_args(Command::Status),
        other => Err(CommandParseError::UnknownVerb {
            verb: bounded_verb(other),
            suggestion: nearest_verb(other),
        }),
    }
}

/// The operator's text after `verb`: `None` when there is none, refused
/// when longer than [`MAX_UNBLOCK_REASON_CHARS`].
fn bounded_text(verb: &'static str, text: &str) -> Result<Option<String>, CommandParseError> {
    let chars = text.chars().count();
    if chars > MAX_UNBLOCK_REASON_CHARS {
        return Err(CommandParseError::TextTooLong { verb, chars });
    }
    Ok((chars > 0).then(|| text.to_owned()))
}

/// The unknown verb is echoed in the reply, which is the controller's own
/// comment and may answer anyone: only letters, digits, `-`, `_` and `.`
/// are echoed, so no marker opener, mention, issue reference, entity or
/// HTML an arbitrary commenter typed ends up in it. Short, too.
fn bounded_verb(verb: &str) -> String {
    const MAX_ECHOED_VERB_CHARS: usize = 32;
    let safe = |c: &char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut shown: String = verb
        .chars()
        .filter(safe)
        .take(MAX_ECHOED_VERB_CHARS)
        .collect();
    if verb.chars().filter(safe).count() > MAX_ECHOED_VERB_CHARS || !verb.chars().all(|c| safe(&c))
    {
        shown.push('…');
    }
    shown
}

/// The closest verb by edit distance (case-insensitive), if it is close
/// enough to be a plausible typo.
fn nearest_verb(typed: &str) -> Option<&'static str> {
    let typed = typed.to_lowercase();
    VERBS
        .iter()
        .map(|verb| (edit_distance(&typed, verb), *verb))
        .filter(|(distance, verb)| *distance <= verb.len().div_ceil(3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, verb)| verb)
}

/// Levenshtein distance over Unicode scalar values.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// The commands `new_body` has that `old_body` did not, with multiset
/// semantics: a command present once before and twice now yields it once.
/// Errors count too, so a typo that was already answered is not re-answered.
pub fn commands_added_by_edit(
    old_body: &str,
    new_body: &str,
) -> Vec<Result<Command, CommandParseError>> {
    let mut previous = parse_commands(old_body);
    parse_commands(new_body)
        .into_iter()
        .filter(
            |parsed| match previous.iter().position(|old| old == parsed) {
                Some(index) => {
                    // The matched old entry is consumed so each counts once.
                    let _consumed = previous.swap_remove(index);
                    false
                }
                None => true,
            },
        )
        .collect()
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Unblock { .. } => write!(f, "{COMMAND_PREFIX} unblock <reason>"),
            Command::Fix { .. } => write!(f, "{COMMAND_PREFIX} fix <notes>"),
            Command::Replan { .. } => write!(f, "{COMMAND_PREFIX} replan <notes>"),
            Command::Approve { text: Some(_), .. } => {
                write!(f, "{COMMAND_PREFIX} approve <answers>")
            }
            Command::Retry { notes: Some(_) } => write!(f, "{COMMAND_PREFIX} retry <notes>"),
            other => write!(f, "{COMMAND_PREFIX} {}", other.verb()),
        }
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
