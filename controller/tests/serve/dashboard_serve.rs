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

/// An implementer reporting 150 tokens and a reviewer that finds nothing in
/// round 1, both scripted, for issue 1; validation passes.
fn reviewed_run_config() -> String {
    format!(
        r#"
[agents]
sandbox = "off"

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
        implement = common::agent_command(
            "reports_tokens.sh",
            &[
                "150",
                &common::agent_script("phase_implement.sh"),
                "good",
                "{hub}/octo/widgets/issues/1"
            ]
        ),
        review = common::agent_command("phase_review.sh", &["clean", "1"]),
    )
}

/// Where this test binary keeps what it leaves for people to look at.
fn artifacts_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium on `url` with `args`, with a fresh profile and none
/// of its background traffic; gives up after a minute.
fn chromium(profile: &std::path::Path, args: &[String], url: &str) -> std::process::Output {
    let mut child = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromium is installed (Debian's `chromium` package)");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _killed = child.kill();
            panic!("chromium did not finish on {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "chromium failed on {url}");
    output
}

fn dump_dom(profile: &std::path::Path, url: &str) -> String {
    let output = chromium(profile, &["--dump-dom".to_owned()], url);
    String::from_utf8(output.stdout).unwrap()
}

fn screenshot(profile: &std::path::Path, url: &str, name: &str, size: (u32, u32)) {
    let file = artifacts_dir().join(name);
    let _stale = std::fs::remove_file(&file);
    chromium(
        profile,
        &[
            format!("--screenshot={}", file.display()),
            format!("--window-size={},{}", size.0, size.1),
        ],
        url,
    );
    let png = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is a PNG",
        file.display()
    );
    assert!(png.len() > 5_000, "{} shows something", file.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_run_reads_well_in_a_real_browser_at_phone_and_desktop_widths() {
    let world = World::start_with(common::WorldOptions {
        config_toml: Some(reviewed_run_config()),
        ..common::WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "a widget to look at").await;
    assert_eq!(issue, 1, "the scripted agents answer for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;
    eventually(
        Duration::from_secs(120),
        "the review round read back",
        || async {
            let effects = world.db.journal().list_effects(run).await.unwrap();
            effects
                .iter()
                .any(|e| {
                    e.identity.starts_with("ai-review-result")
                        && e.stage == autoforge_journal::Stage::Observed
                })
                .then_some(())
        },
    )
    .await;

    let profile = tempfile::tempdir().unwrap();
    let index_url = format!("{}/", world.admin_url());
    let run_url = format!("{}/runs/{run}", world.admin_url());
    let index = tokio::task::block_in_place(|| dump_dom(profile.path(), &index_url));
    assert!(index.contains(&format!("href=\"/runs/{run}\"")), "{index}");
    assert!(index.contains("<td>150</td>"), "the run's tokens: {index}");
    let page = tokio::task::block_in_place(|| dump_dom(profile.path(), &run_url));
    for expected in [
        "Issue <a href=",
        ">#1</a>",
        "Review rounds",
        "review round 1: clean",
        "edit_status_comment",
        "post_comment",
        "implementer",
        "reviewer",
        "<svg class=\"timeline\"",
    ] {
        assert!(page.contains(expected), "missing `{expected}` in {page}");
    }
    let served = world.state_dir().join("app.pem");
    let key = std::fs::read_to_string(served).unwrap();
    let key_body = key.lines().nth(1).unwrap().to_owned();
    for html in [&index, &page] {
        assert!(
            !html.contains(common::WEBHOOK_SECRET),
            "the webhook secret leaked"
        );
        assert!(!html.contains(&key_body), "the App's private key leaked");
        assert!(!html.contains(&owner.token), "a GitHub token leaked");
        assert!(!html.contains("<script"), "the pages need no script");
    }

    tokio::task::block_in_place(|| {
        screenshot(profile.path(), &index_url, "runs-phone.png", (390, 844));
        screenshot(profile.path(), &index_url, "runs-desktop.png", (1280, 900));
        screenshot(profile.path(), &run_url, "run-phone.png", (390, 844));
        screenshot(profile.path(), &run_url, "run-desktop.png", (1280, 900));
    });
}
