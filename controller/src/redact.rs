//! Redaction of secrets and credential-shaped text.
//!
//! Two users share these patterns. The published-text policy (SPEC §7) asks
//! [`find_credential`] whether a text *contains* anything credential-shaped
//! and refuses it; it never rewrites. Captured agent output, validation output
//! and read-context files are instead passed through a [`Redactor`], which
//! replaces every known secret value and every credential-shaped span before
//! the text is stored or shown. Keeping both on one pattern table means a
//! shape the policy refuses is also a shape the logs never keep.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use secrecy::{ExposeSecret, SecretString};

/// The kinds of credential-shaped text we recognise. The name is what
/// diagnostics print; the matched text itself is never echoed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` tokens and fine-grained `github_pat_` tokens.
    GitHubToken,
    /// `sk-…` API keys (OpenAI, Anthropic and look-alikes).
    ApiKey,
    /// A three-part JSON Web Token.
    Jwt,
    /// An HTTP `Authorization:` header with a value.
    AuthorizationHeader,
    /// A PEM private key block.
    PrivateKey,
    /// A URL carrying `user:password@`.
    UrlWithPassword,
    /// An AWS access key id.
    AwsAccessKey,
    /// A value the process knows to be secret (configured tokens, keys, URLs).
    KnownSecret,
}

impl CredentialKind {
    /// A short stable name used in diagnostics and redaction placeholders.
    pub fn name(self) -> &'static str {
        match self {
            Self::GitHubToken => "github-token",
            Self::ApiKey => "api-key",
            Self::Jwt => "jwt",
            Self::AuthorizationHeader => "authorization-header",
            Self::PrivateKey => "private-key",
            Self::UrlWithPassword => "url-with-password",
            Self::AwsAccessKey => "aws-access-key",
            Self::KnownSecret => "secret",
        }
    }
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Pattern table. Each pattern is anchored on a shape distinctive enough that
/// ordinary prose and code do not trip it; the token bodies require a minimum
/// length so that `ghp_` mentioned in documentation is not a credential.
static PATTERNS: LazyLock<Vec<(CredentialKind, Regex)>> = LazyLock::new(|| {
    let table: [(CredentialKind, &str); 7] = [
        (
            CredentialKind::PrivateKey,
            // A block without its END line (a truncated tail) is redacted to
            // the end of the text rather than left half-visible.
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        ),
        (
            CredentialKind::GitHubToken,
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        ),
        (CredentialKind::ApiKey, r"\bsk-[A-Za-z0-9_\-]{16,}"),
        (
            CredentialKind::Jwt,
            r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]+",
        ),
        (
            CredentialKind::AuthorizationHeader,
            r"(?im)\bauthorization\s*:\s*\S[^\r\n]*",
        ),
        (
            CredentialKind::UrlWithPassword,
            r"(?i)\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@",
        ),
        (
            CredentialKind::AwsAccessKey,
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        ),
    ];
    table
        .into_iter()
        .map(|(kind, pattern)| {
            // The patterns are compile-time constants covered by unit tests,
            // so a failure here is a programming error, not bad input.
            #[allow(clippy::expect_used)]
            let regex = Regex::new(pattern).expect("credential pattern compiles");
            (kind, regex)
        })
        .collect()
});

/// The first credential-shaped span in `text`, by kind, if any.
///
/// Used by the published-text policy, which refuses rather than rewrites.
pub fn find_credential(text: &str) -> Option<CredentialKind> {
    PATTERNS
        .iter()
        .filter_map(|(kind, re)| re.find(text).map(|m| (m.start(), *kind)))
        .min_by_key(|(start, _)| *start)
        .map(|(_, kind)| kind)
}

