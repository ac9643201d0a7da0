//! An EPIC's issue through the whole loop with a different vendor per
//! phase, as the example's roles route them: IMPLEMENT by Claude Code,
//! REVIEW round 1 by Codex (read-only, one finding), FIX by OpenCode,
//! REVIEW round 2 by Claude Code (clean), the merge, and the EPIC update by
//! Codex.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::common::scenario::{Agents, Marker, Phase, Scenario};
use crate::profiles::{self, ANTHROPIC_KEY, OPENAI_KEY, OPENROUTER_KEY};
use crate::scripts;

/// Far above what the four launches take on two busy cores (OpenCode alone
/// needs 10–30 s to start).
const CYCLE_PATIENCE: Duration = Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_mixed_vendors_implement_review_fix_review_merge_and_update_the_epic() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let started = Instant::now();
    let tmp_before = cli_entries_in_tmp();
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    let scripted = [
        scripts::implement(1),
        scripts::review(1, true, 2),
        scripts::fix(3),
        scripts::review(2, false, 4),
        scripts::update_epic(5),
    ];
    for script in scripted {
        server.load(script).expect("a script loads");
    }
    let agents = profiles::example_agents(server.base_url(), &installed);
    let s = Scenario::new()
        .agents(Agents::given_toml(agents))
        .merge_mode("auto")
        .tokens_per_run(1_000_000)
        .env("PATH", &profiles::path_with(&installed))
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OPENROUTER_API_KEY", OPENROUTER_KEY)
        .start()
        .await;
    let (epic, children) = s.new_epic(1).await;
    s.operator_labels(epic).await;
    let run = s.run_of(children[0]).await;
    let state = run.reaches_within(Phase::Done, CYCLE_PATIENCE).await;
    eprintln!(
        "mixed-vendor cycle: {:.1}s",
        started.elapsed().as_secs_f64()
    );

    assert_eq!(
        run.phase_history().await,
        [
            Phase::Implement,
            Phase::Review,
            Phase::Fix,
            Phase::Review,
            Phase::ReadyForMerge,
            Phase::Merge,
            Phase::UpdateEpic,
            Phase::Done
        ]
    );
    let pr = s.pull().await;
    assert_eq!(state.merged_prs, vec![pr.number]);
    pr.assert_merged_once().await;
    // The two commits are the CLIs' own, made with their shell tools.
    let commits = s.get(&format!("/pulls/{}/commits", pr.number)).await;
    let made: Vec<(&str, &str)> = commits
        .as_array()
        .expect("a commit list")
        .iter()
        .map(|c| {
            let commit = &c["commit"];
            let message = commit["message"].as_str().expect("a message");
            (
                commit["author"]["name"].as_str().expect("an author"),
                message.lines().next().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        made,
        [("agent", "Add the feature"), ("agent", "Add the fix file")]
    );
    let progress = epic.comments_with(Marker::EpicProgress).await;
    assert_eq!(progress.len(), 1, "one progress comment: {progress:?}");
    assert!(progress[0].body.contains("The feature file is merged."));

    // Each phase ran the profile its role names, once, and its tokens are
    // exactly what the model server claimed for that conversation.
    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let ran: Vec<(&str, &str)> = launches
        .iter()
        .map(|l| (l.role.as_str(), l.profile.as_str()))
        .collect();
    assert_eq!(
        ran,
        [
            ("implement", "claude"),
            ("review", "codex-review"),
            ("fix", "opencode"),
            ("review", "claude-review"),
            ("update_epic", "codex-review"),
        ]
    );
    let mut reported = 0;
    for (launch, script) in
        launches
            .iter()
            .zip(["implement", "review-1", "fix", "review-2", "update-epic"])
    {
        let claimed = server.claimed(script);
        let total = claimed.input_tokens + claimed.cached_input_tokens + claimed.output_tokens;
        assert!(total > 0, "{script} claimed nothing");
        assert_eq!(
            launch.tokens,
            Some(i64::try_from(total).unwrap()),
            "tokens of the {} launch ({})",
            launch.role,
            launch.profile
        );
        reported += total;
    }
    // The run counted them all against limits.tokens_per_run, and says so
    // in its status comment and on the dashboard.
    assert_eq!(state.counters.tokens, reported);
    let status = children[0].comments_with(Marker::Status).await;
    let body = &status.last().expect("a status comment").body;
    assert!(
        body.contains(&format!("- Tokens reported by the agents: {reported}")),
        "{body}"
    );
    let page = s
        .world
        .http
        .get(format!("{}/runs/{}", s.world.admin_url(), run.id))
        .send()
        .await
        .expect("the dashboard answers")
        .text()
        .await
        .expect("a page");
    for launch in &launches {
        let tokens = launch.tokens.expect("tokens");
        assert!(
            page.contains(&format!("{tokens} tokens")),
            "{tokens} on the dashboard"
        );
    }
    assert_fresh_home_and_tmp(&launches);
    let left = new_cli_entries_in_tmp(&tmp_before);
    assert!(left.is_empty(), "left in /tmp: {left:?}");
    for request in server.requests() {
        assert!(
            !matches!(
                request.outcome,
                modelserver::Outcome::NoRoute
                    | modelserver::Outcome::NoScript
                    | modelserver::Outcome::BadRequest { .. }
            ),
            "a CLI sent a request no script answers: {} {} {:?}",
            request.method,
            request.path,
            request.outcome
        );
    }
}

/// Each launch had a HOME and a TMPDIR of its own, in its attempt
/// directory, and the CLI used its HOME.
fn assert_fresh_home_and_tmp(launches: &[autoforge_journal::AgentLaunch]) {
    let mut homes = std::collections::BTreeSet::new();
    for launch in launches {
        let dir = std::path::Path::new(&launch.log_dir);
        let home = dir.join("home");
        let used = std::fs::read_dir(&home).map(Iterator::count).unwrap_or(0);
        assert!(
            used > 0,
            "{} wrote nothing to its HOME {}",
            launch.profile,
            home.display()
        );
        assert!(dir.join("tmp").is_dir(), "{}: a TMPDIR", launch.profile);
        assert!(homes.insert(home), "a HOME per launch");
    }
}

/// Entries of the kinds the three CLIs leave in /tmp when it is not
/// private to the launch.
fn cli_entries_in_tmp() -> std::collections::BTreeSet<String> {
    let known = ["claude-", "codex", "opencode", "cc-socks"];
    std::fs::read_dir("/tmp")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| known.iter().any(|k| n.starts_with(k)))
                .collect()
        })
        .unwrap_or_default()
}

fn new_cli_entries_in_tmp(before: &std::collections::BTreeSet<String>) -> Vec<String> {
    cli_entries_in_tmp().difference(before).cloned().collect()
}
