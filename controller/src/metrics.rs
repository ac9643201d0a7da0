//! Prometheus metrics for `autoforge serve` (SPEC §15), served as text
//! exposition on `GET /metrics` of the serve router.
//!
//! Call sites record through the small functions below rather than through
//! the `metrics` macros directly, so that every name and every label value
//! is decided here (a rate-limit budget's label comes from
//! `github::RateScope::gauge_label`): label values come from fixed sets (an event outside the
//! allow-list is `other`, a phase the build does not know is `other`), never
//! from free text, and never from anything secret. The only open-ended label
//! is the installation id, bounded by the installations the App has.
//!
//! The recorder is process-wide ([`install`] is idempotent). Until it is
//! installed every recording is a cheap no-op, so library code and tests that
//! never serve `/metrics` pay nothing. Histogram samples are buffered until
//! a scrape or an upkeep drains them; a background thread runs the upkeep so
//! that memory stays bounded when nobody scrapes.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `autoforge_webhook_deliveries_received_total` | counter | `event` | every `POST /webhook`, valid or not |
//! | `autoforge_webhook_deliveries_duplicate_total` | counter | `event` | signed deliveries whose id the inbox already held |
//! | `autoforge_webhook_deliveries_invalid_total` | counter | `event`, `reason` | refused: `bad_headers`, `bad_signature`, `not_json`, `too_large`, `unreadable_body` |
//! | `autoforge_deliveries_processed_total` | counter | `event`, `outcome` | dispatched: `started` (a run began), `applied`, `already_seen`, `ignored` |
//! | `autoforge_deliveries_failed_total` | counter | `event`, `outcome` | dispatch failed: `retry` (scheduled again) or `gave_up` |
//! | `autoforge_github_requests_total` | counter | `method`, `status_class` | GitHub REST calls sent: `2xx`…`5xx`, `timeout`, `error` (no answer: transport failure, or no installation token) |
//! | `autoforge_github_request_duration_seconds` | histogram | `method` | time from sending a request to its whole answer (rate-limit waits excluded) |
//! | `autoforge_github_rate_limit_remaining` | gauge | `installation` | last `x-ratelimit-remaining` seen (`app`/`token` for those scopes) |
//! | `autoforge_github_rate_limit_limit` | gauge | `installation` | last `x-ratelimit-limit` seen |
//! | `autoforge_effects_driven_total` | counter | `kind`, `outcome` | effect drives: `observed`, `still_attempted`, `conflict`, `blocked`, `rerequest`, `error` |
//! | `autoforge_active_runs` | gauge | `phase` | non-terminal runs per phase, refreshed by each poller pass |
//! | `autoforge_effect_drive_latency_seconds` | histogram | `kind` | from an effect's intent commit to its read-back (`observed`) |
//! | `autoforge_agent_launches_total` | counter | `role`, `profile`, `outcome` | finished agent processes: `success`, `exit-nonzero`, `signalled`, `idle-timeout`, `wall-timeout`, `cancelled` |
//! | `autoforge_agent_launch_duration_seconds` | histogram | `role`, `profile` | wall time of one agent process |
//! | `autoforge_agent_launch_tokens_total` | counter | `role`, `profile` | tokens the launches reported |
//! | `autoforge_deliveries_pending` | gauge | | webhook deliveries neither processed nor given up, read from the journal at each scrape |
//! | `autoforge_deliveries_oldest_pending_age_seconds` | gauge | | age of the oldest of them (0 when there is none) |
//! | `autoforge_deliveries_given_up` | gauge | | deliveries the dispatcher gave up on |
//! | `autoforge_effects_pending` | gauge | | effects `intended` or `attempted`, over every run |
//! | `autoforge_effects_oldest_pending_age_seconds` | gauge | | age of the oldest of them (0 when there is none) |
//! | `autoforge_effects_conflicted` | gauge | | effects in `conflict` |
//!
//! Profile names are the operator's configured profiles, a small closed
//! set like the installations; roles are the machine's fixed roles.

use std::sync::OnceLock;
use std::time::Duration;

use ::metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use autoforge_journal::{EffectKind, Journal};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::machine::Phase;

