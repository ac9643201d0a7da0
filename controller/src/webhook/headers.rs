//! The delivery's HTTP headers and the few payload fields the inbox indexes.
//!
//! A delivery without its event name or delivery id cannot be stored or
//! deduplicated, so [`HeaderError`] means "answer 400". Signature problems
//! are a separate error ([`SignatureError`], answered 401) because they say
//! something different: the request may not come from GitHub at all.

use super::signature::{SignatureError, verify_signature};
use http::HeaderMap;
use secrecy::SecretString;
use serde::Deserialize;

pub const EVENT_HEADER: &str = "x-github-event";
pub const DELIVERY_HEADER: &str = "x-github-delivery";
pub const SIGNATURE_256_HEADER: &str = "x-hub-signature-256";
pub const LEGACY_SIGNATURE_HEADER: &str = "x-hub-signature";

/// GitHub sends GUIDs; anything much longer is not a delivery id.
const MAX_DELIVERY_ID_LEN: usize = 128;
const MAX_EVENT_NAME_LEN: usize = 64;

/// Whether `event` is shaped like a GitHub event name: letters, digits and
/// underscores (`issues`, `projects_v2_item`). GitHub adds
/// events over time, so anything of that shape is stored and the
/// classifier ignores what it does not use; refusing it would make GitHub
/// mark the delivery failed and the poller redeliver it forever.
fn is_event_name(event: &str) -> bool {
    event.len() <= MAX_EVENT_NAME_LEN
        && event
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A required header that is absent or unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("the {0} header is not a valid value")]
    Invalid(&'static str),
}

/// The headers of one webhook delivery, checked for shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryHeaders {
    /// `X-GitHub-Event`, e.g. `issue_comment`.
    pub event: String,
    /// `X-GitHub-Delivery`: the inbox's deduplication key.
    pub delivery_id: String,
    /// `X-Hub-Signature-256`, if sent.
    pub signature_256: Option<String>,
    /// Whether the legacy SHA-1 `X-Hub-Signature` was sent.
    pub has_legacy_signature: bool,
}

impl DeliveryHeaders {
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, HeaderError> {
        let event = required(headers, EVENT_HEADER)?;
        if !is_event_name(&event) {
            return Err(HeaderError::Invalid(EVENT_HEADER));
        }
        let delivery_id = required(headers, DELIVERY_HEADER)?;
        if delivery_id.len() > MAX_DELIVERY_ID_LEN
            || !delivery_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(HeaderError::Invalid(DELIVERY_HEADER));
        }
        let signature_256 = headers
            .get(SIGNATURE_256_HEADER)
            .map(|value| {
                value
                    .to_str()
                    .map(str::to_owned)
                    .map_err(|_| HeaderError::Invalid(SIGNATURE_256_HEADER))
            })
            .transpose()?;
        Ok(DeliveryHeaders {
            event,
            delivery_id,
            signature_256,
            has_legacy_signature: headers.contains_key(LEGACY_SIGNATURE_HEADER),
        })
    }

    /// Verifies the raw body against the SHA-256 signature; a delivery
    /// carrying only the legacy SHA-1 signature is refused as such.
    pub fn verify(&self, secret: &SecretString, body: &[u8]) -> Result<(), SignatureError> {
        if self.signature_256.is_none() && self.has_legacy_signature {
            return Err(SignatureError::OnlyLegacySha1);
        }
        verify_signature(secret, body, self.signature_256.as_deref())
    }
}

fn required(headers: &HeaderMap, name: &'static str) -> Result<String, HeaderError> {
    let value = headers.get(name).ok_or(HeaderError::Missing(name))?;
    let value = value
        .to_str()
        .map_err(|_| HeaderError::Invalid(name))?
        .trim();
    if value.is_empty() {
        return Err(HeaderError::Missing(name));
    }
    Ok(value.to_owned())
}

/// Columns the inbox stores beside the raw body, read leniently: a payload
/// without a repository (e.g. `installation`) simply has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryMeta {
    pub action: Option<String>,
    pub repository: Option<String>,
    pub installation_id: Option<u64>,
}

