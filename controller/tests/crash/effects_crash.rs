//! Real crashes at the executor's windows (SPEC §6 rule 7): a child process
//! (this test binary, re-run on one ignored test) drives an effect with
//! `AUTOFORGE_CRASH_AT` set and aborts; the parent then recovers by driving
//! the same row and checks that the comment exists exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use autoforge::effects::DriveOutcome;
use autoforge::github::{GitHubAuth, GitHubClient};
use autoforge::machine::{EffectIntent, Reply};
use autoforge_journal::{EffectId, Journal, Lease, RunId, Stage};
use common::{OWNER, World};
use secrecy::{ExposeSecret, SecretString};

const CHILD: &str = "EFFECTS_CRASH_CHILD";

/// Runs only inside the child the crash test starts; the parent passes
/// everything it needs in the environment.
#[tokio::test]
#[ignore = "started by crashing_at_each_window_never_duplicates_or_loses_the_comment"]
async fn crash_child_drives_one_effect() {
    let var = |name: &str| std::env::var(format!("{CHILD}_{name}")).expect(name);
    let journal = Journal::connect(&SecretString::from(var("DB")))
        .await
        .unwrap();
    let api = GitHubClient::new(
        &var("HUB"),
        GitHubAuth::Token(SecretString::from(var("TOKEN"))),
    )
    .unwrap()
    .installation(0)
    .unwrap();
    let lease = Lease {
        run_id: RunId(var("RUN").parse().unwrap()),
        owner: var("OWNER"),
        fencing_token: var("FENCE").parse().unwrap(),
        expires_at: chrono::Utc::now() + Duration::from_secs(60),
    };
    let executor = autoforge::effects::EffectExecutor::new(
        journal.clone(),
        api,
        var("REPO").parse().unwrap(),
        OWNER.into(),
    );
    let effect = journal
        .get_effect(EffectId(var("EFFECT").parse().unwrap()))
        .await
        .unwrap()
        .unwrap();
    let outcome = executor.drive(&lease, &effect).await.unwrap();
    panic!("the crash point did not fire; drive ended with {outcome:?}");
}

#[tokio::test]
async fn crashing_at_each_window_never_duplicates_or_loses_the_comment() {
    // (crash point, attempts after recovery)
    let windows = [
        ("after_attempted", 2),
        ("after_send", 1),
        ("after_read_back", 1),
    ];
    for (point, attempts) in windows {
        let mut world = World::with_leased_run().await;
        assert_eq!(
            world.human_issue("Add widgets", "please").await,
            autoforge_journal::testing::issue(1)
        );
        let intent = EffectIntent::PostCommandReply {
            thread: autoforge_journal::testing::issue(1),
            comment_id: 77,
            reply: Reply::Accepted {
                command: "retry".into(),
                detail: "again".into(),
            },
        };
        let [row] = world
            .journal(vec![world.plan(&intent, &BTreeMap::new())])
            .await
            .try_into()
            .unwrap();
        // Asynchronously: fakehub runs on this test's runtime and must keep
        // answering the child.
        let status = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::common::test_in(module_path!(), "crash_child_drives_one_effect").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .env("AUTOFORGE_CRASH_AT", format!("{point}:post_comment"))
            .env(format!("{CHILD}_DB"), world.db.url().expose_secret())
            .env(format!("{CHILD}_HUB"), world.hub.base_url())
            .env(format!("{CHILD}_TOKEN"), world.token_text())
            .env(format!("{CHILD}_RUN"), world.run_id().0.to_string())
            .env(format!("{CHILD}_OWNER"), &world.lease().owner)
            .env(
                format!("{CHILD}_FENCE"),
                world.lease().fencing_token.to_string(),
            )
            .env(format!("{CHILD}_REPO"), world.repo.to_string())
            .env(format!("{CHILD}_EFFECT"), row.id.0.to_string())
            .output()
            .await
            .unwrap();
        assert_eq!(
            status.status.signal(),
            Some(libc::SIGABRT),
            "{point}: the child must abort, it ended with {:?}\n{}",
            status.status,
            String::from_utf8_lossy(&status.stderr)
        );
        let crashed = world.row(row.id).await;
        assert_eq!(crashed.stage, Stage::Attempted, "{point}");
        let outcome = world.drive(&world.executor(), row.id).await;
        assert!(
            matches!(outcome, DriveOutcome::Observed(_)),
            "{point}: {outcome:?}"
        );
        let comments = world
            .api
            .issue_comments(&world.repo, autoforge_journal::testing::issue(1))
            .await
            .unwrap();
        assert_eq!(comments.len(), 1, "{point}");
        assert_eq!(world.row(row.id).await.attempts, attempts, "{point}");
    }
}
