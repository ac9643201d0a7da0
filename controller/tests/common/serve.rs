//! The real `autoforge serve` in the world: a child process with a
//! controlled environment, its webhook URL registered with fakehub's App.
//! Tests act as people through fakehub's REST API and assert on the journal
//! and on fakehub's request log.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use autoforge_journal::testing::TestDatabase;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::git::agent_script;
use super::world::{NAME, OWNER, Person, World, eventually};

pub const APP_SLUG: &str = "autoforge-e2e";
pub const WEBHOOK_SECRET: &str = "e2e-webhook-secret";
pub const POLL_SECONDS: u64 = 5;

/// The serve process of a world and what restarting it needs.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT` of the serve process's webhook listener.
    url: String,
    /// `http://127.0.0.1:PORT` of its admin listener (dashboard, metrics);
    /// the system picks the port, so it changes on a restart.
    admin_url: String,
    /// The App's id and private key, to act as the App (e.g. redeliver).
    app_id: u64,
    app_key: secrecy::SecretString,
    /// The App's installation on the owner's account.
    installation: u64,
    state: tempfile::TempDir,
    /// How serve was started, to start it again after a crash.
    options: WorldOptions,
    port: u16,
}

/// Variations of the served world.
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
    /// Where every serve process of the world appends its stdout and
    /// stderr (instead of the test's stderr), to be read afterwards.
    pub log_file: Option<std::path::PathBuf>,
    /// The webhook secret of the App and of serve; [`WEBHOOK_SECRET`] when
    /// unset.
    pub webhook_secret: Option<String>,
    /// A password added to serve's `DATABASE_URL` when the test database's
    /// URL has none (a cluster that trusts its socket ignores it), so a
    /// test has a database password to look for.
    pub database_password: Option<String>,
    /// Where GitHub sends the App's webhooks when that is not the first
    /// serve process (a relay in front of several replicas).
    pub webhook_url: Option<String>,
    /// The Postgres server the world's database is created on, when not
    /// the tests' shared one (a cluster the test stops and starts).
    pub database_server: Option<secrecy::SecretString>,
}

/// A further `autoforge serve` process started by
/// [`World::start_replica_at`].
pub struct Replica {
    pub child: Child,
    /// `http://127.0.0.1:PORT` of its webhook listener.
    pub url: String,
    /// `http://127.0.0.1:PORT` of its admin listener.
    pub admin_url: String,
}

/// A port nobody listens on right now; the serve process binds it next.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a probe port");
    listener.local_addr().expect("probe address").port()
}

impl World {
    /// Starts everything and waits until `/readyz` answers 200.
    pub async fn start() -> World {
        Self::start_with(WorldOptions::default()).await
    }