/// The body is not a JSON object, so not a GitHub webhook payload.
#[derive(Debug, thiserror::Error)]
#[error("the delivery body is not a JSON object: {0}")]
pub struct MetaError(#[source] serde_json::Error);

impl DeliveryMeta {
    pub fn from_body(body: &[u8]) -> Result<Self, MetaError> {
        #[derive(Deserialize)]
        struct Raw {
            action: Option<String>,
            repository: Option<RawRepository>,
            installation: Option<RawInstallation>,
        }
        #[derive(Deserialize)]
        struct RawRepository {
            full_name: String,
        }
        #[derive(Deserialize)]
        struct RawInstallation {
            id: u64,
        }
        let raw: Raw = serde_json::from_slice(body).map_err(MetaError)?;
        Ok(DeliveryMeta {
            action: raw.action,
            repository: raw.repository.map(|repository| repository.full_name),
            installation_id: raw.installation.map(|installation| installation.id),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::sign_body;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

    #[test]
    fn complete_headers_are_read() {
        let parsed = DeliveryHeaders::from_headers(&headers(&[
            ("X-GitHub-Event", "issue_comment"),
            ("X-GitHub-Delivery", DELIVERY),
            ("X-Hub-Signature-256", "sha256=00"),
        ]))
        .expect("valid headers");
        assert_eq!(parsed.event, "issue_comment");
        assert_eq!(parsed.delivery_id, DELIVERY);
        assert_eq!(parsed.signature_256.as_deref(), Some("sha256=00"));
        assert!(!parsed.has_legacy_signature);
    }

    #[test]
    fn missing_event_or_delivery_is_a_header_error() {
        assert_eq!(
            DeliveryHeaders::from_headers(&headers(&[("X-GitHub-Delivery", DELIVERY)])),
            Err(HeaderError::Missing(EVENT_HEADER))
        );
        assert_eq!(
            DeliveryHeaders::from_headers(&headers(&[("X-GitHub-Event", "ping")])),
            Err(HeaderError::Missing(DELIVERY_HEADER))
        );
        assert_eq!(
            DeliveryHeaders::from_headers(&headers(&[
                ("X-GitHub-Event", "ping"),
                ("X-GitHub-Delivery", "  ")
            ])),
            Err(HeaderError::Missing(DELIVERY_HEADER))
        );
    }

    #[test]
    fn event_names_with_digits_are_read() {
        for event in ["projects_v2_item", "projects_v2", "issues"] {
            let parsed = DeliveryHeaders::from_headers(&headers(&[
                ("X-GitHub-Event", event),
                ("X-GitHub-Delivery", DELIVERY),
            ]))
            .expect("an event name GitHub sends");
            assert_eq!(parsed.event, event);
        }
    }

    #[test]
    fn odd_event_or_delivery_values_are_invalid() {
        for event in ["issue-comment", "projects v2", &"a".repeat(65)] {
            assert_eq!(
                DeliveryHeaders::from_headers(&headers(&[
                    ("X-GitHub-Event", event),
                    ("X-GitHub-Delivery", DELIVERY)
                ])),
                Err(HeaderError::Invalid(EVENT_HEADER)),
                "{event}"
            );
        }
        assert_eq!(
            DeliveryHeaders::from_headers(&headers(&[
                ("X-GitHub-Event", "issues; drop"),
                ("X-GitHub-Delivery", DELIVERY)
            ])),
            Err(HeaderError::Invalid(EVENT_HEADER))
        );
        let long_id = "a".repeat(MAX_DELIVERY_ID_LEN + 1);
        assert_eq!(
            DeliveryHeaders::from_headers(&headers(&[
                ("X-GitHub-Event", "ping"),
                ("X-GitHub-Delivery", &long_id)
            ])),
            Err(HeaderError::Invalid(DELIVERY_HEADER))
        );
    }

    #[test]
    fn only_legacy_sha1_signature_is_refused_as_such() {
        let parsed = DeliveryHeaders::from_headers(&headers(&[
            ("X-GitHub-Event", "ping"),
            ("X-GitHub-Delivery", DELIVERY),
            (
                "X-Hub-Signature",
                "sha1=0123456789abcdef0123456789abcdef01234567",
            ),
        ]))
        .expect("valid headers");
        let secret = SecretString::from("s".to_owned());
        assert_eq!(
            parsed.verify(&secret, b"{}"),
            Err(SignatureError::OnlyLegacySha1)
        );
    }

    #[test]
    fn sha256_signature_wins_when_both_are_sent() {
        let secret = SecretString::from("s".to_owned());
        let signature = sign_body(&secret, b"{}");
        let parsed = DeliveryHeaders::from_headers(&headers(&[
            ("X-GitHub-Event", "ping"),
            ("X-GitHub-Delivery", DELIVERY),
            ("X-Hub-Signature", "sha1=00"),
            ("X-Hub-Signature-256", &signature),
        ]))
        .expect("valid headers");
        assert_eq!(parsed.verify(&secret, b"{}"), Ok(()));
    }

    #[test]
    fn meta_reads_action_repository_and_installation() {
        let body = br#"{"action":"created","repository":{"full_name":"o/r","id":1},
                        "installation":{"id":42,"node_id":"x"},"extra":[1]}"#;
        assert_eq!(
            DeliveryMeta::from_body(body).expect("object"),
            DeliveryMeta {
                action: Some("created".to_owned()),
                repository: Some("o/r".to_owned()),
                installation_id: Some(42),
            }
        );
    }

    #[test]
    fn meta_of_a_minimal_object_is_empty() {
        assert_eq!(
            DeliveryMeta::from_body(b"{}").expect("object"),
            DeliveryMeta::default()
        );
    }

    #[test]
    fn meta_refuses_a_body_that_is_not_an_object() {
        assert!(DeliveryMeta::from_body(b"[1,2]").is_err());
        assert!(DeliveryMeta::from_body(b"not json").is_err());
    }
}