pub const DELIVERIES_RECEIVED: &str = "autoforge_webhook_deliveries_received_total";
pub const DELIVERIES_DUPLICATE: &str = "autoforge_webhook_deliveries_duplicate_total";
pub const DELIVERIES_INVALID: &str = "autoforge_webhook_deliveries_invalid_total";
pub const DELIVERIES_PROCESSED: &str = "autoforge_deliveries_processed_total";
pub const DELIVERIES_FAILED: &str = "autoforge_deliveries_failed_total";
pub const GITHUB_REQUESTS: &str = "autoforge_github_requests_total";
pub const GITHUB_REQUEST_DURATION: &str = "autoforge_github_request_duration_seconds";
pub const RATE_LIMIT_REMAINING: &str = "autoforge_github_rate_limit_remaining";
pub const RATE_LIMIT_LIMIT: &str = "autoforge_github_rate_limit_limit";
pub const EFFECTS_DRIVEN: &str = "autoforge_effects_driven_total";
pub const ACTIVE_RUNS: &str = "autoforge_active_runs";
pub const EFFECT_DRIVE_LATENCY: &str = "autoforge_effect_drive_latency_seconds";
pub const LAUNCHES: &str = "autoforge_agent_launches_total";
pub const LAUNCH_DURATION: &str = "autoforge_agent_launch_duration_seconds";
pub const LAUNCH_TOKENS: &str = "autoforge_agent_launch_tokens_total";
pub const DELIVERIES_PENDING: &str = "autoforge_deliveries_pending";
pub const DELIVERIES_OLDEST_AGE: &str = "autoforge_deliveries_oldest_pending_age_seconds";
pub const DELIVERIES_GIVEN_UP: &str = "autoforge_deliveries_given_up";
pub const EFFECTS_PENDING: &str = "autoforge_effects_pending";
pub const EFFECTS_OLDEST_AGE: &str = "autoforge_effects_oldest_pending_age_seconds";
pub const EFFECTS_CONFLICTED: &str = "autoforge_effects_conflicted";

/// The exposition format version Prometheus expects for text scrapes.
const EXPOSITION_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds of the request-duration buckets, in seconds: GitHub answers
/// most reads in tens of milliseconds; the client gives up at 30 s.
const DURATION_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Upper bounds of the effect-latency buckets, in seconds: a write is
/// usually read back within a second; retries and rate-limit waits take
/// minutes.
const LATENCY_BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0, 600.0];

/// Upper bounds of the launch-duration buckets, in seconds: scripted
/// agents take a fraction of a second, real ones minutes to an hour.
const LAUNCH_BUCKETS: [f64; 10] = [
    0.5, 1.0, 5.0, 15.0, 60.0, 180.0, 600.0, 1_200.0, 1_800.0, 3_600.0,
];

/// How often buffered histogram samples are drained without a scrape.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Webhook events that get their own label value; the rest are `other`.
/// These are the events the App subscribes to or GitHub sends unasked.
const KNOWN_EVENTS: &[&str] = &[
    "check_run",
    "check_suite",
    "installation",
    "installation_repositories",
    "issue_comment",
    "issues",
    "label",
    "ping",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "push",
    "repository",
    "status",
    "sub_issues",
    "workflow_run",
];

/// Why `/webhook` refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidDelivery {
    BadHeaders,
    BadSignature,
    NotJson,
    TooLarge,
    /// The body could not be read for another reason (client went away…).
    UnreadableBody,
}

impl InvalidDelivery {
    fn label(self) -> &'static str {
        match self {
            InvalidDelivery::BadHeaders => "bad_headers",
            InvalidDelivery::BadSignature => "bad_signature",
            InvalidDelivery::NotJson => "not_json",
            InvalidDelivery::TooLarge => "too_large",
            InvalidDelivery::UnreadableBody => "unreadable_body",
        }
    }
}

/// What the dispatcher did with a delivery it handled without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Processed {
    /// A run was started by it.
    Started,
    /// Acted on an existing run.
    Applied,
    /// The same change had been acted on before (e.g. by the poller).
    AlreadySeen,
    /// It concerned no run.
    Ignored,
}

impl Processed {
    fn label(self) -> &'static str {
        match self {
            Processed::Started => "started",
            Processed::Applied => "applied",
            Processed::AlreadySeen => "already_seen",
            Processed::Ignored => "ignored",
        }
    }
}

/// How a failed dispatch continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchFailure {
    Retry,
    GaveUp,
}

impl DispatchFailure {
    fn label(self) -> &'static str {
        match self {
            DispatchFailure::Retry => "retry",
            DispatchFailure::GaveUp => "gave_up",
        }
    }
}

