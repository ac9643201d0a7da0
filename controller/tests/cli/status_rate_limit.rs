//! `autoforge status` shows the rate-limit headroom the real `autoforge
//! serve` last read from fakehub, per installation and resource, with the
//! age of the reading, in text and as JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{World, eventually};
use secrecy::ExposeSecret;
use serde_json::Value;

fn status(world: &World, scratch: &std::path::Path, json: bool) -> Output {
    status_on(world.db.url(), scratch, json)
}

fn status_on(url: &secrecy::SecretString, scratch: &std::path::Path, json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_autoforge"));
    command.arg("status");
    if json {
        command.arg("--json");
    }
    command
        .arg("--state-dir")
        .arg(scratch)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", scratch)
        .env("DATABASE_URL", url.expose_secret())
        .current_dir(scratch)
        .output()
        .expect("run autoforge status")
}

fn parsed(output: &Output) -> Value {
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("status --json prints JSON")
}

/// The reading of `owner`'s `core` budget, once serve has written one.
fn core_reading(value: &Value, owner: &str) -> Option<Value> {
    value["rate_limit"]
        .as_array()?
        .iter()
        .find(|r| r["owner"] == owner && r["resource"] == "core")
        .cloned()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_the_rate_limit_headroom_serve_last_read_per_installation() {
    let world = World::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let installation = world.installation_id().to_string();
    // Work that makes serve read GitHub as the installation.
    let owner = world.owner();
    let issue = world.open_issue(&owner, "a widget").await;
    world.add_label(&owner, issue, "autoforge").await;
    let _run = world.run_for(issue).await;

    let reading = eventually(Duration::from_secs(60), "a recorded reading", || async {
        core_reading(&parsed(&status(&world, dir, true)), &installation)
    })
    .await;
    let limit = reading["limit"].as_i64().expect("a limit");
    let remaining = reading["remaining"].as_i64().expect("a remaining count");
    assert_eq!(limit, 5000, "fakehub's installation budget: {reading:#}");
    assert!(remaining < limit, "serve spent some of it: {reading:#}");
    assert!(reading["age_seconds"].as_i64().is_some(), "{reading:#}");
    assert!(
        reading["reset_in_seconds"].as_i64().unwrap() > 0,
        "{reading:#}"
    );
    assert!(
        reading["recorded_by"]
            .as_str()
            .unwrap()
            .starts_with("serve-"),
        "{reading:#}"
    );
    // What serve spent is what fakehub counted, up to the requests made
    // after the reading was taken.
    let spent = world.hub.points_spent();
    let counted = spent[&format!("installation:{installation}")];
    assert!(
        i64::try_from(counted).unwrap() >= limit - remaining,
        "fakehub counted {counted}, the reading says {} spent",
        limit - remaining
    );

    let text = String::from_utf8(status(&world, dir, false).stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(&format!("installation {installation} core:")))
        .unwrap_or_else(|| panic!("no reading line in:\n{text}"));
    assert!(line.contains("of 5000 left, resets in"), "{line}");
    assert!(line.contains(" ago)"), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_says_when_serve_has_recorded_no_reading_yet() {
    let db = autoforge_journal::testing::TestDatabase::fresh().await;
    let scratch = tempfile::tempdir().unwrap();
    let value = parsed(&status_on(db.url(), scratch.path(), true));
    assert_eq!(value["rate_limit"], serde_json::json!([]), "{value:#}");
    let text = String::from_utf8(status_on(db.url(), scratch.path(), false).stdout).unwrap();
    assert!(text.contains("Rate limit: no reading yet"), "{text}");
}
