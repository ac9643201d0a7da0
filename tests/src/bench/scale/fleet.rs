//! The world the scale, recovery and replica measurements run in: a local
//! Postgres with fsync on, fakehub in-process holding many repositories of
//! one operator with the App installed on all of them and their issues
//! written, the demo's scripted agents, and `autoforge serve` replicas as
//! child processes of this release build (so their memory, CPU and a
//! SIGKILL are their own).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use autoforge::demo::PersonApi;
use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio::process::{Child, Command};

const OPERATOR: &str = "bench-operator";
const SECRET: &str = "bench-scale-webhook-secret";
/// Short leases, so that recovery after a SIGKILL is measured in seconds;
/// the report names it.
pub const LEASE_SECONDS: u64 = 10;
/// How many labels are sent at once while the runs are started.
const LABELS_IN_FLIGHT: usize = 16;

/// How big the fleet is.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub repositories: usize,
    pub issues_per_repository: usize,
    /// Runs each replica drives at once (`driver.concurrency`).
    pub concurrency: usize,
    /// Whether every run's first review has findings (then one is fixed,
    /// one deferred to a follow-up issue, and a second round is clean).
    pub fix_round: bool,
    /// Whether the default branches require a check nobody reports, so
    /// that runs park at the merge gate instead of merging.
    pub required_check: bool,
    /// fakehub's primary rate limit per token and hour: GitHub's 5,000,
    /// or more to measure the controller rather than the budget.
    pub budget_per_hour: u64,
}

/// GitHub's primary rate limit of an installation token, per hour.
pub const GITHUB_BUDGET: u64 = 5_000;

impl Size {
    pub fn runs(self) -> usize {
        self.repositories * self.issues_per_repository
    }
}

/// One `autoforge serve` process of the fleet.
pub struct Replica {
    pub child: Child,
    pub pid: u32,
    pub url: String,
    log: PathBuf,
}

/// The fleet's world; everything stops when it is dropped.
pub struct Fleet {
    pub hub: fakehub::Handle,
    pub postgres: LocalPostgres,
    pub pool: sqlx::PgPool,
    operator: PersonApi,
    /// `(owner/name, issue number)` of every issue to run on.
    pub issues: Vec<(String, u64)>,
    binary: PathBuf,
    config_file: PathBuf,
    key_file: PathBuf,
    database_url: SecretString,
    state: PathBuf,
    /// The port fakehub's App delivers webhooks to (replica 0's).
    webhook_port: u16,
    _scratch: tempfile::TempDir,
}

