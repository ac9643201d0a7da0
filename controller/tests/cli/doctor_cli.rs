//! `autoforge doctor`, run as the real binary against fakehub (the App, its
//! webhook configuration and its deliveries), a real Postgres and agent
//! programs on disk: everything passing, and each failure named with what to
//! do, exit status 1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use autoforge::github::permissions::{APP_EVENTS, APP_PERMISSIONS};
use autoforge_journal::testing::TestDatabase;
use secrecy::ExposeSecret;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_autoforge");
const SECRET: &str = "doctor-webhook-secret";

/// What the App on fakehub holds.
pub struct AppShape {
    pub permissions: Vec<(String, String)>,
    pub events: Vec<String>,
    pub webhook_path: &'static str,
    /// Whether anything answers at the webhook URL (else deliveries fail).
    pub receiver: bool,
}

impl AppShape {
    /// Exactly what the code needs, with a webhook that answers.
    pub fn complete() -> AppShape {
        AppShape {
            permissions: APP_PERMISSIONS
                .iter()
                .map(|g| (g.permission.to_owned(), g.access.as_str().to_owned()))
                .collect(),
            events: APP_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
            webhook_path: "/webhook",
            receiver: true,
        }
    }
}

/// fakehub with one App, a database, and a directory for the config,
/// the state and the agent programs.
pub struct Installation {
    pub hub: fakehub::Handle,
    pub db: TestDatabase,
    pub dir: tempfile::TempDir,
    app_id: u64,
    key_file: PathBuf,
    receiver: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Installation {
    fn drop(&mut self) {
        if let Some(task) = self.receiver.take() {
            task.abort();
        }
    }
}

/// A listener that answers 200 to every webhook delivery.
async fn webhook_receiver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(|| async { "ok" });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, task)
}

impl Installation {
    pub async fn new(shape: AppShape, db: TestDatabase) -> Installation {
        let hub = fakehub::start(fakehub::Config::default()).await.unwrap();
        let (base, receiver) = if shape.receiver {
            let (base, task) = webhook_receiver().await;
            (base, Some(task))
        } else {
            // A port that was free a moment ago: nothing answers there.
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            (format!("http://{}", probe.local_addr().unwrap()), None)
        };
        let app = hub
            .create_app(&fakehub::NewApp {
                slug: "doctor-app".into(),
                owner: None,
                webhook_url: Some(format!("{base}{}", shape.webhook_path)),
                webhook_secret: Some(SECRET.into()),
                permissions: shape.permissions.into_iter().collect(),
                events: shape.events,
            })
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("app.pem");
        std::fs::write(&key_file, app.private_key_pem.expose_secret()).unwrap();
        let installation = Installation {
            hub,
            db,
            dir,
            app_id: app.id,
            key_file,
            receiver,
        };
        installation.wait_for_deliveries().await;
        installation
    }