    pub async fn start_with(options: WorldOptions) -> World {
        let mut world = World::empty_on(options.database_server.as_ref()).await;
        let hub = &world.hub;
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let app = hub
            .create_app(&fakehub::NewApp {
                slug: APP_SLUG.into(),
                owner: Some(OWNER.into()),
                webhook_url: Some(
                    options
                        .webhook_url
                        .clone()
                        .unwrap_or_else(|| format!("{url}/webhook")),
                ),
                webhook_secret: Some(options.webhook_secret().to_owned()),
                permissions: [
                    ("issues", "write"),
                    ("pull_requests", "write"),
                    ("contents", "write"),
                    ("metadata", "read"),
                    // The driver reads a PR head's checks and statuses once it is open.
                    ("checks", "write"),
                    ("statuses", "read"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
                events: vec![],
            })
            .await
            .expect("create the app");
        let installation = hub
            .install(
                app.id,
                &fakehub::NewInstallation {
                    account: OWNER.into(),
                    repositories: vec![NAME.into()],
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
        let mut command = full_serve_command(hub, &world.db, &options, state.path(), app.id, port);
        command.envs(options.env.iter().map(|(k, v)| (k, v)));
        let (child, admin_url) = spawn_and_wait_for_listening(command, options.log_file.as_deref());
        world.served = Some(Served {
            child,
            url,
            admin_url,
            app_id: app.id,
            app_key: secrecy::SecretString::from(app.private_key_pem.expose_secret().to_owned()),
            installation,
            state,
            options,
            port,
        });
        world.wait_ready().await;
        world
    }

    fn served(&self) -> &Served {
        self.served.as_ref().expect("a world made by World::start")
    }

    fn served_mut(&mut self) -> &mut Served {
        self.served.as_mut().expect("a world made by World::start")
    }

    /// `http://127.0.0.1:PORT` of the serve process's webhook listener:
    /// `/webhook` and the probes only.
    pub fn serve_url(&self) -> &str {
        &self.served().url
    }

    /// `http://127.0.0.1:PORT` of the serve process's admin listener: the
    /// dashboard, `/metrics` and the probes.
    pub fn admin_url(&self) -> &str {
        &self.served().admin_url
    }

    /// The App's id, to act as the App.
    pub fn app_id(&self) -> u64 {
        self.served().app_id
    }

    /// The id of the App's installation on the owner's account.
    pub fn installation_id(&self) -> u64 {
        self.served().installation
    }

    /// The App's private key, to act as the App.
    pub fn app_key(&self) -> secrecy::SecretString {
        self.served().app_key.clone()
    }

    /// The process id of the first serve process (its driver's lease
    /// owner is `driver-<pid>-…`).
    pub fn serve_pid(&self) -> u32 {
        self.served().child.id()
    }

    /// serve's state directory.
    pub fn state_dir(&self) -> &Path {
        self.served().state.path()
    }

    /// Waits up to `timeout` for the serve process to end by itself (a
    /// crash point aborts it); `None` if it is still running.
    pub async fn wait_for_serve_exit(
        &mut self,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.served_mut().child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A second `autoforge serve` on the same database and fakehub (a
    /// replica), on its own ports and state directory; GitHub's webhooks
    /// still go to the first. The caller ends it.
    pub async fn start_replica(&self, state_dir: &Path) -> Child {
        self.start_replica_at(state_dir).await.child
    }

    /// [`Self::start_replica`], also saying where the replica listens; it
    /// returns once the replica's `/readyz` answers 200.
    pub async fn start_replica_at(&self, state_dir: &Path) -> Replica {
        let served = self.served();
        std::fs::copy(
            served.state.path().join("app.pem"),
            state_dir.join("app.pem"),
        )
        .expect("copy the App key");
        let config = served.state.path().join("autoforge.toml");
        if config.exists() {
            std::fs::copy(&config, state_dir.join("autoforge.toml")).expect("copy the config");
        }
        let port = free_port();
        let command = full_serve_command(
            &self.hub,
            &self.db,
            &served.options,
            state_dir,
            served.app_id,
            port,
        );
        let (child, admin_url) =
            spawn_and_wait_for_listening(command, served.options.log_file.as_deref());
        let url = format!("http://127.0.0.1:{port}");
        self.wait_ready_at(&url).await;
        Replica {
            child,
            url,
            admin_url,
        }
    }

    /// The command that starts one more `autoforge serve` of this world on
    /// `port` with `state_dir` (the App key and the configuration copied
    /// there), for a test that runs it its own way.
    pub fn serve_command_at(&self, state_dir: &Path, port: u16) -> Command {
        let served = self.served();
        std::fs::copy(
            served.state.path().join("app.pem"),
            state_dir.join("app.pem"),
        )
        .expect("copy the App key");
        let config = served.state.path().join("autoforge.toml");
        if config.exists() {
            std::fs::copy(&config, state_dir.join("autoforge.toml")).expect("copy the config");
        }
        full_serve_command(
            &self.hub,
            &self.db,
            &served.options,
            state_dir,
            served.app_id,
            port,
        )
    }

    /// Starts serve again on the same port, database and state directory
    /// (after the previous process ended), with `env` added.
    pub async fn restart_serve(&mut self, env: &[(&str, &str)]) {
        assert!(
            !matches!(self.served_mut().child.try_wait(), Ok(None)),
            "the previous serve process is still running"
        );
        let served = self.served();
        let mut command = full_serve_command(
            &self.hub,
            &self.db,
            &served.options,
            served.state.path(),
            served.app_id,
            served.port,
        );
        command.envs(env.iter().copied());
        let log_file = served.options.log_file.clone();
        let (child, admin_url) = spawn_and_wait_for_listening(command, log_file.as_deref());
        let served = self.served_mut();
        served.child = child;
        served.admin_url = admin_url;
        self.wait_ready().await;
    }

    async fn wait_ready(&self) {
        self.wait_ready_at(self.serve_url()).await;
    }

    async fn wait_ready_at(&self, url: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self
                .http
                .get(format!("{url}/readyz"))
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

    /// Creates the owner's repository `name` (a README on `main`) and makes
    /// it, with every repository already there, the App's installation's
    /// (GitHub then sends `installation_repositories.added`).
    pub async fn add_repository_to_installation(&self, name: &str) {
        let files =
            std::collections::BTreeMap::from([("README.md".to_owned(), "hello\n".to_owned())]);
        self.hub
            .create_repo(&fakehub::RepoSpec {
                owner: OWNER.into(),
                name: name.into(),
                default_branch: "main".into(),
                private: true,
                files,
                required_checks: vec![],
            })
            .await
            .expect("create the repository");
        self.set_installation_repositories(&[NAME, name]);
    }

    /// Suspends the App's installation on the owner's account, as the
    /// owner does in the settings (GitHub then sends `installation.suspend`
    /// and refuses the installation's tokens).
    pub fn suspend_installation(&self) {
        self.hub
            .suspend_installation(self.served().installation, Some(OWNER))
            .expect("suspend the installation");
    }

    /// Lifts the suspension (GitHub sends `installation.unsuspend`).
    pub fn unsuspend_installation(&self) {
        self.hub
            .unsuspend_installation(self.served().installation)
            .expect("unsuspend the installation");
    }

    /// Replaces the repositories of the App's installation.
    pub fn set_installation_repositories(&self, names: &[&str]) {
        let names: Vec<String> = names.iter().map(|n| format!("{OWNER}/{n}")).collect();
        self.hub
            .set_installation_repos(self.served().installation, &names)
            .expect("set the installation's repositories");
    }

    pub async fn open_issue(&self, person: &Person, title: &str) -> u64 {
        let issue = self
            .rest_as(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{NAME}/issues"),
                json!({"title": title, "body": "please"}),
            )
            .await;
        issue["number"].as_u64().expect("issue number")
    }

    pub async fn add_label(&self, person: &Person, issue: u64, label: &str) {
        self.rest_as(
            person,
            reqwest::Method::POST,
            &format!("/repos/{OWNER}/{NAME}/issues/{issue}/labels"),
            json!({"labels": [label]}),
        )
        .await;
    }

    pub async fn comment(&self, person: &Person, issue: u64, body: &str) -> u64 {
        let comment = self
            .rest_as(
                person,
                reqwest::Method::POST,
                &format!("/repos/{OWNER}/{NAME}/issues/{issue}/comments"),
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
                self.db
                    .journal()
                    .active_run_for_issue(&repository, autoforge_journal::testing::issue(issue))
                    .await
                    .unwrap()
                    .map(|run| run.id)
            }
        })
        .await
    }

    /// Replaces serve's `autoforge.toml` (`{hub}` becomes fakehub's base
    /// URL); the next start reads it.
    pub fn rewrite_config(&self, toml: &str) {
        let toml = toml.replace("{hub}", self.hub.base_url());
        std::fs::write(self.state_dir().join("autoforge.toml"), toml).expect("write the config");
    }

    /// SIGKILLs the serve process (a crash no code of it sees) and waits
    /// for it to be gone.
    pub fn kill_serve(&mut self) -> std::process::ExitStatus {
        let child = &mut self.served_mut().child;
        child.kill().expect("SIGKILL autoforge serve");
        off_the_runtime(|| child.wait().expect("reap autoforge serve"))
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        terminate(&mut self.served_mut().child)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _status = terminate(&mut self.child);
        }
    }
}

impl WorldOptions {
    /// The webhook secret the App signs with and serve checks.
    pub fn webhook_secret(&self) -> &str {
        self.webhook_secret.as_deref().unwrap_or(WEBHOOK_SECRET)
    }
}

/// A TOML argv array running the scripted agent `script` with `args`.
pub fn agent_command(script: &str, args: &[&str]) -> String {
    let mut argv = vec![format!("\"{}\"", agent_script(script))];
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
        command.env("DATABASE_URL", database_url(db, options));
    }
    command
        .env("AUTOFORGE_WEBHOOK_SECRET", options.webhook_secret())
        .env("AUTOFORGE_GITHUB_API_URL", hub.base_url())
        .env("AUTOFORGE_GITHUB_APP_ID", app_id.to_string())
        .env(
            "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE",
            state_dir.join("app.pem"),
        )
        .env("AUTOFORGE_SERVER_LISTEN", format!("127.0.0.1:{port}"))
        // Nobody needs to know the admin port in advance.
        .env("AUTOFORGE_SERVER_ADMIN_LISTEN", "127.0.0.1:0")
        .env("AUTOFORGE_POLL_INTERVAL_SECONDS", POLL_SECONDS.to_string());
    command
}

/// The test database's URL, with `options.database_password` added when
/// it names a user without a password.
pub fn database_url(db: &TestDatabase, options: &WorldOptions) -> String {
    let url = db.url().expose_secret().to_owned();
    let Some(password) = &options.database_password else {
        return url;
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    match rest.split_once('@') {
        Some((user, host)) if !user.contains(':') => format!("{scheme}://{user}:{password}@{host}"),
        _ => url,
    }
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

/// Spawns serve and waits for its two "listening" lines; returns the child
/// and the admin listener's URL from the second. With `log`, stdout and
/// stderr are appended to that file.
fn spawn_and_wait_for_listening(command: Command, log: Option<&Path>) -> (Child, String) {
    off_the_runtime(|| spawn_and_wait(command, log))
}

/// Runs the blocking `f` so that the runtime's other tasks keep running
/// meanwhile: every world's fakehub serves from the test's runtime, and a
/// serve process starting or stopping waits for it.
pub fn off_the_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn spawn_and_wait(mut command: Command, log: Option<&Path>) -> (Child, String) {
    let log_path = log.map(Path::to_path_buf);
    let mut log = log.map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the serve log")
    });
    match &log {
        Some(file) => {
            command.stderr(file.try_clone().expect("share the serve log"));
        }
        None => {
            command.stderr(Stdio::piped());
        }
    }
    let mut child = command.spawn().expect("spawn autoforge serve");
    // Without a log file, stderr goes to the test's captured output and its
    // last lines are kept, so a serve that dies before listening says why.
    let stderr_tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    if let Some(stderr) = child.stderr.take() {
        let tail = std::sync::Arc::clone(&stderr_tail);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                let mut tail = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if tail.len() == 30 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
    }
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Write;
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(file) = log.as_mut() {
                let _written = writeln!(file, "{line}");
            }
            // Only the first two lines are waited for; the rest is drained
            // so the child never blocks on a full pipe.
            let _sent = sender.send(line);
        }
    });
    let mut next_line = |what: &str| match receiver.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(_) => {
            let status = child.try_wait();
            // The stderr reader may still be draining what the child wrote
            // just before it ended.
            std::thread::sleep(Duration::from_millis(200));
            let logged = match &log_path {
                Some(path) => std::fs::read_to_string(path)
                    .map(|text| text.lines().rev().take(30).collect::<Vec<_>>().join("\n"))
                    .unwrap_or_default(),
                None => {
                    let tail = stderr_tail
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    tail.iter().rev().cloned().collect::<Vec<_>>().join("\n")
                }
            };
            panic!(
                "autoforge serve did not print its {what} line: {status:?}; its log, last lines first:\n{logged}"
            );
        }
    };
    let webhook = next_line("listening");
    assert!(
        webhook.starts_with("listening on http://"),
        "unexpected first line {webhook}"
    );
    let admin = next_line("admin listening");
    let admin_url = admin
        .strip_prefix("admin listening on ")
        .unwrap_or_else(|| panic!("unexpected second line {admin}"))
        .to_owned();
    (child, admin_url)
}

/// Sends SIGTERM to `child` and waits for it (SIGKILL after 20 s).
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    off_the_runtime(|| terminate_now(child))
}

fn terminate_now(child: &mut Child) -> std::process::ExitStatus {
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
