//! `X-Hub-Signature-256` verification: HMAC-SHA256 over the raw body,
//! compared in constant time, before anything looks at the payload.
//!
//! Every [`SignatureError`] means "not from GitHub as far as we can tell";
//! the ingress answers 401 and stores nothing. The legacy SHA-1
//! `X-Hub-Signature` is never accepted on its own: SHA-1 HMAC is still
//! unbroken, but accepting it would let a downgrade pick the weaker scheme.

use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

const SHA256_PREFIX: &str = "sha256=";

/// Why a delivery's signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    #[error(
        "only the legacy SHA-1 X-Hub-Signature header was sent; X-Hub-Signature-256 is required"
    )]
    OnlyLegacySha1,
    #[error("the X-Hub-Signature-256 header is not `sha256=` followed by 64 hex digits")]
    Malformed,
    #[error("the signature does not match the body")]
    Mismatch,
    #[error("no webhook secret is configured, so no signature can be checked")]
    EmptySecret,
}

/// Checks `header` (the value of `X-Hub-Signature-256`) against `body`.
pub fn verify_signature(
    secret: &SecretString,
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let secret = secret.expose_secret();
    if secret.is_empty() {
        return Err(SignatureError::EmptySecret);
    }
    let hex_digest = header
        .trim()
        .strip_prefix(SHA256_PREFIX)
        .ok_or(SignatureError::Malformed)?;
    let expected = hex::decode(hex_digest).map_err(|_| SignatureError::Malformed)?;
    if expected.len() != 32 {
        return Err(SignatureError::Malformed);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .map_err(|_| SignatureError::EmptySecret)?;
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

/// The header value GitHub would send for `body`; used by fakehub-style
/// senders and by tests that need a signed delivery.
pub fn sign_body(secret: &SecretString, body: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail; an empty key is
    // still a key (verification refuses it separately).
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose_secret().as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body);
    format!(
        "{SHA256_PREFIX}{}",
        hex::encode(mac.finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(value: &str) -> SecretString {
        SecretString::from(value.to_owned())
    }

    /// Computed with `printf '%s' '{"zen":"hi"}' | openssl dgst -sha256 -hmac s3cret`,
    /// independently of this crate.
    const OPENSSL_VECTOR: &str =
        "sha256=b18ce78d18646301e6811d72dbafbde385e5ab0f65482fdb261485ca0773c8bc";

    #[test]
    fn independently_computed_signature_is_accepted() {
        assert_eq!(
            verify_signature(&secret("s3cret"), br#"{"zen":"hi"}"#, Some(OPENSSL_VECTOR)),
            Ok(())
        );
    }

    #[test]
    fn uppercase_hex_digest_is_accepted() {
        let upper = format!("sha256={}", OPENSSL_VECTOR[7..].to_uppercase());
        assert_eq!(
            verify_signature(&secret("s3cret"), br#"{"zen":"hi"}"#, Some(&upper)),
            Ok(())
        );
    }

    #[test]
    fn tampered_body_is_a_mismatch() {
        assert_eq!(
            verify_signature(&secret("s3cret"), br#"{"zen":"ho"}"#, Some(OPENSSL_VECTOR)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn wrong_secret_is_a_mismatch() {
        assert_eq!(
            verify_signature(&secret("other"), br#"{"zen":"hi"}"#, Some(OPENSSL_VECTOR)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn missing_header_is_refused() {
        assert_eq!(
            verify_signature(&secret("s3cret"), b"{}", None),
            Err(SignatureError::Missing)
        );
    }

    #[test]
    fn sha1_style_or_truncated_values_are_malformed() {
        let body = b"{}";
        for header in [
            "sha1=0123456789abcdef0123456789abcdef01234567",
            "sha256=",
            "sha256=zz",
            "sha256=abcd",
            "deadbeef",
        ] {
            assert_eq!(
                verify_signature(&secret("s3cret"), body, Some(header)),
                Err(SignatureError::Malformed),
                "{header}"
            );
        }
    }

    #[test]
    fn empty_secret_never_verifies() {
        let empty = secret("");
        let header = sign_body(&empty, b"{}");
        assert_eq!(
            verify_signature(&empty, b"{}", Some(&header)),
            Err(SignatureError::EmptySecret)
        );
    }

    #[test]
    fn signing_and_verifying_round_trip() {
        let key = secret("k");
        let header = sign_body(&key, b"payload");
        assert_eq!(verify_signature(&key, b"payload", Some(&header)), Ok(()));
        assert_eq!(header, sign_body(&key, b"payload"));
    }
}
