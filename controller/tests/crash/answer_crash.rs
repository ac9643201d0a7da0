//! The crash matrix's cell for an answer outside any run: someone who is
//! not an operator adds the trigger label, `autoforge serve` aborts at one
//! window of the answer's write-ahead path, a second `serve` starts on the
//! same database, and the labelling ends up answered exactly once with the
//! journalled bytes, and no run exists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::{World, eventually};
use autoforge_journal::{RunFilter, Stage};

use super::crash_serve::crash_and_restart;

/// Longer than an answer's claim (a crashed sender's claim must run out
/// before the next sender may reconcile it) plus a few poll passes.
const SETTLE: Duration = Duration::from_secs(150);

pub(super) async fn cell(mut world: World, cell: &str) {
    let owner = world.owner();
    let issue = world.open_issue(&owner, "crash matrix").await;
    let tia = world.person("tia", "triage");
    world.add_label(&tia, issue, "autoforge").await;
    crash_and_restart(&mut world, cell).await;

    let journal = world.db.journal().clone();
    let repository = world.repository();
    let answer = eventually(SETTLE, &format!("{cell}: the answer observed"), || {
        let (journal, repository) = (journal.clone(), repository.clone());
        async move {
            let thread = autoforge_journal::IssueNumber::new(issue).unwrap();
            let answers = journal.answers_on(&repository, thread).await.unwrap();
            assert!(
                answers.len() <= 1,
                "{cell}: one answer journalled: {answers:?}"
            );
            answers
                .into_iter()
                .find(|a| a.stage != Stage::Intended && a.stage != Stage::Attempted)
        }
    })
    .await;
    assert_eq!(answer.stage, Stage::Observed, "{cell}: {answer:?}");

    // A few poll passes later GitHub still shows it once, with its bytes.
    tokio::time::sleep(Duration::from_secs(crate::common::POLL_SECONDS + 1)).await;
    let path = format!("/repos/{}/issues/{issue}/comments", world.repository());
    let comments = world
        .rest_as(&owner, reqwest::Method::GET, &path, serde_json::Value::Null)
        .await;
    let bodies: Vec<&str> = comments
        .as_array()
        .expect("a comment list")
        .iter()
        .filter_map(|c| c["body"].as_str())
        .filter(|body| body.contains("<!-- autoforge-notice"))
        .collect();
    assert_eq!(
        bodies,
        [answer.body.as_str()],
        "{cell}: answered exactly once"
    );
    let runs = world
        .db
        .journal()
        .list_runs(RunFilter::All, 10)
        .await
        .unwrap();
    assert!(runs.is_empty(), "{cell}: no run started: {runs:?}");
}
