//! Every controller marker, rendered and scanned in one place (SPEC §6).
//!
//! Rendering goes through [`crate::publish::render_marker`] (sorted keys,
//! `<`/`>` escaped), so publish and the executor produce the same bytes.
//! Scanning is strict: a marker of a known name whose payload is not JSON,
//! not an object, lacks a required key, carries an unknown key or a value of
//! the wrong type is a *defect* of the object that carries it, never
//! "absent" — treating it as absent would let the executor write a second
//! object next to one it cannot read.
//!
//! # Identity scheme
//!
//! Every marker the executor writes carries, next to the SPEC's keys, the
//! run id (`run`) and a per-effect random nonce (`write`, 32 lowercase hex
//! digits, drawn when the effect is planned and stored in the journal row's
//! `completion`). An object whose marker carries the `write` nonce of one of
//! the run's journalled effects was written by this journal; an object that
//! carries a marker with the same identity but no such nonce was not, and
//! is foreign unless the entry observation saw it. The nonce is random, not
//! derived from anything public, so an agent cannot forge "ours" by copying
//! the template.

use serde_json::{Map, Value};

use crate::publish::render_marker;

/// The literal first line of the EPIC's managed roadmap section.
pub const ROADMAP_START: &str = "<!-- ai-controller-roadmap:start -->";
/// The literal last line of the EPIC's managed roadmap section.
pub const ROADMAP_END: &str = "<!-- ai-controller-roadmap:end -->";

/// The markers that carry a JSON payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkerName {
    Implementation,
    ReviewResult,
    FollowUp,
    EpicProgress,
    Status,
    Reply,
    Notice,
    InlineReview,
    Plan,
}

/// What a key's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Text,
    /// A JSON integer ≥ 0 (never a boolean, never a float).
    Count,
    Flag,
    TextList,
}

struct KeySpec {
    key: &'static str,
    kind: KeyType,
    required: bool,
}

const fn req(key: &'static str, kind: KeyType) -> KeySpec {
    KeySpec {
        key,
        kind,
        required: true,
    }
}

const fn opt(key: &'static str, kind: KeyType) -> KeySpec {
    KeySpec {
        key,
        kind,
        required: false,
    }
}

/// The journal identity keys every marker may carry (see the module docs).
const RUN: KeySpec = opt("run", KeyType::Count);
const WRITE: KeySpec = opt("write", KeyType::Text);

impl MarkerName {
    pub const ALL: [MarkerName; 9] = [
        MarkerName::Implementation,
        MarkerName::ReviewResult,
        MarkerName::FollowUp,
        MarkerName::EpicProgress,
        MarkerName::Status,
        MarkerName::Reply,
        MarkerName::Notice,
        MarkerName::InlineReview,
        MarkerName::Plan,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MarkerName::Implementation => "ai-implementation",
            MarkerName::ReviewResult => "ai-review-result",
            MarkerName::FollowUp => "ai-follow-up",
            MarkerName::EpicProgress => "ai-epic-progress",
            MarkerName::Status => "autoforge-status",
            MarkerName::Reply => "autoforge-reply",
            MarkerName::Notice => "autoforge-notice",
            MarkerName::InlineReview => "ai-inline-review",
            MarkerName::Plan => "ai-plan",
        }
    }

    fn keys(self) -> &'static [KeySpec] {
        match self {
            MarkerName::Implementation => IMPLEMENTATION_KEYS,
            MarkerName::ReviewResult => REVIEW_RESULT_KEYS,
            MarkerName::FollowUp => FOLLOW_UP_KEYS,
            MarkerName::EpicProgress => EPIC_PROGRESS_KEYS,
            MarkerName::Status => STATUS_KEYS,
            MarkerName::Reply => REPLY_KEYS,
            MarkerName::Notice => NOTICE_KEYS,
            MarkerName::InlineReview => INLINE_REVIEW_KEYS,
            MarkerName::Plan => PLAN_KEYS,
        }
    }
}

/// Stored in a row's `completion` by its spelling, like in the marker.
impl serde::Serialize for MarkerName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for MarkerName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        MarkerName::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown marker `{name}`")))
    }
}

