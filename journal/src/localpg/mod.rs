//! The managed local Postgres: the zero-configuration database used when no
//! `DATABASE_URL` is set. It keeps a persistent cluster under
//! `<state_dir>/postgres`, reachable through a Unix socket only (no TCP
//! port) and only with the superuser's password (SCRAM-SHA-256, never
//! `trust`; see [`auth`]), driven by the system's `initdb` and `pg_ctl`.
//!
//! Layout under the data root (0700):
//! - `data/`       the cluster (initialised on first start)
//! - `run/`        the socket directory, 0700
//! - `password`    the superuser's random password, 0600, ours only
//! - `server.log`  the server's log
//!
//! A Unix socket path is limited to 107 bytes. When `<root>/run` would be too
//! long (or contains characters `pg_ctl`'s shell would misread), the socket
//! lives in `/tmp/autoforge-pg-<hash of the root>` instead, a stable name
//! so that a restart finds the same place. It is 0700 like `run/`, and
//! reaching the socket is not enough to connect without the password.

mod account;
mod auth;
mod binaries;
mod paths;

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};

pub use binaries::PgBinaries;

use account::{RunAs, check_reachable, grant_parent_traversal, private_dir};
use paths::{pid_in, process_is_live, socket_dir_for, survives_pg_ctl_quoting};

/// The port number only names the socket file (`.s.PGSQL.<port>`); fixing it
/// makes the URL independent of a stray `PGPORT`.
const PORT: u16 = 5432;
/// A postmaster killed a moment ago can stay a zombie for a while, and its
/// `postmaster.pid` then still names a "live" process. Starting is retried
/// for this long when the server reports exactly that.
const STALE_LOCK_RETRY: Duration = Duration::from_secs(8);

/// Why the local Postgres could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LocalPgError {
    #[error(
        "no PostgreSQL server programs (initdb, pg_ctl, postgres) found; looked in $PG_BIN, \
         `pg_config --bindir`, PATH and /usr/lib/postgresql/*/bin ({}). Install the PostgreSQL \
         server package (e.g. `apt-get install postgresql`), point PG_BIN at its bin directory, \
         or set DATABASE_URL to use an existing database",
        searched.join(", ")
    )]
    BinariesNotFound { searched: Vec<String> },

    #[error(
        "running as root, but there is no `postgres` OS user to run the server as (PostgreSQL \
         refuses to run as root). Create one (`useradd --system postgres`) or set DATABASE_URL"
    )]
    NoServerUser,

    #[error(
        "the postgres user cannot reach {dir}: {blocking} is not traversable by it. Choose a \
         state directory outside it, make it traversable, or set DATABASE_URL"
    )]
    Unreachable { dir: PathBuf, blocking: PathBuf },

    #[error(
        "{dir} exists but is not a directory owned by us or the postgres user; refusing to use it"
    )]
    UnsafeDirectory { dir: PathBuf },

    #[error("{program} failed ({status}): {output}")]
    CommandFailed {
        program: &'static str,
        status: String,
        output: String,
    },

    #[error("could not {action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },

    #[error("could not {action}: {source}")]
    Os {
        action: String,
        #[source]
        source: nix::Error,
    },

    #[error(
        "{dir} cannot hold the cluster: pg_ctl passes it through a shell, so it must be \
         UTF-8 without quotes, `$`, backquotes, backslashes or line breaks"
    )]
    UnsupportedPath { dir: PathBuf },

    #[error("the server started but its postmaster.pid is unreadable: {0}")]
    PidFile(String),
}

/// The group of the account the server runs as when that is not us (we are
/// root): the one group the state directory lets traverse it.
pub fn server_group() -> Option<u32> {
    RunAs::detect()
        .ok()
        .flatten()
        .map(|run_as| run_as.gid.as_raw())
}

/// How careful the cluster is with the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync on: the product's persistent cluster.
    Durable,
    /// fsync, synchronous commit and full-page writes off: tests only, where
    /// the data is thrown away anyway.
    Ephemeral,
}

/// How to run the local cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPgOptions {
    pub durability: Durability,
    /// Stop the server when the handle is dropped (including during a
    /// panic), so a failing test does not leak a server.
    pub stop_on_drop: bool,
    /// How long `pg_ctl` waits for start and stop.
    pub timeout: Duration,
    /// Server programs to use; found automatically when `None`.
    pub binaries: Option<PgBinaries>,
}

