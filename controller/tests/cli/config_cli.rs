//! The `autoforge config` commands, run as the real binary with a controlled
//! environment (cleared, then only what each test sets).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_autoforge");

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// Runs the binary in the sandbox directory with only `HOME` and `vars`
    /// in its environment.
    fn run(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let output = Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("HOME", self.dir.path())
            .envs(vars.iter().copied())
            .output()
            .expect("run autoforge");
        Run(output)
    }
}

struct Run(Output);

impl Run {
    fn code(&self) -> Option<i32> {
        self.0.status.code()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    fn assert_refused_with(&self, needles: &[&str]) {
        let stderr = self.stderr();
        assert_eq!(self.code(), Some(1), "stderr: {stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
        }
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

#[test]
fn unknown_key_is_named_with_its_path_and_rule() {
    let sandbox = Sandbox::new();
    let file = sandbox.file("a.toml", "[github]\nbogus = 1\n");
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&["github.bogus", "additionalProperties", "unknown key"]);
}

#[test]
fn wrong_type_is_named_with_the_type_rule() {
    let sandbox = Sandbox::new();
    let file = sandbox.file("a.toml", "[poll]\ninterval_seconds = \"often\"\n");
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&["poll.interval_seconds", "[rule: type]"]);
}

#[test]
fn every_problem_is_listed_in_one_run() {
    let sandbox = Sandbox::new();
    let file = sandbox.file(
        "a.toml",
        "bogus = true\n[merge]\nmode = \"yolo\"\n[server]\nlisten = \"here\"\n",
    );
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&["3 problem(s)", "bogus", "merge.mode", "server.listen"]);
}

#[test]
fn environment_override_wins_over_the_file_and_is_validated() {
    let sandbox = Sandbox::new();
    // The file's value is invalid, but the environment replaces it before
    // validation, so the check passes.
    let file = sandbox.file("a.toml", "[server]\nlisten = \"not an address\"\n");
    let run = sandbox.run(
        &["config", "check", path_str(&file)],
        &[("AUTOFORGE_SERVER_LISTEN", "0.0.0.0:9000")],
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());

    let file = sandbox.file("b.toml", "[server]\nlisten = \"127.0.0.1:8080\"\n");
    sandbox
        .run(
            &["config", "check", path_str(&file)],
            &[
                ("AUTOFORGE_SERVER_LISTEN", "nowhere"),
                ("AUTOFORGE_POLL_INTERVAL_SECONDS", "1"),
            ],
        )
        .assert_refused_with(&[
            "server.listen (from AUTOFORGE_SERVER_LISTEN)",
            "poll.interval_seconds (from AUTOFORGE_POLL_INTERVAL_SECONDS)",
            "[rule: minimum]",
        ]);
}

#[test]
fn starts_with_no_config_file_at_all() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(
        &["config", "check"],
        &[
            ("AUTOFORGE_GITHUB_TOKEN", "ghp_fromenv"),
            ("AUTOFORGE_WEBHOOK_SECRET", "s"),
        ],
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(
        run.stdout(),
        "ok: no config file, environment only\n\
         webhook listener: 127.0.0.1:8080 (/webhook, /healthz, /readyz)\n\
         admin listener: 127.0.0.1:8081 (dashboard, /metrics, /healthz, /readyz); \
         dashboard and /metrics served without a token (loopback address)\n"
    );
    assert!(!run.stderr().contains("ghp_fromenv"));
}

#[test]
fn config_file_is_found_through_the_flag_the_variable_and_the_working_directory() {
    let sandbox = Sandbox::new();
    let named = sandbox.file("named.toml", "");
    let source = |run: &Run| run.stdout().lines().next().unwrap_or_default().to_owned();
    let run = sandbox.run(&["--config", path_str(&named), "config", "check"], &[]);
    assert_eq!(source(&run), format!("ok: {}", named.display()));
    let run = sandbox.run(
        &["config", "check"],
        &[("AUTOFORGE_CONFIG", path_str(&named))],
    );
    assert_eq!(source(&run), format!("ok: {}", named.display()));
    sandbox.file("autoforge.toml", "");
    let run = sandbox.run(&["config", "check"], &[]);
    assert!(source(&run).ends_with("autoforge.toml"), "{}", run.stdout());
}

#[test]
fn missing_config_file_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox
        .run(&["--config", "absent.toml", "config", "check"], &[])
        .assert_refused_with(&["cannot read config file absent.toml"]);
}

#[test]
fn secret_keys_in_the_file_are_refused_with_a_hint_and_not_echoed() {
    let sandbox = Sandbox::new();
    let file = sandbox.file(
        "a.toml",
        "webhook_secret = \"hunter2-value\"\n[github]\ntoken = \"ghp_secretvalue\"\n",
    );
    let run = sandbox.run(&["config", "check", path_str(&file)], &[]);
    run.assert_refused_with(&[
        "webhook_secret: unknown key; secrets are never read from the config file, set AUTOFORGE_WEBHOOK_SECRET",
        "github.token: unknown key; secrets are never read from the config file, set AUTOFORGE_GITHUB_TOKEN",
    ]);
    assert!(!run.stderr().contains("hunter2-value"));
    assert!(!run.stderr().contains("ghp_secretvalue"));
}

