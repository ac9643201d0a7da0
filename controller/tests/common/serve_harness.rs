//! A reusable end-to-end harness: fakehub as GitHub, a fresh journal
//! database, and the real `autoforge serve` binary as a child process with
//! a controlled environment, its webhook URL registered with fakehub's App.
//! Tests act as people through fakehub's REST API and assert on the journal
//! and on fakehub's request log.
//!
//! Included with `mod serve_harness;` by the `serve_*` test files; compiled
//! alone it is an empty test binary.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use autoforge_journal::Journal;
use autoforge_journal::testing::TestDatabase;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

pub const OWNER: &str = "octo";
pub const REPO: &str = "widgets";
pub const APP_SLUG: &str = "autoforge-e2e";
pub const WEBHOOK_SECRET: &str = "e2e-webhook-secret";
pub const POLL_SECONDS: u64 = 5;

/// One running world: fakehub, the database and `autoforge serve`.
pub struct World {
    pub hub: fakehub::Handle,
    pub db: TestDatabase,
    pub serve: Child,
    /// `http://127.0.0.1:PORT` of the serve process.
    pub serve_url: String,
    pub owner_token: String,
    pub http: reqwest::Client,
    /// The App's id and private key, to act as the App (e.g. redeliver).
    pub app_id: u64,
    pub app_key: secrecy::SecretString,
    pub state: tempfile::TempDir,
    /// How serve was started, to start it again after a crash.
    pub options: WorldOptions,
    port: u16,
}

/// Variations of the world.
#[derive(Debug, Clone, Default)]
pub struct WorldOptions {
    /// No `DATABASE_URL`: serve starts its managed Postgres under the state dir.
    pub managed_database: bool,
    /// Written as `autoforge.toml` in serve's working directory; `{hub}`
    /// is replaced by fakehub's base URL, which is known only once it runs.
    pub config_toml: Option<String>,
    /// Extra environment for the first serve process only (a restart
    /// names its own), e.g. `AUTOFORGE_CRASH_AT`.
    pub env: Vec<(String, String)>,
}

/// A person acting on fakehub with their own token.
#[derive(Clone)]
pub struct Person {
    pub login: String,
    pub token: String,
}

/// A port nobody listens on right now; the serve process binds it next.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    listener.local_addr().expect("probe address").port()
}

impl World {
    /// Starts everything and waits until `/readyz` answers 200.
    pub async fn start() -> World {
        Self::start_with(WorldOptions::default()).await
    }