/// The installed recorder could not be set up.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the Prometheus recorder could not be installed: {0}")]
pub struct MetricsError(String);

static INSTALLED: OnceLock<Result<PrometheusHandle, MetricsError>> = OnceLock::new();

/// Installs the process-wide Prometheus recorder on first call and returns
/// a handle that renders it; later calls return the same handle. Fails only
/// if some other recorder was installed first.
pub fn install() -> Result<PrometheusHandle, MetricsError> {
    INSTALLED
        .get_or_init(|| {
            let handle = builder()
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|error| MetricsError(error.to_string()))?;
            describe_all();
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP_INTERVAL);
                        upkeep.run_upkeep();
                    }
                })
                .map_err(|error| {
                    MetricsError(format!("cannot start the upkeep thread: {error}"))
                })?;
            Ok(handle)
        })
        .clone()
}

/// The exporter's configuration: real histograms (not summaries) for the
/// duration metric, so that replicas' buckets can be summed.
fn builder() -> Result<PrometheusBuilder, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(GITHUB_REQUEST_DURATION.to_owned()),
            &DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(EFFECT_DRIVE_LATENCY.to_owned()),
            &LATENCY_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full(LAUNCH_DURATION.to_owned()), &LAUNCH_BUCKETS)
}

fn describe_all() {
    describe_counter!(DELIVERIES_RECEIVED, "Webhook requests received.");
    describe_counter!(
        DELIVERIES_DUPLICATE,
        "Signed webhook deliveries already in the inbox."
    );
    describe_counter!(DELIVERIES_INVALID, "Webhook requests refused, by reason.");
    describe_counter!(
        DELIVERIES_PROCESSED,
        "Deliveries the dispatcher handled, by outcome."
    );
    describe_counter!(
        DELIVERIES_FAILED,
        "Delivery dispatches that failed, by what happens next."
    );
    describe_counter!(GITHUB_REQUESTS, "GitHub REST requests sent.");
    describe_histogram!(
        GITHUB_REQUEST_DURATION,
        Unit::Seconds,
        "Time from sending a GitHub request to having its whole answer."
    );
    describe_gauge!(
        RATE_LIMIT_REMAINING,
        "Requests left in the current GitHub rate-limit window."
    );
    describe_gauge!(RATE_LIMIT_LIMIT, "Size of the GitHub rate-limit window.");
    describe_counter!(EFFECTS_DRIVEN, "Effect drives, by kind and outcome.");
    describe_gauge!(ACTIVE_RUNS, "Non-terminal runs, by phase.");
    describe_histogram!(
        EFFECT_DRIVE_LATENCY,
        Unit::Seconds,
        "Time from an effect's intent commit to its read-back."
    );
    describe_counter!(LAUNCHES, "Finished agent processes, by outcome.");
    describe_histogram!(
        LAUNCH_DURATION,
        Unit::Seconds,
        "Wall time of one agent process."
    );
    describe_counter!(LAUNCH_TOKENS, "Tokens reported by agent launches.");
    describe_gauge!(DELIVERIES_PENDING, "Webhook deliveries not yet handled.");
    describe_gauge!(
        DELIVERIES_OLDEST_AGE,
        Unit::Seconds,
        "Age of the oldest webhook delivery not yet handled."
    );
    describe_gauge!(DELIVERIES_GIVEN_UP, "Webhook deliveries given up on.");
    describe_gauge!(EFFECTS_PENDING, "Effects not yet read back.");
    describe_gauge!(
        EFFECTS_OLDEST_AGE,
        Unit::Seconds,
        "Age of the oldest effect not yet read back."
    );
    describe_gauge!(EFFECTS_CONFLICTED, "Effects in conflict.");
}

