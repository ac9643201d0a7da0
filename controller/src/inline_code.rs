//! Inline code spans for the texts the controller writes: a value shown
//! exactly as it is, whatever backticks or spaces it holds. Plain text with
//! no dependencies, so the machine can word its reasons with it and
//! `publish` its bodies.

/// `value` as an inline code span whose backtick run is longer than any run
/// inside it. It is padded with one space on each side when it starts or
/// ends with a backtick or a space, because CommonMark strips exactly one
/// space from each side of such a span; the padding is what gets stripped.
pub fn code_span(value: &str) -> String {
    let longest = longest_run(value, '`');
    let fence = "`".repeat(longest + 1);
    let edge = |c: char| c == '`' || c == ' ';
    let all_spaces = value.chars().all(|c| c == ' ');
    if !all_spaces && (value.starts_with(edge) || value.ends_with(edge)) {
        format!("{fence} {value} {fence}")
    } else {
        format!("{fence}{value}{fence}")
    }
}

/// Length of the longest run of `c` in `text`.
pub fn longest_run(text: &str, c: char) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for ch in text.chars() {
        if ch == c {
            current += 1;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_span_fence_outgrows_the_value() {
        assert_eq!(code_span("src/a.rs:3"), "`src/a.rs:3`");
        assert_eq!(code_span("a``b"), "```a``b```");
        assert_eq!(code_span("`x"), "`` `x ``");
        assert_eq!(code_span(" a "), "`  a  `");
    }

    proptest::proptest! {
        #[test]
        fn a_code_span_renders_exactly_its_value(value in "[^\\n\\r]{1,40}") {
            proptest::prop_assume!(!value.chars().all(|c| c == ' '));
            let rendered = code_span(&value);
            let codes: Vec<String> = pulldown_cmark::Parser::new(&rendered)
                .filter_map(|e| match e {
                    pulldown_cmark::Event::Code(text) => Some(text.into_string()),
                    _ => None,
                })
                .collect();
            proptest::prop_assert_eq!(codes, vec![value]);
        }
    }

    #[test]
    fn longest_run_counts_consecutive_characters() {
        assert_eq!(longest_run("a`b``c```", '`'), 3);
        assert_eq!(longest_run("none", '`'), 0);
    }
}
