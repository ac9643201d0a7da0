//! The crash matrix on the real binary (SPEC §6): an `autoforge serve`
//! child aborts at a crash point of the write-ahead protocol for one
//! effect kind (`AUTOFORGE_CRASH_AT=point:kind`), a second `autoforge
//! serve` starts on the same database and state directory, and the test
//! checks what a crash-free run would show: the phase it reaches, every
//! effect observed, and each intended object on fakehub exactly once with
//! the bytes the journal planned.
//!
//! One test per (point, kind) cell, so the matrix reads in the test list
//! and cells run in parallel. `docs/reliability.md` lists the matrix.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_harness;

use std::time::Duration;

use autoforge_journal::{Effect, EffectKind, RunId, Stage};
use serde_json::Value;
use serve_harness::{Person, World, WorldOptions, eventually};

/// Short leases: the restarted process takes the dead one's run over soon.
const DRIVER: &str = "[driver]\nlease_seconds = 5\n";

fn agent(script: &str, args: &[&str]) -> String {
    let path = format!("{}/../tests/agents/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut argv = vec![format!("\"{path}\"")];
    argv.extend(args.iter().map(|a| format!("\"{a}\"")));
    format!("[{}]", argv.join(", "))
}

/// How far a scenario goes, and so which agents it configures.
#[derive(Debug, Clone, Copy)]
enum Scenario {
    /// No agents: the run parks in IMPLEMENT after its status comment;
    /// then an operator asks `/autoforge status`.
    StartAndStatusCommand,
    /// An implementer and a clean reviewer: branch, PR, one review comment,
    /// READY_FOR_MERGE (merge.mode = never).
    PublishAndReview,
}

impl Scenario {
    fn config(self) -> String {
        match self {
            Scenario::StartAndStatusCommand => DRIVER.to_owned(),
            Scenario::PublishAndReview => format!(
                r#"{DRIVER}
[agents.profiles.implementer]
command = {implement}
idle_timeout_seconds = 60
max_runtime_seconds = 120

[agents.profiles.reviewer]
command = {review}
idle_timeout_seconds = 60
max_runtime_seconds = 120

[agents.roles]
implement = "implementer"
review = "reviewer"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
                implement = agent(
                    "phase_implement.sh",
                    &["good", "{hub}/octo/widgets/issues/1"]
                ),
                review = agent("phase_review.sh", &["clean", "1"]),
            ),
        }
    }

    /// The phase a crash-free run of the scenario settles in.
    fn final_phase(self) -> &'static str {
        match self {
            Scenario::StartAndStatusCommand => "IMPLEMENT",
            Scenario::PublishAndReview => "READY_FOR_MERGE",
        }
    }
}

async fn run_of(world: &World, issue: u64) -> RunId {
    let repository = world.repository();
    eventually(Duration::from_secs(20), "a run for the issue", || {
        let repository = repository.clone();
        async move {
            world
                .journal()
                .active_run_for_issue(&repository, i64::try_from(issue).unwrap())
                .await
                .unwrap()
                .map(|run| run.id)
        }
    })
    .await
}

async fn phase(world: &World, run: RunId) -> String {
    world.journal().get_run(run).await.unwrap().unwrap().phase
}

/// Waits until the run is in `phase` with every effect observed and an
/// effect whose identity contains `expected` (empty: any) among them.
async fn settled(
    world: &World,
    run: RunId,
    phase: &str,
    expected: &str,
    cell: &str,
) -> Vec<Effect> {
    eventually(
        Duration::from_secs(120),
        &format!("{cell}: {phase}, all observed"),
        || async {
            let current = world.journal().get_run(run).await.unwrap()?;
            let effects = world.journal().list_effects(run).await.unwrap();
            (current.phase == phase
                && effects.iter().any(|e| e.identity.contains(expected))
                && effects.iter().all(|e| e.stage == Stage::Observed))
            .then_some(effects)
        },
    )
    .await
}

