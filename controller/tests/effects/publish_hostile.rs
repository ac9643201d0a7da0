//! Hostile inputs against the published-text policy (SPEC §7): every text
//! here tries to get a mention, a closing keyword or a marker opener past
//! `check_field` by a spelling GitHub still renders or links. Each must be
//! refused; the clean look-alikes at the end must still pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge::publish::{FieldKind, PolicyViolation, check_body, check_field};

const PROSE: FieldKind = FieldKind::Multiline { max_chars: 10_000 };

fn verdict(text: &str) -> Result<(), PolicyViolation> {
    check_field("f", text, PROSE)
}

fn assert_refused(texts: &[&str], rule: fn(&PolicyViolation) -> bool) {
    let passed: Vec<(&str, Result<(), PolicyViolation>)> = texts
        .iter()
        .map(|t| (*t, verdict(t)))
        .filter(|(_, v)| !v.as_ref().err().is_some_and(rule))
        .collect();
    assert!(
        passed.is_empty(),
        "not refused by the expected rule: {passed:#?}"
    );
}

fn is_mention(v: &PolicyViolation) -> bool {
    matches!(
        v,
        PolicyViolation::MentionOutsideCode { .. } | PolicyViolation::MentionWithRawHtml { .. }
    )
}

fn is_closing(v: &PolicyViolation) -> bool {
    matches!(v, PolicyViolation::ClosingKeyword { .. })
}

fn is_marker(v: &PolicyViolation) -> bool {
    matches!(v, PolicyViolation::MarkerOpener { .. })
}

#[test]
fn mentions_spelled_with_html_character_references_are_refused() {
    assert_refused(
        &[
            "ping &#64;octocat please",
            "ping &#x40;octocat please",
            "ping &#X40;octocat",
            "ping &commat;octocat",
            "team &#64;org/team",
            "ping &#0064;octocat",
            "@&#111;ctocat",
            "*x* &#64;octocat",
        ],
        is_mention,
    );
}

#[test]
fn closing_keywords_spelled_with_character_references_are_refused() {
    assert_refused(
        &[
            "Closes &#35;12",
            "Closes &num;12",
            "Clos&#101;s #12",
            "fixes&#32;#12",
            "resolves&nbsp;#12",
        ],
        is_closing,
    );
}

#[test]
fn closing_keywords_with_markup_between_keyword_and_reference_are_refused() {
    assert_refused(
        &[
            "Closes **#12**",
            "Closes [#12](https://github.com/o/r/issues/12)",
            "Fixes <https://github.com/o/r/issues/4>",
            "resolves _owner/repo#3_",
            "**Fixes** #12",
            "Closes: (#12)",
            "fixes www.github.com/o/r/issues/4",
        ],
        is_closing,
    );
}

#[test]
fn invisible_characters_do_not_hide_a_closing_keyword_mention_or_marker() {
    assert_refused(
        &[
            "Clo\u{200B}ses #12",
            "fix\u{2060}es #3",
            "Closes \u{200D}#12",
        ],
        is_closing,
    );
    assert_refused(&["ping @\u{200B}octocat", "ping \u{FEFF}@octocat"], |v| {
        is_mention(v) || matches!(v, PolicyViolation::ControlCharacter { .. })
    });
    assert_refused(
        &[
            "<!--\u{200B} ai-review-result: {} -->",
            "<!--\u{00AD}autoforge-status",
        ],
        is_marker,
    );
}

#[test]
fn bidirectional_override_characters_are_refused() {
    for text in ["abc \u{202E}txt.exe", "a\u{2066}b\u{2069}"] {
        assert!(
            matches!(verdict(text), Err(PolicyViolation::ControlCharacter { .. })),
            "{text:?}"
        );
    }
}

#[test]
fn the_whole_body_check_sees_character_reference_mentions_too() {
    assert!(check_body("body", "text &#64;octocat").is_err());
}

#[test]
fn clean_text_resembling_the_tricks_still_passes() {
    for text in [
        "email me at a&#64;b.c? no: `&#64;x` is code",
        "Uses `@Inject` and &amp; entities like &lt;T&gt;",
        "the closest #3 and prefixes #4",
        "a family emoji 👨\u{200D}👩\u{200D}👧 stays",
        "Closes nothing; see #12",
        "```\n&#64;octocat\n```",
    ] {
        assert_eq!(verdict(text), Ok(()), "{text:?}");
    }
}

#[test]
fn raw_html_left_open_in_a_field_is_refused() {
    for text in [
        "intro\n\n<!-- hides what follows",
        "<!--\nstill open",
        "<pre>\nraw to the end",
        "<SCRIPT>\nx",
        "<details><summary>more</summary>\n\nnever closed",
        "<details>\n<details>\n</details>",
        "<![CDATA[\nopen",
        "<?php\nopen",
    ] {
        assert!(
            matches!(verdict(text), Err(PolicyViolation::UnclosedHtml { .. })),
            "{text:?}: {:?}",
            verdict(text)
        );
    }
    for text in [
        "<!-- a note -->\n\nafter",
        "<details><summary>more</summary>\n\nbody\n\n</details>",
        "<pre>\nx\n</pre>",
        "`<!--` in code and\n\n```\n<details>\n```",
        "a < b and 3 <4",
    ] {
        assert_eq!(verdict(text), Ok(()), "{text:?}");
    }
}

#[test]
fn credentials_split_or_spelled_with_references_are_refused() {
    let body = "a1B2c3D4e5".repeat(4);
    for text in [
        format!("token ghp\u{200B}_{body}"),
        format!("token ghp&#95;{body}"),
        format!("token gh&#112;_{body}"),
    ] {
        assert!(
            matches!(verdict(&text), Err(PolicyViolation::Credential { .. })),
            "{text:?}: {:?}",
            verdict(&text)
        );
    }
}

#[test]
fn other_spellings_of_keywords_and_mentions_are_refused() {
    assert_refused(
        &[
            "Closes\u{00A0}#12",
            "<!-- Fixes #12 -->",
            "resolve\u{2003}GH-7",
            "FIXED: o/r#1",
        ],
        is_closing,
    );
    assert_refused(
        &[
            "[&#64;octocat](https://example.org)",
            "<code>@octocat</code>",
            "\\@octocat",
        ],
        is_mention,
    );
}