impl LocalPgOptions {
    /// The product default: durable; stopped explicitly on shutdown.
    pub fn persistent() -> Self {
        LocalPgOptions {
            durability: Durability::Durable,
            stop_on_drop: false,
            timeout: Duration::from_secs(60),
            binaries: None,
        }
    }

    /// For tests: no fsync, stopped when dropped.
    pub fn ephemeral() -> Self {
        LocalPgOptions {
            durability: Durability::Ephemeral,
            stop_on_drop: true,
            timeout: Duration::from_secs(30),
            binaries: None,
        }
    }
}

/// A running local cluster. Start and stop block for a fraction of a second
/// (they run `initdb`/`pg_ctl`); from async code call them through
/// `tokio::task::spawn_blocking`.
#[derive(Debug)]
pub struct LocalPostgres {
    binaries: PgBinaries,
    run_as: Option<RunAs>,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    log_file: PathBuf,
    password: SecretString,
    postmaster_pid: i32,
    options: LocalPgOptions,
    stopped: bool,
}

impl LocalPostgres {
    /// Initialises the cluster under `data_root` if it does not exist yet,
    /// and starts it (or adopts a server already running on it).
    pub fn start(data_root: &Path, options: LocalPgOptions) -> Result<LocalPostgres, LocalPgError> {
        let binaries = match &options.binaries {
            Some(binaries) => binaries.clone(),
            None => PgBinaries::find()?,
        };
        let run_as = RunAs::detect()?;
        let data_root = std::path::absolute(data_root).map_err(|source| LocalPgError::Io {
            action: format!("resolve {}", data_root.display()),
            source,
        })?;
        if !survives_pg_ctl_quoting(&data_root) {
            return Err(LocalPgError::UnsupportedPath { dir: data_root });
        }
        private_dir(&data_root, run_as)?;
        grant_parent_traversal(&data_root, run_as)?;
        check_reachable(&data_root, run_as)?;
        let socket_dir = socket_dir_for(&data_root);
        private_dir(&socket_dir, run_as)?;
        check_reachable(&socket_dir, run_as)?;

        let mut server = LocalPostgres {
            binaries,
            run_as,
            data_dir: data_root.join("data"),
            socket_dir,
            log_file: data_root.join("server.log"),
            password: SecretString::from(String::new()),
            postmaster_pid: 0,
            options,
            stopped: true,
        };
        let hba_changed = server.prepare_authentication(&data_root)?;
        if server.is_running() {
            if hba_changed {
                server.reload()?;
            }
            tracing::warn!(data_dir = %server.data_dir.display(), "adopting a PostgreSQL server that is already running");
        } else {
            server.start_server()?;
        }
        server.read_pid_file()?;
        server.stopped = false;
        Ok(server)
    }

    /// `postgres://postgres:<password>@localhost/postgres?host=<socket
    /// dir>`: the `host` parameter makes the client use the socket.
    pub fn database_url(&self) -> SecretString {
        self.database_url_for("postgres")
    }

