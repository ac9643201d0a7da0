//! Where a Markdown text is code, and where it is not.
//!
//! The mention rule of the published-text policy exempts `@name` inside code,
//! so the policy must know which bytes GitHub renders as code. We ask
//! pulldown-cmark (CommonMark) and then stay conservative where GitHub's
//! dialect may disagree: an inline code span is trusted only when it is on
//! one line and holds no `|` (a table cell boundary would split it), and a
//! fenced block is trusted only when its own closing fence is present.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// The code regions of a Markdown text and whether a fenced block runs to the
/// end of the text without its closing fence.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CodeMap {
    /// Byte ranges GitHub renders as code and that may exempt a mention.
    pub code: Vec<Range<usize>>,
    /// Byte offset of the first fenced block whose closing fence is missing.
    pub unclosed_fence_at: Option<usize>,
    /// Byte offset of the first raw HTML construct that stays open to the
    /// end of the text (see [`unclosed_html`]).
    pub unclosed_html_at: Option<usize>,
}

impl CodeMap {
    /// Scans `text` once.
    pub fn scan(text: &str) -> Self {
        let mut map = CodeMap::default();
        let mut open_fence: Option<Range<usize>> = None;
        let mut html = HtmlBalance::default();
        for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
            match event {
                Event::Html(raw) | Event::InlineHtml(raw) => html.see(&raw, range.start),
                Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => {
                    open_fence = Some(range);
                }
                Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)) => {
                    map.code.push(range);
                }
                Event::End(TagEnd::CodeBlock) => {
                    if let Some(block) = open_fence.take() {
                        if fence_is_closed(&text[block.clone()]) {
                            map.code.push(block);
                        } else if map.unclosed_fence_at.is_none() {
                            map.unclosed_fence_at = Some(block.start);
                        }
                    }
                }
                Event::Code(_) => {
                    let span = &text[range.clone()];
                    if !span.contains('\n') && !span.contains('|') {
                        map.code.push(range);
                    }
                }
                _ => {}
            }
        }
        map.unclosed_html_at = html.unclosed_at();
        map
    }

    /// Whether byte `offset` lies inside a trusted code region.
    pub fn is_code(&self, offset: usize) -> bool {
        self.code.iter().any(|r| r.contains(&offset))
    }
}

/// A fenced block's source is closed when its last line is a fence of the
/// same character at least as long as the opening one. Container prefixes
/// (`>` of a block quote, list indentation) are skipped on both lines.
fn fence_is_closed(block: &str) -> bool {
    let mut lines = block.lines();
    let Some(first) = lines.next() else {
        return false;
    };
    let opening = strip_container_prefix(first);
    let Some(fence_char) = opening.chars().next().filter(|c| *c == '`' || *c == '~') else {
        return false;
    };
    let opening_len = opening.chars().take_while(|c| *c == fence_char).count();
    let Some(last) = lines.rfind(|l| !l.trim().is_empty()) else {
        return false;
    };
    let closing = strip_container_prefix(last).trim_end();
    closing.len() >= opening_len && closing.chars().all(|c| c == fence_char)
}

