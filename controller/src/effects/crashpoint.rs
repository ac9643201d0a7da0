//! Deliberate crashes at the windows of SPEC §6 rule 7, for the crash
//! matrix: `AUTOFORGE_CRASH_AT=after_send` (any effect) or
//! `AUTOFORGE_CRASH_AT=after_send:create_pr` (one kind) makes the process
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashSpec {
    pub point: Point,
    /// Only effects of this kind trigger it; `None` is any effect.
    pub kind: Option<EffectKind>,
}

impl CrashSpec {
    /// Parses `point` or `point:kind`. Anything else is an error: a typo in
    /// a crash test must fail loudly, not silently never crash.
    pub fn parse(text: &str) -> Result<CrashSpec, String> {
        let (point_text, kind_text) = match text.split_once(':') {
            Some((point, kind)) => (point, Some(kind)),
            None => (text, None),
        };
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
        Ok(CrashSpec { point, kind })
    }

    pub fn fires_at(&self, point: Point, kind: Option<EffectKind>) -> bool {
        self.point == point && (self.kind.is_none() || self.kind == kind)
    }
}

static CONFIGURED: OnceLock<Option<CrashSpec>> = OnceLock::new();

fn configured() -> Option<CrashSpec> {
    *CONFIGURED.get_or_init(|| {
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
}

/// Aborts the process if `AUTOFORGE_CRASH_AT` names this point (and kind).
pub fn crash_point(point: Point, kind: Option<EffectKind>) {
    if let Some(spec) = configured()
        && spec.fires_at(point, kind)
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
        assert!(any.fires_at(Point::AfterSendBeforeReadBack, Some(EffectKind::Push)));
        assert!(!any.fires_at(Point::AfterIntentCommit, None));
        let one = CrashSpec::parse("after_send:create_pr").expect("valid");
        assert!(one.fires_at(Point::AfterSendBeforeReadBack, Some(EffectKind::CreatePr)));
        assert!(!one.fires_at(Point::AfterSendBeforeReadBack, Some(EffectKind::Push)));
    }

    #[test]
    fn typos_are_errors() {
        assert!(CrashSpec::parse("after_sned").is_err());
        assert!(CrashSpec::parse("after_send:create_prr").is_err());
    }
}
