//! The crash matrix on the real binary (SPEC §6): an `autoforge serve`
//! child aborts at a crash point of the write-ahead protocol for one
//! effect kind (`AUTOFORGE_CRASH_AT=point:kind`), a second `autoforge
//! serve` starts on the same database and state directory, and the test
//! checks what a crash-free run would show: the phase it reaches, every
//! effect observed, and each intended object on fakehub exactly once with
//! the bytes the journal planned (comments, check runs, inline reviews).
//!
//! The cells are generated, not listed: the matrix (`matrix.rs`) names
//! the families of objects it crashes around — an effect kind, narrowed to
//! one kind of object when the kind writes several, and the scenario that
//! writes it — and each family's test crashes at every point of
//! `Point::ALL`. `docs/reliability.md` lists the matrix.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use autoforge::effects::crashpoint::{CRASH_ENV, Point};
use autoforge_journal::{Effect, EffectKind, RunId, Stage};
use common::{OWNER, Person, REPO, World, WorldOptions, agent_command, eventually};
use serde_json::Value;

use super::matrix::Family;

/// Short leases: the restarted process takes the dead one's run over soon.
const DRIVER: &str = "[driver]\nlease_seconds = 5\n";

/// How far a scenario goes, and so which agents it configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scenario {
    /// No agents: the run parks in IMPLEMENT after its status comment;
    /// then an operator asks `/autoforge status`.
    StartAndStatusCommand,
    /// An implementer and a clean reviewer: branch, PR, one review comment,
    /// READY_FOR_MERGE (merge.mode = never).
    PublishAndReview,
    /// EPIC #1 with child #2, the child labelled: a round-1 finding
    /// deferred by the fixer to a new follow-up issue, a clean round 2, an
    /// automatic merge, UPDATE_EPIC (progress comment, roadmap splice) and
    /// DONE.
    FullLoop,
    /// Issue #1 alone: round 1's finding deferred to a new follow-up issue,
    /// round 2's finding deferred to that same (listed) issue, whose
    /// markers are appended; a clean round 3, an automatic merge, DONE.
    FollowUpReuse,
    /// A person already pushed `autoforge/1` and opened an unmarked PR
    /// from it: the implementer continues that branch, the push
    /// fast-forwards it and the PR is adopted (marker appended to the
    /// person's body); a clean review; READY_FOR_MERGE.
    AdoptPersonsPr,
    /// Like `PublishAndReview` with status labels on: the issue's label
    /// follows the phase (running, then ready).
    PublishWithStatusLabels,
    /// No run at all: someone who is not an operator adds the trigger
    /// label and is answered once (`answer_crash.rs`).
    AnswerWithoutRun,
    /// Issue #1: round 1 has a finding on the line the implementer added
    /// and one outside the diff (one inline comment, one finding in the
    /// review's body), the fixer fixes both, a clean round 2 posts its own
    /// review; READY_FOR_MERGE.
    InlineReviewRounds,
    /// Like `PublishAndReview` with `plan.mode = "post"`: a planner's plan
    /// is posted on the issue (`ai-plan`) before the implementer runs.
    PlanAndPublish,
}

/// A configuration of `driver` (the whole `[driver]` section), an
/// implementer (`implement`: the TOML after its `command = `, further
/// lines of its profile allowed) and a clean reviewer.
pub(super) fn implement_and_review(driver: &str, implement: &str) -> String {
    format!(
        r#"{driver}
[agents.profiles.implementer]
command = {implement}

[agents.profiles.reviewer]
command = {review}

[agents.roles]
implement = "implementer"
review = "reviewer"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
        review = agent_command("phase_review.sh", &["clean", "1"]),
    )
}

