//! The published-text policy (SPEC §7): refuse, never rewrite.
//!
//! Every agent-supplied field is checked on its own ([`check_field`]) and
//! every body the controller composes is checked again as a whole
//! ([`check_body`]), because Markdown does not respect field boundaries: a
//! fence one field leaves open swallows the fields after it, and raw HTML in
//! one field voids the code exemption for a mention in another. A violation
//! names the field, the rule and an offset or size, never the text itself,
//! so diagnostics can be logged and shown to the agent without re-publishing
//! what was refused.

use std::sync::LazyLock;

use regex::Regex;

use super::markdown::CodeMap;
use super::rendered::{RenderedView, is_bidi_control};
use crate::redact::{CredentialKind, find_credential};

/// GitHub's limit for an issue, PR or comment body, in characters.
pub const GITHUB_BODY_MAX_CHARS: usize = 65_536;
/// GitHub's limit for an issue or PR title, in characters.
pub const GITHUB_TITLE_MAX_CHARS: usize = 256;

/// How a field may be shaped. Sizes are counted in Unicode scalar values
/// (`char`s), the unit JSON Schema's `maxLength` uses, so the schema and this
/// check agree on every bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A single line: no control character of any kind.
    OneLine { max_chars: usize },
    /// Markdown prose: `\n` and `\t` are the only control characters allowed.
    Multiline { max_chars: usize },
}

/// Why a text may not be published. Offsets are byte offsets into the
/// checked text; sizes are characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyViolation {
    #[error("{field}: contains a controller marker opener at byte {offset}")]
    MarkerOpener { field: String, offset: usize },
    #[error("{field}: contains credential-shaped text ({kind})")]
    Credential { field: String, kind: CredentialKind },
    #[error(
        "{field}: contains a closing keyword followed by an issue reference at byte {offset} (refused even inside code)"
    )]
    ClosingKeyword { field: String, offset: usize },
    #[error("{field}: contains an @-mention outside code at byte {offset}")]
    MentionOutsideCode { field: String, offset: usize },
    #[error(
        "{field}: contains an @-mention at byte {offset} while raw HTML appears outside code at byte {html_offset}"
    )]
    MentionWithRawHtml {
        field: String,
        offset: usize,
        html_offset: usize,
    },
    #[error("{field}: a fenced code block opened at byte {offset} is not closed in this field")]
    UnclosedFence { field: String, offset: usize },
    #[error(
        "{field}: raw HTML opened at byte {offset} (a comment, <details>, <pre> or similar) is not closed in this field"
    )]
    UnclosedHtml { field: String, offset: usize },
    #[error("{field}: is {chars} characters, over the limit of {max}")]
    TooLong {
        field: String,
        chars: usize,
        max: usize,
    },
    #[error("{field}: is blank")]
    Blank { field: String },
    #[error("{field}: contains control character U+{code:04X} at byte {offset}")]
    ControlCharacter {
        field: String,
        code: u32,
        offset: usize,
    },
    #[error("{field}: contains a URL at byte {offset}; this field may not contain any URL")]
    Url { field: String, offset: usize },
    #[error(
        "{field}: a line at byte {offset} starts with `/autoforge`, which reads as an operator command (refused even inside code)"
    )]
    CommandLine { field: String, offset: usize },
}

impl PolicyViolation {
    /// The field the violation was found in.
    pub fn field(&self) -> &str {
        match self {
            Self::MarkerOpener { field, .. }
            | Self::Credential { field, .. }
            | Self::ClosingKeyword { field, .. }
            | Self::MentionOutsideCode { field, .. }
            | Self::MentionWithRawHtml { field, .. }
            | Self::UnclosedFence { field, .. }
            | Self::UnclosedHtml { field, .. }
            | Self::TooLong { field, .. }
            | Self::Blank { field }
            | Self::ControlCharacter { field, .. }
            | Self::Url { field, .. }
            | Self::CommandLine { field, .. } => field,
        }
    }
}

static MARKER_OPENER: LazyLock<Regex> = LazyLock::new(|| compile(r"(?i)<!--\s*(?:ai|autoforge)-"));

