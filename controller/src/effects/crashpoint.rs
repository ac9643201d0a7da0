//! Deliberate crashes at the windows of SPEC §6 rule 7, for the crash
//! matrix: `AUTOFORGE_CRASH_AT=after_send` (any effect) or
//! `AUTOFORGE_CRASH_AT=after_send:create_pr` (one kind) or
//! `AUTOFORGE_CRASH_AT=after_send:post_comment:ai-epic-progress` (one kind,
//! identities starting with the given text) makes the process
//! abort — no unwinding, no destructors, no flushed buffers, like a power
//! cut — the first time it reaches that point.
//!
//! The variable is read once; when it is unset the check is one atomic load
//! and a comparison.

use std::sync::OnceLock;

use autoforge_journal::EffectKind;

/// The crash windows of the write-ahead protocol, in protocol order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The transition and its intents are committed; nothing was sent.
    AfterIntentCommit,
    /// `attempted` is durable; the request was not sent.
    AfterAttemptedBeforeSend,
    /// The request was sent (it may have landed); nothing read back.
    AfterSendBeforeReadBack,
    /// Read-back showed the write; `observed` is not yet recorded.
    AfterReadBackBeforeObserved,
    /// Every effect is observed; the next transition is not committed.
    AfterObservedBeforeTransition,
}

impl Point {
    pub const ALL: [Point; 5] = [
        Point::AfterIntentCommit,
        Point::AfterAttemptedBeforeSend,
        Point::AfterSendBeforeReadBack,
        Point::AfterReadBackBeforeObserved,
        Point::AfterObservedBeforeTransition,
    ];

    /// The spelling used in `AUTOFORGE_CRASH_AT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Point::AfterIntentCommit => "after_intent",
            Point::AfterAttemptedBeforeSend => "after_attempted",
            Point::AfterSendBeforeReadBack => "after_send",
            Point::AfterReadBackBeforeObserved => "after_read_back",
            Point::AfterObservedBeforeTransition => "after_observed",
        }
    }
}

/// The environment variable naming the crash point.
pub const CRASH_ENV: &str = "AUTOFORGE_CRASH_AT";

/// A parsed `AUTOFORGE_CRASH_AT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashSpec {
    pub point: Point,
    /// Only effects of this kind trigger it; `None` is any effect.
    pub kind: Option<EffectKind>,
    /// Only effects whose identity starts with this; `None` is any.
    pub identity_prefix: Option<String>,
}

impl CrashSpec {
    /// Parses `point`, `point:kind` or `point:kind:identity-prefix` (the
    /// prefix may itself contain `:`). Anything else is an error: a typo in
    /// a crash test must fail loudly, not silently never crash.
    pub fn parse(text: &str) -> Result<CrashSpec, String> {
        let mut parts = text.splitn(3, ':');
        let point_text = parts.next().unwrap_or_default();
        let kind_text = parts.next();
        let identity_prefix = parts.next().map(str::to_owned);
        if identity_prefix.as_deref() == Some("") {
            return Err(format!("{CRASH_ENV}: the identity prefix is empty"));
        }
        let point = Point::ALL
            .into_iter()
            .find(|p| p.as_str() == point_text)
            .ok_or_else(|| format!("{CRASH_ENV}: unknown crash point `{point_text}`"))?;
        let kind = kind_text
            .map(|k| {
                k.parse::<EffectKind>()
                    .map_err(|e| format!("{CRASH_ENV}: {e}"))
            })
            .transpose()?;
        Ok(CrashSpec {
            point,
            kind,
            identity_prefix,
        })
    }

    pub fn fires_at(&self, point: Point, kind: EffectKind, identity: &str) -> bool {
        self.point == point
            && self.kind.is_none_or(|k| k == kind)
            && self
                .identity_prefix
                .as_deref()
                .is_none_or(|prefix| identity.starts_with(prefix))
    }
}

static CONFIGURED: OnceLock<Option<CrashSpec>> = OnceLock::new();

fn configured() -> Option<&'static CrashSpec> {
    CONFIGURED
        .get_or_init(|| {
            let text = std::env::var(CRASH_ENV).ok().filter(|t| !t.is_empty())?;
            match CrashSpec::parse(&text) {
                Ok(spec) => Some(spec),
                Err(error) => {
                    // Continuing would run a crash test that never crashes.
                    eprintln!("{error}");
                    std::process::abort();
                }
            }
        })
        .as_ref()
}

/// Aborts the process if `AUTOFORGE_CRASH_AT` names this point (and the
/// effect's kind and identity).
pub fn crash_point(point: Point, kind: EffectKind, identity: &str) {
    if let Some(spec) = configured()
        && spec.fires_at(point, kind, identity)
    {
        eprintln!("{CRASH_ENV}: aborting at {}", point.as_str());
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_with_and_without_a_kind_filter() {
        let any = CrashSpec::parse("after_send").expect("valid");
        assert!(any.fires_at(Point::AfterSendBeforeReadBack, EffectKind::Push, "x"));
        assert!(!any.fires_at(Point::AfterIntentCommit, EffectKind::Push, "x"));
        let one = CrashSpec::parse("after_send:create_pr").expect("valid");
        assert!(one.fires_at(Point::AfterSendBeforeReadBack, EffectKind::CreatePr, "x"));
        assert!(!one.fires_at(Point::AfterSendBeforeReadBack, EffectKind::Push, "x"));
    }

    #[test]
    fn an_identity_prefix_narrows_a_kind_to_one_family_of_objects() {
        let spec =
            CrashSpec::parse("after_send:post_comment:ai-epic-progress:epic=1").expect("valid");
        let point = Point::AfterSendBeforeReadBack;
        assert!(spec.fires_at(
            point,
            EffectKind::PostComment,
            "ai-epic-progress:epic=1:issue=2"
        ));
        assert!(!spec.fires_at(point, EffectKind::PostComment, "ai-review-result:pr=3"));
        assert!(!spec.fires_at(point, EffectKind::CreateIssue, "ai-epic-progress:epic=1"));
        assert!(CrashSpec::parse("after_send:post_comment:").is_err());
    }

    #[test]
    fn typos_are_errors() {
        assert!(CrashSpec::parse("after_sned").is_err());
        assert!(CrashSpec::parse("after_send:create_prr").is_err());
    }
}