impl Scenario {
    fn config(self) -> String {
        match self {
            Scenario::StartAndStatusCommand | Scenario::AnswerWithoutRun => DRIVER.to_owned(),
            Scenario::PublishWithStatusLabels => format!(
                "[labels]\nstatus = true\n{}",
                Scenario::PublishAndReview.config()
            ),
            Scenario::PlanAndPublish => format!(
                "[plan]\nmode = \"post\"\n\n[agents.profiles.planner]\ncommand = {}\n\n{}",
                agent_command("phase_plan.sh", &["questions"]),
                Scenario::PublishAndReview
                    .config()
                    .replace("[agents.roles]\n", "[agents.roles]\nplan = \"planner\"\n")
            ),
            Scenario::PublishAndReview | Scenario::AdoptPersonsPr => implement_and_review(
                DRIVER,
                &agent_command(
                    "phase_implement.sh",
                    &["good", "{hub}/octo/widgets/issues/1"],
                ),
            ),
            Scenario::InlineReviewRounds => format!(
                r#"{DRIVER}
[agents.profiles.implementer]
command = {implement}

[agents.profiles.r1]
command = {r1}

[agents.profiles.r2]
command = {r2}

[agents.profiles.fixer]
command = {fix}

[agents.roles]
implement = "implementer"
review = [{{ rounds = "1", profile = "r1" }}, {{ rounds = "2+", profile = "r2" }}]
fix = "fixer"
update_epic = "implementer"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
                implement = agent_command(
                    "phase_implement.sh",
                    &["good", "{hub}/octo/widgets/issues/1"]
                ),
                r1 = agent_command("phase_review.sh", &["inline", "1"]),
                r2 = agent_command("phase_review.sh", &["clean", "2"]),
                fix = agent_command("phase_fix.sh", &["good", "R1-F1", "R1-F2"]),
            ),
            Scenario::FullLoop => format!(
                r#"{DRIVER}
[merge]
mode = "auto"

[agents.profiles.implementer]
command = {implement}

[agents.profiles.first_reviewer]
command = {first_review}

[agents.profiles.later_reviewer]
command = {later_review}

[agents.profiles.fixer]
command = {fix}

[agents.profiles.epic]
command = {epic}

[agents.roles]
implement = "implementer"
review = [{{ rounds = "1", profile = "first_reviewer" }}, {{ rounds = "2+", profile = "later_reviewer" }}]
fix = "fixer"
update_epic = "epic"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
                implement = agent_command("phase_implement.sh", &["per_issue", "-"]),
                first_review = agent_command("phase_review.sh", &["findings", "1"]),
                later_review = agent_command("phase_review.sh", &["clean", "2"]),
                fix = agent_command("phase_fix.sh", &["follow_up", "R1-F1"]),
                epic = agent_command("phase_update_epic.sh", &["good"]),
            ),
            Scenario::FollowUpReuse => format!(
                r#"{DRIVER}
[merge]
mode = "auto"

[agents.profiles.implementer]
command = {implement}

[agents.profiles.r1]
command = {r1}

[agents.profiles.r2]
command = {r2}

[agents.profiles.r3]
command = {r3}

[agents.profiles.fixer]
command = {fix}

[agents.roles]
implement = "implementer"
review = [{{ rounds = "1", profile = "r1" }}, {{ rounds = "2", profile = "r2" }}, {{ rounds = "3+", profile = "r3" }}]
fix = "fixer"
update_epic = "implementer"

[validation]
commands = ["true"]
timeout_seconds = 60
"#,
                implement = agent_command(
                    "phase_implement.sh",
                    &["good", "{hub}/octo/widgets/issues/1"]
                ),
                r1 = agent_command("phase_review.sh", &["round_findings", "1"]),
                r2 = agent_command("phase_review.sh", &["round_findings", "2"]),
                r3 = agent_command("phase_review.sh", &["clean", "3"]),
                fix = agent_command("phase_fix.sh", &["defer_listed"]),
            ),
        }
    }

    /// The phase a crash-free run of the scenario settles in.
    fn final_phase(self) -> &'static str {
        match self {
            Scenario::StartAndStatusCommand => "IMPLEMENT",
            Scenario::PublishAndReview
            | Scenario::AdoptPersonsPr
            | Scenario::PublishWithStatusLabels
            | Scenario::InlineReviewRounds
            | Scenario::PlanAndPublish => "READY_FOR_MERGE",
            Scenario::FullLoop | Scenario::FollowUpReuse => "DONE",
            Scenario::AnswerWithoutRun => "no run",
        }
    }
}

async fn phase(world: &World, run: RunId) -> String {
    world
        .db
        .journal()
        .get_run(run)
        .await
        .unwrap()
        .unwrap()
        .phase
}

/// Waits until the run is in `phase` with every effect observed and an
/// effect whose identity contains `expected` (empty: any) among them.
pub(super) async fn settled(
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
            let current = world.db.journal().get_run(run).await.unwrap()?;
            let effects = world.db.journal().list_effects(run).await.unwrap();
            (current.phase == phase
                && effects.iter().any(|e| e.identity.contains(expected))
                && effects.iter().all(|e| e.stage == Stage::Observed))
            .then_some(effects)
        },
    )
    .await
}

