//! `splice_epic_roadmap`: replace the controller-managed section of an EPIC
//! body (SPEC §9) without touching a byte outside it.
//!
//! The payload is the whole new body, computed once from the body read when
//! the phase began. Before writing, the body is read again: the bytes
//! outside the section must still be those the payload was computed from
//! (compared by [`outside_digest`]); if a human edited them, overwriting
//! would lose the edit, so the section is requested again instead. After
//! writing, read-back must show exactly the payload.
//!
//! Row: target `issue/<epic>`, payload the whole new body, precondition
//! [`SplicePrecondition`], completion the bare nonce. The write itself is
//! the whole-body write of `issues`.

use autoforge_journal::{Effect, EffectKind, IssueNumber, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::EffectExecutor;
use super::markers::{ROADMAP_END, ROADMAP_START, RoadmapMarkers, scan_roadmap};
use super::planning::{Draft, PlanError, blank_line_after};
use super::protocol::{Observation, read_failed};
use super::row::{BodyPayload, Nonce, Row, digest, payload, precondition, target_number};
use crate::publish::check_body;

/// The bodies the splice was computed on.
#[derive(Serialize, Deserialize)]
struct SplicePrecondition {
    /// The whole body read when the phase began.
    base_sha256: String,
    /// [`outside_digest`] of that body: what a human edit would change.
    outside_sha256: String,
}

/// The body with `section` placed between the roadmap markers: appended
/// after one blank line when the body has none, replacing what lies between
/// them when it has one start line followed by one end line. Any other
/// arrangement is refused.
pub fn splice_roadmap(body: &str, section: &str) -> Result<String, String> {
    let block = format!(
        "{ROADMAP_START}\n{}\n{ROADMAP_END}",
        section.trim_matches(['\n', '\r'])
    );
    match scan_roadmap(body) {
        RoadmapMarkers::Absent => Ok(format!("{body}{}{block}", blank_line_after(body))),
        RoadmapMarkers::Section { start, end, .. } => {
            Ok(format!("{}{block}{}", &body[..start], &body[end..]))
        }
        RoadmapMarkers::Malformed(defect) => Err(defect),
    }
}

/// SHA-256 of the bytes outside the managed section: everything before the
/// start line (without the newlines that separate it from the section, which
/// the append adds) and everything after the end line.
pub fn outside_digest(body: &str) -> Result<String, String> {
    let (before, after) = match scan_roadmap(body) {
        RoadmapMarkers::Absent => (body, ""),
        RoadmapMarkers::Section { start, end, .. } => (&body[..start], &body[end..]),
        RoadmapMarkers::Malformed(defect) => return Err(defect),
    };
    let before = before.trim_end_matches(['\n', '\r']);
    Ok(digest(&format!("{}:{before}{after}", before.len())))
}

/// `section` spliced into `epic`'s body as read at phase start.
pub(crate) fn plan(
    draft: Draft<'_>,
    epic: IssueNumber,
    section: &str,
) -> Result<NewEffect, PlanError> {
    check_body("roadmap section", section)?;
    let base = draft.ctx.body_of(epic)?;
    let spliced = splice_roadmap(base, section).map_err(PlanError::Refused)?;
    let row = Row {
        target: format!("issue/{epic}"),
        precondition: SplicePrecondition {
            base_sha256: digest(base),
            outside_sha256: outside_digest(base).map_err(PlanError::Refused)?,
        },
        payload: BodyPayload { body: spliced },
        completion: Nonce {
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::SpliceEpicRoadmap, row)
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: BodyPayload = payload(effect)?;
    let SplicePrecondition {
        outside_sha256: outside,
        ..
    } = precondition(effect)?;
    let number = target_number(effect)?;
    let epic = executor
        .api
        .issue(&executor.repo, number)
        .await
        .map_err(read_failed)?;
    let body = epic.body.as_deref().unwrap_or("");
    if body == wanted.body {
        return Ok(Observation::Present(json!({
            "number": epic.number, "url": epic.html_url, "outside_sha256": outside,
        })));
    }
    Ok(match outside_digest(body) {
        Err(defect) => Observation::Blocked(format!(
            "the roadmap markers of {} are unusable: {defect}",
            epic.html_url
        )),
        Ok(now) if now != outside => Observation::Rerequest(format!(
            "the body of {} changed outside the roadmap section since the phase began",
            epic.html_url
        )),
        Ok(_) => Observation::Absent,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    mod properties {
        use proptest::prelude::*;

        use super::super::{outside_digest, splice_roadmap};
        use crate::effects::markers::{ROADMAP_END, ROADMAP_START};

        /// Text with no roadmap marker in it (any other character may appear).
        fn outside() -> impl Strategy<Value = String> {
            "\\PC{0,120}(\n\\PC{0,60}){0,3}".prop_filter("no roadmap marker", |t| {
                !t.contains("ai-controller-roadmap")
            })
        }

        proptest! {
            #[test]
            fn proptest_splice_never_changes_a_byte_outside_the_markers(
                before in outside(),
                after in outside(),
                old in outside(),
                new in outside(),
            ) {
                let body = format!("{before}\n{ROADMAP_START}\n{old}\n{ROADMAP_END}\n{after}");
                let spliced = splice_roadmap(&body, &new).unwrap();
                let start = spliced.find(ROADMAP_START).unwrap();
                let end = spliced.rfind(ROADMAP_END).unwrap() + ROADMAP_END.len();
                prop_assert_eq!(&spliced[..start], &body[..before.len() + 1]);
                prop_assert_eq!(&spliced[end..], format!("\n{after}"));
                prop_assert_eq!(outside_digest(&spliced).unwrap(), outside_digest(&body).unwrap());
            }

            #[test]
            fn proptest_a_first_splice_keeps_the_whole_body_before_the_section(
                body in outside(),
                section in outside(),
            ) {
                let spliced = splice_roadmap(&body, &section).unwrap();
                prop_assert!(spliced.starts_with(body.as_str()));
                prop_assert_eq!(outside_digest(&spliced).unwrap(), outside_digest(&body).unwrap());
                // Splicing again replaces only the section.
                let again = splice_roadmap(&spliced, "other").unwrap();
                prop_assert!(again.starts_with(body.as_str()));
                prop_assert_eq!(outside_digest(&again).unwrap(), outside_digest(&body).unwrap());
            }

            #[test]
            fn proptest_splice_and_digest_never_panic(body in "\\PC{0,300}", section in "\\PC{0,100}") {
                let _ = splice_roadmap(&body, &section);
                let _ = outside_digest(&body);
            }
        }
    }

    #[test]
    fn a_body_without_markers_gets_the_section_after_one_blank_line() {
        for (body, expected_prefix) in [
            ("intro", "intro\n\n"),
            ("intro\n", "intro\n\n"),
            ("intro\n\n", "intro\n\n"),
            ("", ""),
        ] {
            let spliced = splice_roadmap(body, "\nplan\n").unwrap();
            assert_eq!(
                spliced,
                format!("{expected_prefix}{ROADMAP_START}\nplan\n{ROADMAP_END}")
            );
            assert_eq!(outside_digest(&spliced), outside_digest(body), "{body:?}");
        }
    }

    #[test]
    fn an_existing_section_is_replaced_and_outside_bytes_kept() {
        let body = format!("head\r\n{ROADMAP_START}\nold\n{ROADMAP_END}\r\ntail <b>");
        let spliced = splice_roadmap(&body, "new").unwrap();
        assert_eq!(
            spliced,
            format!("head\r\n{ROADMAP_START}\nnew\n{ROADMAP_END}\r\ntail <b>")
        );
        assert_eq!(outside_digest(&spliced), outside_digest(&body));
    }

    #[test]
    fn an_edit_outside_the_section_changes_the_digest() {
        let body = format!("head\n{ROADMAP_START}\nold\n{ROADMAP_END}\ntail");
        let edited = body.replace("tail", "tail!");
        assert_ne!(outside_digest(&body), outside_digest(&edited));
        let inside = body.replace("old", "changed");
        assert_eq!(outside_digest(&body), outside_digest(&inside));
    }

    #[test]
    fn unusable_markers_are_refused() {
        let body = format!("{ROADMAP_END}\n{ROADMAP_START}");
        assert!(splice_roadmap(&body, "x").is_err());
        assert!(outside_digest(&body).is_err());
    }
}
