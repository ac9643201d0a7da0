//! The real `autoforge serve` process answers `/metrics` with valid
//! exposition that reflects what it did: a webhook fakehub sent after a
//! person opened an issue, and the rate-limit budget of the installation
//! its poller read with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::exposition;

use std::time::Duration;

use common::{World, eventually};
use exposition::{Sample, parse_exposition};

async fn scrape(world: &World) -> Vec<Sample> {
    let response = world
        .http
        .get(format!("{}/metrics", world.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains(common::WEBHOOK_SECRET),
        "a secret leaked into the exposition"
    );
    parse_exposition(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

fn total(samples: &[Sample], name: &str, label: (&str, &str)) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && s.labels.get(label.0).map(String::as_str) == Some(label.1))
        .map(|s| s.value)
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_exposes_deliveries_and_the_installation_budget_on_metrics() {
    let world = World::start().await;
    let owner = world.owner();
    world.open_issue(&owner, "metrics please").await;

    let samples = eventually(
        Duration::from_secs(15),
        "the issues delivery received and processed",
        || async {
            let samples = scrape(&world).await;
            let issues = ("event", "issues");
            let received = total(
                &samples,
                "autoforge_webhook_deliveries_received_total",
                issues,
            );
            let processed = total(&samples, "autoforge_deliveries_processed_total", issues);
            (received >= 1.0 && processed >= 1.0).then_some(samples)
        },
    )
    .await;

    // The poller's first pass reads the installation's repositories, so an
    // installation-labelled budget is exported next to the App's own.
    let installation_budget = samples
        .iter()
        .filter(|s| s.name == "autoforge_github_rate_limit_remaining")
        .find(|s| {
            let scope = s.labels["installation"].as_str();
            scope.parse::<u64>().is_ok()
        })
        .expect("an installation's remaining budget is exported");
    let scope = installation_budget.labels["installation"].clone();
    let limit = samples
        .iter()
        .find(|s| {
            s.name == "autoforge_github_rate_limit_limit" && s.labels["installation"] == scope
        })
        .expect("the installation's limit is exported");
    assert!(installation_budget.value < limit.value);
    assert!(
        total(
            &samples,
            "autoforge_github_requests_total",
            ("status_class", "2xx")
        ) >= 1.0
    );
}

/// A scripted implementer that commits and answers for issue 1, validated
/// by a command that passes: the run publishes and reaches REVIEW.
fn implementing_config() -> String {
    let script = format!(
        "{}/../tests/agents/phase_implement.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    format!(
        r#"
[agents]
sandbox = "off"

[agents.profiles.scripted]
command = ["{script}", "good", "{{hub}}/octo/widgets/issues/1"]
idle_timeout_seconds = 60
max_runtime_seconds = 120

[agents.roles]
implement = "scripted"

[validation]
commands = [["true"]]
timeout_seconds = 60
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_scripted_launch_metrics_show_launches_effect_latency_and_backlogs() {
    let world = World::start_with(common::WorldOptions {
        config_toml: Some(implementing_config()),
        ..common::WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "add the feature").await;
    assert_eq!(issue, 1, "the scripted agent answers for issue 1");
    world.add_label(&owner, issue, "autoforge").await;

    let samples = eventually(
        Duration::from_secs(90),
        "a finished launch and an observed write",
        || async {
            let samples = scrape(&world).await;
            let launched = total(
                &samples,
                "autoforge_agent_launches_total",
                ("outcome", "success"),
            );
            let observed = samples
                .iter()
                .filter(|s| s.name == "autoforge_effect_drive_latency_seconds_count")
                .map(|s| s.value)
                .sum::<f64>();
            (launched >= 1.0 && observed >= 1.0).then_some(samples)
        },
    )
    .await;
    let launch = samples
        .iter()
        .find(|s| s.name == "autoforge_agent_launches_total")
        .expect("a launch counter");
    assert_eq!(launch.labels["role"], "implement");
    assert_eq!(launch.labels["profile"], "scripted");
    assert!(
        total(
            &samples,
            "autoforge_agent_launch_duration_seconds_count",
            ("profile", "scripted")
        ) >= 1.0
    );
    assert!(
        samples.iter().any(
            |s| s.name == "autoforge_effect_drive_latency_seconds_bucket"
                && s.labels.get("kind").map(String::as_str) == Some("edit_status_comment")
        ),
        "the status comment's latency is recorded"
    );
    // The backlogs come from the journal at each scrape; a served inbox
    // that keeps up has nothing given up.
    for name in [
        "autoforge_deliveries_pending",
        "autoforge_deliveries_oldest_pending_age_seconds",
        "autoforge_effects_pending",
        "autoforge_effects_conflicted",
    ] {
        assert!(samples.iter().any(|s| s.name == name), "{name} is exported");
    }
    let given_up = samples
        .iter()
        .find(|s| s.name == "autoforge_deliveries_given_up")
        .expect("given-up deliveries exported");
    assert_eq!(given_up.value, 0.0);
}
