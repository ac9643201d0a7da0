//! The dashboard as `autoforge serve` offers it: the real binary on a
//! loopback admin listener, a run started by a labelled issue on fakehub.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{World, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shows_a_started_run_on_its_loopback_dashboard() {
    let world = World::start().await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "shown on the dashboard").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;

    let index = world
        .http
        .get(format!("{}/", world.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(index.status(), reqwest::StatusCode::OK);
    let html = index.text().await.unwrap();
    assert!(html.contains(&format!("/runs/{run}")), "{html}");
    assert!(html.contains(&format!("issues/{issue}")));

    // The start transition shows up in the run's timeline once the driver
    // has committed it.
    let page = eventually(
        Duration::from_secs(20),
        "the run's first transition",
        || {
            let url = format!("{}/runs/{run}", world.admin_url());
            let http = world.http.clone();
            async move {
                let html = http.get(url).send().await.ok()?.text().await.ok()?;
                html.contains("→ IMPLEMENT").then_some(html)
            }
        },
    )
    .await;
    assert!(page.contains("edit_status_comment"), "{page}");
}