    /// Until fakehub has an answer (or a failure) for every delivery.
    async fn wait_for_deliveries(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.hub.deliveries().iter().any(|d| d.status == "pending") {
            assert!(Instant::now() < deadline, "a delivery stayed pending");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// An executable shell script in `agents/` beside the state directory.
    pub fn agent(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.dir.path().join("agents");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Runs `autoforge doctor --json ARGS` with a config holding `agents`
    /// (TOML) and returns the output with the parsed report.
    pub async fn doctor(&self, agents: &str, args: &[&str]) -> (Output, Value) {
        self.doctor_with_env(agents, args, &[]).await
    }

    /// [`Installation::doctor`] with `env` added to (or replacing in) the
    /// command's environment: the vendor keys profiles inherit, a `PATH`.
    pub async fn doctor_with_env(
        &self,
        agents: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Value) {
        let github = format!("app_id = {}\n", self.app_id);
        let key = self.key_file.display().to_string();
        let auth = ("AUTOFORGE_GITHUB_PRIVATE_KEY_FILE", key.as_str());
        self.doctor_env(&github, auth, agents, args, env).await
    }

    /// [`Installation::doctor`] with `github` added to the `[github]`
    /// table and `auth` as the one credential variable.
    pub async fn doctor_as(
        &self,
        github: &str,
        auth: (&str, &str),
        agents: &str,
        args: &[&str],
    ) -> (Output, Value) {
        self.doctor_env(github, auth, agents, args, &[]).await
    }

    async fn doctor_env(
        &self,
        github: &str,
        auth: (&str, &str),
        agents: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Value) {
        let config = self.dir.path().join("autoforge.toml");
        let text = format!(
            "[github]\napi_url = \"{}\"\n{github}\n{agents}\n",
            self.hub.base_url(),
        );
        std::fs::write(&config, text).unwrap();
        let output = tokio::process::Command::new(BIN)
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(["doctor", "--json"])
            .args(args)
            .env_clear()
            .env("HOME", self.dir.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DATABASE_URL", self.db.url().expose_secret())
            .env(auth.0, auth.1)
            .envs(env.iter().copied())
            .env("AUTOFORGE_WEBHOOK_SECRET", SECRET)
            .current_dir(self.dir.path())
            .output()
            .await
            .expect("autoforge doctor runs");
        let report = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("doctor printed no JSON ({e}): {}", shown(&output)));
        (output, report)
    }
}

pub fn shown(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The check named `name` in a `--json` report.
pub fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report:#}"))
}

/// Every profile routed to one program.
pub fn one_profile(program: &Path) -> String {
    format!(
        "[agents.profiles.shell]\ncommand = [\"{}\"]\n[agents.roles]\nimplement = \"shell\"\n\
         review = \"shell\"\nfix = \"shell\"\nupdate_epic = \"shell\"\n",
        program.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_every_check_against_a_complete_app_a_migrated_database_and_a_present_agent()
{
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let agent = install.agent("agent.sh", "exit 0\n");
    let (output, report) = install.doctor(&one_profile(&agent), &[]).await;
    assert!(output.status.success(), "{}", shown(&output));
    assert_eq!(report["ok"], true, "{report:#}");
    for name in [
        "config",
        "git",
        "sandbox",
        "agent:shell",
        "prompts",
        "database",
        "github",
        "github:permissions",
        "github:events",
        "github:webhook",
        "github:deliveries",
    ] {
        assert_eq!(check(&report, name)["status"], "ok", "{name}: {report:#}");
    }
    assert!(
        check(&report, "github:deliveries")["detail"]
            .as_str()
            .unwrap()
            .contains("arrived"),
        "the App's ping was delivered: {report:#}"
    );
    // Doctor reads GitHub; it writes nothing there.
    let writes: Vec<_> = install
        .hub
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(writes.is_empty(), "doctor wrote to GitHub: {writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_missing_permission_and_event_the_wrong_webhook_path_and_pending_migrations()
 {
    let mut shape = AppShape::complete();
    shape
        .permissions
        .retain(|(permission, _)| permission != "checks");
    for (permission, level) in &mut shape.permissions {
        if permission == "pull_requests" {
            *level = "read".into();
        }
    }
    shape.events.retain(|e| e != "check_suite");
    shape.webhook_path = "/hooks";
    let install = Installation::new(shape, TestDatabase::fresh_unmigrated().await).await;
    let (output, report) = install
        .doctor(&one_profile(Path::new("/nonexistent/agent-cli")), &[])
        .await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    assert_eq!(report["ok"], false);
    let failed = |name: &str, says: &str, fix: &str| {
        let check = check(&report, name);
        assert_eq!(check["status"], "fail", "{name}: {report:#}");
        let detail = check["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{name}: {detail}");
        let told = check["fix"].as_str().unwrap();
        assert!(told.contains(fix), "{name}: {told}");
    };
    failed(
        "github:permissions",
        "Pull requests needs write (has read)",
        "settings page",
    );
    failed("github:permissions", "Checks needs write (has none)", "");
    failed(
        "github:events",
        "not subscribed to check_suite",
        "subscribe",
    );
    failed("github:webhook", "does not end in /webhook", "/webhook");
    failed("database", "migrations are pending", "autoforge migrate");
    failed("agent:shell", "/nonexistent/agent-cli", "install the CLI");
    assert_eq!(check(&report, "github")["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_failed_deliveries_from_the_apps_delivery_log() {
    let shape = AppShape {
        receiver: false,
        ..AppShape::complete()
    };
    let install = Installation::new(shape, TestDatabase::fresh().await).await;
    let agent = install.agent("agent.sh", "exit 0\n");
    let (output, report) = install.doctor(&one_profile(&agent), &[]).await;
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let deliveries = check(&report, "github:deliveries");
    assert_eq!(deliveries["status"], "fail", "{report:#}");
    let detail = deliveries["detail"].as_str().unwrap();
    assert!(
        detail.contains("1 of the last 1 deliveries failed: ping"),
        "{detail}"
    );
}

#[test]
fn a_configuration_that_does_not_load_fails_its_line_and_the_host_is_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("autoforge.toml");
    std::fs::write(&config, "[merge]\nmode = \"sometimes\"\n").unwrap();
    let output = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .arg("doctor")
        .env_clear()
        .env("HOME", dir.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", shown(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?} in:\n{text}"))
            .to_owned()
    };
    assert!(
        line("FAIL config:").contains("-> fix each problem listed"),
        "{text}"
    );
    assert!(line("FAIL config:").contains("merge.mode"), "{text}");
    line("OK   git:");
    line("OK   sandbox:");
    line("SKIP database:");
    line("SKIP github:");
    assert!(text.ends_with("doctor: 1 check(s) failed\n"), "{text}");
}

/// `autoforge --state-dir STATE ARGS` with no database configured, so
/// the managed cluster under STATE is the one used.
async fn managed(state: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env_clear()
        .env("HOME", state)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_a_running_managed_database_and_leaves_it_running() {
    use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
    // A state directory the unprivileged Postgres account can traverse.
    let state = tempfile::Builder::new()
        .prefix("af-doctor")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let migrated = managed(state.path(), &["migrate"]).await;
    assert!(migrated.status.success(), "{}", shown(&migrated));
    let cluster = state.path().join("postgres");
    // The cluster serve would run on.
    let server = tokio::task::spawn_blocking({
        let cluster = cluster.clone();
        move || LocalPostgres::start(&cluster, LocalPgOptions::persistent())
    })
    .await
    .unwrap()
    .unwrap();
    let database_line = |output: &Output| {
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        check(&report, "database").clone()
    };
    let output = managed(state.path(), &["doctor", "--json"]).await;
    assert_eq!(database_line(&output)["status"], "ok", "{}", shown(&output));
    let pid = cluster.join("data/postmaster.pid");
    assert!(pid.is_file(), "doctor stopped the running cluster");
    let alive = Path::new(&format!("/proc/{}", server.postmaster_pid())).exists();
    assert!(alive, "the cluster's postmaster is gone");
    tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
    // Stopped, doctor starts it for its look and stops it again.
    let output = managed(state.path(), &["doctor", "--json"]).await;
    assert_eq!(database_line(&output)["status"], "ok", "{}", shown(&output));
    assert!(!pid.exists(), "doctor left the cluster it started running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_with_a_token_checks_who_it_is_and_has_no_app_permissions_to_compare() {
    let install = Installation::new(AppShape::complete(), TestDatabase::fresh().await).await;
    let user = install
        .hub
        .create_user("doctor-user", fakehub::world::UserKind::User)
        .unwrap();
    let agent = install.agent("agent.sh", "exit 0\n");
    let token = user.token.expose_secret().to_owned();
    let (output, report) = install
        .doctor_as(
            "",
            ("AUTOFORGE_GITHUB_TOKEN", &token),
            &one_profile(&agent),
            &[],
        )
        .await;
    assert!(output.status.success(), "{}", shown(&output));
    let github = check(&report, "github");
    assert_eq!(github["status"], "ok", "{report:#}");
    assert!(
        github["detail"].as_str().unwrap().contains("doctor-user"),
        "{report:#}"
    );
    assert_eq!(check(&report, "github:permissions")["status"], "skipped");
    let shown_report = report.to_string();
    assert!(
        !shown_report.contains(&token),
        "the token leaked: {shown_report}"
    );
}