/// `GET /metrics` over the process-wide recorder, installing it if needed.
/// Each scrape first reads the backlogs from `journal` (so every replica
/// reports the shared inbox and effect journal as they are). If another
/// recorder holds the slot the route answers 503 and says why.
pub fn metrics_router(journal: Journal) -> Router {
    let installed = install();
    if let Err(error) = &installed {
        tracing::error!(%error, "/metrics will answer 503");
    }
    Router::new().route(
        "/metrics",
        get(move || {
            let installed = installed.clone();
            let journal = journal.clone();
            async move {
                match installed {
                    Ok(handle) => {
                        refresh_backlogs(&journal).await;
                        (
                            [(header::CONTENT_TYPE, EXPOSITION_CONTENT_TYPE)],
                            handle.render(),
                        )
                            .into_response()
                    }
                    Err(error) => {
                        (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response()
                    }
                }
            }
        }),
    )
}

/// Sets the backlog gauges from the journal. An unreadable journal keeps
/// the last values (and `/readyz` says the database is unreachable).
async fn refresh_backlogs(journal: &Journal) {
    let now = chrono::Utc::now();
    let age = |then: Option<chrono::DateTime<chrono::Utc>>| {
        then.map_or(0.0, |t| {
            (now - t).num_milliseconds().max(0) as f64 / 1_000.0
        })
    };
    match journal.delivery_backlog().await {
        Ok(backlog) => {
            gauge!(DELIVERIES_PENDING).set(backlog.pending as f64);
            gauge!(DELIVERIES_OLDEST_AGE).set(age(backlog.oldest_received_at));
            gauge!(DELIVERIES_GIVEN_UP).set(backlog.failed as f64);
        }
        Err(error) => tracing::warn!(%error, "/metrics: the delivery backlog is unreadable"),
    }
    match journal.effect_backlog().await {
        Ok(backlog) => {
            gauge!(EFFECTS_PENDING).set(backlog.pending as f64);
            gauge!(EFFECTS_OLDEST_AGE).set(age(backlog.oldest_created_at));
            gauge!(EFFECTS_CONFLICTED).set(backlog.conflicts as f64);
        }
        Err(error) => tracing::warn!(%error, "/metrics: the effect backlog is unreadable"),
    }
}

/// The label value for a webhook event name.
pub fn event_label(event: &str) -> &'static str {
    KNOWN_EVENTS
        .iter()
        .find(|known| **known == event)
        .copied()
        .unwrap_or("other")
}

pub fn delivery_received(event: &str) {
    counter!(DELIVERIES_RECEIVED, "event" => event_label(event)).increment(1);
}

pub fn delivery_duplicate(event: &str) {
    counter!(DELIVERIES_DUPLICATE, "event" => event_label(event)).increment(1);
}

pub fn delivery_invalid(event: &str, reason: InvalidDelivery) {
    counter!(DELIVERIES_INVALID, "event" => event_label(event), "reason" => reason.label())
        .increment(1);
}

pub fn delivery_processed(event: &str, outcome: Processed) {
    counter!(DELIVERIES_PROCESSED, "event" => event_label(event), "outcome" => outcome.label())
        .increment(1);
}

pub fn delivery_failed(event: &str, outcome: DispatchFailure) {
    counter!(DELIVERIES_FAILED, "event" => event_label(event), "outcome" => outcome.label())
        .increment(1);
}

/// The class of an HTTP status, or of a request that got none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    Status(u16),
    Timeout,
    NoAnswer,
}

fn status_class(result: CallResult) -> &'static str {
    match result {
        CallResult::Status(100..=199) => "1xx",
        CallResult::Status(200..=299) => "2xx",
        CallResult::Status(300..=399) => "3xx",
        CallResult::Status(400..=499) => "4xx",
        CallResult::Status(500..=599) => "5xx",
        CallResult::Status(_) => "other",
        CallResult::Timeout => "timeout",
        CallResult::NoAnswer => "error",
    }
}

/// One GitHub request and how long it took; `method` is the client's fixed
/// method name.
pub fn github_request(method: &'static str, result: CallResult, took: Duration) {
    counter!(GITHUB_REQUESTS, "method" => method, "status_class" => status_class(result))
        .increment(1);
    histogram!(GITHUB_REQUEST_DURATION, "method" => method).record(took.as_secs_f64());
}

/// Mirrors a budget after the client folded a response into it; `owner` is
/// the budget's `installation` label (`github::RateScope::gauge_label`: an
/// installation id, `app` or `token`). A value GitHub did not send (`None`)
/// leaves the gauge as it was.
pub fn rate_limit(owner: String, remaining: Option<u64>, limit: Option<u64>) {
    let installation = owner;
    if let Some(remaining) = remaining {
        gauge!(RATE_LIMIT_REMAINING, "installation" => installation.clone()).set(remaining as f64);
    }
    if let Some(limit) = limit {
        gauge!(RATE_LIMIT_LIMIT, "installation" => installation).set(limit as f64);
    }
}

/// How one effect drive step ended, as the counter labels it. Effects map
/// their outcome onto it, so no free text (a conflict's reason) can become
/// a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriveEnd {
    Observed,
    StillAttempted,
    Conflict,
    Blocked,
    Rerequest,
    Error,
}

