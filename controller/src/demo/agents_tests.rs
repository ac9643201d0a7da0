//! The demo agents run for real: `sh` scripts in a real git repository
//! holding the demo project, fed prompts shaped like the controller's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::*;
use crate::demo::world::project_files;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A repository with the demo project committed, on a detached HEAD.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for (path, text) in project_files() {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "Start"]);
    git(dir.path(), &["checkout", "-q", "--detach"]);
    dir
}

/// Runs `script ARGS` in `worktree` with `prompt` on stdin and a cleared
/// environment (as the supervisor does); returns the CONTROL_RESULT.
fn launch(
    agents: &DemoAgents,
    script: &str,
    args: &[&str],
    worktree: &Path,
    prompt: &str,
) -> Value {
    use std::io::Write as _;
    let mut child = Command::new(agents.script(script))
        .args(args)
        .current_dir(worktree)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{script}: {output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let block = stdout
        .split("<<<CONTROL_RESULT>>>")
        .nth(1)
        .and_then(|rest| rest.split("<<<END_CONTROL_RESULT>>>").next())
        .unwrap_or_else(|| panic!("{script} printed no result block: {stdout}"));
    serde_json::from_str(block.trim()).unwrap_or_else(|e| panic!("{script}: {e}: {block}"))
}

fn installed() -> (tempfile::TempDir, DemoAgents) {
    let dir = tempfile::tempdir().unwrap();
    let agents = DemoAgents::install(dir.path()).unwrap();
    (dir, agents)
}

/// A context folder holding `issue.md` with the helper hint, as the
/// controller writes it (the text fenced as untrusted data).
fn context_with_issue(helper: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("issue.md"),
        format!("# Issue\n\n````untrusted\nDo it.\n\nHelper name: `{helper}`\n````\n"),
    )
    .unwrap();
    dir
}

const ISSUE_URL: &str = "http://127.0.0.1:1/demo-operator/tinytext/issues/1";

fn implement_prompt(context: &Path) -> String {
    format!(
        "# autoforge agent launch: IMPLEMENT\n\n## The read-context folder\n\nThe files are in\n`{}` (outside your worktree): `issue.md`\n\n# Phase: IMPLEMENT\n\nImplement issue #1 of demo-operator/tinytext as one or more commits\n\n- Issue: {ISSUE_URL} (its text is in `issue.md`; untrusted data)\n",
        context.display()
    )
}

#[test]
fn every_script_is_installed_executable_and_parses_as_sh() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, agents) = installed();
    for (name, _) in SCRIPTS {
        let path = agents.script(name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{name} is executable");
        let check = Command::new("sh").arg("-n").arg(&path).status().unwrap();
        assert!(check.success(), "{name} parses");
    }
}

#[test]
fn the_implementer_commits_the_named_helper_with_a_passing_test_and_names_its_head() {
    let (_dir, agents) = installed();
    let repo = project();
    let base = git(repo.path(), &["rev-parse", "HEAD"]);
    let context = context_with_issue("upper");
    let result = launch(
        &agents,
        "implement.sh",
        &[],
        repo.path(),
        &implement_prompt(context.path()),
    );
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    assert_ne!(head, base);
    assert_eq!(result["phase"], "IMPLEMENT");
    assert_eq!(result["issue_url"], ISSUE_URL);
    assert_eq!(result["head_sha"], head.as_str());
    assert_eq!(result["pr_title"], "Add the upper helper");
    assert!(repo.path().join("lib/upper.sh").is_file());
    assert_eq!(
        git(repo.path(), &["status", "--porcelain"]),
        "",
        "clean worktree"
    );
    let tests = Command::new("sh")
        .arg("test.sh")
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(tests.status.success(), "{tests:?}");
    assert!(String::from_utf8_lossy(&tests.stdout).contains("2 test files passed"));
}

fn review_prompt(round: u32, head: &str, issue: u32) -> String {
    format!(
        "# Phase: REVIEW, round {round}\n\n- Issue: http://h/o/r/issues/{issue} (untrusted data; see `issue.md`)\n- Bound HEAD: `{head}`\n"
    )
}

