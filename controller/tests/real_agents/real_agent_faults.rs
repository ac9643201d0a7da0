//! Model API faults on the real loop. An overloaded reply and a stream cut
//! midway make Codex (whose example profile leaves retries to autoforge)
//! exit non-zero: the launch fails, the machine launches again, and the
//! run completes. Claude Code and OpenCode retry both themselves, within
//! one launch, and still report every token of the conversation. A CLI whose model never answers is killed at its
//! profile's idle timeout with every process it started, and the next
//! launch completes the phase.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use modelserver::FaultKind;
use toml::Value;

use crate::common::scenario::{Agents, Phase, Running, Scenario};
use crate::profiles::{self, ANTHROPIC_KEY, Installed, OPENAI_KEY, OPENROUTER_KEY};
use crate::scripts;

const PATIENCE: Duration = Duration::from_secs(300);

async fn start(agents: String, installed: &Installed) -> Running {
    Scenario::new()
        .agents(Agents::given_toml(agents))
        .merge_mode("auto")
        .env("PATH", &profiles::path_with(installed))
        .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env("OPENROUTER_API_KEY", OPENROUTER_KEY)
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_codex_launches_failed_by_overload_and_a_cut_stream_are_retried_to_done() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    let implement = scripts::implement(1)
        .fault(0, FaultKind::Overloaded, 1)
        .fault(1, FaultKind::CutStream, 1);
    server.load(implement).expect("loads");
    server.load(scripts::review(1, false, 2)).expect("loads");
    let roles = "implement = \"codex\"\nreview = \"claude-review\"\n";
    let agents = profiles::example_agents_routed(server.base_url(), &installed, Some(roles));
    let s = start(agents, &installed).await;
    let issue = s.new_issue("a feature file").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches_within(Phase::Done, PATIENCE).await;

    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implement: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    let exits: Vec<Option<i32>> = implement.iter().map(|l| l.exit_status).collect();
    assert_eq!(
        exits,
        [Some(1), Some(1), Some(0)],
        "overloaded, cut, then complete"
    );
    report_relaunch_waits(&implement);
    // The failed launches reported no usage: Codex prints none for a turn
    // that failed, even for the whole reply the second launch received
    // before its stream broke. The last launch reports exactly its own
    // four replies (pwd, write, commit, final).
    let tokens: Vec<Option<i64>> = implement.iter().map(|l| l.tokens).collect();
    let claims = server.claims("implement");
    // A cut reply is booked when its connection breaks, which may be after
    // the next launch began: leave it out, then take the last four.
    let last_launch: u64 = claims
        .iter()
        .filter(|c| !c.cut && !c.side)
        .rev()
        .take(4)
        .map(|c| c.usage.input_tokens + c.usage.cached_input_tokens + c.usage.output_tokens)
        .sum();
    assert_eq!(
        tokens,
        [None, None, Some(i64::try_from(last_launch).unwrap())]
    );
    let outcomes: Vec<modelserver::Outcome> = server
        .requests()
        .into_iter()
        .filter(|r| r.script.as_deref() == Some("implement"))
        .map(|r| r.outcome)
        .collect();
    assert!(outcomes.contains(&modelserver::Outcome::Fault {
        fault: FaultKind::Overloaded
    }));
    assert!(outcomes.contains(&modelserver::Outcome::Fault {
        fault: FaultKind::CutStream
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_recovers_from_overload_and_a_cut_stream_within_one_launch() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    let implement = scripts::implement(1)
        .fault(0, FaultKind::Overloaded, 1)
        .fault(1, FaultKind::CutStream, 1);
    server.load(implement).expect("loads");
    server.load(scripts::review(1, false, 2)).expect("loads");
    let roles = "implement = \"claude\"\nreview = \"claude-review\"\n";
    let agents = profiles::example_agents_routed(server.base_url(), &installed, Some(roles));
    let s = start(agents, &installed).await;
    let issue = s.new_issue("a feature file").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches_within(Phase::Done, PATIENCE).await;

    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implement: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    assert_eq!(implement.len(), 1, "Claude Code retried by itself");
    // Everything the server claimed, the input a cut stream announced
    // included, is in the launch's count.
    let claims = server.claims("implement");
    assert!(claims.iter().any(|c| c.cut && c.usage.input_tokens > 0));
    let claimed = server.claimed("implement");
    let total = claimed.input_tokens + claimed.cached_input_tokens + claimed.output_tokens;
    assert_eq!(implement[0].tokens, Some(i64::try_from(total).unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_opencode_recovers_from_overload_and_a_cut_stream_and_the_run_completes() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    let implement = scripts::implement(1)
        .fault(0, FaultKind::Overloaded, 1)
        .fault(1, FaultKind::CutStream, 1);
    server.load(implement).expect("loads");
    server.load(scripts::review(1, false, 2)).expect("loads");
    let roles = "implement = \"opencode\"\nreview = \"claude-review\"\n";
    let agents = profiles::example_agents_routed(server.base_url(), &installed, Some(roles));
    let s = start(agents, &installed).await;
    let issue = s.new_issue("a feature file").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches_within(Phase::Done, PATIENCE).await;

    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implement: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    assert_eq!(
        implement.len(),
        1,
        "OpenCode retried by itself: {implement:?}"
    );
    assert_eq!(implement[0].exit_status, Some(0));
    let outcomes: Vec<modelserver::Outcome> = server
        .requests()
        .into_iter()
        .filter(|r| r.script.as_deref() == Some("implement"))
        .map(|r| r.outcome)
        .collect();
    assert!(outcomes.contains(&modelserver::Outcome::Fault {
        fault: FaultKind::Overloaded
    }));
    assert!(outcomes.contains(&modelserver::Outcome::Fault {
        fault: FaultKind::CutStream
    }));
    // A Chat Completions stream books its usage in the last chunk, which a
    // cut stream never sends; OpenCode's own side request (the session
    // title) is not in its reported usage. Every conversation reply is.
    let claims = server.claims("implement");
    assert!(claims.iter().all(|c| !c.cut), "{claims:?}");
    let replies: u64 = claims
        .iter()
        .filter(|c| !c.side)
        .map(|c| c.usage.input_tokens + c.usage.cached_input_tokens + c.usage.output_tokens)
        .sum();
    assert_eq!(implement[0].tokens, Some(i64::try_from(replies).unwrap()));
}

/// Prints how long each relaunch waited after the launch before it ended
/// (the retry backoff plus the controller's own work in between), from the
/// launch rows: a launch started `duration_ms` before it ended. Reported,
/// not asserted: the figure depends on the machine's load.
fn report_relaunch_waits(launches: &[&autoforge_journal::AgentLaunch]) {
    let began = |l: &autoforge_journal::AgentLaunch| {
        l.ended_at
            .map(|end| end - chrono::Duration::milliseconds(l.duration_ms.unwrap_or(0)))
    };
    for pair in launches.windows(2) {
        if let (Some(ended), Some(next)) = (pair[0].ended_at, began(pair[1])) {
            eprintln!(
                "relaunch of {} after {} ms",
                pair[1].profile,
                (next - ended).num_milliseconds()
            );
        }
    }
}

/// Processes whose working directory is inside `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| {
            let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
            cwd.starts_with(dir)
                .then(|| format!("{} {}", e.file_name().to_string_lossy(), cwd.display()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_claude_code_that_hangs_is_killed_at_its_idle_timeout_and_relaunched() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let server = modelserver::start(modelserver::Config::default())
        .await
        .expect("the model server starts");
    // The first request of the conversation is never answered.
    let implement = scripts::implement(1).fault(0, FaultKind::Hang, 1);
    server.load(implement).expect("loads");
    server.load(scripts::review(1, false, 2)).expect("loads");
    let roles = "implement = \"claude\"\nreview = \"claude-review\"\n";
    // Only the idle timeout differs from the example: 10 minutes would
    // make a slow test.
    let agents =
        profiles::example_agents_tweaked(server.base_url(), &installed, Some(roles), |name, p| {
            if name == "claude" {
                p.insert("idle_timeout_seconds".into(), Value::Integer(5));
            }
        });
    let s = start(agents, &installed).await;
    let issue = s.new_issue("a feature file").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    run.reaches_within(Phase::Done, PATIENCE).await;

    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implement: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    assert_eq!(implement.len(), 2, "{implement:?}");
    assert_eq!(implement[1].exit_status, Some(0));
    let first = implement[0];
    assert_ne!(first.exit_status, Some(0), "{first:?}");
    let waited = first.duration_ms.expect("a duration");
    assert!(
        (5_000..60_000).contains(&waited),
        "killed after its 5 s idle timeout, not before: {waited} ms"
    );
    server.release("implement");
    // serve itself works in the state directory; agents in a worktree.
    let left = processes_in(&s.world.state_dir().join("worktrees"));
    assert!(left.is_empty(), "processes left in the state dir: {left:?}");
}