impl DriveEnd {
    fn label(self) -> &'static str {
        match self {
            Self::Observed => "observed",
            Self::StillAttempted => "still_attempted",
            Self::Conflict => "conflict",
            Self::Blocked => "blocked",
            Self::Rerequest => "rerequest",
            Self::Error => "error",
        }
    }
}

/// One `EffectExecutor::drive` step and how it ended.
pub fn effect_driven(kind: EffectKind, end: DriveEnd) {
    counter!(EFFECTS_DRIVEN, "kind" => kind.as_str(), "outcome" => end.label()).increment(1);
}

/// An effect was read back `latency` after its intent was committed.
pub fn effect_observed(kind: EffectKind, latency: Duration) {
    histogram!(EFFECT_DRIVE_LATENCY, "kind" => kind.as_str()).record(latency.as_secs_f64());
}

/// One agent process finished. `outcome` is the journal's fixed word for
/// how it ended; `role` one of the machine's roles.
pub fn launch_finished(
    role: &'static str,
    profile: &str,
    outcome: &'static str,
    took: Duration,
    tokens: Option<u64>,
) {
    let profile = profile.to_owned();
    counter!(LAUNCHES, "role" => role, "profile" => profile.clone(), "outcome" => outcome)
        .increment(1);
    histogram!(LAUNCH_DURATION, "role" => role, "profile" => profile.clone())
        .record(took.as_secs_f64());
    if let Some(tokens) = tokens {
        counter!(LAUNCH_TOKENS, "role" => role, "profile" => profile).increment(tokens);
    }
}