const IMPLEMENTATION_KEYS: &[KeySpec] = &[req("issue", KeyType::Text), RUN, WRITE];
const REVIEW_RESULT_KEYS: &[KeySpec] = &[
    req("round", KeyType::Count),
    req("reviewed_head_sha", KeyType::Text),
    req("needs_fix_round", KeyType::Flag),
    opt("reviewed_base_ref", KeyType::Text),
    opt("reviewed_merge_base_sha", KeyType::Text),
    opt("finding_ids", KeyType::TextList),
    RUN,
    WRITE,
];
const FOLLOW_UP_KEYS: &[KeySpec] = &[
    req("finding_id", KeyType::Text),
    req("pr", KeyType::Text),
    RUN,
    WRITE,
];
const EPIC_PROGRESS_KEYS: &[KeySpec] = &[
    req("issue", KeyType::Text),
    req("pr", KeyType::Text),
    RUN,
    WRITE,
];
const STATUS_KEYS: &[KeySpec] = &[req("run", KeyType::Count), WRITE];
const REPLY_KEYS: &[KeySpec] = &[req("command_comment_id", KeyType::Count), RUN, WRITE];
const NOTICE_KEYS: &[KeySpec] = &[req("event", KeyType::Text), RUN, WRITE];
const PLAN_KEYS: &[KeySpec] = &[req("version", KeyType::Count), RUN, WRITE];
const INLINE_REVIEW_KEYS: &[KeySpec] = &[
    req("round", KeyType::Count),
    req("reviewed_head_sha", KeyType::Text),
    req("reviewed_base_ref", KeyType::Text),
    req("reviewed_merge_base_sha", KeyType::Text),
    RUN,
    WRITE,
];

/// One marker found in a text: its payload and where it sits.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundMarker {
    pub payload: Map<String, Value>,
    /// Byte range of the whole `<!-- … -->` in the scanned text.
    pub span: std::ops::Range<usize>,
}

impl FoundMarker {
    /// The per-effect nonce, if the marker carries one.
    pub fn write_nonce(&self) -> Option<&str> {
        self.payload.get("write").and_then(Value::as_str)
    }

    /// True when every key of `key` has the same value in this marker.
    pub fn matches(&self, key: &Map<String, Value>) -> bool {
        key.iter().all(|(k, v)| self.payload.get(k) == Some(v))
    }
}

/// The result of scanning one text for one marker name.
#[derive(Debug, Clone, PartialEq)]
pub enum Scan {
    Absent,
    Found(Vec<FoundMarker>),
    /// A marker of this name that cannot be read; the text is unusable.
    Malformed(String),
}

impl Scan {
    /// The markers found, or the defect. `Absent` is an empty list.
    pub fn into_result(self) -> Result<Vec<FoundMarker>, String> {
        match self {
            Scan::Absent => Ok(Vec::new()),
            Scan::Found(found) => Ok(found),
            Scan::Malformed(defect) => Err(defect),
        }
    }
}

/// Renders a marker after checking the payload against the marker's schema,
/// so the executor can never write a marker it would itself call malformed.
pub fn render(name: MarkerName, payload: &Map<String, Value>) -> Result<String, String> {
    check_payload(name, payload)?;
    Ok(render_marker(
        name.as_str(),
        &Value::Object(payload.clone()),
    ))
}

/// Every marker named `name` in `text`, in order.
pub fn scan(text: &str, name: MarkerName) -> Scan {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find("<!--") {
        let start = from + offset;
        from = start + 4;
        let after_open = text[from..].trim_start();
        let Some(rest) = after_open.strip_prefix(name.as_str()) else {
            continue;
        };
        let rest_trimmed = rest.trim_start();
        // `ai-follow-up` must not match `ai-follow-upx`; the next thing
        // after the name is the colon (possibly after spaces).
        let Some(payload_and_close) = rest_trimmed.strip_prefix(':') else {
            if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                continue;
            }
            return Scan::Malformed(format!(
                "{} marker at byte {start} has no `:` after its name",
                name.as_str()
            ));
        };
        let payload_start = text.len() - payload_and_close.len();
        let Some(close) = payload_and_close.find("-->") else {
            return Scan::Malformed(format!(
                "{} marker at byte {start} is never closed",
                name.as_str()
            ));
        };
        let raw = &payload_and_close[..close];
        if raw.contains("<!--") {
            return Scan::Malformed(format!(
                "{} marker at byte {start} contains another comment opener",
                name.as_str()
            ));
        }
        let end = payload_start + close + 3;
        let payload = match serde_json::from_str::<Value>(raw.trim()) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Scan::Malformed(format!(
                    "{} marker at byte {start} is not a JSON object",
                    name.as_str()
                ));
            }
            Err(error) => {
                return Scan::Malformed(format!(
                    "{} marker at byte {start} is not JSON: {error}",
                    name.as_str()
                ));
            }
        };
        if let Err(defect) = check_payload(name, &payload) {
            return Scan::Malformed(format!("marker at byte {start}: {defect}"));
        }
        found.push(FoundMarker {
            payload,
            span: start..end,
        });
        from = end;
    }
    if found.is_empty() {
        Scan::Absent
    } else {
        Scan::Found(found)
    }
}