/// A closing keyword, then separators, then any issue reference GitHub
/// links: `#n`, `owner/repo#n`, an issues/pull URL (with a scheme or a
/// `www.` host) or `GH-n`. The separators include the Markdown that can
/// stand between the two without breaking the reference for GitHub
/// (emphasis, link and autolink openers, code spans, parentheses), so
/// `Closes **#12**` and `Fixes <https://…/issues/4>` are caught. The
/// reference is captured so the commit-message policy can tell the run's
/// own issue from another.
pub(crate) static CLOSING_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)[\s:*_~`\[\]()<>]+(?P<reference>#[0-9]+|[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#[0-9]+|(?:https?://|www\.)[^\s/]+/[^\s/]+/[^\s/]+/(?:issues|pull)/[0-9]+|GH-[0-9]+)",
    )
});

/// `@` not preceded by a word character and followed by a login character.
static MENTION: LazyLock<Regex> = LazyLock::new(|| compile(r"(?:^|[^A-Za-z0-9_])(@[A-Za-z0-9])"));

/// Anything GitHub may treat as raw HTML (a tag, a comment, a declaration).
static RAW_HTML: LazyLock<Regex> = LazyLock::new(|| compile(r"<[A-Za-z/!?]"));

/// A line that starts (after indentation) with the command prefix. The
/// controller's own comments are never read as commands, but other bots
/// and people copying text may act on them, and with a personal token the
/// controller's login is a person's.
static COMMAND_LINE: LazyLock<Regex> =
    LazyLock::new(|| compile(r"(?im)^[ \t]*/autoforge(?:[ \t\r]|$)"));

static ANY_URL: LazyLock<Regex> = LazyLock::new(|| compile(r"(?i)://|\bwww\."));

fn compile(pattern: &str) -> Regex {
    // Constant patterns covered by the tests below: failing here is a bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("policy pattern compiles")
}

/// Checks one agent-supplied field before it is stored for publishing.
pub fn check_field(field: &str, text: &str, kind: FieldKind) -> Result<(), PolicyViolation> {
    if text.trim().is_empty() {
        return Err(PolicyViolation::Blank {
            field: field.into(),
        });
    }
    let (max, multiline) = match kind {
        FieldKind::OneLine { max_chars } => (max_chars, false),
        FieldKind::Multiline { max_chars } => (max_chars, true),
    };
    check_size(field, text, max)?;
    check_controls(field, text, multiline)?;
    check_markdown(field, text)?;
    check_no_command_line(field, text)?;
    check_closed(field, text)
}

/// No line of agent text may start with `/autoforge`, in the source or in
/// what it renders to (`&#47;autoforge` renders as the prefix). Checked on
/// agent fields only: the controller's own bodies name commands on purpose.
fn check_no_command_line(field: &str, text: &str) -> Result<(), PolicyViolation> {
    if let Some(m) = COMMAND_LINE.find(text) {
        return Err(PolicyViolation::CommandLine {
            field: field.into(),
            offset: m.start(),
        });
    }
    let rendered = RenderedView::of(text);
    if let Some(m) = COMMAND_LINE.find(&rendered.text) {
        return Err(PolicyViolation::CommandLine {
            field: field.into(),
            offset: rendered.source_offset(m.start()),
        });
    }
    Ok(())
}

/// Every fence and every swallowing HTML construct a text opens is closed
/// in it, so it cannot change how what follows it renders.
pub fn check_closed(field: &str, text: &str) -> Result<(), PolicyViolation> {
    let map = CodeMap::scan(text);
    if let Some(offset) = map.unclosed_fence_at {
        return Err(PolicyViolation::UnclosedFence {
            field: field.into(),
            offset,
        });
    }
    check_html_closed_in(field, &map)
}

/// Every swallowing HTML construct (see [`CodeMap::unclosed_html_at`]) a
/// field opens is closed in that field, so it cannot hide what the
/// controller renders after it.
pub fn check_html_closed(field: &str, text: &str) -> Result<(), PolicyViolation> {
    check_html_closed_in(field, &CodeMap::scan(text))
}

fn check_html_closed_in(field: &str, map: &CodeMap) -> Result<(), PolicyViolation> {
    if let Some(offset) = map.unclosed_html_at {
        return Err(PolicyViolation::UnclosedHtml {
            field: field.into(),
            offset,
        });
    }
    Ok(())
}

/// Checks a whole rendered body (without the controller's trailing marker):
/// the same content rules as a field, applied across field boundaries, plus
/// GitHub's body limit. An unclosed fence is not re-reported here; its effect
/// (a mention no longer in code, or one exposed after it) is.
pub fn check_body(field: &str, body: &str) -> Result<(), PolicyViolation> {
    check_size(field, body, GITHUB_BODY_MAX_CHARS)?;
    check_controls(field, body, true)?;
    check_markdown(field, body)
}

/// A field that must not carry any URL at all (the EPIC progress report:
/// issues and PRs are referred to as `#n`), even inside code.
pub fn check_no_url(field: &str, text: &str) -> Result<(), PolicyViolation> {
    let rendered = RenderedView::of(text);
    let found = ANY_URL.find(text).map(|m| m.start()).or_else(|| {
        ANY_URL
            .find(&rendered.text)
            .map(|m| rendered.source_offset(m.start()))
    });
    match found {
        Some(offset) => Err(PolicyViolation::Url {
            field: field.into(),
            offset,
        }),
        None => Ok(()),
    }
}

/// Size in characters against `max`.
pub fn check_size(field: &str, text: &str, max: usize) -> Result<(), PolicyViolation> {
    let chars = text.chars().count();
    if chars > max {
        return Err(PolicyViolation::TooLong {
            field: field.into(),
            chars,
            max,
        });
    }
    Ok(())
}

fn check_controls(field: &str, text: &str, multiline: bool) -> Result<(), PolicyViolation> {
    let bad = text.char_indices().find(|(_, c)| {
        let control = c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_bidi_control(*c);
        control && !(multiline && matches!(c, '\n' | '\t'))
    });
    match bad {
        Some((offset, c)) => Err(PolicyViolation::ControlCharacter {
            field: field.into(),
            code: u32::from(c),
            offset,
        }),
        None => Ok(()),
    }
}

/// The content rules shared by fields and bodies, in the policy's order.
///
/// Each rule looks at the source and at what it renders to
/// ([`RenderedView`]): character references and invisible characters must
/// not carry a keyword, a mention or a credential past a source-only check.
/// Offsets are always reported in the source.
fn check_markdown(field: &str, text: &str) -> Result<(), PolicyViolation> {
    let visible = RenderedView::without_invisibles(text);
    if let Some(m) = MARKER_OPENER.find(&visible.text) {
        return Err(PolicyViolation::MarkerOpener {
            field: field.into(),
            offset: visible.source_offset(m.start()),
        });
    }
    let rendered = RenderedView::of(text);
    let views: &[&str] = if rendered.differs {
        &[text, &rendered.text]
    } else {
        &[text]
    };
    if let Some(kind) = views.iter().find_map(|v| find_credential(v)) {
        return Err(PolicyViolation::Credential {
            field: field.into(),
            kind,
        });
    }
    if let Some(m) = CLOSING_REFERENCE.find(text) {
        return Err(PolicyViolation::ClosingKeyword {
            field: field.into(),
            offset: m.start(),
        });
    }
    if let Some(m) = CLOSING_REFERENCE.find(&rendered.text) {
        return Err(PolicyViolation::ClosingKeyword {
            field: field.into(),
            offset: rendered.source_offset(m.start()),
        });
    }
    check_mentions(field, text, &rendered)
}

/// Mentions are found in the source and in the rendered view; both are
/// exempt only where the *source* is code, since GitHub decodes nothing
/// inside code.
fn check_mentions(field: &str, text: &str, rendered: &RenderedView) -> Result<(), PolicyViolation> {
    let mut mentions: Vec<usize> = MENTION
        .captures_iter(text)
        .filter_map(|c| c.get(1).map(|m| m.start()))
        .collect();
    if rendered.differs {
        mentions.extend(
            MENTION
                .captures_iter(&rendered.text)
                .filter_map(|c| c.get(1).map(|m| rendered.source_offset(m.start()))),
        );
        mentions.sort_unstable();
    }
    let Some(&first) = mentions.first() else {
        return Ok(());
    };
    let map = CodeMap::scan(text);
    let html = RAW_HTML
        .find_iter(text)
        .map(|m| m.start())
        .find(|offset| !map.is_code(*offset));
    if let Some(html_offset) = html {
        return Err(PolicyViolation::MentionWithRawHtml {
            field: field.into(),
            offset: first,
            html_offset,
        });
    }
    match mentions.into_iter().find(|offset| !map.is_code(*offset)) {
        Some(offset) => Err(PolicyViolation::MentionOutsideCode {
            field: field.into(),
            offset,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROSE: FieldKind = FieldKind::Multiline { max_chars: 1_000 };
    const LINE: FieldKind = FieldKind::OneLine { max_chars: 50 };

    fn refused(text: &str) -> PolicyViolation {
        check_field("f", text, PROSE).expect_err("must be refused")
    }

    #[test]
    fn plain_markdown_with_code_mentions_passes() {
        let text = "Uses `@Inject` and\n\n```java\n@Override\n```\n\nemail me: a@b.c";
        assert_eq!(check_field("f", text, PROSE), Ok(()));
    }

    #[test]
    fn marker_opener_is_refused_in_any_spacing_and_case() {
        for text in [
            "<!--ai-x",
            "<!--\n ai-x",
            "<!-- AutoForge-status",
            "`<!-- ai-review`",
        ] {
            assert!(
                matches!(refused(text), PolicyViolation::MarkerOpener { .. }),
                "{text:?}"
            );
        }
        assert_eq!(check_field("f", "<!-- a note -->", PROSE), Ok(()));
    }

    #[test]
    fn closing_keywords_are_refused_even_in_code() {
        for text in [
            "Closes #12",
            "```\nfixes: #3\n```",
            "resolved o/r#4",
            "fix https://github.com/o/r/issues/9",
            "Resolves GH-4",
        ] {
            assert!(
                matches!(refused(text), PolicyViolation::ClosingKeyword { .. }),
                "{text:?}"
            );
        }
        assert_eq!(check_field("f", "prefix #12 and closest #3", PROSE), Ok(()));
    }

    #[test]
    fn mention_outside_code_is_refused_with_its_offset() {
        assert_eq!(
            refused("ping @someone please"),
            PolicyViolation::MentionOutsideCode {
                field: "f".into(),
                offset: 5
            }
        );
    }

    #[test]
    fn raw_html_voids_the_code_exemption() {
        assert!(matches!(
            refused("<details>x</details> and `@team`"),
            PolicyViolation::MentionWithRawHtml { .. }
        ));
        assert_eq!(check_field("f", "`<b>` and `@team`", PROSE), Ok(()));
    }

    #[test]
    fn unclosed_fence_is_refused() {
        assert!(matches!(
            refused("```\ncode"),
            PolicyViolation::UnclosedFence { offset: 0, .. }
        ));
    }

    #[test]
    fn one_line_fields_refuse_every_control_character() {
        for c in ['\n', '\t', '\u{7f}', '\u{85}', '\u{2028}'] {
            let text = format!("a{c}b");
            assert!(
                matches!(
                    check_field("t", &text, LINE),
                    Err(PolicyViolation::ControlCharacter { offset: 1, .. })
                ),
                "{c:?}"
            );
        }
        assert!(check_field("t", "a\tb\nc", PROSE).is_ok());
        assert!(matches!(
            check_field("t", "a\rb", PROSE),
            Err(PolicyViolation::ControlCharacter { code: 0x0d, .. })
        ));
    }

    #[test]
    fn sizes_are_counted_in_characters() {
        let text = "é".repeat(50);
        assert!(check_field("t", &text, LINE).is_ok());
        assert_eq!(
            check_field("t", &format!("{text}x"), LINE),
            Err(PolicyViolation::TooLong {
                field: "t".into(),
                chars: 51,
                max: 50
            })
        );
    }

    #[test]
    fn blank_and_credential_fields_are_refused() {
        assert!(matches!(refused("  \n"), PolicyViolation::Blank { .. }));
        let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4));
        assert!(matches!(
            refused(&format!("use `{token}`")),
            PolicyViolation::Credential {
                kind: CredentialKind::GitHubToken,
                ..
            }
        ));
    }

    #[test]
    fn no_url_rule_finds_any_scheme_and_www_hosts() {
        assert!(check_no_url("p", "see `ftp://x`").is_err());
        assert!(check_no_url("p", "www.example.org").is_err());
        assert!(check_no_url("p", "merged #4 and #5").is_ok());
        assert!(check_no_url("p", "see https&colon;&sol;&sol;evil.example").is_err());
        assert!(check_no_url("p", "see http&#58;//x.example").is_err());
        assert!(check_no_url("p", "ww&#119;.example.org").is_err());
    }

    #[test]
    fn a_line_starting_with_the_command_prefix_is_refused_even_in_code() {
        for text in [
            "/autoforge merge",
            "Looks fine.\n/autoforge merge",
            "Looks fine.\n   /AutoForge unblock now",
            "```\n/autoforge merge\n```",
            "&#47;autoforge merge",
        ] {
            assert!(
                matches!(refused(text), PolicyViolation::CommandLine { .. }),
                "{text:?} was not refused as a command line"
            );
        }
        for text in [
            "Run `/autoforge status` to see it.",
            "/autoforge-docs is a page name",
            "mid-line /autoforge merge is not a command",
        ] {
            assert!(
                check_field("f", text, FieldKind::Multiline { max_chars: 1000 }).is_ok(),
                "{text:?} was refused"
            );
        }
    }

    #[test]
    fn display_never_echoes_the_text() {
        let text = "hello @secret-person";
        let shown = refused(text).to_string();
        assert!(!shown.contains("secret-person"), "{shown}");
    }
}
