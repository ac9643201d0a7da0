//! `limits.tokens_per_run` against what a real CLI reports: Claude Code's
//! implementer spends more than the limit, so the run is BLOCKED before
//! the reviewer starts, and the status comment says how many tokens went.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::scenario::{Agents, Marker, Phase, Scenario};
use crate::profiles::{self, ANTHROPIC_KEY, OPENAI_KEY};
use crate::scripts;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_tokens_spend_the_run_budget_and_block_it() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    server.load(scripts::implement(1)).expect("loads");
    server.load(scripts::review(1, false, 2)).expect("loads");
    let roles = "implement = \"claude\"\nreview = \"codex-review\"\n";
    let agents = profiles::example_agents_routed(server.base_url(), &installed, Some(roles));
    let s = Scenario::new()
        .agents(Agents::given_toml(agents))
        .tokens_per_run(2_000)
        .env("PATH", &profiles::path_with(&installed))
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .start()
        .await;
    let issue = s.new_issue("an expensive feature").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    let state = run
        .reaches_within(Phase::Blocked, Duration::from_secs(300))
        .await;

    let claimed = server.claimed("implement");
    let spent = claimed.input_tokens + claimed.cached_input_tokens + claimed.output_tokens;
    assert!(spent > 2_000, "the script claims more than the limit");
    assert_eq!(state.counters.tokens, spent);
    let reason = &state.blocked.as_ref().expect("blocked").reason;
    assert!(reason.contains("tokens_per_run"), "{reason}");
    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let roles: Vec<&str> = launches.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(roles, ["implement"], "the reviewer never started");
    let status = issue.comments_with(Marker::Status).await;
    let body = &status.last().expect("a status comment").body;
    assert!(
        body.contains(&format!("- Tokens reported by the agents: {spent}")),
        "{body}"
    );
}
