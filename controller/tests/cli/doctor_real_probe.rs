//! `autoforge doctor --probe` with the real agent CLIs (Claude Code, Codex
//! CLI, OpenCode, as `scripts/install-agent-clis.sh` pins them) against the
//! scripted model server: each CLI's writer probe commits through the CLI's
//! own tools, reviewers answer the marker they read, and a writing profile
//! whose permission flags refuse writes fails with that reason. Every
//! launch runs inside the agent sandbox with the host's loopback (network
//! "shared"), where the model server listens.
//! Run them alone with `cargo test -p autoforge --test cli -- real_agent`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use autoforge::doctor::probe::{ANSWER_WORD, READ_PROBE_TITLE, WRITE_PROBE_TITLE};
use autoforge_journal::testing::TestDatabase;
use modelserver::clis::{self, AgentCli};
use modelserver::{Handle, Script};
use serde_json::Value;

use crate::doctor_cli::{AppShape, Installation, check, shown};

// The real_agents binary's loader of the shipped profiles; this binary
// uses only part of it.
#[allow(dead_code)]
#[path = "../real_agents/profiles.rs"]
mod profiles;

const MARKER: &str = r"(probe-[0-9a-f]{32})";
const KEY: &str = "sk-modelserver-test";
const COMMIT: &str = "git add -A && git commit -qm 'Probe commit' && git rev-parse HEAD";

/// What the model does for a write probe: write the file (by absolute
/// path, or by name for Codex's `apply_patch`), commit, answer the marker.
fn write_script(by_name: bool) -> Script {
    let file = if by_name {
        r"git add (probe-[0-9a-f]{32}\.txt) &&"
    } else {
        r"Create the file (/\S+/probe-[0-9a-f]{32}\.txt) holding"
    };
    Script::new("write-probe", WRITE_PROBE_TITLE)
        .capture_prompt("file", file)
        .capture_prompt("marker", &format!("holding the single line {MARKER}"))
        .write_file("{{file}}", "{{marker}}\n")
        .shell(COMMIT)
        .final_message(format!("{ANSWER_WORD} {{{{marker}}}}"))
}

/// What the model does for a read probe: read the marker file, answer it.
fn read_script() -> Script {
    Script::new("read-probe", READ_PROBE_TITLE)
        .capture_prompt("path", r"Read the file (/\S+/autoforge-probe\.txt)")
        .read_file("{{path}}")
        .capture_result("marker", 0, MARKER)
        .final_message(format!("{ANSWER_WORD} {{{{marker}}}}"))
}

/// The installed CLIs' cache, bound read-only into each launch.
fn cache() -> PathBuf {
    let dir = clis::cache_dir().expect("a cache directory");
    dir.canonicalize().unwrap_or(dir)
}

fn strings(items: &[&str]) -> toml::Value {
    toml::Value::Array(
        items
            .iter()
            .map(|s| toml::Value::String((*s).to_owned()))
            .collect(),
    )
}

/// A profile: argv, environment, usage pattern, sandbox with the network
/// and the CLI cache.
fn profile(command: Vec<String>, env: &[(&str, String)], usage: &str) -> toml::Value {
    let mut table = toml::Table::new();
    table.insert(
        "command".into(),
        toml::Value::Array(command.into_iter().map(toml::Value::String).collect()),
    );
    let env: toml::Table = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), toml::Value::String(v.clone())))
        .collect();
    table.insert("env".into(), toml::Value::Table(env));
    table.insert("usage_pattern".into(), toml::Value::String(usage.into()));
    table.insert("idle_timeout_seconds".into(), toml::Value::Integer(120));
    table.insert("max_runtime_seconds".into(), toml::Value::Integer(300));
    let mut sandbox = toml::Table::new();
    sandbox.insert("network".into(), toml::Value::String("shared".into()));
    sandbox.insert(
        "read_only".into(),
        strings(&[cache().to_str().expect("UTF-8 cache path")]),
    );
    table.insert("sandbox".into(), toml::Value::Table(sandbox));
    toml::Value::Table(table)
}

/// `[agents]` with `profiles`, `implementer` and `fixer` in the writing
/// roles and `reviewer` reviewing and updating the EPIC.
fn agents(
    profiles: Vec<(&str, toml::Value)>,
    implementer: &str,
    fixer: &str,
    reviewer: &str,
) -> String {
    let mut roles = toml::Table::new();
    for (role, name) in [
        ("implement", implementer),
        ("fix", fixer),
        ("update_epic", reviewer),
        ("review", reviewer),
    ] {
        roles.insert(role.into(), toml::Value::String(name.into()));
    }
    let mut agents = toml::Table::new();
    agents.insert(
        "profiles".into(),
        toml::Value::Table(
            profiles
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        ),
    );
    agents.insert("roles".into(), toml::Value::Table(roles));
    let mut document = toml::Table::new();
    document.insert("agents".into(), toml::Value::Table(agents));
    toml::to_string(&document).unwrap()
}