    pub async fn start_with(options: WorldOptions) -> World {
        let db = TestDatabase::fresh().await;
        let hub = fakehub::start(fakehub::Config::default())
            .await
            .expect("start fakehub");
        let owner = hub
            .create_user(OWNER, fakehub::world::UserKind::User)
            .expect("create the owner");
        hub.create_repo(&fakehub::RepoSpec {
            owner: OWNER.into(),
            name: REPO.into(),
            default_branch: "main".into(),
            private: true,
            files: [("README.md".to_owned(), "widgets\n".to_owned())].into(),
            required_checks: vec![],
        })
        .await
        .expect("create the repository");
        let port = free_port();
        let serve_url = format!("http://127.0.0.1:{port}");
        let app = hub
            .create_app(&fakehub::NewApp {
                slug: APP_SLUG.into(),
                owner: Some(OWNER.into()),
                webhook_url: Some(format!("{serve_url}/webhook")),
                webhook_secret: Some(WEBHOOK_SECRET.into()),
                permissions: [
                    ("issues", "write"),
                    ("pull_requests", "write"),
                    ("contents", "write"),
                    ("metadata", "read"),
                    // The driver reads a PR head's checks and statuses once it is open.
                    ("checks", "read"),
                    ("statuses", "read"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
                events: vec![],
            })
            .await
            .expect("create the app");
        hub.install(
            app.id,
            &fakehub::NewInstallation {
                account: OWNER.into(),
                repositories: vec![REPO.into()],
            },
        )
        .expect("install the app");

        let state = tempfile::tempdir().expect("state dir");
        let key_file = state.path().join("app.pem");
        std::fs::write(&key_file, app.private_key_pem.expose_secret()).expect("write the key");
        if let Some(toml) = &options.config_toml {
            let toml = toml.replace("{hub}", hub.base_url());
            std::fs::write(state.path().join("autoforge.toml"), toml).expect("write the config");
        }
        let mut command = full_serve_command(&hub, &db, &options, state.path(), app.id, port);
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
        let serve = spawn_and_wait_for_listening(command);
        let world = World {
            hub,
            db,
            serve,
            serve_url,
            owner_token: owner.token.expose_secret().to_owned(),
            http: reqwest::Client::new(),
            app_id: app.id,
            app_key: secrecy::SecretString::from(app.private_key_pem.expose_secret().to_owned()),
            state,
            options,
            port,
        };
        world.wait_ready().await;
        world
    }

    /// Waits up to `timeout` for the serve process to end by itself (a
    /// crash point aborts it); `None` if it is still running.
    pub async fn wait_for_serve_exit(
        &mut self,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.serve.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A second `autoforge serve` on the same database and fakehub (a
    /// replica), on its own port and state directory; GitHub's webhooks
    /// still go to the first. The caller ends it.
    pub async fn start_replica(&self, state_dir: &Path) -> Child {
        std::fs::copy(self.state.path().join("app.pem"), state_dir.join("app.pem"))
            .expect("copy the App key");
        let config = self.state.path().join("autoforge.toml");
        if config.exists() {
            std::fs::copy(&config, state_dir.join("autoforge.toml")).expect("copy the config");
        }
        let command = full_serve_command(
            &self.hub,
            &self.db,
            &self.options,
            state_dir,
            self.app_id,
            free_port(),
        );
        spawn_and_wait_for_listening(command)
    }

    /// Starts serve again on the same port, database and state directory
    /// (after the previous process ended), with `env` added.
    pub async fn restart_serve(&mut self, env: &[(&str, &str)]) {
        assert!(
            !matches!(self.serve.try_wait(), Ok(None)),
            "the previous serve process is still running"
        );
        let mut command = full_serve_command(
            &self.hub,
            &self.db,
            &self.options,
            self.state.path(),
            self.app_id,
            self.port,
        );
        command.envs(env.iter().copied());
        self.serve = spawn_and_wait_for_listening(command);
        self.wait_ready().await;
    }

    pub fn journal(&self) -> &Journal {
        self.db.journal()
    }

    pub fn owner(&self) -> Person {
        Person {
            login: OWNER.into(),
            token: self.owner_token.clone(),
        }
    }

    /// A new user with `permission` (`read`, `write`, `admin`, …) on the repository.
    pub fn person(&self, login: &str, permission: &str) -> Person {
        let user = self
            .hub
            .create_user(login, fakehub::world::UserKind::User)
            .expect("create a user");
        self.hub
            .set_collaborator(OWNER, REPO, login, permission)
            .expect("grant a permission");
        Person {
            login: login.into(),
            token: user.token.expose_secret().to_owned(),
        }
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self
                .http
                .get(format!("{}/readyz", self.serve_url))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "autoforge serve never became ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A REST call to fakehub as `person`; panics unless it succeeds.
    pub async fn api(
        &self,
        person: &Person,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> Value {
        let response = self
            .http
            .request(method, format!("{}{path}", self.hub.base_url()))
            .header("authorization", format!("token {}", person.token))
            .header("user-agent", "autoforge-e2e")
            .json(&body)
            .send()
            .await
            .expect("fakehub answers");
        let status = response.status();
        let text = response.text().await.expect("body");
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub async fn open_issue(&self, person: &Person, title: &str) -> u64 {
        let issue = self
            .api(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{REPO}/issues"),
                json!({"title": title, "body": "please"}),
            )
            .await;
        issue["number"].as_u64().expect("issue number")
    }

    pub async fn add_label(&self, person: &Person, issue: u64, label: &str) {
        self.api(
            person,
            reqwest::Method::POST,
            &format!("/repos/{OWNER}/{REPO}/issues/{issue}/labels"),
            json!({"labels": [label]}),
        )
        .await;
    }

    pub async fn comment(&self, person: &Person, issue: u64, body: &str) -> u64 {
        let comment = self
            .api(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{REPO}/issues/{issue}/comments"),
                json!({"body": body}),
            )
            .await;
        comment["id"].as_u64().expect("comment id")
    }

    /// The active run for `issue`, once the dispatcher created it.
    pub async fn run_for(&self, issue: u64) -> autoforge_journal::RunId {
        let repository = self.repository();
        eventually(Duration::from_secs(20), "a run for the issue", || {
            let repository = repository.clone();
            async move {
                self.journal()
                    .active_run_for_issue(&repository, i64::try_from(issue).unwrap())
                    .await
                    .unwrap()
                    .map(|run| run.id)
            }
        })
        .await
    }

    /// The full name the journal uses.
    pub fn repository(&self) -> String {
        format!("{OWNER}/{REPO}")
    }

    /// Requests fakehub answered whose route matches `route`.
    pub fn requests_to(&self, route: &str) -> Vec<fakehub::world::RequestRecord> {
        self.hub
            .requests()
            .into_iter()
            .filter(|r| r.route == route)
            .collect()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.serve)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if matches!(self.serve.try_wait(), Ok(None)) {
            let _status = terminate(&mut self.serve);
        }
    }
}

/// The path of a scripted agent in `tests/agents/`.
pub fn agent_path(script: &str) -> String {
    format!("{}/../tests/agents/{script}", env!("CARGO_MANIFEST_DIR"))
}

/// A TOML argv array running the scripted agent `script` with `args`.
pub fn agent_command(script: &str, args: &[&str]) -> String {
    let mut argv = vec![format!("\"{}\"", agent_path(script))];
    argv.extend(args.iter().map(|a| format!("\"{a}\"")));
    format!("[{}]", argv.join(", "))
}

/// The serve command of a world: its database, fakehub, App and port.
fn full_serve_command(
    hub: &fakehub::Handle,
    db: &TestDatabase,
    options: &WorldOptions,
    state_dir: &Path,
    app_id: u64,
    port: u16,
) -> Command {
    let mut command = serve_command(state_dir);
    if !options.managed_database {
        command.env("DATABASE_URL", db.url().expose_secret());
    }
    command
        .env("AUTOFORGE_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("AUTOFORGE_GITHUB_API_URL", hub.base_url())
        .env("AUTOFORGE_GITHUB_APP_ID", app_id.to_string())
        .env(
            "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE",
            state_dir.join("app.pem"),
        )
        .env("AUTOFORGE_SERVER_LISTEN", format!("127.0.0.1:{port}"))
        .env("AUTOFORGE_POLL_INTERVAL_SECONDS", POLL_SECONDS.to_string());
    command
}

/// `autoforge serve` with a clean environment: only what the test sets.
pub fn serve_command(state_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_autoforge"));
    command
        .arg("serve")
        .arg("--state-dir")
        .arg(state_dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", state_dir)
        .env("RUST_LOG", "autoforge=debug,info")
        .env("AUTOFORGE_LOGGING_FORMAT", "human")
        .current_dir(state_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

fn spawn_and_wait_for_listening(mut command: Command) -> Child {
    let mut child = command.spawn().expect("spawn autoforge serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _sent = sender.send(line);
        }
        // Keep draining so the child never blocks on a full pipe.
        for _line in lines {}
    });
    match receiver.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => assert!(
            line.starts_with("listening on"),
            "unexpected first line {line}"
        ),
        Err(_) => {
            let status = child.try_wait();
            panic!("autoforge serve did not start listening: {status:?}");
        }
    }
    child
}

/// Sends SIGTERM to `child` and waits for it (SIGKILL after 20 s).
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    let _sent = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        if Instant::now() > deadline {
            let _killed = child.kill();
            return child.wait().expect("wait for the killed child");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `check` every 100 ms until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