/// Sets the per-phase gauge from the phases of every active run (as the
/// journal spells them). Phases with no run are set to zero so that a run
/// leaving a phase is visible.
pub fn active_runs<'a>(phases: impl IntoIterator<Item = &'a str>) {
    let mut counts = [0_u64; Phase::ALL.len()];
    let mut unknown = 0_u64;
    for phase in phases {
        match Phase::ALL.iter().position(|known| known.as_str() == phase) {
            Some(index) => counts[index] += 1,
            None => unknown += 1,
        }
    }
    for (phase, count) in Phase::ALL.iter().zip(counts) {
        if !phase.is_terminal() {
            gauge!(ACTIVE_RUNS, "phase" => phase.as_str()).set(count as f64);
        }
    }
    gauge!(ACTIVE_RUNS, "phase" => "other").set(unknown as f64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusRecorder;

    /// Records with a recorder of its own and returns the exposition text,
    /// so these tests see only their own samples.
    fn render_local(record: impl FnOnce()) -> String {
        let recorder: PrometheusRecorder =
            builder().expect("fixed buckets are valid").build_recorder();
        let handle = recorder.handle();
        ::metrics::with_local_recorder(&recorder, record);
        handle.render()
    }

    #[test]
    fn unknown_events_share_the_other_label() {
        assert_eq!(event_label("issue_comment"), "issue_comment");
        assert_eq!(event_label("made_up_event"), "other");
        assert_eq!(event_label("Issues"), "other");
        assert_eq!(event_label(""), "other");
    }

    #[test]
    fn a_free_text_event_name_never_becomes_a_label_value() {
        let text = render_local(|| {
            delivery_received("secret_token_abc");
            delivery_received("issues");
        });
        assert!(!text.contains("secret_token_abc"), "{text}");
        assert!(
            text.contains(r#"autoforge_webhook_deliveries_received_total{event="other"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"autoforge_webhook_deliveries_received_total{event="issues"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn github_requests_are_counted_by_status_class() {
        let text = render_local(|| {
            let quick = Duration::from_millis(20);
            github_request("GET", CallResult::Status(200), quick);
            github_request("GET", CallResult::Status(304), quick);
            github_request("GET", CallResult::Status(201), quick);
            github_request("POST", CallResult::Status(422), quick);
            github_request("POST", CallResult::Timeout, quick);
            github_request("PATCH", CallResult::NoAnswer, quick);
        });
        for line in [
            r#"autoforge_github_requests_total{method="GET",status_class="2xx"} 2"#,
            r#"autoforge_github_requests_total{method="GET",status_class="3xx"} 1"#,
            r#"autoforge_github_requests_total{method="POST",status_class="4xx"} 1"#,
            r#"autoforge_github_requests_total{method="POST",status_class="timeout"} 1"#,
            r#"autoforge_github_requests_total{method="PATCH",status_class="error"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
    }

    #[test]
    fn request_durations_are_real_histograms_with_fixed_buckets() {
        let text = render_local(|| {
            github_request("GET", CallResult::Status(200), Duration::from_millis(20));
            github_request("GET", CallResult::Status(200), Duration::from_millis(700));
            github_request("GET", CallResult::Timeout, Duration::from_secs(31));
        });
        for line in [
            "# TYPE autoforge_github_request_duration_seconds histogram",
            r#"autoforge_github_request_duration_seconds_bucket{method="GET",le="0.01"} 0"#,
            r#"autoforge_github_request_duration_seconds_bucket{method="GET",le="0.025"} 1"#,
            r#"autoforge_github_request_duration_seconds_bucket{method="GET",le="1"} 2"#,
            r#"autoforge_github_request_duration_seconds_bucket{method="GET",le="30"} 2"#,
            r#"autoforge_github_request_duration_seconds_bucket{method="GET",le="+Inf"} 3"#,
            r#"autoforge_github_request_duration_seconds_count{method="GET"} 3"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
    }

    #[test]
    fn rate_limit_gauges_follow_the_scope_and_keep_values_github_did_not_resend() {
        let text = render_local(|| {
            rate_limit("42".to_owned(), Some(4990), Some(5000));
            rate_limit("42".to_owned(), Some(4989), None);
            rate_limit("app".to_owned(), Some(4990), Some(5000));
        });
        for line in [
            r#"autoforge_github_rate_limit_remaining{installation="42"} 4989"#,
            r#"autoforge_github_rate_limit_limit{installation="42"} 5000"#,
            r#"autoforge_github_rate_limit_remaining{installation="app"} 4990"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
    }

    #[test]
    fn active_runs_reset_emptied_phases_and_bucket_unknown_ones() {
        let text = render_local(|| {
            active_runs(["IMPLEMENT", "IMPLEMENT", "REVIEW"]);
            active_runs(["IMPLEMENT", "NOT_A_PHASE"]);
        });
        for line in [
            r#"autoforge_active_runs{phase="IMPLEMENT"} 1"#,
            r#"autoforge_active_runs{phase="REVIEW"} 0"#,
            r#"autoforge_active_runs{phase="other"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(!text.contains(r#"phase="DONE""#), "{text}");
    }

    #[test]
    fn launches_are_counted_by_role_profile_and_outcome_with_durations_and_tokens() {
        let text = render_local(|| {
            launch_finished(
                "implement",
                "scripted",
                "success",
                Duration::from_millis(300),
                Some(120),
            );
            launch_finished(
                "implement",
                "scripted",
                "idle-timeout",
                Duration::from_secs(90),
                None,
            );
            effect_observed(EffectKind::PostComment, Duration::from_millis(400));
        });
        for line in [
            r#"autoforge_agent_launches_total{role="implement",profile="scripted",outcome="success"} 1"#,
            r#"autoforge_agent_launches_total{role="implement",profile="scripted",outcome="idle-timeout"} 1"#,
            r#"autoforge_agent_launch_tokens_total{role="implement",profile="scripted"} 120"#,
            r#"autoforge_agent_launch_duration_seconds_bucket{role="implement",profile="scripted",le="0.5"} 1"#,
            r#"autoforge_agent_launch_duration_seconds_bucket{role="implement",profile="scripted",le="180"} 2"#,
            "# TYPE autoforge_effect_drive_latency_seconds histogram",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        let latency = format!(
            r#"autoforge_effect_drive_latency_seconds_bucket{{kind="{}",le="0.5"}} 1"#,
            EffectKind::PostComment.as_str()
        );
        assert!(text.contains(&latency), "{text}");
    }

    #[test]
    fn effect_drives_are_counted_by_kind_and_outcome() {
        let text = render_local(|| {
            effect_driven(EffectKind::PostComment, DriveEnd::Observed);
            effect_driven(EffectKind::SetLabels, DriveEnd::Blocked);
        });
        let post = format!(
            r#"autoforge_effects_driven_total{{kind="{}",outcome="observed"}} 1"#,
            EffectKind::PostComment.as_str()
        );
        let labels = format!(
            r#"autoforge_effects_driven_total{{kind="{}",outcome="blocked"}} 1"#,
            EffectKind::SetLabels.as_str()
        );
        assert!(text.contains(&post), "{text}");
        assert!(text.contains(&labels), "{text}");
    }
}