async fn get(world: &World, owner: &Person, path: &str) -> Vec<Value> {
    world
        .api(owner, reqwest::Method::GET, path, Value::Null)
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The `body` the journal planned for a comment effect.
fn planned_body(effect: &Effect) -> String {
    let payload: Value = serde_json::from_slice(&effect.payload).expect("payload is JSON");
    payload["body"].as_str().expect("a body").to_owned()
}

/// Every comment-like effect is on fakehub exactly once, with the bytes of
/// the last write the journal planned for its identity.
async fn comments_exactly_once(world: &World, owner: &Person, effects: &[Effect], cell: &str) {
    let mut threads: Vec<u64> = Vec::new();
    for effect in effects {
        // Comments live on issue and PR threads; a reaction's target is a
        // comment id, not a thread.
        let thread = effect
            .target
            .strip_prefix("issue/")
            .or_else(|| effect.target.strip_prefix("pull/"));
        if let Some(n) = thread.and_then(|n| n.parse::<u64>().ok()) {
            threads.push(n);
        }
    }
    threads.sort_unstable();
    threads.dedup();
    let mut comments = Vec::new();
    for thread in threads {
        let path = format!("/repos/{}/issues/{thread}/comments", world.repository());
        comments.extend(get(world, owner, &path).await);
    }
    let commented = effects.iter().filter(|e| {
        matches!(
            e.kind,
            EffectKind::PostComment | EffectKind::EditStatusComment
        )
    });
    let mut last_by_identity: std::collections::BTreeMap<&str, &Effect> = Default::default();
    for effect in commented {
        last_by_identity.insert(&effect.identity, effect);
    }
    for (identity, effect) in last_by_identity {
        let marker_key = identity.split(':').next().unwrap();
        let carrying: Vec<&Value> = comments
            .iter()
            .filter(|c| {
                let body = c["body"].as_str().unwrap_or_default();
                body.contains(marker_key) && body == planned_body(effect)
            })
            .collect();
        assert_eq!(carrying.len(), 1, "{cell}: one comment for {identity}");
        let same_marker = comments
            .iter()
            .filter(|c| c["body"].as_str().unwrap_or_default().contains(marker_key))
            .count();
        // One comment per identity of this marker name.
        let identities = effects
            .iter()
            .filter(|e| e.identity.split(':').next() == Some(marker_key))
            .map(|e| e.identity.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        assert_eq!(
            same_marker, identities,
            "{cell}: no duplicate {marker_key} comment"
        );
    }
}

/// Runs one cell: crash at `point` for `kind`, restart, check.
async fn cell(scenario: Scenario, point: &str, kind: &str) {
    let cell = format!("{point}:{kind}");
    let mut world = World::start_with(WorldOptions {
        config_toml: Some(scenario.config()),
        env: vec![("AUTOFORGE_CRASH_AT".to_owned(), cell.clone())],
        ..WorldOptions::default()
    })
    .await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "crash matrix").await;
    assert_eq!(issue, 1, "the scripted agents answer for issue 1");
    world.add_label(&owner, issue, "autoforge").await;
    let run = run_of(&world, issue).await;

    let mut command_comment = None;
    if let Scenario::StartAndStatusCommand = scenario {
        // The status command comes once the run waits; a crash for the
        // start's own effects has happened by then, so restart first.
        let crashed_early = kind == "edit_status_comment";
        if crashed_early {
            crash_and_restart(&mut world, &cell).await;
        }
        settled(&world, run, "IMPLEMENT", "", &cell).await;
        command_comment = Some(world.comment(&owner, issue, "/autoforge status").await);
        if !crashed_early {
            crash_and_restart(&mut world, &cell).await;
        }
    } else {
        crash_and_restart(&mut world, &cell).await;
    }

    let expected = match command_comment {
        Some(comment) => format!("autoforge-reply:command_comment_id={comment}"),
        None => String::new(),
    };
    let effects = settled(&world, run, scenario.final_phase(), &expected, &cell).await;
    assert_eq!(phase(&world, run).await, scenario.final_phase(), "{cell}");
    comments_exactly_once(&world, &owner, &effects, &cell).await;

    if let Some(comment) = command_comment {
        let path = format!(
            "/repos/{}/issues/comments/{comment}/reactions",
            world.repository()
        );
        let reactions = get(&world, &owner, &path).await;
        assert_eq!(reactions.len(), 1, "{cell}: one 👀 reaction: {reactions:?}");
        assert_eq!(reactions[0]["content"], "eyes", "{cell}");
    }
    if let Scenario::PublishAndReview = scenario {
        let pulls = get(
            &world,
            &owner,
            &format!("/repos/{}/pulls?state=all", world.repository()),
        )
        .await;
        assert_eq!(pulls.len(), 1, "{cell}: one PR: {pulls:?}");
        let pushed: Vec<&Effect> = effects
            .iter()
            .filter(|e| e.kind == EffectKind::Push)
            .collect();
        assert_eq!(pushed.len(), 1, "{cell}: one push intent");
        let head = pulls[0]["head"]["sha"].as_str().unwrap();
        assert!(
            pushed[0].identity.ends_with(head),
            "{cell}: the PR head is the pushed candidate"
        );
        // The implementer ran once, in the crashed process or its successor.
        let launches = world.journal().list_launches(run).await.unwrap();
        let implements = launches.iter().filter(|l| l.role == "implement").count();
        assert!(implements >= 1, "{cell}");
    }
}

/// Waits for the child to abort at its crash point and starts a clean one.
async fn crash_and_restart(world: &mut World, cell: &str) {
    let status = world
        .wait_for_serve_exit(Duration::from_secs(120))
        .await
        .unwrap_or_else(|| panic!("{cell}: serve never reached its crash point"));
    // The crash point aborts (SIGABRT); any other end is a different failure.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc_sigabrt()),
        "{cell}: serve must die at its crash point, not otherwise: {status}"
    );
    world.restart_serve(&[]).await;
}

