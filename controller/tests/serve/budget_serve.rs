//! Run bounds that come from what agents report, on the real binary:
//! `limits.tokens_per_run` against the tokens each launch reports through
//! its profile's `usage_pattern`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{World, WorldOptions, agent_command, agent_script, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_agents_report_more_tokens_than_its_budget_blocks_before_the_next_launch() {
    let config = format!(
        r#"
[driver]
lease_seconds = 5

[limits]
tokens_per_run = 500

[agents.profiles.implementer]
command = {implement}
usage_pattern = 'tokens used: (?<tokens>\d+)'

[agents.profiles.reviewer]
command = {review}

[agents.roles]
implement = "implementer"
review = "reviewer"

[validation]
commands = ["true"]
"#,
        implement = agent_command(
            "reports_tokens.sh",
            &[
                "600",
                &agent_script("phase_implement.sh"),
                "good",
                "{hub}/octo/widgets/issues/1"
            ]
        ),
        review = agent_command("phase_review.sh", &["clean", "1"]),
    );
    let world = World::start_with(WorldOptions {
        config_toml: Some(config),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "an expensive widget").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;

    let blocked = eventually(Duration::from_secs(60), "the run BLOCKED", || async {
        let row = world.db.journal().get_run(run).await.unwrap()?;
        (row.phase == "BLOCKED").then_some(row)
    })
    .await;
    let reason = blocked.state["blocked"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(reason.contains("600 tokens"), "{reason}");
    assert!(reason.contains("tokens_per_run"), "{reason}");
    let launches = world.db.journal().list_launches(run).await.unwrap();
    let roles: Vec<&str> = launches.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(roles, ["implement"], "the reviewer never started");
    assert_eq!(
        launches[0].tokens,
        Some(600),
        "the launch row keeps the count"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_priced_launches_reach_its_cost_budget_blocks_before_the_next_launch() {
    let config = format!(
        r#"
[driver]
lease_seconds = 5

[limits]
cost_per_run = 1.5

[agents.profiles.implementer]
command = {implement}

[agents.profiles.implementer.output]
format = "json-lines"
input_tokens = "/usage/input_tokens"
output_tokens = "/usage/output_tokens"

[agents.profiles.implementer.price]
input = 1.0
output = 10.0

[agents.profiles.reviewer]
command = {review}

[agents.roles]
implement = "implementer"
review = "reviewer"

[validation]
commands = ["true"]
"#,
        implement = agent_command(
            "reports_usage_json.sh",
            &[
                "1000000",
                "100000",
                &agent_script("phase_implement.sh"),
                "good",
                "{hub}/octo/widgets/issues/1"
            ]
        ),
        review = agent_command("phase_review.sh", &["clean", "1"]),
    );
    let world = World::start_with(WorldOptions {
        config_toml: Some(config),
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "an expensive widget").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;

    let blocked = eventually(Duration::from_secs(60), "the run BLOCKED", || async {
        let row = world.db.journal().get_run(run).await.unwrap()?;
        (row.phase == "BLOCKED").then_some(row)
    })
    .await;
    let reason = blocked.state["blocked"]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    // 1 000 000 input tokens at 1.0 and 100 000 output tokens at 10.0 per million.
    assert!(reason.contains("2.00 (estimated cost)"), "{reason}");
    assert!(reason.contains("limits.cost_per_run"), "{reason}");
    let launches = world.db.journal().list_launches(run).await.unwrap();
    let roles: Vec<&str> = launches.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(roles, ["implement"], "the reviewer never started");
    assert_eq!(launches[0].tokens, Some(1_100_000));
    let totals = world.db.journal().launch_totals(&[run]).await.unwrap();
    assert_eq!(
        (totals.input_tokens, totals.output_tokens),
        (1_000_000, 100_000)
    );
    assert_eq!(totals.cost_micros, Some(2_000_000));
}