/// Raw HTML that, left open, swallows whatever is rendered after it: the
/// HTML blocks that end only at their own terminator (comments, `<pre>`,
/// `<script>`, `<style>`, `<textarea>`, `<?`, `<!X`, CDATA), which run past
/// blank lines into the next field, and `<details>`, which GitHub keeps open
/// (collapsed) until its closing tag. Either would let one agent field hide
/// the controller's own lines after it, such as the review verdict.
#[derive(Debug, Default)]
struct HtmlBalance {
    /// Openers still waiting for their terminator: (terminator, offset).
    pending: Vec<(&'static str, usize)>,
    open_details: Vec<usize>,
}

const TERMINATED_OPENERS: &[(&str, &str)] = &[
    ("<!--", "-->"),
    ("<![cdata[", "]]>"),
    ("<?", "?>"),
    ("<pre", "</pre>"),
    ("<script", "</script>"),
    ("<style", "</style>"),
    ("<textarea", "</textarea>"),
];

impl HtmlBalance {
    /// Feeds one raw HTML event (a block's lines or an inline tag).
    fn see(&mut self, raw: &str, offset: usize) {
        let lower = raw.to_ascii_lowercase();
        let mut at = 0;
        while at < lower.len() {
            let rest = &lower[at..];
            if let Some((terminator, _)) = self.pending.last().copied() {
                match rest.find(terminator) {
                    Some(end) => {
                        self.pending.pop();
                        at += end + terminator.len();
                        continue;
                    }
                    None => return,
                }
            }
            let Some(lt) = rest.find('<') else { return };
            let tag = &rest[lt..];
            let start = offset + at + lt;
            if let Some((_, terminator)) = TERMINATED_OPENERS
                .iter()
                .find(|(opener, _)| starts_tag(tag, opener))
            {
                self.pending.push((terminator, start));
            } else if tag.starts_with("<!")
                && tag[2..].starts_with(|c: char| c.is_ascii_alphabetic())
            {
                self.pending.push((">", start));
            } else if starts_tag(tag, "<details") {
                self.open_details.push(start);
            } else if starts_tag(tag, "</details") {
                self.open_details.pop();
            }
            at += lt + 1;
        }
    }

    fn unclosed_at(&self) -> Option<usize> {
        let pending = self.pending.first().map(|(_, offset)| *offset);
        let details = self.open_details.first().copied();
        pending.into_iter().chain(details).min()
    }
}

/// Whether `tag` opens with `name` as a whole tag name (`<pre>`, `<pre `,
/// not `<prefix>`). Openers ending in punctuation match as they are.
fn starts_tag(tag: &str, name: &str) -> bool {
    let Some(rest) = tag.strip_prefix(name) else {
        return false;
    };
    !name.ends_with(|c: char| c.is_ascii_alphabetic())
        || rest.is_empty()
        || rest.starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == '/')
}

fn strip_container_prefix(line: &str) -> &str {
    line.trim_start_matches([' ', '\t', '>'])
        .trim_start_matches(['-', '*', '+'])
        .trim_start()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_text(text: &str) -> Vec<&str> {
        CodeMap::scan(text)
            .code
            .into_iter()
            .map(|r| &text[r])
            .collect()
    }

    #[test]
    fn inline_span_and_closed_fence_are_code() {
        let text = "see `@a` here\n\n```rust\nlet x = \"@b\";\n```\n";
        let map = CodeMap::scan(text);
        assert_eq!(code_text(text).len(), 2);
        assert!(map.is_code(text.find("@a").expect("present")));
        assert!(map.is_code(text.find("@b").expect("present")));
        assert_eq!(map.unclosed_fence_at, None);
    }

    #[test]
    fn unclosed_fence_is_reported_and_not_code() {
        let text = "intro\n\n~~~~\n@who\n";
        let map = CodeMap::scan(text);
        assert_eq!(map.unclosed_fence_at, Some(7));
        assert!(!map.is_code(text.find('@').expect("present")));
    }

    #[test]
    fn shorter_closing_fence_does_not_close() {
        let map = CodeMap::scan("````\nx\n```\n");
        assert!(map.unclosed_fence_at.is_some());
    }

    #[test]
    fn fence_inside_a_block_quote_closes_with_its_prefix() {
        let map = CodeMap::scan("> ```\n> @x\n> ```\n");
        assert_eq!(map.unclosed_fence_at, None);
        assert_eq!(map.code.len(), 1);
    }

    #[test]
    fn spans_with_a_pipe_or_a_newline_are_not_trusted() {
        assert!(code_text("a `x | @y` b").is_empty());
        assert!(code_text("a `x\n@y` b").is_empty());
    }
}