/// Replaces known secret values and credential-shaped spans with
/// `[REDACTED:<kind>]`.
///
/// Known secrets shorter than [`Redactor::MIN_SECRET_LEN`] are ignored:
/// redacting every occurrence of a three-letter string would make logs
/// unreadable without protecting anything real.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<SecretString>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// Secrets shorter than this are not redacted by value.
    pub const MIN_SECRET_LEN: usize = 8;

    /// A redactor that knows only the credential patterns.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value to redact wherever it appears verbatim.
    pub fn with_secret(mut self, secret: SecretString) -> Self {
        self.add_secret(secret);
        self
    }

    /// Adds a value to redact wherever it appears verbatim.
    pub fn add_secret(&mut self, secret: SecretString) {
        if secret.expose_secret().len() >= Self::MIN_SECRET_LEN {
            self.secrets.push(secret);
        }
    }

    /// `text` with every secret and credential-shaped span replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            let value = secret.expose_secret();
            if out.contains(value) {
                out = Cow::Owned(out.replace(value, &placeholder(CredentialKind::KnownSecret)));
            }
        }
        for (kind, re) in PATTERNS.iter() {
            if re.is_match(&out) {
                out = Cow::Owned(
                    re.replace_all(&out, placeholder(*kind).as_str())
                        .into_owned(),
                );
            }
        }
        out
    }
}

fn placeholder(kind: CredentialKind) -> String {
    format!("[REDACTED:{kind}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(prefix: &str) -> String {
        format!("{prefix}{}", "a1B2c3D4e5".repeat(4))
    }

    #[test]
    fn finds_each_github_token_prefix() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"] {
            let text = format!("use {} here", token(prefix));
            assert_eq!(
                find_credential(&text),
                Some(CredentialKind::GitHubToken),
                "{prefix}"
            );
        }
    }

    #[test]
    fn a_bare_prefix_in_prose_is_not_a_credential() {
        assert_eq!(
            find_credential("installation tokens start with ghs_ on GitHub"),
            None
        );
        assert_eq!(find_credential("the sk-learn package"), None);
    }

    #[test]
    fn finds_jwt_authorization_header_key_block_and_password_url() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjF9.c2lnbmF0dXJl";
        assert_eq!(find_credential(jwt), Some(CredentialKind::Jwt));
        assert_eq!(
            find_credential("curl -H 'Authorization: Bearer abc'"),
            Some(CredentialKind::AuthorizationHeader)
        );
        assert_eq!(
            find_credential("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"),
            Some(CredentialKind::PrivateKey)
        );
        assert_eq!(
            find_credential("clone https://x-access-token:abc@github.com/o/r"),
            Some(CredentialKind::UrlWithPassword)
        );
        assert_eq!(
            find_credential("key AKIAABCDEFGHIJKLMNOP"),
            Some(CredentialKind::AwsAccessKey)
        );
        assert_eq!(
            find_credential(&token("sk-ant-")),
            Some(CredentialKind::ApiKey)
        );
    }

    #[test]
    fn ordinary_urls_and_code_are_clean() {
        assert_eq!(
            find_credential("see https://github.com/o/r/pull/3 and user@example.com"),
            None
        );
        assert_eq!(
            find_credential("let header = headers.get(\"authorization\");"),
            None
        );
    }

    #[test]
    fn redactor_replaces_known_secret_and_patterns() {
        let secret = "postgres://u:hunter2hunter2@db/x";
        let redactor = Redactor::new().with_secret(SecretString::from("hunter2hunter2"));
        let text = format!("url {secret} token {}", token("ghp_"));
        let out = redactor.redact(&text);
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("ghp_a1B2"), "{out}");
        assert!(out.contains("[REDACTED:github-token]"), "{out}");
    }

    #[test]
    fn truncated_private_key_is_redacted_to_the_end() {
        let out = Redactor::new().redact("before\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg");
        assert_eq!(out, "before\n[REDACTED:private-key]");
    }

    #[test]
    fn short_known_secrets_are_ignored_and_clean_text_is_borrowed() {
        let redactor = Redactor::new().with_secret(SecretString::from("abc"));
        assert!(matches!(redactor.redact("abc abc"), Cow::Borrowed(_)));
    }

    #[test]
    fn debug_output_does_not_show_secrets() {
        let redactor = Redactor::new().with_secret(SecretString::from("supersecretvalue"));
        assert!(!format!("{redactor:?}").contains("supersecret"));
    }
}