/// Replaces the single `name` marker of `body` with one that also carries
/// the journal identity (`run`, `write`). The rest of the body is kept
/// byte for byte. Publish lays the text out; the executor stamps it.
pub fn stamp(body: &str, name: MarkerName, run: i64, write: &str) -> Result<String, String> {
    let found = scan(body, name).into_result()?;
    let [marker] = found.as_slice() else {
        return Err(format!(
            "expected exactly one {} marker to stamp, found {}",
            name.as_str(),
            found.len()
        ));
    };
    let mut payload = marker.payload.clone();
    payload.insert("run".into(), Value::from(run));
    payload.insert("write".into(), Value::from(write));
    let rendered = render(name, &payload)?;
    Ok(format!(
        "{}{rendered}{}",
        &body[..marker.span.start],
        &body[marker.span.end..]
    ))
}

fn check_payload(name: MarkerName, payload: &Map<String, Value>) -> Result<(), String> {
    let specs = name.keys();
    for key in payload.keys() {
        if !specs.iter().any(|spec| spec.key == key) {
            return Err(format!("{} has an unknown key `{key}`", name.as_str()));
        }
    }
    for spec in specs {
        match payload.get(spec.key) {
            None if spec.required => {
                return Err(format!("{} lacks `{}`", name.as_str(), spec.key));
            }
            None => {}
            Some(value) if !has_type(value, spec.kind) => {
                return Err(format!(
                    "{}: `{}` has the wrong type",
                    name.as_str(),
                    spec.key
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn has_type(value: &Value, kind: KeyType) -> bool {
    match kind {
        KeyType::Text => value.as_str().is_some_and(|s| !s.is_empty()),
        KeyType::Count => value.is_u64(),
        KeyType::Flag => value.is_boolean(),
        KeyType::TextList => value
            .as_array()
            .is_some_and(|items| items.iter().all(|i| i.as_str().is_some())),
    }
}

/// Where the roadmap markers sit in an EPIC body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoadmapMarkers {
    /// Neither line: the section is appended.
    Absent,
    /// Exactly one start line before exactly one end line. `inner` is the
    /// byte range between the end of the start marker and the start of the
    /// end marker.
    Section {
        start: usize,
        inner: std::ops::Range<usize>,
        end: usize,
    },
    /// Anything else: the body cannot be spliced safely.
    Malformed(String),
}

/// Finds the roadmap marker lines. Only a marker alone on its line counts
/// as a marker, but any other occurrence of the text is a defect, because a
/// human reading the body could not tell which one we mean.
pub fn scan_roadmap(body: &str) -> RoadmapMarkers {
    let starts: Vec<usize> = body.match_indices(ROADMAP_START).map(|(i, _)| i).collect();
    let ends: Vec<usize> = body.match_indices(ROADMAP_END).map(|(i, _)| i).collect();
    match (starts.as_slice(), ends.as_slice()) {
        ([], []) => RoadmapMarkers::Absent,
        ([start], [end]) if start < end => {
            let alone = |at: usize, len: usize| {
                (at == 0 || body[..at].ends_with('\n'))
                    && body[at + len..]
                        .strip_prefix('\r')
                        .unwrap_or(&body[at + len..])
                        .chars()
                        .next()
                        .is_none_or(|c| c == '\n')
            };
            if !alone(*start, ROADMAP_START.len()) || !alone(*end, ROADMAP_END.len()) {
                return RoadmapMarkers::Malformed(
                    "a roadmap marker shares its line with other text".into(),
                );
            }
            RoadmapMarkers::Section {
                start: *start,
                inner: start + ROADMAP_START.len()..*end,
                end: end + ROADMAP_END.len(),
            }
        }
        (s, e) => RoadmapMarkers::Malformed(format!(
            "{} start and {} end roadmap markers, not one start followed by one end",
            s.len(),
            e.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn rendered_markers_scan_back_to_their_payload_and_span() {
        let payload = map(json!({"issue": "https://h/o/r/issues/1", "run": 7, "write": "ab"}));
        let marker = render(MarkerName::Implementation, &payload).unwrap();
        let body = format!("text\n\n{marker}\ntail");
        let Scan::Found(found) = scan(&body, MarkerName::Implementation) else {
            panic!("not found");
        };
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].payload, payload);
        assert_eq!(&body[found[0].span.clone()], marker);
        assert_eq!(found[0].write_nonce(), Some("ab"));
    }

    #[test]
    fn other_marker_names_and_prefixes_are_not_matched() {
        let body = "<!-- ai-follow-upx: {} --> <!-- ai-implementation: {\"issue\":\"u\"} -->";
        assert_eq!(scan(body, MarkerName::FollowUp), Scan::Absent);
        assert_eq!(scan("no markers", MarkerName::Status), Scan::Absent);
    }

    #[test]
    fn unreadable_markers_are_defects_not_absence() {
        let cases = [
            "<!-- ai-implementation: {not json} -->",
            "<!-- ai-implementation: [1] -->",
            "<!-- ai-implementation: {\"issue\": \"u\"",
            "<!-- ai-implementation: {} -->",
            "<!-- ai-implementation: {\"issue\": \"u\", \"extra\": 1} -->",
            "<!-- ai-implementation {\"issue\": \"u\"} -->",
            "<!-- ai-review-result: {\"round\": true, \"reviewed_head_sha\": \"h\", \"needs_fix_round\": false} -->",
            "<!-- autoforge-status: {\"run\": \"7\"} -->",
        ];
        for case in cases {
            let name = if case.contains("review") {
                MarkerName::ReviewResult
            } else if case.contains("status") {
                MarkerName::Status
            } else {
                MarkerName::Implementation
            };
            assert!(
                matches!(scan(case, name), Scan::Malformed(_)),
                "accepted {case}"
            );
        }
    }

    #[test]
    fn stamping_adds_the_journal_identity_and_keeps_every_other_byte() {
        let body =
            "Closes #3\n\n<!-- ai-implementation: {\"issue\":\"https://h/o/r/issues/3\"} -->\n";
        let stamped = stamp(body, MarkerName::Implementation, 12, "00ff").unwrap();
        assert_eq!(
            stamped,
            "Closes #3\n\n<!-- ai-implementation: {\"issue\":\"https://h/o/r/issues/3\",\"run\":12,\"write\":\"00ff\"} -->\n"
        );
        assert!(stamp("none", MarkerName::Implementation, 1, "x").is_err());
    }

    #[test]
    fn rendering_refuses_a_payload_the_scanner_would_call_malformed() {
        assert!(render(MarkerName::Status, &map(json!({"run": -1}))).is_err());
        assert!(render(MarkerName::Reply, &map(json!({"command_comment_id": 5}))).is_ok());
    }

    #[test]
    fn roadmap_markers_must_be_one_start_then_one_end_on_their_own_lines() {
        assert_eq!(scan_roadmap("plain body"), RoadmapMarkers::Absent);
        let body = format!("a\n{ROADMAP_START}\nold\n{ROADMAP_END}\nz");
        let RoadmapMarkers::Section { start, inner, end } = scan_roadmap(&body) else {
            panic!("no section");
        };
        assert_eq!(&body[..start], "a\n");
        assert_eq!(&body[inner], "\nold\n");
        assert_eq!(&body[end..], "\nz");
        for bad in [
            format!("{ROADMAP_END}\n{ROADMAP_START}"),
            format!("{ROADMAP_START}\n{ROADMAP_START}\n{ROADMAP_END}"),
            format!("{ROADMAP_START}\nx"),
            format!("text {ROADMAP_START}\n{ROADMAP_END}"),
        ] {
            assert!(
                matches!(scan_roadmap(&bad), RoadmapMarkers::Malformed(_)),
                "{bad}"
            );
        }
    }
}