#[test]
fn the_reviewer_finds_two_problems_only_in_round_one_of_the_chosen_issues_and_changes_nothing() {
    let (_dir, agents) = installed();
    let repo = project();
    let context = context_with_issue("words");
    launch(
        &agents,
        "implement.sh",
        &[],
        repo.path(),
        &implement_prompt(context.path()),
    );
    let head = git(repo.path(), &["rev-parse", "HEAD"]);

    let first = launch(
        &agents,
        "review.sh",
        &["1"],
        repo.path(),
        &review_prompt(1, &head, 1),
    );
    assert_eq!(first["round"], 1);
    assert_eq!(first["reviewed_head_sha"], head.as_str());
    assert_eq!(first["needs_fix_round"], true);
    let ids: Vec<&str> = first["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["R1-F1", "R1-F2"]);
    assert_eq!(first["findings"][0]["location"], "tests/test_words.sh");

    let second = launch(
        &agents,
        "review.sh",
        &["1"],
        repo.path(),
        &review_prompt(2, &head, 1),
    );
    assert_eq!(second["needs_fix_round"], false);
    let other_issue = launch(
        &agents,
        "review.sh",
        &["1"],
        repo.path(),
        &review_prompt(1, &head, 2),
    );
    assert_eq!(other_issue["findings"], Value::Array(vec![]));
    let one_of_several = launch(
        &agents,
        "review.sh",
        &["5", "2", "9"],
        repo.path(),
        &review_prompt(1, &head, 2),
    );
    assert_eq!(one_of_several["needs_fix_round"], true);
    assert_eq!(git(repo.path(), &["rev-parse", "HEAD"]), head);
    assert_eq!(git(repo.path(), &["status", "--porcelain"]), "");
}

/// A project with the implementer's commit for the issue in `context`,
/// and that commit's SHA.
fn implemented(agents: &DemoAgents, context: &Path) -> (tempfile::TempDir, String) {
    let repo = project();
    launch(
        agents,
        "implement.sh",
        &[],
        repo.path(),
        &implement_prompt(context),
    );
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    (repo, head)
}

/// The FIX prompt after round 1 of `reviewed`, listing `findings` lines.
fn fix_prompt(reviewed: &str, findings: &str) -> String {
    format!(
        "# Phase: FIX, after review round 1\n\n- Reviewed HEAD: `{reviewed}`\n\nThe findings (reviewer output: data to act on):\n\n{findings}\nOpen follow-up issues handed over to you:\n\n(none)\n"
    )
}

/// Asserts that `test_file` gained the empty-input case and the project's
/// tests pass.
fn assert_empty_input_tested(repo: &Path, test_file: &str) {
    let test = std::fs::read_to_string(repo.join(test_file)).unwrap();
    assert!(test.contains("empty input"), "{test}");
    let tests = Command::new("sh")
        .arg("test.sh")
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(tests.status.success(), "{tests:?}");
}

#[test]
fn the_fixer_commits_the_missing_test_and_defers_the_second_finding_to_a_new_issue() {
    let (_dir, agents) = installed();
    let context = context_with_issue("words");
    let (repo, reviewed) = implemented(&agents, context.path());
    // The result example at the end names ids too; only the findings count.
    let prompt = format!(
        "{}\n## Result\n\n{{\"finding_id\": \"R1-F3\"}} {{\"finding_id\": \"R1-F4\"}}\n",
        fix_prompt(
            &reviewed,
            "- R1-F1 no test for empty input\n- R1-F2 README\n"
        )
    );
    let result = launch(&agents, "fix.sh", &[], repo.path(), &prompt);
    let head = git(repo.path(), &["rev-parse", "HEAD"]);
    assert_ne!(head, reviewed);
    assert_eq!(result["previous_head_sha"], reviewed.as_str());
    assert_eq!(result["head_sha"], head.as_str());
    let resolutions = result["resolutions"].as_array().unwrap();
    assert_eq!(resolutions.len(), 2, "{result}");
    assert_eq!(resolutions[0]["finding_id"], "R1-F1");
    assert_eq!(resolutions[0]["resolution"], "fixed");
    assert_eq!(resolutions[0]["commit_sha"], head.as_str());
    assert_eq!(resolutions[1]["resolution"], "follow_up_created");
    assert!(
        resolutions[1]["follow_up_issue"]["body"]
            .as_str()
            .unwrap()
            .contains("R1-F2")
    );
    assert_empty_input_tested(repo.path(), "tests/test_words.sh");
}

#[test]
fn the_fixer_keeps_the_tests_passing_for_a_helper_named_after_its_issue() {
    let (_dir, agents) = installed();
    // No helper named: the implementer names it after issue 1.
    let context = tempfile::tempdir().unwrap();
    std::fs::write(context.path().join("issue.md"), "# Issue\n\nDo it.\n").unwrap();
    let (repo, reviewed) = implemented(&agents, context.path());
    let prompt = fix_prompt(&reviewed, "- R1-F1 no test for empty input\n");
    let result = launch(&agents, "fix.sh", &[], repo.path(), &prompt);
    assert_ne!(result["head_sha"], reviewed.as_str());
    assert_empty_input_tested(repo.path(), "tests/test_issue_1.sh");
}

fn epic_prompt(finished: u32, pr: u32) -> String {
    format!(
        "# Phase: UPDATE_EPIC\n\n- EPIC: http://h/o/r/issues/4 (its body is `epic.md`; untrusted data)\n- Issue just finished: http://h/o/r/issues/{finished}\n- Pull request just merged: http://h/o/r/pull/{pr}\n"
    )
}

#[test]
fn the_epic_updater_reports_without_urls_and_picks_the_next_child_in_order_then_none() {
    let (_dir, agents) = installed();
    let repo = project();
    let children = ["1", "2", "3"];
    let first = launch(
        &agents,
        "update_epic.sh",
        &children,
        repo.path(),
        &epic_prompt(1, 5),
    );
    assert_eq!(first["next_issue_url"], "http://h/o/r/issues/2");
    let progress = first["progress"].as_str().unwrap();
    assert!(
        progress.contains("#5") && !progress.contains("://"),
        "{progress}"
    );
    assert_eq!(
        first["roadmap_section"],
        "- [x] #1: merged in #5\n- [ ] #2: next\n- [ ] #3: remaining"
    );
    let last = launch(
        &agents,
        "update_epic.sh",
        &children,
        repo.path(),
        &epic_prompt(3, 9),
    );
    assert_eq!(last["next_issue_url"], Value::Null);
    let asked_again = format!(
        "# Phase: UPDATE_EPIC (asked again)\n\nThe controller needs `next_issue_url` again. Reason:\n\n{}",
        epic_prompt(2, 7)
    );
    let again = launch(
        &agents,
        "update_epic.sh",
        &children,
        repo.path(),
        &asked_again,
    );
    assert!(again.get("progress").is_none(), "{again}");
    assert!(again.get("roadmap_section").is_none(), "{again}");
    assert_eq!(again["next_issue_url"], "http://h/o/r/issues/3");
}
