//! The text a reader (and GitHub's mention and reference filters) sees once
//! a body is rendered, for the policy to check alongside the source.
//!
//! Two source tricks change what is rendered without changing what a naive
//! pattern over the source sees: HTML character references (`&#64;user`
//! renders as `@user`, also inside raw HTML blocks, also without the
//! trailing `;` for numeric references) and invisible format characters
//! (`Clo\u{200B}ses`, `<!--\u{AD}ai-`). [`RenderedView`] decodes the first
//! and drops the second, and remembers for every byte of the view the source
//! byte it came from, so a violation found in the view is reported at a
//! source offset and code exemptions are decided on the source.
//!
//! Only references that can produce ASCII (every numeric one, and the named
//! ones for ASCII punctuation and spaces) are decoded: no named reference
//! produces a letter or digit, so the others cannot form a mention, a
//! keyword, a reference or a marker.

use std::sync::LazyLock;

use regex::Regex;

/// Invisible format characters that render as nothing (zero-width spaces
/// and joiners, word joiners, soft hyphens, byte-order marks, directional
/// marks). A text is also checked with them removed, so they cannot split
/// a keyword or a marker opener for the eye while GitHub ignores them.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
    )
}

/// Characters that reorder how the surrounding text is displayed
/// (embeddings, overrides, isolates): they can make published text read
/// differently from what it is, so the policy refuses them outright.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A numeric reference (`;` optional, as browsers accept) or a named one.
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    // Constant pattern exercised by the tests below: failing is a bug.
    #[allow(clippy::expect_used)]
    Regex::new(r"&(?:#[xX](?P<hex>[0-9a-fA-F]+);?|#(?P<dec>[0-9]+);?|(?P<name>[A-Za-z][A-Za-z0-9]{1,31});?)")
        .expect("reference pattern compiles")
});

/// Named references that decode to ASCII or to a space-like character, and
/// whether the name is also accepted without its `;` (HTML's legacy names).
const NAMED: &[(&str, char, bool)] = &[
    ("excl", '!', false),
    ("quot", '"', true),
    ("QUOT", '"', true),
    ("num", '#', false),
    ("dollar", '$', false),
    ("percnt", '%', false),
    ("amp", '&', true),
    ("AMP", '&', true),
    ("apos", '\'', false),
    ("lpar", '(', false),
    ("rpar", ')', false),
    ("ast", '*', false),
    ("midast", '*', false),
    ("plus", '+', false),
    ("comma", ',', false),
    ("period", '.', false),
    ("sol", '/', false),
    ("colon", ':', false),
    ("semi", ';', false),
    ("lt", '<', true),
    ("LT", '<', true),
    ("equals", '=', false),
    ("gt", '>', true),
    ("GT", '>', true),
    ("quest", '?', false),
    ("commat", '@', false),
    ("lsqb", '[', false),
    ("lbrack", '[', false),
    ("bsol", '\\', false),
    ("rsqb", ']', false),
    ("rbrack", ']', false),
    ("Hat", '^', false),
    ("lowbar", '_', false),
    ("UnderBar", '_', false),
    ("grave", '`', false),
    ("DiacriticalGrave", '`', false),
    ("lcub", '{', false),
    ("lbrace", '{', false),
    ("verbar", '|', false),
    ("vert", '|', false),
    ("VerticalLine", '|', false),
    ("rcub", '}', false),
    ("rbrace", '}', false),
    ("Tab", '\t', false),
    ("NewLine", '\n', false),
    ("nbsp", '\u{A0}', true),
    ("NonBreakingSpace", '\u{A0}', false),
    ("ensp", '\u{2002}', false),
    ("emsp", '\u{2003}', false),
    ("emsp13", '\u{2004}', false),
    ("emsp14", '\u{2005}', false),
    ("numsp", '\u{2007}', false),
    ("puncsp", '\u{2008}', false),
    ("thinsp", '\u{2009}', false),
    ("ThinSpace", '\u{2009}', false),
    ("hairsp", '\u{200A}', false),
    ("VeryThinSpace", '\u{200A}', false),
    ("MediumSpace", '\u{205F}', false),
    ("hyphen", '\u{2010}', false),
    ("dash", '\u{2010}', false),
    ("shy", '\u{AD}', true),
    ("ZeroWidthSpace", '\u{200B}', false),
    ("zwnj", '\u{200C}', false),
    ("zwj", '\u{200D}', false),
    ("NoBreak", '\u{2060}', false),
];

/// `text` as rendered: references decoded, invisible characters dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedView {
    pub text: String,
    /// For each byte of `text`, the source byte offset it came from.
    source_offsets: Vec<usize>,
    /// Whether `text` differs from the source at all.
    pub differs: bool,
}

impl RenderedView {
    /// Builds the rendered view of `source`: references decoded, invisible
    /// characters dropped.
    pub fn of(source: &str) -> Self {
        Self::build(source, true)
    }