    /// The URL of another database in this cluster. The password is hex,
    /// so it needs no escaping.
    pub fn database_url_for(&self, database: &str) -> SecretString {
        SecretString::from(format!(
            "postgres://postgres:{}@localhost:{PORT}/{database}?host={}",
            self.password.expose_secret(),
            self.socket_dir.display()
        ))
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    pub fn binaries(&self) -> &PgBinaries {
        &self.binaries
    }

    /// The process id of the postmaster this handle started or adopted.
    pub fn postmaster_pid(&self) -> i32 {
        self.postmaster_pid
    }

    /// Stops the server, waiting for it to shut down cleanly.
    pub fn stop(mut self) -> Result<(), LocalPgError> {
        self.stop_with("fast")
    }

    /// Starts a watcher that stops this server and deletes `remove` once
    /// its stdin reaches end of file. The caller keeps the returned pipe
    /// end; when the caller's process ends, for any reason, the kernel
    /// closes it. The watcher runs in its own process group so a Ctrl-C
    /// aimed at the test run does not kill it before it cleans up.
    pub fn spawn_guardian(&self, remove: &Path) -> std::io::Result<std::process::ChildStdin> {
        let mut command = self.command(PathBuf::from("/bin/sh"));
        command
            .arg("-c")
            .arg(
                "cat >/dev/null; \"$0\" -D \"$1\" -m immediate -w -s stop >/dev/null 2>&1; \
                 rm -rf -- \"$2\"",
            )
            .arg(self.binaries.pg_ctl())
            .arg(&self.data_dir)
            .arg(remove)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = command.spawn()?;
        child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the guardian has no stdin pipe"))
    }

    /// Makes sure the cluster exists, has a password the controller knows
    /// and admits nothing but that password; true when `pg_hba.conf` had
    /// to be rewritten (a running server must then reload it).
    fn prepare_authentication(&mut self, data_root: &Path) -> Result<bool, LocalPgError> {
        if !self.data_dir.join("PG_VERSION").is_file() {
            let password = auth::generate_password()?;
            self.initdb(data_root, &password)?;
            auth::write_password(data_root, &password)?;
            self.password = password;
        } else if let Some(password) = auth::read_password(data_root)? {
            self.password = password;
        } else {
            self.migrate_trusting_cluster(data_root)?;
        }
        auth::pin_hba(&self.data_dir, self.run_as)
    }

    /// A cluster from before password authentication: it has data but no
    /// password file. Sets a password on the stopped cluster; the caller
    /// then replaces its `trust` rules.
    fn migrate_trusting_cluster(&mut self, data_root: &Path) -> Result<(), LocalPgError> {
        tracing::warn!(
            data_dir = %self.data_dir.display(),
            "the managed PostgreSQL cluster has no password (made by an earlier autoforge); \
             giving its superuser one and switching it to password authentication"
        );
        if self.is_running() {
            self.stopped = false;
            self.stop_with("fast")?;
        }
        let password = auth::generate_password()?;
        let postgres = self.command(self.binaries.dir().join("postgres"));
        auth::set_password_offline(postgres, &self.data_dir, &password)?;
        auth::write_password(data_root, &password)?;
        self.password = password;
        Ok(())
    }

    fn reload(&self) -> Result<(), LocalPgError> {
        let status = self
            .pg_ctl()
            .arg("reload")
            .status()
            .map_err(|source| LocalPgError::Io {
                action: "run pg_ctl reload".to_owned(),
                source,
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(LocalPgError::CommandFailed {
                program: "pg_ctl reload",
                status: status.to_string(),
                output: String::new(),
            })
        }
    }

    fn initdb(&self, data_root: &Path, password: &SecretString) -> Result<(), LocalPgError> {
        let pwfile = auth::initdb_password_file(data_root, password, self.run_as)?;
        let mut command = self.command(self.binaries.initdb());
        command
            .arg("-D")
            .arg(&self.data_dir)
            .args([
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .current_dir(data_root);
        if self.options.durability == Durability::Ephemeral {
            command.arg("--no-sync");
        }
        let output = command.output();
        auth::remove_initdb_password(&pwfile);
        let output = output.map_err(|source| LocalPgError::Io {
            action: "run initdb".to_owned(),
            source,
        })?;
        if output.status.success() {
            return Ok(());
        }
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        Err(LocalPgError::CommandFailed {
            program: "initdb",
            status: output.status.to_string(),
            output: tail(&text),
        })
    }

    fn start_server(&self) -> Result<(), LocalPgError> {
        let deadline = Instant::now() + STALE_LOCK_RETRY;
        loop {
            let log_offset = fs::metadata(&self.log_file).map(|m| m.len()).unwrap_or(0);
            let status = self
                .pg_ctl()
                .arg("-l")
                .arg(&self.log_file)
                .arg("-o")
                .arg(self.server_settings())
                .arg("start")
                .status()
                .map_err(|source| LocalPgError::Io {
                    action: "run pg_ctl start".to_owned(),
                    source,
                })?;
            if status.success() {
                return Ok(());
            }
            let log = read_from(&self.log_file, log_offset);
            // Both clear up by themselves shortly after a crash: the dead
            // postmaster is reaped, its orphaned backends notice and exit.
            let crash_leftover = (log.contains("lock file") && log.contains("already exists"))
                || log.contains("pre-existing shared memory block");
            if !crash_leftover || Instant::now() >= deadline {
                return Err(LocalPgError::CommandFailed {
                    program: "pg_ctl start",
                    status: status.to_string(),
                    output: tail(&log),
                });
            }
            tracing::debug!("postmaster.pid of a dead server still locked; retrying start");
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// Passed through `pg_ctl -o`, which hands it to a shell: the socket
    /// path was checked to hold no characters a shell would interpret.
    fn server_settings(&self) -> String {
        let mut settings = format!(
            "-c listen_addresses='' -p {PORT} -k {} -c unix_socket_permissions=0700",
            self.socket_dir.display()
        );
        if self.options.durability == Durability::Ephemeral {
            settings.push_str(
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                 -c max_connections=300",
            );
        } else {
            settings.push_str(" -c fsync=on");
        }
        settings
    }

    /// A server is running on our data directory if `postmaster.pid`
    /// names a live process that is not a zombie. `pg_ctl status` alone
    /// cannot tell: right after a crash the dead postmaster lingers as a
    /// zombie until it is reaped, and signalling it still succeeds.
    fn is_running(&self) -> bool {
        let Some(pid) = pid_in(&self.data_dir) else {
            return false;
        };
        process_is_live(pid)
            && self
                .pg_ctl()
                .arg("status")
                .status()
                .is_ok_and(|status| status.success())
    }

    fn read_pid_file(&mut self) -> Result<(), LocalPgError> {
        let text = fs::read_to_string(self.data_dir.join("postmaster.pid"))
            .map_err(|e| LocalPgError::PidFile(e.to_string()))?;
        // Line 1: postmaster pid; line 5: the first socket directory. An
        // adopted server may use another socket directory than ours.
        let mut lines = text.lines();
        self.postmaster_pid = lines
            .next()
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or_else(|| LocalPgError::PidFile("no pid on its first line".to_owned()))?;
        if let Some(dir) = lines.nth(3).map(str::trim).filter(|d| !d.is_empty()) {
            self.socket_dir = PathBuf::from(dir);
        }
        Ok(())
    }

    fn stop_with(&mut self, mode: &str) -> Result<(), LocalPgError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let output = self
            .pg_ctl()
            .args(["-m", mode, "stop"])
            .output()
            .map_err(|source| LocalPgError::Io {
                action: "run pg_ctl stop".to_owned(),
                source,
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(LocalPgError::CommandFailed {
                program: "pg_ctl stop",
                status: output.status.to_string(),
                output: tail(&String::from_utf8_lossy(&output.stderr)),
            })
        }
    }

    /// `pg_ctl -D <data> -w -t <timeout> -s`, as the server's user, with no
    /// terminal streams: `pg_ctl start` hands its stdout to the postmaster,
    /// so capturing it would block until the server exits.
    fn pg_ctl(&self) -> Command {
        let mut command = self.command(self.binaries.pg_ctl());
        command
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-w", "-s", "-t"])
            .arg(self.options.timeout.as_secs().max(1).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    fn command(&self, program: PathBuf) -> Command {
        let mut command = Command::new(program);
        command.stdin(Stdio::null());
        // Our own libpq-style settings must not steer the server programs.
        for var in [
            "PGDATA",
            "PGPORT",
            "PGHOST",
            "PGUSER",
            "PGDATABASE",
            "PGOPTIONS",
        ] {
            command.env_remove(var);
        }
        if let Some(run_as) = self.run_as {
            run_as.apply(&mut command);
        }
        command
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        if !self.options.stop_on_drop || self.stopped {
            return;
        }
        // Only stop the server this handle started: after a crash test a
        // new server may run on the same data directory.
        if pid_in(&self.data_dir) != Some(self.postmaster_pid) {
            return;
        }
        let mode = match self.options.durability {
            Durability::Durable => "fast",
            Durability::Ephemeral => "immediate",
        };
        if let Err(error) = self.stop_with(mode) {
            tracing::warn!(%error, "could not stop the local PostgreSQL server");
        }
    }
}

fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = fs::File::open(path)
        && file.seek(SeekFrom::Start(offset)).is_ok()
    {
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

/// The last lines of a program's output, enough to explain a failure.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let text = (1..=20)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(tail(&text), "13 | 14 | 15 | 16 | 17 | 18 | 19 | 20");
    }
}