/// SIGABRT's number on Linux.
fn libc_sigabrt() -> i32 {
    nix::sys::signal::Signal::SIGABRT as i32
}

macro_rules! matrix {
    ($scenario:expr, $kind:literal => $($name:ident: $point:literal),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                cell($scenario, $point, $kind).await;
            }
        )+
    };
}

matrix!(Scenario::StartAndStatusCommand, "edit_status_comment" =>
    status_comment_survives_a_crash_after_its_intent: "after_intent",
    status_comment_survives_a_crash_after_attempted: "after_attempted",
    status_comment_survives_a_crash_after_send: "after_send",
    status_comment_survives_a_crash_after_read_back: "after_read_back",
    status_comment_survives_a_crash_after_observed: "after_observed",
);

matrix!(Scenario::StartAndStatusCommand, "add_reaction" =>
    reaction_survives_a_crash_after_its_intent: "after_intent",
    reaction_survives_a_crash_after_attempted: "after_attempted",
    reaction_survives_a_crash_after_send: "after_send",
    reaction_survives_a_crash_after_read_back: "after_read_back",
    reaction_survives_a_crash_after_observed: "after_observed",
);

matrix!(Scenario::StartAndStatusCommand, "post_comment" =>
    command_reply_survives_a_crash_after_its_intent: "after_intent",
    command_reply_survives_a_crash_after_attempted: "after_attempted",
    command_reply_survives_a_crash_after_send: "after_send",
    command_reply_survives_a_crash_after_read_back: "after_read_back",
    command_reply_survives_a_crash_after_observed: "after_observed",
);

matrix!(Scenario::PublishAndReview, "push" =>
    push_survives_a_crash_after_its_intent: "after_intent",
    push_survives_a_crash_after_attempted: "after_attempted",
    push_survives_a_crash_after_send: "after_send",
    push_survives_a_crash_after_read_back: "after_read_back",
    push_survives_a_crash_after_observed: "after_observed",
);

matrix!(Scenario::PublishAndReview, "create_pr" =>
    pull_request_survives_a_crash_after_its_intent: "after_intent",
    pull_request_survives_a_crash_after_attempted: "after_attempted",
    pull_request_survives_a_crash_after_send: "after_send",
    pull_request_survives_a_crash_after_read_back: "after_read_back",
    pull_request_survives_a_crash_after_observed: "after_observed",
);

matrix!(Scenario::PublishAndReview, "post_comment" =>
    review_comment_survives_a_crash_after_its_intent: "after_intent",
    review_comment_survives_a_crash_after_attempted: "after_attempted",
    review_comment_survives_a_crash_after_send: "after_send",
    review_comment_survives_a_crash_after_read_back: "after_read_back",
    review_comment_survives_a_crash_after_observed: "after_observed",
);

/// Two `autoforge serve` processes on one database compete for the same
/// run: the leases let one drive it at a time, and GitHub sees every
/// object once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_one_database_write_every_object_once() {
    let scenario = Scenario::PublishAndReview;
    let world = World::start_with(WorldOptions {
        config_toml: Some(scenario.config()),
        ..WorldOptions::default()
    })
    .await;
    let replica_state = tempfile::tempdir().unwrap();
    let mut replica = world.start_replica(replica_state.path()).await;
    let owner = world.owner();
    let issue = world.open_issue(&owner, "two replicas").await;
    world.add_label(&owner, issue, "autoforge").await;
    let run = run_of(&world, issue).await;

    let effects = settled(&world, run, scenario.final_phase(), "", "replicas").await;
    comments_exactly_once(&world, &owner, &effects, "replicas").await;
    let pulls = get(
        &world,
        &owner,
        &format!("/repos/{}/pulls?state=all", world.repository()),
    )
    .await;
    assert_eq!(pulls.len(), 1, "one PR: {pulls:?}");
    let launches = world.journal().list_launches(run).await.unwrap();
    let roles: Vec<&str> = launches.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(roles, ["implement", "review"], "each agent ran once");
    assert!(serve_harness::terminate(&mut replica).success());
}