pub(super) async fn get(world: &World, owner: &Person, path: &str) -> Vec<Value> {
    world
        .rest_as(owner, reqwest::Method::GET, path, Value::Null)
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
pub(super) async fn comments_exactly_once(
    world: &World,
    owner: &Person,
    effects: &[Effect],
    cell: &str,
) {
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

/// Every head the journal wrote a check run for carries exactly one
/// `autoforge` check, showing the last write the journal planned for it.
async fn checks_exactly_once(world: &World, owner: &Person, effects: &[Effect], cell: &str) {
    let mut last_by_head: std::collections::BTreeMap<String, Value> = Default::default();
    for effect in effects.iter().filter(|e| e.kind == EffectKind::CheckRun) {
        let payload: Value = serde_json::from_slice(&effect.payload).expect("payload is JSON");
        let head = payload["head_sha"].as_str().expect("a head").to_owned();
        last_by_head.insert(head, payload);
    }
    for (head, planned) in last_by_head {
        let path = format!(
            "/repos/{}/commits/{head}/check-runs?check_name=autoforge",
            world.repository()
        );
        let listed = world
            .rest_as(owner, reqwest::Method::GET, &path, Value::Null)
            .await;
        let runs = listed["check_runs"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            runs.len(),
            1,
            "{cell}: one autoforge check on {head}: {runs:?}"
        );
        let run = &runs[0];
        assert_eq!(run["external_id"], planned["external_id"], "{cell}");
        assert_eq!(run["status"], planned["status"], "{cell}");
        assert_eq!(
            run["conclusion"],
            planned.get("conclusion").cloned().unwrap_or(Value::Null),
            "{cell}"
        );
        assert_eq!(
            run["output"]["summary"], planned["output"]["summary"],
            "{cell}"
        );
    }
}

/// Every review the journal planned is on its PR exactly once, with the
/// journalled body and as many inline comments as it sent, and no other
/// review carries the inline-review marker.
async fn reviews_exactly_once(world: &World, owner: &Person, effects: &[Effect], cell: &str) {
    let planned: Vec<&Effect> = effects
        .iter()
        .filter(|e| e.kind == EffectKind::PostReview)
        .collect();
    let mut pulls: Vec<&str> = planned
        .iter()
        .filter_map(|e| e.target.strip_prefix("pull/"))
        .collect();
    pulls.sort_unstable();
    pulls.dedup();
    let repository = world.repository();
    let mut marked = 0;
    for pull in pulls {
        let reviews = get(
            world,
            owner,
            &format!("/repos/{repository}/pulls/{pull}/reviews"),
        )
        .await;
        marked += reviews
            .iter()
            .filter(|r| {
                r["body"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("<!-- ai-inline-review")
            })
            .count();
        for effect in planned
            .iter()
            .filter(|e| e.target == format!("pull/{pull}"))
        {
            let request: Value = serde_json::from_slice(&effect.payload).expect("payload is JSON");
            let same: Vec<&Value> = reviews
                .iter()
                .filter(|r| r["body"] == request["body"])
                .collect();
            assert_eq!(same.len(), 1, "{cell}: one review for {}", effect.identity);
            let path = format!(
                "/repos/{repository}/pulls/{pull}/reviews/{}/comments",
                same[0]["id"]
            );
            let comments = get(world, owner, &path).await;
            let sent = request["comments"].as_array().map_or(0, Vec::len);
            assert_eq!(
                comments.len(),
                sent,
                "{cell}: inline comments of {}",
                effect.identity
            );
        }
    }
    let identities: std::collections::BTreeSet<&str> =
        planned.iter().map(|e| e.identity.as_str()).collect();
    assert_eq!(
        marked,
        identities.len(),
        "{cell}: no duplicate inline review"
    );
}

/// Runs one cell: crash at `point` for the family's objects, restart,
/// check.
pub(super) async fn cell(family: &Family, point: Point) {
    let scenario = family.scenario;
    let cell = family.crash_spec(point);
    let mut world = World::start_with(WorldOptions {
        config_toml: Some(scenario.config()),
        env: vec![(CRASH_ENV.to_owned(), cell.clone())],
        ..WorldOptions::default()
    })
    .await;
    if scenario == Scenario::AnswerWithoutRun {
        return super::answer_crash::cell(world, &cell).await;
    }
    let owner = world.owner();
    let issue = match scenario {
        Scenario::FullLoop => epic_with_one_child(&world, &owner).await,
        Scenario::AdoptPersonsPr => {
            let issue = world.open_issue(&owner, "crash matrix").await;
            persons_branch_and_pr(&world, &owner, issue).await;
            issue
        }
        _ => {
            let issue = world.open_issue(&owner, "crash matrix").await;
            assert_eq!(issue, 1, "the scripted agents answer for issue 1");
            issue
        }
    };
    world.add_label(&owner, issue, "autoforge").await;
    let run = world.run_for(issue).await;

    let mut command_comment = None;
    if let Scenario::StartAndStatusCommand = scenario {
        // The status command comes once the run waits; a crash for the
        // start's own effects has happened by then, so restart first.
        let crashed_early = family.kind == EffectKind::EditStatusComment;
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
    checks_exactly_once(&world, &owner, &effects, &cell).await;
    reviews_exactly_once(&world, &owner, &effects, &cell).await;

    if let Some(comment) = command_comment {
        let path = format!(
            "/repos/{}/issues/comments/{comment}/reactions",
            world.repository()
        );
        let reactions = get(&world, &owner, &path).await;
        assert_eq!(reactions.len(), 1, "{cell}: one 👀 reaction: {reactions:?}");
        assert_eq!(reactions[0]["content"], "eyes", "{cell}");
    }
    if let Scenario::PublishWithStatusLabels = scenario {
        let labels = get(
            &world,
            &owner,
            &format!("/repos/{}/issues/{issue}/labels", world.repository()),
        )
        .await;
        let status: Vec<&str> = labels
            .iter()
            .filter_map(|l| l["name"].as_str())
            .filter(|name| name.starts_with("autoforge:"))
            .collect();
        assert_eq!(status, ["autoforge:ready"], "{cell}: {labels:?}");
    }
    if let Scenario::InlineReviewRounds = scenario {
        let pull = effects
            .iter()
            .find(|e| e.kind == EffectKind::PostReview)
            .and_then(|e| e.target.strip_prefix("pull/"))
            .expect("a planned review");
        let path = format!("/repos/{}/pulls/{pull}/reviews", world.repository());
        let reviews = get(&world, &owner, &path).await;
        assert_eq!(
            reviews.len(),
            2,
            "{cell}: one review per round: {reviews:?}"
        );
        let first = format!("{path}/{}/comments", reviews[0]["id"]);
        let comments = get(&world, &owner, &first).await;
        assert_eq!(comments.len(), 1, "{cell}: {comments:?}");
        assert_eq!(
            (comments[0]["path"].as_str(), comments[0]["line"].as_u64()),
            (Some("feature.txt"), Some(1)),
            "{cell}"
        );
    }
    if let Scenario::PublishAndReview
    | Scenario::AdoptPersonsPr
    | Scenario::PublishWithStatusLabels = scenario
    {
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
        let launches = world.db.journal().list_launches(run).await.unwrap();
        let implements = launches.iter().filter(|l| l.role == "implement").count();
        assert!(implements >= 1, "{cell}");
    }
    if let Scenario::FullLoop = scenario {
        full_loop_objects_exactly_once(&world, &owner, &cell).await;
    }
    if let Scenario::AdoptPersonsPr = scenario {
        let pulls = get(
            &world,
            &owner,
            &format!("/repos/{}/pulls?state=all", world.repository()),
        )
        .await;
        let body = pulls[0]["body"].as_str().unwrap_or_default();
        assert!(
            body.starts_with(PERSONS_BODY),
            "{cell}: the person's text kept: {body:?}"
        );
        assert_eq!(
            body.matches("<!-- ai-implementation").count(),
            1,
            "{cell}: adopted once: {body}"
        );
        assert_eq!(
            pulls[0]["user"]["login"], OWNER,
            "{cell}: still the person's PR"
        );
    }
    if let Scenario::FollowUpReuse = scenario {
        let issues = get(
            &world,
            &owner,
            &format!("/repos/{}/issues?state=all", world.repository()),
        )
        .await;
        let marked: Vec<&Value> = issues
            .iter()
            .filter(|i| {
                i["body"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("<!-- ai-follow-up")
            })
            .collect();
        assert_eq!(marked.len(), 1, "{cell}: one follow-up issue: {issues:?}");
        let body = marked[0]["body"].as_str().unwrap();
        assert_eq!(
            body.matches("<!-- ai-follow-up").count(),
            2,
            "{cell}: created once, appended once: {body}"
        );
    }
}

const PERSONS_BODY: &str = "Started on this myself; please take it over.";

/// `autoforge/<issue>` pushed by the owner with one commit on the default
/// branch, and an open PR from it without any marker.
async fn persons_branch_and_pr(world: &World, owner: &Person, issue: u64) {
    let dir = tempfile::tempdir().unwrap();
    let url = world.hub.git_url(OWNER, REPO);
    let header = format!("http.extraHeader=Authorization: Bearer {}", owner.token);
    let git = |dir: &std::path::Path, args: &[&str]| {
        let identity = ["-c", "user.name=Octo", "-c", "user.email=octo@example.com"];
        let output = std::process::Command::new("git")
            .args(["-c", &header])
            .args(identity)
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    git(dir.path(), &["clone", "-q", &url, "work"]);
    let work = dir.path().join("work");
    let git_in = |args: &[&str]| git(&work, args);
    let branch = format!("autoforge/{issue}");
    git_in(&["checkout", "-q", "-b", &branch]);
    std::fs::write(work.join("started.txt"), "a start\n").unwrap();
    git_in(&["add", "started.txt"]);
    git_in(&["commit", "-q", "-m", "Start the widget"]);
    git_in(&["push", "-q", "origin", &branch]);
    world
        .rest_as(
            owner,
            reqwest::Method::POST,
            &format!("/repos/{}/pulls", world.repository()),
            serde_json::json!({ "title": "Widget (started by hand)", "head": branch,
                "base": "main", "body": PERSONS_BODY }),
        )
        .await;
}

/// EPIC #1 (its body written by a person) with sub-issue #2; returns 2.
async fn epic_with_one_child(world: &World, owner: &Person) -> u64 {
    let epic = world.open_issue(owner, "The widgets EPIC").await;
    let child = world.open_issue(owner, "First widget").await;
    assert_eq!((epic, child), (1, 2));
    let path = format!("/repos/{}/issues/{child}", world.repository());
    let read = world
        .rest_as(owner, reqwest::Method::GET, &path, Value::Null)
        .await;
    world
        .rest_as(
            owner,
            reqwest::Method::POST,
            &format!("/repos/{}/issues/{epic}/sub_issues", world.repository()),
            serde_json::json!({ "sub_issue_id": read["id"] }),
        )
        .await;
    child
}

/// After the whole loop: the PR merged by one request, one follow-up
/// issue, the EPIC's roadmap section once with the person's text kept.
async fn full_loop_objects_exactly_once(world: &World, owner: &Person, cell: &str) {
    let repository = world.repository();
    let pulls = get(
        world,
        owner,
        &format!("/repos/{repository}/pulls?state=all"),
    )
    .await;
    assert_eq!(pulls.len(), 1, "{cell}: one PR: {pulls:?}");
    let number = pulls[0]["number"].as_u64().unwrap();
    assert_eq!(pulls[0]["merged"], true, "{cell}: merged");
    let merge_path = format!("/repos/{repository}/pulls/{number}/merge");
    let merges = world
        .hub
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path == merge_path)
        .count();
    assert_eq!(merges, 1, "{cell}: one merge request");
    let issues = get(
        world,
        owner,
        &format!("/repos/{repository}/issues?state=all"),
    )
    .await;
    let follow_ups = issues
        .iter()
        .filter(|i| {
            i["pull_request"].is_null()
                && i["body"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("ai-follow-up")
        })
        .count();
    assert_eq!(follow_ups, 1, "{cell}: one follow-up issue: {issues:?}");
    let epic = world
        .rest_as(
            owner,
            reqwest::Method::GET,
            &format!("/repos/{repository}/issues/1"),
            Value::Null,
        )
        .await;
    let body = epic["body"].as_str().unwrap();
    assert!(
        body.starts_with("please"),
        "{cell}: the person's text kept: {body:?}"
    );
    assert_eq!(
        body.matches("ai-controller-roadmap:start").count(),
        1,
        "{cell}: {body}"
    );
    assert_eq!(
        body.matches("ai-controller-roadmap:end").count(),
        1,
        "{cell}: {body}"
    );
}

/// Waits for the child to abort at its crash point and starts a clean one.
pub(super) async fn crash_and_restart(world: &mut World, cell: &str) {
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
    let run = world.run_for(issue).await;

    let effects = settled(&world, run, scenario.final_phase(), "", "replicas").await;
    comments_exactly_once(&world, &owner, &effects, "replicas").await;
    let pulls = get(
        &world,
        &owner,
        &format!("/repos/{}/pulls?state=all", world.repository()),
    )
    .await;
    assert_eq!(pulls.len(), 1, "one PR: {pulls:?}");
    let launches = world.db.journal().list_launches(run).await.unwrap();
    let roles: Vec<&str> = launches.iter().map(|l| l.role.as_str()).collect();
    assert_eq!(roles, ["implement", "review"], "each agent ran once");
    assert!(common::terminate(&mut replica).success());
}
