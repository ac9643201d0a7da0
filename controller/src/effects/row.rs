//! The typed journal row. A kind's planner fills [`Row`] with its own
//! `Payload`, `Precondition` and `Completion` types; its reconcile and send
//! decode the same types back with [`payload`], [`precondition`] and
//! [`completion`]. The column shapes several kinds share — a whole body, a
//! body digest, a marker identity, the bare nonce — are declared here.
//!
//! The JSON is the row format of every earlier build (existing databases
//! and the crash matrix depend on it): field names are the journal's keys,
//! and payload bytes are written with sorted keys.

use autoforge_journal::{Effect, EffectKind, NewEffect, Stage};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::EffectError;
use super::markers::MarkerName;

/// One effect's columns, typed by its kind.
pub(crate) struct Row<P, Q, C> {
    /// `issue/<n>`, `pull/<n>`, `comment/<id>`, `head/<branch>`, `issues`
    /// or the full ref name.
    pub target: String,
    /// What must still hold right before sending.
    pub precondition: Q,
    /// The request's data, sent byte for byte.
    pub payload: P,
    /// What read-back must show, and the row's `write` nonce.
    pub completion: C,
}

impl<P: Serialize, Q: Serialize, C: Serialize> Row<P, Q, C> {
    /// The journal row for `kind` and `identity`.
    pub(crate) fn into_new_effect(
        self,
        kind: EffectKind,
        identity: String,
    ) -> Result<NewEffect, serde_json::Error> {
        // Through a `Value` on purpose: its map keeps keys sorted, so the
        // payload bytes do not depend on the order fields are declared in.
        let payload = serde_json::to_value(&self.payload)?;
        Ok(NewEffect {
            kind,
            identity,
            target: self.target,
            precondition: serde_json::to_value(&self.precondition)?,
            payload: serde_json::to_vec(&payload)?,
            completion: serde_json::to_value(&self.completion)?,
        })
    }
}

/// The payload bytes, decoded as the kind's type.
pub(crate) fn payload<T: DeserializeOwned>(effect: &Effect) -> Result<T, EffectError> {
    serde_json::from_slice(&effect.payload).map_err(|e| corrupt(effect, "payload", e.to_string()))
}

/// The `precondition` column, decoded as the kind's type.
pub(crate) fn precondition<T: DeserializeOwned>(effect: &Effect) -> Result<T, EffectError> {
    T::deserialize(&effect.precondition).map_err(|e| corrupt(effect, "precondition", e.to_string()))
}

/// The `completion` column, decoded as the kind's type.
pub(crate) fn completion<T: DeserializeOwned>(effect: &Effect) -> Result<T, EffectError> {
    T::deserialize(&effect.completion).map_err(|e| corrupt(effect, "completion", e.to_string()))
}

/// The number in a target like `issue/12` or `pull/3`, as the kind of
/// number the caller reads (an issue's or a pull request's).
pub(crate) fn target_number<N: std::str::FromStr>(effect: &Effect) -> Result<N, EffectError> {
    effect
        .target
        .rsplit_once('/')
        .and_then(|(_, n)| n.parse().ok())
        .ok_or_else(|| {
            corrupt(
                effect,
                "target",
                format!("`{}` names no number", effect.target),
            )
        })
}

pub(crate) fn corrupt(effect: &Effect, field: &'static str, detail: String) -> EffectError {
    EffectError::CorruptRow {
        id: effect.id.0,
        kind: effect.kind,
        field,
        detail,
    }
}

/// Lower-case hex SHA-256 of `text`.
pub(crate) fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The payload of every kind that writes one whole body: comments, the PR
/// adoption, appended issue markers, the roadmap splice.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct BodyPayload {
    pub body: String,
}

/// No precondition beyond the reconcile itself.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct NoPrecondition {}

/// Guards an append: the body GitHub shows must still be the one planned on.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct BaseDigest {
    /// [`digest`] of the body read when the phase began.
    pub base_sha256: String,
}

/// The completion of kinds recognised by a marker: its name, the identity
/// `key` the marker must carry, and the row's nonce.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Marked {
    pub marker: MarkerName,
    /// A subset of the marker's payload, compared key by key with
    /// [`super::markers::FoundMarker::matches`].
    pub key: Map<String, Value>,
    pub write: String,
}

/// The identity `key` of an observed row of `kind` recognised by a `name`
/// marker, decoded as the kind's own key type; `None` for any other row
/// (another kind or marker, not yet observed, or a key of another shape).
pub(crate) fn observed_key<K: DeserializeOwned>(
    effect: &Effect,
    kind: EffectKind,
    name: MarkerName,
) -> Option<K> {
    #[derive(Deserialize)]
    struct MarkedKey<K> {
        marker: MarkerName,
        key: K,
    }
    if effect.kind != kind || effect.stage != Stage::Observed {
        return None;
    }
    // Decoded from the borrowed value: no copy of the row's JSON per row.
    let marked = MarkedKey::<K>::deserialize(&effect.completion).ok()?;
    (marked.marker == name).then_some(marked.key)
}

/// What read-back recorded for an observed row, decoded as `T`.
pub(crate) fn observed_as<T: DeserializeOwned>(effect: &Effect) -> Option<T> {
    T::deserialize(effect.observed.as_ref()?).ok()
}

/// The completion of kinds recognised without a marker: only the nonce.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Nonce {
    pub write: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_bytes_have_sorted_keys_whatever_the_declaration_order() {
        #[derive(Serialize)]
        struct Unsorted {
            zeta: u8,
            alpha: Option<String>,
        }
        let row = Row {
            target: "issue/1".to_owned(),
            precondition: NoPrecondition {},
            payload: Unsorted {
                zeta: 1,
                alpha: None,
            },
            completion: Nonce {
                write: "n".to_owned(),
            },
        };
        let effect = row
            .into_new_effect(EffectKind::SetLabels, "x".to_owned())
            .unwrap();
        assert_eq!(effect.payload, br#"{"alpha":null,"zeta":1}"#);
        assert_eq!(effect.precondition, json!({}));
        assert_eq!(effect.completion, json!({"write": "n"}));
    }

    #[test]
    fn a_marked_completion_reads_the_marker_by_its_spelling() {
        let marked: Marked = serde_json::from_value(json!({
            "marker": "ai-follow-up", "key": {"pr": "u"}, "write": "n"
        }))
        .unwrap();
        assert_eq!(marked.marker, MarkerName::FollowUp);
        assert!(
            serde_json::from_value::<Marked>(
                json!({"marker": "ai-other", "key": {}, "write": "n"})
            )
            .is_err()
        );
    }
}