async fn server(by_name: bool) -> Handle {
    let server = modelserver::start(modelserver::Config::default())
        .await
        .unwrap();
    server.load(write_script(by_name)).unwrap();
    server.load(read_script()).unwrap();
    server
}

fn claude(cli: &Path, server: &Handle, tools: &[&str]) -> toml::Value {
    let mut command: Vec<String> = [
        "-p",
        "--output-format",
        "json",
        "--model",
        "claude-sonnet-4-5",
        "--permission-mode",
        "dontAsk",
        "--no-session-persistence",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    command.insert(0, cli.display().to_string());
    command.extend(tools.iter().map(|s| (*s).to_owned()));
    let env = [
        ("ANTHROPIC_BASE_URL", server.base_url().to_owned()),
        ("ANTHROPIC_API_KEY", KEY.to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("DISABLE_ERROR_REPORTING", "1".to_owned()),
    ];
    profile(command, &env, r#""output_tokens":\s*(\d+)"#)
}

/// The probe line of `profile`, printed for `--nocapture`.
fn probe<'a>(report: &'a Value, profile: &str) -> &'a Value {
    let line = check(report, &format!("probe:{profile}"));
    eprintln!("probe:{profile}: {} {}", line["status"], line["detail"]);
    line
}

fn assert_passed(report: &Value, profile: &str, kind: &str) {
    let line = probe(report, profile);
    assert_eq!(line["status"], "ok", "{report:#}");
    assert_eq!(line["probe"]["kind"], kind, "{report:#}");
    assert!(
        line["probe"]["tokens"].as_u64().is_some_and(|t| t > 0),
        "{profile} reported its tokens: {report:#}"
    );
}

fn assert_probes_left_nothing(install: &Installation) {
    let probes = install.state_dir().join("doctor-probes");
    let left = std::fs::read_dir(&probes).map_or(0, Iterator::count);
    assert_eq!(left, 0, "a probe left files in {}", probes.display());
    assert!(!probes.exists(), "the probes' parent directory is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_claude_code_writes_reads_and_a_read_only_writer_is_denied() {
    let Some(cli) = clis::require(AgentCli::ClaudeCode) else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let server = server(false).await;
    let writer = claude(&cli, &server, &["--allowedTools", "Write,Edit,Read,Bash"]);
    let locked = claude(&cli, &server, &["--tools", "Read,Grep,Glob"]);
    let reviewer = claude(&cli, &server, &["--tools", "Read,Grep,Glob"]);
    let config = agents(
        vec![
            ("claude", writer),
            ("claude-locked", locked),
            ("claude-review", reviewer),
        ],
        "claude",
        "claude-locked",
        "claude-review",
    );
    let (output, report) = install.doctor(&config, &["--probe"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    assert_passed(&report, "claude", "write");
    assert_passed(&report, "claude-review", "read");
    let locked = probe(&report, "claude-locked");
    assert_eq!(locked["status"], "fail", "{report:#}");
    assert_eq!(
        locked["probe"]["failure"]["reason"], "writes_denied",
        "{report:#}"
    );
    assert!(
        locked["detail"]
            .as_str()
            .unwrap()
            .contains("permission mode denies writes"),
        "{report:#}"
    );
    assert_probes_left_nothing(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_passes_the_shipped_codex_profiles() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let server = server(true).await;
    let config = shipped(server.base_url(), &installed, "codex");
    let path = profiles::path_with(&installed);
    let env = [
        ("PATH", path.as_str()),
        ("OPENAI_API_KEY", profiles::OPENAI_KEY),
    ];
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    assert!(output.status.success(), "{}", shown(&output));
    assert_passed(&report, "codex", "write");
    assert_passed(&report, "codex-review", "read");
    assert!(
        !report.to_string().contains(profiles::OPENAI_KEY),
        "the key leaked into the report"
    );
    assert_probes_left_nothing(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_passes_the_shipped_opencode_profiles() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let server = server(false).await;
    let config = shipped(server.base_url(), &installed, "opencode");
    let path = profiles::path_with(&installed);
    let env = [
        ("PATH", path.as_str()),
        ("OPENROUTER_API_KEY", profiles::OPENROUTER_KEY),
    ];
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    assert!(output.status.success(), "{}", shown(&output));
    assert_passed(&report, "opencode", "write");
    assert_passed(&report, "opencode-review", "read");
    assert!(
        !report.to_string().contains(profiles::OPENROUTER_KEY),
        "the key leaked into the report"
    );
    assert_probes_left_nothing(&install);
}

/// A model API that refuses every key, in OpenAI's error shape.
async fn refusing_api() -> (String, tokio::task::JoinHandle<()>) {
    refusing_with(serde_json::json!({"error": {
        "message": "Incorrect API key provided",
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }}))
    .await
}

/// A model API that answers every request 401 with `body`.
async fn refusing_with(body: Value) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let refuse = move || {
        let body = body.clone();
        async move { (axum::http::StatusCode::UNAUTHORIZED, axum::Json(body)) }
    };
    let app = axum::Router::new().fallback(refuse);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_shipped_codex_with_a_refused_key_fails_as_auth_refused() {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let (base, api) = refusing_api().await;
    let config = shipped(&base, &installed, "codex");
    let path = profiles::path_with(&installed);
    let env = [
        ("PATH", path.as_str()),
        ("OPENAI_API_KEY", profiles::OPENAI_KEY),
    ];
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    api.abort();
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    for name in ["codex", "codex-review"] {
        let line = probe(&report, name);
        assert_eq!(
            line["probe"]["failure"]["reason"], "auth_refused",
            "{report:#}"
        );
    }
    assert_probes_left_nothing(&install);
}

/// The shipped `<cli>` and `<cli>-review` profiles of
/// `autoforge.example.toml`, aimed at `base` (only base URLs, the CLI cache
/// and the roles differ), the writer implementing and fixing, the reviewer
/// reviewing and updating the EPIC.
fn shipped(base: &str, installed: &profiles::Installed, cli: &str) -> String {
    let roles = format!(
        "implement = \"{cli}\"\nfix = \"{cli}\"\nupdate_epic = \"{cli}-review\"\n\
         review = \"{cli}-review\"\n"
    );
    let text = profiles::example_agents_routed(base, installed, Some(&roles));
    let mut document: toml::Table = text.parse().unwrap();
    let agents = document["agents"].as_table_mut().unwrap();
    let shipped = agents["profiles"].as_table_mut().unwrap();
    shipped.retain(|name, _| name == cli || *name == format!("{cli}-review"));
    assert_eq!(shipped.len(), 2, "the example ships {cli} and {cli}-review");
    toml::to_string(&document).unwrap()
}

/// The shipped `claude` and `claude-review` profiles of
/// `autoforge.example.toml`, aimed at `server` (the only change), with
/// `fixer` in the fix role.
fn shipped_claude(server: &Handle, installed: &profiles::Installed, fixer: &str) -> String {
    let roles = format!(
        "implement = \"claude\"\nfix = \"{fixer}\"\nupdate_epic = \"claude-review\"\n\
         review = \"claude-review\"\n"
    );
    let text = profiles::example_agents_routed(server.base_url(), installed, Some(&roles));
    let mut document: toml::Table = text.parse().unwrap();
    let agents = document["agents"].as_table_mut().unwrap();
    let shipped = agents["profiles"].as_table_mut().unwrap();
    shipped.retain(|name, _| name.starts_with("claude"));
    assert_eq!(
        shipped.len(),
        2,
        "the example ships claude and claude-review"
    );
    toml::to_string(&document).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_passes_the_shipped_claude_profiles_and_fails_the_reviewer_as_a_fixer()
 {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let server = server(false).await;
    let path = profiles::path_with(&installed);
    let env = [
        ("PATH", path.as_str()),
        ("ANTHROPIC_API_KEY", profiles::ANTHROPIC_KEY),
    ];
    let config = shipped_claude(&server, &installed, "claude");
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    assert!(output.status.success(), "{}", shown(&output));
    assert_passed(&report, "claude", "write");
    assert_passed(&report, "claude-review", "read");
    // The read-only reviewer in a writing seat: its tools refuse the write.
    let config = shipped_claude(&server, &installed, "claude-review");
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let line = probe(&report, "claude-review");
    assert_eq!(
        line["probe"]["failure"]["reason"], "writes_denied",
        "{report:#}"
    );
    assert!(
        !report.to_string().contains(profiles::ANTHROPIC_KEY),
        "the key leaked into the report"
    );
    assert_probes_left_nothing(&install);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agent_doctor_probe_shipped_claude_with_a_refused_key_fails_as_auth_refused_within_seconds()
 {
    let Some(installed) = profiles::installed() else {
        return;
    };
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    // The Messages API's answer to a key it does not know.
    let (base, api) = refusing_with(serde_json::json!({
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }))
    .await;
    let config = shipped(&base, &installed, "claude");
    let path = profiles::path_with(&installed);
    let env = [
        ("PATH", path.as_str()),
        ("ANTHROPIC_API_KEY", profiles::ANTHROPIC_KEY),
    ];
    let started = std::time::Instant::now();
    let (output, report) = install.doctor_with_env(&config, &["--probe"], &env).await;
    let took = started.elapsed();
    api.abort();
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    for name in ["claude", "claude-review"] {
        let line = probe(&report, name);
        assert_eq!(
            line["probe"]["failure"]["reason"], "auth_refused",
            "{report:#}"
        );
    }
    // Two probes, each over after Claude Code's three retries (a few
    // seconds), far from the 120 s it spent retrying silently before.
    assert!(took < std::time::Duration::from_secs(60), "took {took:?}");
    assert!(
        !report.to_string().contains(profiles::ANTHROPIC_KEY),
        "the key leaked into the report"
    );
    assert_probes_left_nothing(&install);
}
