//! The rate-limit windows that injected faults close, and the requests a
//! client sends while one is closed. A secondary limit closes its caller's
//! rate scope (an installation, the App, a user) for its `retry-after`; an
//! exhausted primary limit closes it until `x-ratelimit-reset`. A request
//! of that scope arriving before the window opens again is refused the way
//! GitHub refuses it and recorded: a client that honours GitHub's answers
//! sends none.
//!
//! A request that reaches fakehub within [`IN_FLIGHT_GRACE_MS`] of the
//! refusal is refused but not counted: it was on its way before the client
//! could read the refusal (several tasks share one installation), as it
//! would be on GitHub.

use std::collections::HashMap;

use serde::Serialize;

use crate::Handle;

/// How long after a refusal a request of the same scope is taken to have
/// been sent before the client read it.
pub const IN_FLIGHT_GRACE_MS: i64 = 100;

/// Which limit closed a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// `retry-after` (403 or 429).
    Secondary,
    /// `x-ratelimit-remaining: 0` until `x-ratelimit-reset`.
    Primary,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    kind: WindowKind,
    /// Unix milliseconds the window opens again.
    until_ms: i64,
    /// Unix milliseconds the refusal that closed it was answered.
    closed_ms: i64,
}

/// One request sent while its scope's window was closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowRequest {
    pub scope: String,
    pub method: String,
    pub path: String,
    pub window: WindowKind,
    /// How long after the refusal it arrived.
    pub ms_after_refusal: i64,
    /// How long before the window opened again.
    pub ms_before_open: i64,
}

/// A closed window a request ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    pub kind: WindowKind,
    /// Milliseconds until it opens.
    pub remaining_ms: i64,
}

/// Every scope's closed window and the requests counted inside one.
#[derive(Debug, Default)]
pub struct ClosedWindows {
    windows: HashMap<String, Window>,
    /// How many windows the faults closed.
    closings: u64,
    inside: Vec<WindowRequest>,
}

impl ClosedWindows {
    /// `scope` is closed from `now_ms` until `until_ms` (a later window
    /// already in force is kept).
    pub fn close(&mut self, scope: &str, kind: WindowKind, now_ms: i64, until_ms: i64) {
        self.closings += 1;
        let window = Window {
            kind,
            until_ms,
            closed_ms: now_ms,
        };
        self.windows
            .entry(scope.to_owned())
            .and_modify(|old| {
                if until_ms > old.until_ms {
                    *old = window;
                }
            })
            .or_insert(window);
    }

    /// The closed window a request of `scope` arriving at `now_ms` runs
    /// into, if any; counts the request unless it was already on its way.
    pub fn enter(&mut self, scope: &str, now_ms: i64, method: &str, path: &str) -> Option<Closed> {
        let window = *self.windows.get(scope)?;
        if window.until_ms <= now_ms {
            self.windows.remove(scope);
            return None;
        }
        let after = now_ms - window.closed_ms;
        if after >= IN_FLIGHT_GRACE_MS {
            self.inside.push(WindowRequest {
                scope: scope.to_owned(),
                method: method.to_owned(),
                path: path.to_owned(),
                window: window.kind,
                ms_after_refusal: after,
                ms_before_open: window.until_ms - now_ms,
            });
        }
        Some(Closed {
            kind: window.kind,
            remaining_ms: window.until_ms - now_ms,
        })
    }

    pub fn closings(&self) -> u64 {
        self.closings
    }

    pub fn inside(&self) -> &[WindowRequest] {
        &self.inside
    }
}

impl Handle {
    /// Requests sent inside a rate-limit window a fault closed, oldest first.
    pub fn closed_window_requests(&self) -> Vec<WindowRequest> {
        self.shared.faults().windows.inside().to_vec()
    }

    /// How many rate-limit windows the faults closed so far.
    pub fn closed_windows(&self) -> u64 {
        self.shared.faults().windows.closings()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_request_inside_a_closed_window_is_counted_and_one_after_it_is_not() {
        let mut windows = ClosedWindows::default();
        windows.close("installation:1", WindowKind::Secondary, 1_000, 4_000);
        assert_eq!(windows.enter("installation:2", 2_000, "GET", "/a"), None);
        let closed = windows.enter("installation:1", 2_000, "GET", "/a");
        assert_eq!(
            closed,
            Some(Closed {
                kind: WindowKind::Secondary,
                remaining_ms: 2_000
            })
        );
        assert_eq!(windows.inside().len(), 1);
        assert_eq!(windows.inside()[0].ms_after_refusal, 1_000);
        assert_eq!(windows.enter("installation:1", 4_000, "GET", "/a"), None);
        assert_eq!(windows.inside().len(), 1);
        assert_eq!(windows.closings(), 1);
    }

    #[test]
    fn a_request_already_on_its_way_is_refused_but_not_counted() {
        let mut windows = ClosedWindows::default();
        windows.close("app:1", WindowKind::Primary, 1_000, 9_000);
        assert!(windows.enter("app:1", 1_050, "POST", "/b").is_some());
        assert!(windows.inside().is_empty());
    }

    #[test]
    fn a_shorter_window_does_not_shorten_a_longer_one() {
        let mut windows = ClosedWindows::default();
        windows.close("s", WindowKind::Primary, 0, 10_000);
        windows.close("s", WindowKind::Secondary, 100, 3_000);
        let closed = windows.enter("s", 5_000, "GET", "/").unwrap();
        assert_eq!(closed.kind, WindowKind::Primary);
    }
}