    /// `source` with only its invisible characters dropped. Marker openers
    /// are looked for here: a reference-spelled `&lt;!--` is visible text,
    /// not a comment, but a comment split by a zero-width space still is one.
    pub fn without_invisibles(source: &str) -> Self {
        Self::build(source, false)
    }

    fn build(source: &str, decode_references: bool) -> Self {
        let mut view = Self {
            text: String::with_capacity(source.len()),
            source_offsets: Vec::with_capacity(source.len()),
            differs: false,
        };
        let mut copied_to = 0;
        let references = REFERENCE
            .captures_iter(source)
            .filter(|_| decode_references);
        for captures in references {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            let Some((decoded, used)) = decode(&captures, whole.as_str()) else {
                continue;
            };
            view.copy(source, copied_to, whole.start());
            view.push(decoded, whole.start());
            copied_to = whole.start() + used;
        }
        view.copy(source, copied_to, source.len());
        view.differs = view.text != source;
        view
    }

    /// The source offset of view byte `offset`.
    pub fn source_offset(&self, offset: usize) -> usize {
        self.source_offsets
            .get(offset)
            .copied()
            .unwrap_or_else(|| self.source_offsets.last().map_or(0, |last| last + 1))
    }

    fn copy(&mut self, source: &str, from: usize, to: usize) {
        if from >= to {
            return;
        }
        for (offset, c) in source[from..to].char_indices() {
            self.push(c, from + offset);
        }
    }

    fn push(&mut self, c: char, source_offset: usize) {
        if is_invisible(c) {
            return;
        }
        self.text.push(c);
        self.source_offsets
            .extend(std::iter::repeat_n(source_offset, c.len_utf8()));
    }
}

/// The character a reference stands for and how many source bytes it uses
/// (a legacy name without `;` uses only its own letters).
fn decode(captures: &regex::Captures<'_>, whole: &str) -> Option<(char, usize)> {
    if let Some(hex) = captures.name("hex") {
        return Some((numeric(hex.as_str(), 16), whole.len()));
    }
    if let Some(dec) = captures.name("dec") {
        return Some((numeric(dec.as_str(), 10), whole.len()));
    }
    let name = captures.name("name")?.as_str();
    if whole.ends_with(';')
        && let Some((_, c, _)) = NAMED.iter().find(|(n, _, _)| *n == name)
    {
        return Some((*c, whole.len()));
    }
    // Browsers also accept a legacy name without `;`, even when letters
    // follow it (`&ltdiv` is `<div`): the longest such prefix counts.
    NAMED
        .iter()
        .filter(|(n, _, legacy)| *legacy && name.starts_with(n))
        .max_by_key(|(n, _, _)| n.len())
        .map(|(n, c, _)| (*c, 1 + n.len()))
}

/// A numeric reference's character; leading zeros do not count, and what is
/// not a valid scalar value renders as the replacement character, as in HTML.
fn numeric(digits: &str, radix: u32) -> char {
    let significant = digits.trim_start_matches('0');
    if significant.len() > 8 {
        return '\u{FFFD}';
    }
    u32::from_str_radix(significant, radix)
        .ok()
        .filter(|c| *c != 0)
        .and_then(char::from_u32)
        .unwrap_or('\u{FFFD}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_decoded_with_and_without_semicolons() {
        let view = RenderedView::of("a&#64;b &#x40;c &commat;d &#64e &nbsp;f &ltg &commatx");
        assert_eq!(view.text, "a@b @c @d @e \u{A0}f <g &commatx");
        assert!(view.differs);
        assert_eq!(RenderedView::of("&#0000000064;x").text, "@x");
        assert!(!RenderedView::of("plain & simple").differs);
    }

    #[test]
    fn offsets_map_back_to_the_reference_in_the_source() {
        let source = "xy &#64;user";
        let view = RenderedView::of(source);
        let at = view.text.find('@').expect("decoded");
        assert_eq!(view.source_offset(at), 3);
        assert_eq!(view.source_offset(view.text.find('u').expect("kept")), 8);
    }

    #[test]
    fn without_invisibles_keeps_references() {
        let view = RenderedView::without_invisibles("&lt;!--\u{200B}ai-");
        assert_eq!(view.text, "&lt;!--ai-");
        assert_eq!(view.source_offset(7), 10);
    }

    #[test]
    fn invisible_characters_are_dropped_and_others_kept() {
        let view = RenderedView::of("Clo\u{200B}ses é 👨\u{200D}👩 &zwj;");
        assert_eq!(view.text, "Closes é 👨👩 ");
        assert!(view.differs);
    }

    #[test]
    fn unknown_names_and_invalid_numbers_are_handled() {
        assert_eq!(
            RenderedView::of("&bogus; &#0; &#x110000;").text,
            "&bogus; \u{FFFD} \u{FFFD}"
        );
    }
}
