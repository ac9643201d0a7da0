//! `autoforge doctor --probe` with scripted shell agents: a writer that
//! commits and a reviewer that reads the marker pass, with their token
//! counts; a missing program and an agent that never answers fail with
//! their reasons; and no probe leaves anything behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use autoforge_journal::testing::TestDatabase;
use serde_json::Value;

use crate::doctor_cli::{AppShape, Installation, check, shown};

/// Does what the probe prompt asks: writes and commits the file of a write
/// probe, or answers with the marker file's contents.
const PROBE_AGENT: &str = r#"prompt=$(cat)
case "$prompt" in
*"WRITE PROBE"*)
  line=$(printf '%s\n' "$prompt" | grep '^Create the file ')
  file=$(printf '%s\n' "$line" | sed 's/^Create the file \([^ ]*\) holding.*/\1/')
  marker=$(printf '%s\n' "$line" | sed 's/.*holding the single line //')
  printf '%s\n' "$marker" > "$file"
  git add -A && git commit -qm 'Probe commit'
  echo "PROBE_ANSWER $marker"
  ;;
*)
  echo "PROBE_ANSWER $(cat autoforge-probe.txt)"
  ;;
esac
echo "tokens used: 42"
"#;

/// Commits what a write probe asks for but never says so.
const MUTE_AGENT: &str = r#"prompt=$(cat)
line=$(printf '%s\n' "$prompt" | grep '^Create the file ')
file=$(printf '%s\n' "$line" | sed 's/^Create the file \([^ ]*\) holding.*/\1/')
printf '%s\n' "$line" | sed 's/.*holding the single line //' > "$file"
git add -A && git commit -qm 'Probe commit'
echo "all done, nothing to report"
"#;

fn profile(name: &str, command: &str) -> String {
    format!(
        "[agents.profiles.{name}]\ncommand = [\"{command}\"]\n\
         usage_pattern = 'tokens used: (\\d+)'\n\
         [agents.profiles.{name}.sandbox]\nnetwork = \"none\"\n"
    )
}

fn roles(writer: &str, reviewer: &str) -> String {
    format!(
        "[agents.roles]\nimplement = \"{writer}\"\nfix = \"{writer}\"\n\
         update_epic = \"{writer}\"\nreview = \"{reviewer}\"\n"
    )
}

fn probe_facts<'a>(report: &'a Value, profile: &str) -> &'a Value {
    &check(report, &format!("probe:{profile}"))["probe"]
}

/// Nothing of any probe is left in the state directory.
fn assert_nothing_left(install: &Installation) {
    let probes = install.state_dir().join("doctor-probes");
    let left: Vec<_> = std::fs::read_dir(&probes)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "probes left {left:?} in {}",
        probes.display()
    );
    assert!(!probes.exists(), "the probes' parent directory is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_passes_a_writer_that_commits_and_a_reviewer_that_reads_the_marker() {
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let agent = install.agent("probe-agent.sh", PROBE_AGENT);
    let agent = agent.display().to_string();
    let agents = format!(
        "{}{}{}",
        profile("writer", &agent),
        profile("reader", &agent),
        roles("writer", "reader")
    );
    let (output, report) = install.doctor(&agents, &["--probe"]).await;
    assert!(output.status.success(), "{}", shown(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("2 real agent launch(es)") && stderr.contains("billed"),
        "the probes are announced as billable first: {stderr}"
    );
    let writer = probe_facts(&report, "writer");
    assert_eq!(writer["kind"], "write", "{report:#}");
    assert_eq!(writer["tokens"], 42, "{report:#}");
    assert!(writer.get("failure").is_none(), "{report:#}");
    let reader = probe_facts(&report, "reader");
    assert_eq!(reader["kind"], "read", "{report:#}");
    assert_eq!(reader["tokens"], 42, "{report:#}");
    assert_eq!(check(&report, "probe:reader")["status"], "ok");
    assert_nothing_left(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_of_a_profile_whose_program_is_missing_fails_as_binary_missing() {
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let agents = format!(
        "{}{}",
        profile("ghost", "no-such-agent-cli"),
        roles("ghost", "ghost")
    );
    let (output, report) = install.doctor(&agents, &["--probe"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let probe = check(&report, "probe:ghost");
    assert_eq!(probe["status"], "fail");
    assert_eq!(
        probe["probe"]["failure"]["reason"], "binary_missing",
        "{report:#}"
    );
    assert!(
        probe["detail"]
            .as_str()
            .unwrap()
            .contains("no-such-agent-cli"),
        "{report:#}"
    );
    assert!(probe["fix"].as_str().unwrap().contains("install the CLI"));
    assert_nothing_left(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_of_an_agent_that_never_gives_the_answer_fails_as_output_unparsable() {
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let mute = install.agent("mute-agent.sh", MUTE_AGENT);
    let agents = format!(
        "{}{}",
        profile("mute", &mute.display().to_string()),
        roles("mute", "mute")
    );
    let (output, report) = install.doctor(&agents, &["--probe"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let probe = check(&report, "probe:mute");
    assert_eq!(
        probe["probe"]["failure"]["reason"], "output_unparsable",
        "{report:#}"
    );
    assert!(
        probe["detail"]
            .as_str()
            .unwrap()
            .contains("all done, nothing to report"),
        "the reason quotes how the output ended: {report:#}"
    );
    assert_nothing_left(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_of_an_agent_that_hangs_is_ended_at_its_idle_limit_and_fails_as_timed_out() {
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let hang = install.agent("hang-agent.sh", "cat >/dev/null\nsleep 60\n");
    let agents = format!(
        "[agents.profiles.hang]\ncommand = [\"{}\"]\nidle_timeout_seconds = 2\n\
         [agents.profiles.hang.sandbox]\nnetwork = \"none\"\n{}",
        hang.display(),
        roles("hang", "hang")
    );
    let started = std::time::Instant::now();
    let (output, report) = install.doctor(&agents, &["--probe"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let probe = check(&report, "probe:hang");
    assert_eq!(
        probe["probe"]["failure"]["reason"], "timed_out",
        "{report:#}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the probe waited for the agent: {:?}",
        started.elapsed()
    );
    assert_nothing_left(&install);
}