#[test]
fn role_naming_an_undefined_profile_is_refused() {
    let sandbox = Sandbox::new();
    let file = sandbox.file(
        "a.toml",
        "[agents.profiles.claude]\ncommand = [\"claude\"]\n[agents.roles]\nimplement = \"claude\"\nfix = \"ghost\"\n",
    );
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&[
            "agents.roles.fix",
            "profile `ghost` is not defined",
            "[rule: profile-defined]",
        ]);
}

#[test]
fn overlapping_review_ranges_are_refused() {
    let sandbox = Sandbox::new();
    let file = sandbox.file(
        "a.toml",
        concat!(
            "[agents.profiles.a]\ncommand = [\"a\"]\n",
            "[agents.profiles.b]\ncommand = [\"b\"]\n",
            "[agents.roles]\nreview = [{ rounds = \"1-3\", profile = \"a\" }, { rounds = \"3+\", profile = \"b\" }]\n",
        ),
    );
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&[
            "agents.roles.review",
            "rounds 1-3 and 3+ overlap",
            "[rule: round-coverage]",
        ]);
}

#[test]
fn example_config_passes_the_check() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../autoforge.example.toml");
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["config", "check", path_str(&example)], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(run.stdout().starts_with("ok: "), "{}", run.stdout());
    // The example sets every role, so nothing is left to warn about.
    assert_eq!(run.stderr(), "");
}

#[test]
fn schema_command_prints_a_valid_draft_2020_12_schema() {
    let run = Sandbox::new().run(&["config", "schema"], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let schema: Value = serde_json::from_str(&run.stdout()).expect("stdout is JSON");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    jsonschema::draft202012::meta::validate(&schema).expect("a valid 2020-12 schema");
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/config.schema.json"),
    )
    .expect("schema file");
    assert_eq!(run.stdout(), shipped);
}

#[test]
fn schema_command_works_even_when_the_config_is_broken() {
    let sandbox = Sandbox::new();
    sandbox.file("autoforge.toml", "this is not toml");
    let run = sandbox.run(&["config", "schema"], &[]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
}

#[test]
fn usage_errors_exit_with_status_two() {
    let run = Sandbox::new().run(&["config", "frobnicate"], &[]);
    assert_eq!(run.code(), Some(2));
    let run = Sandbox::new().run(&["-v", "-q", "config", "schema"], &[]);
    assert_eq!(run.code(), Some(2));
}

#[test]
fn toml_syntax_error_gives_the_position() {
    let sandbox = Sandbox::new();
    let file = sandbox.file("a.toml", "[server]\nlisten = \n");
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&["a.toml:2:", "invalid TOML"]);
}

#[test]
fn agents_can_be_configured_from_the_environment_alone() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(
        &["config", "check"],
        &[
            (
                "AUTOFORGE_AGENTS_PROFILES",
                r#"{"claude": {"command": ["claude", "-p"]}}"#,
            ),
            ("AUTOFORGE_AGENTS_ROLES_IMPLEMENT", "claude"),
            ("AUTOFORGE_AGENTS_ROLES_FIX", "claude"),
            ("AUTOFORGE_AGENTS_ROLES_UPDATE_EPIC", "claude"),
            ("AUTOFORGE_AGENTS_ROLES_REVIEW", "claude"),
            (
                "AUTOFORGE_VALIDATION_COMMANDS",
                r#"["make check", ["cargo", "test"]]"#,
            ),
        ],
    );
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(run.stderr(), "", "no warning expected");

    sandbox
        .run(
            &["config", "check"],
            &[(
                "AUTOFORGE_AGENTS_PROFILES",
                r#"{"claude": {"command": []}}"#,
            )],
        )
        .assert_refused_with(&[
            "agents.profiles.claude.command (from AUTOFORGE_AGENTS_PROFILES)",
            "[rule: minItems]",
        ]);
}

#[test]
fn a_misspelt_variable_is_an_error_naming_it_and_the_name_it_resembles() {
    Sandbox::new()
        .run(
            &["config", "check"],
            &[("AUTOFORGE_SERVER_LISTNE", "0.0.0.0:1")],
        )
        .assert_refused_with(&[
            "AUTOFORGE_SERVER_LISTNE: autoforge reads no variable of this name; did you mean AUTOFORGE_SERVER_LISTEN?",
            "[rule: unknown-variable]",
        ]);
}

#[test]
fn serve_refuses_to_start_with_an_unknown_variable() {
    let run = Sandbox::new().run(
        &["serve"],
        &[
            ("AUTOFORGE_WEBHOOK_SECRET", "s"),
            ("AUTOFORGE_WEBHOOK_PAHT", "/hooks"),
        ],
    );
    run.assert_refused_with(&[
        "AUTOFORGE_WEBHOOK_PAHT: autoforge reads no variable of this name; did you mean AUTOFORGE_WEBHOOK_PATH?",
    ]);
    assert!(!run.stderr().contains("/hooks"), "{}", run.stderr());
}

#[test]
fn the_removed_user_agent_key_is_refused_as_unknown() {
    let sandbox = Sandbox::new();
    let file = sandbox.file("a.toml", "[github]\nuser_agent = \"me\"\n");
    sandbox
        .run(&["config", "check", path_str(&file)], &[])
        .assert_refused_with(&["github.user_agent", "unknown key", "additionalProperties"]);
}
