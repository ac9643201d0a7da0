//! Live progress of agent launches on the real `autoforge serve`: a
//! launch's journal row exists from the moment its process starts, with
//! its pid, and its heartbeats refresh it while it runs; a launch a
//! controller crash cut short is ended as `lost` before the relaunch, and
//! no process of it survives the crash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::scenario;

use std::time::Duration;

use autoforge_journal::{LOST_OUTCOME, RunningLaunch};
use scenario::{Agents, PATIENCE, Phase, Role, Running, Scenario, eventually};

/// The running launch of `run` once a heartbeat after the start has been
/// written (its elapsed time is past `at_least`).
async fn running_after(
    s: &Running,
    run: autoforge_journal::RunId,
    at_least: Duration,
) -> RunningLaunch {
    let journal = s.world.db.journal();
    let millis = i64::try_from(at_least.as_millis()).unwrap();
    eventually(
        PATIENCE,
        "a heartbeat of the running launch",
        || async move {
            let running = journal.running_launch(run).await.unwrap()?;
            (running.elapsed_ms? >= millis).then_some(running)
        },
    )
    .await
}

/// Processes whose command line mentions `needle` (the scenario's evidence
/// folder names every scripted agent's).
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_row_exists_from_the_start_and_heartbeats_refresh_it() {
    let s = Scenario::new()
        .agents(Agents::scripted().hold(Role::Implement, [1]))
        .heartbeat_seconds(1)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    s.launch_started(Role::Implement, 1).await;

    let running = running_after(&s, run.id, Duration::from_secs(2)).await;
    assert_eq!(running.role, "implement");
    assert_eq!(running.profile, "implementer");
    assert_eq!(running.attempt, 0);
    let pid = running.pid.expect("the row names the process");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the recorded pid {pid} is the running launch's process"
    );
    let beat = running.heartbeat_at.expect("a heartbeat time");
    assert!(beat > running.started_at, "refreshed after the start");
    assert!(running.log_dir.contains("attempt-1"), "{}", running.log_dir);

    s.release(Role::Implement, 1);
    run.reaches(Phase::ReadyForMerge).await;
    let journal = s.world.db.journal();
    assert_eq!(journal.running_launch(run.id).await.unwrap(), None);
    let launches = journal.list_launches(run.id).await.unwrap();
    let implement = launches.iter().find(|l| l.role == "implement").unwrap();
    assert_eq!(implement.outcome.as_deref(), Some("success"));
    assert!(implement.duration_ms.unwrap() >= 2_000, "it ran while held");
    assert!(launches.iter().all(|l| l.ended_at.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_cut_short_by_a_controller_crash_is_lost_and_leaves_no_process() {
    let mut s = Scenario::new()
        .agents(Agents::scripted().hold(Role::Implement, [1]))
        .heartbeat_seconds(1)
        .start()
        .await;
    let issue = s.new_issue("a widget").await.number;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await.id;
    s.launch_started(Role::Implement, 1).await;
    let running = running_after(&s, run, Duration::from_secs(1)).await;
    let evidence = s.evidence_path("");
    let evidence = evidence.to_string_lossy().trim_end_matches('/').to_owned();
    assert!(
        !processes_mentioning(&evidence).is_empty(),
        "the held agent runs"
    );

    s.world.kill_serve();
    // The sandbox dies with its parent and takes its namespace with it.
    eventually(Duration::from_secs(15), "no agent process left", || async {
        processes_mentioning(&evidence).is_empty().then_some(())
    })
    .await;
    let row = s.world.db.journal().list_launches(run).await.unwrap();
    assert_eq!(row.len(), 1);
    assert_eq!(row[0].ended_at, None, "nobody ended it: serve died");

    s.world.restart_serve(&[]).await;
    let run = s.run_of(issue).await;
    run.reaches(Phase::ReadyForMerge).await;
    let launches = s.world.db.journal().list_launches(run.id).await.unwrap();
    let implements: Vec<_> = launches.iter().filter(|l| l.role == "implement").collect();
    assert_eq!(implements.len(), 2, "{launches:?}");
    assert_eq!(implements[0].id, running.id);
    assert_eq!(implements[0].outcome.as_deref(), Some(LOST_OUTCOME));
    assert!(implements[0].ended_at.is_some());
    assert_eq!(implements[0].log_dir, running.log_dir, "its log is named");
    assert!(
        std::path::Path::new(&implements[0].log_dir)
            .join("output.log")
            .exists(),
        "the lost launch's log is kept"
    );
    assert!(
        implements[0].ended_at.unwrap() < implements[1].started_at,
        "recorded lost before the relaunch"
    );
    assert_eq!(implements[1].outcome.as_deref(), Some("success"));
    assert_eq!(s.launches(Role::Implement), 2);
}

/// The bodies of the status comment edits the run journalled, oldest
/// first, with when each was planned.
async fn status_edits(
    s: &Running,
    run: autoforge_journal::RunId,
) -> Vec<(chrono::DateTime<chrono::Utc>, String)> {
    s.world
        .db
        .journal()
        .list_effects(run)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == autoforge_journal::EffectKind::EditStatusComment)
        .map(|e| {
            let payload: serde_json::Value = serde_json::from_slice(&e.payload).unwrap();
            (
                e.created_at,
                payload["body"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

const REFRESH_SECONDS: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_comment_shows_the_running_launch_no_more_often_than_its_refresh_interval() {
    let s = Scenario::new()
        .agents(Agents::scripted().implement(["slow_chatty", "{hub}/octo/widgets/issues/1"]))
        .heartbeat_seconds(1)
        .status_refresh_seconds(REFRESH_SECONDS)
        .start()
        .await;
    let issue = s.new_issue("a widget").await;
    s.operator_labels(issue).await;
    let run = s.run_of(issue).await;
    // While the implementer runs, the dashboard's run page shows it live,
    // read from the launch's heartbeat row.
    let page = running_page(&s, run.id).await;
    assert!(
        page.contains("with `implementer` (attempt 1)") && page.contains(" output"),
        "{page}"
    );
    run.reaches(Phase::ReadyForMerge).await;

    let edits = status_edits(&s, run.id).await;
    let running: Vec<&(chrono::DateTime<chrono::Utc>, String)> = edits
        .iter()
        .filter(|(_, body)| body.contains("- Running:"))
        .collect();
    assert!(
        running.len() >= 2,
        "the growing output was shown more than once: {edits:#?}"
    );
    for (_, body) in &running {
        assert!(
            body.contains("- Running: implementer `implementer` for less than a minute, "),
            "{body}"
        );
        assert!(body.contains(" KB output"), "{body}");
        assert!(body.contains("- Phase: **IMPLEMENT**"), "{body}");
    }
    // Never more often than the interval (the edits are planned at the
    // ticks of one interval timer; a second of slack for the journal).
    for pair in running.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= chrono::Duration::milliseconds(
                1_000 * i64::try_from(REFRESH_SECONDS).unwrap() - 1_000
            ),
            "two running edits {gap} apart"
        );
    }
    // The launch's end takes the line away, and nothing shows it after.
    let last_running = edits
        .iter()
        .rposition(|(_, body)| body.contains("- Running:"))
        .unwrap();
    let after = &edits[last_running + 1..];
    assert!(!after.is_empty(), "the end edited the comment again");
    assert!(
        after.iter().all(|(_, body)| !body.contains("Running")),
        "{after:#?}"
    );
    let shown = s.world.db.journal().list_launches(run.id).await.unwrap();
    assert_eq!(shown.iter().filter(|l| l.role == "implement").count(), 1);
    insta::assert_snapshot!(
        "status_comment_running_launch",
        pinned_running(&running[0].1)
    );
}

/// The run page of the live dashboard once it shows a running launch.
async fn running_page(s: &Running, run: autoforge_journal::RunId) -> String {
    let url = format!("{}/runs/{run}", s.world.admin_url());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let page = reqwest::get(&url)
            .await
            .expect("the dashboard answers")
            .text()
            .await
            .expect("the run page");
        if page.contains("Running: ") {
            return page;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run page never showed the running launch: {page}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The comment's visible text with the output size, which depends on how
/// far the agent got, written as `N`.
fn pinned_running(body: &str) -> String {
    let visible = body.split("<!--").next().unwrap_or(body).trim_end();
    visible
        .lines()
        .map(|line| match line.strip_prefix("- Running: ") {
            Some(rest) => {
                let (head, _) = rest.rsplit_once(", ").unwrap_or((rest, ""));
                format!("- Running: {head}, N KB output")
            }
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