/// The `autoforge` binary of this build's profile, built if it is missing
/// or stale (the bench depends on the library, not on the binary).
fn serve_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("the bench's own path")?;
    let dir = exe.parent().context("the bench's folder")?.to_path_buf();
    let release = dir.file_name().is_some_and(|name| name == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    // With this crate selected too, features unify as in the bench's own
    // build, so the shared dependencies are not built a second time.
    build.args([
        "build",
        "--locked",
        "-p",
        "autoforge-tests",
        "-p",
        "autoforge",
    ]);
    build.args(["--bin", "autoforge"]);
    if release {
        build.arg("--release");
    }
    let status = build
        .current_dir(crate::repo_root())
        .status()
        .context("running cargo build for the autoforge binary")?;
    if !status.success() {
        bail!("cargo build of the autoforge binary failed: {status}");
    }
    Ok(dir.join("autoforge"))
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl Fleet {
    /// Starts Postgres and fakehub and writes the world: `size`'s
    /// repositories and issues, the App, the agents and serve's
    /// configuration. No run starts until [`Fleet::label_all`].
    pub async fn seed(size: Size) -> anyhow::Result<Fleet> {
        let binary = tokio::task::spawn_blocking(serve_binary).await??;
        let scratch = tempfile::tempdir()?;
        let state = scratch.path().join("state");
        std::fs::create_dir_all(&state)?;
        autoforge::workspace::restrict_state_dir(&state)?;

        let root = scratch.path().join("postgres");
        let mut pg_options = LocalPgOptions::persistent();
        pg_options.stop_on_drop = true;
        let postgres =
            tokio::task::spawn_blocking(move || LocalPostgres::start(&root, pg_options)).await??;
        let database_url = postgres.database_url();
        let journal = Journal::connect(&database_url).await?;
        journal.migrate().await?;
        journal.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(database_url.expose_secret())
            .await
            .context("the bench's own database connection")?;

        let hub = fakehub::start(fakehub::Config {
            rate_limit: size.budget_per_hour,
            ..fakehub::Config::default()
        })
        .await?;
        let person = hub
            .create_user(OPERATOR, fakehub::world::UserKind::User)
            .map_err(|error| anyhow::anyhow!("cannot create the operator: {error}"))?;
        let names: Vec<String> = (0..size.repositories)
            .map(|i| format!("project-{i:02}"))
            .collect();
        for name in &names {
            hub.create_repo(&fakehub::RepoSpec {
                owner: OPERATOR.into(),
                name: name.clone(),
                default_branch: "main".into(),
                private: true,
                files: autoforge::demo::project_files(),
                required_checks: if size.required_check {
                    vec!["ci".to_owned()]
                } else {
                    Vec::new()
                },
            })
            .await
            .map_err(|error| anyhow::anyhow!("cannot create {name}: {error}"))?;
        }
        let webhook_port = free_port()?;
        let secret = SecretString::from(SECRET.to_owned());
        let app = autoforge::demo::install_app(
            &hub,
            OPERATOR,
            &names,
            &format!("http://127.0.0.1:{webhook_port}/webhook"),
            &secret,
        )
        .await?;
        let operator = PersonApi::new(hub.base_url(), person.token.clone());
        let mut issues = Vec::new();
        for name in &names {
            let full = format!("{OPERATOR}/{name}");
            for i in 0..size.issues_per_repository {
                // No helper name: the scripted implementer then adds one
                // named after the issue, so no two PRs touch one file.
                let issue = operator
                    .post(
                        &format!("/repos/{full}/issues"),
                        &json!({"title": format!("Task {i}"), "body": "Add a helper with a test; `sh test.sh` must pass."}),
                    )
                    .await?;
                let number = issue["number"]
                    .as_u64()
                    .context("an issue without a number")?;
                issues.push((full.clone(), number));
            }
        }

        let key_file = state.join("app.pem");
        std::fs::write(&key_file, app.private_key_pem.expose_secret())?;
        let agents = autoforge::demo::DemoAgents::install(&state.join("agents"))?;
        // Without a fix round no review finds anything: every run is
        // implement, review, merge.
        let reviewed: Vec<u64> = if size.fix_round {
            issues.iter().map(|(_, number)| *number).collect()
        } else {
            Vec::new()
        };
        let mut document =
            autoforge::demo::settings::demo_document(&autoforge::demo::settings::DemoSettings {
                state_dir: &state,
                api_url: hub.base_url(),
                app_id: app.id,
                private_key_file: &key_file,
                webhook_secret: &secret,
                agents: agents.agents_table(&reviewed, &[]),
            });
        let mut driver = toml::Table::new();
        driver.insert(
            "lease_seconds".into(),
            toml::Value::Integer(LEASE_SECONDS as i64),
        );
        driver.insert(
            "concurrency".into(),
            toml::Value::Integer(i64::try_from(size.concurrency)?),
        );
        document.insert("driver".into(), toml::Value::Table(driver));
        let config_file = state.join("autoforge.toml");
        std::fs::write(&config_file, toml::to_string_pretty(&document)?)?;
        Ok(Fleet {
            hub,
            postgres,
            pool,
            operator,
            issues,
            binary,
            config_file,
            key_file,
            database_url,
            state,
            webhook_port,
            _scratch: scratch,
        })
    }

    /// Starts replica `index` (0 receives the webhooks) and waits until it
    /// answers `/readyz`.
    pub async fn start_replica(&self, index: usize) -> anyhow::Result<Replica> {
        self.start_replica_under(index, &[], Duration::from_secs(60))
            .await
    }

    /// [`Self::start_replica`] with serve run by `wrapper` (a profiler's
    /// command line, which makes it slower to start: `ready_within`).
    pub async fn start_replica_under(
        &self,
        index: usize,
        wrapper: &[String],
        ready_within: Duration,
    ) -> anyhow::Result<Replica> {
        let dir = self.state.join(format!("replica-{index}"));
        std::fs::create_dir_all(&dir)?;
        let port = if index == 0 {
            self.webhook_port
        } else {
            free_port()?
        };
        let log = dir.join("serve.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        command
            .arg("--config")
            .arg(&self.config_file)
            .arg("--state-dir")
            .arg(&dir)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .env("RUST_LOG", "warn")
            .env("DATABASE_URL", self.database_url.expose_secret())
            .env("AUTOFORGE_WEBHOOK_SECRET", SECRET)
            .env("AUTOFORGE_GITHUB_PRIVATE_KEY_FILE", &self.key_file)
            .env("AUTOFORGE_SERVER_LISTEN", format!("127.0.0.1:{port}"))
            .env("AUTOFORGE_SERVER_ADMIN_LISTEN", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true);
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let pid = child.id().context("serve's pid")?;
        let mut replica = Replica {
            child,
            pid,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        replica.wait_ready(ready_within).await?;
        Ok(replica)
    }

    /// A path in the fleet's private state folder.
    pub fn state_path(&self, name: &str) -> PathBuf {
        self.state.join(name)
    }

    /// Waits until every issue's run has ended (`DONE` or otherwise).
    pub async fn wait_all_ended(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let (runs, active): (i64, i64) =
                sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE active) FROM runs")
                    .fetch_one(&self.pool)
                    .await?;
            if runs as usize >= self.issues.len() && active == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{active} of {runs} runs still active after {} s ({} issues labelled)",
                    within.as_secs(),
                    self.issues.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Labels every issue as the operator (fakehub sends each `labeled`
    /// webhook to replica 0), a few at a time.
    pub async fn label_all(&self) -> anyhow::Result<()> {
        self.label_first(self.issues.len()).await
    }

    /// Labels the first `count` issues (one per repository first).
    pub async fn label_first(&self, count: usize) -> anyhow::Result<()> {
        let mut pending = tokio::task::JoinSet::new();
        for (repository, number) in self.issues.iter().take(count) {
            if pending.len() >= LABELS_IN_FLIGHT {
                pending.join_next().await.context("a label task")???;
            }
            let path = format!("/repos/{repository}/issues/{number}/labels");
            let operator = self.operator.clone();
            pending.spawn(async move {
                operator
                    .post(&path, &json!({"labels": ["autoforge"]}))
                    .await
                    .map(drop)
            });
        }
        while let Some(done) = pending.join_next().await {
            done??;
        }
        Ok(())
    }
}

impl Replica {
    async fn wait_ready(&mut self, within: Duration) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "serve ended before it was ready ({status}): {}",
                    self.log_tail()
                );
            }
            let ready = http
                .get(format!("{}/readyz", self.url))
                .send()
                .await
                .is_ok_and(|answer| answer.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "serve was not ready within {} s: {}",
                    within.as_secs(),
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines serve logged, for an error.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM (serve finishes what it holds and a profiler writes its
    /// data), and waits until the process is gone.
    pub async fn terminate(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid)?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        self.child.wait().await.context("waiting for serve to stop")
    }

    /// SIGKILL, and waits until the process is gone.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await.context("killing serve")
    }
}
