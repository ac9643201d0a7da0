//! A Postgres cluster of one test's own, which the test stops, starts or
//! SIGKILLs (a database outage, a crash) without touching the cluster the
//! other tests share. Its URL (a Unix socket in the cluster's directory,
//! and the generated password) stays the same across restarts.

use std::time::{Duration, Instant};

use autoforge_journal::localpg::{Durability, LocalPgOptions, LocalPostgres};
use secrecy::SecretString;

pub struct TestCluster {
    // Declared before `root`: the server stops before its directory goes.
    server: Option<LocalPostgres>,
    root: tempfile::TempDir,
    url: SecretString,
    options: LocalPgOptions,
}

impl TestCluster {
    /// Initialises and starts a cluster in a fresh directory, with the
    /// tests' settings (no fsync, no synchronous commit).
    pub async fn start() -> TestCluster {
        Self::start_with(LocalPgOptions::ephemeral()).await
    }

    /// A cluster that keeps every commit it acknowledged through a SIGKILL
    /// of its server, as the managed cluster in production does
    /// (synchronous commit on). The tests' settings would lose the last
    /// commits' WAL with the server process, which a real crash of a
    /// durable server never does. fsync stays on: the product's setting.
    pub async fn start_durable() -> TestCluster {
        Self::start_with(LocalPgOptions {
            durability: Durability::Durable,
            ..LocalPgOptions::ephemeral()
        })
        .await
    }

    async fn start_with(options: LocalPgOptions) -> TestCluster {
        let root = tempfile::Builder::new()
            .prefix("aft-own-pg-")
            .tempdir_in("/tmp")
            .expect("a directory for the cluster");
        let path = root.path().to_owned();
        let first = options.clone();
        let server = tokio::task::spawn_blocking(move || LocalPostgres::start(&path, first))
            .await
            .unwrap()
            .expect("start the test's own cluster");
        let url = server.database_url();
        TestCluster {
            server: Some(server),
            root,
            url,
            options,
        }
    }

    /// The server's URL (its `postgres` database), for
    /// `TestDatabase::fresh_on` and `DATABASE_URL`.
    pub fn url(&self) -> &SecretString {
        &self.url
    }

    /// Stops the server (a fast shutdown: sessions are cut).
    pub async fn stop(&mut self) {
        let server = self.server.take().expect("the cluster is running");
        tokio::task::spawn_blocking(move || server.stop())
            .await
            .unwrap()
            .expect("stop the cluster");
    }

    /// SIGKILLs the postmaster (a crash no code of it sees) and waits
    /// until the process is gone; its backends notice and exit by
    /// themselves, and [`Self::start_again`] copes with what they leave.
    pub async fn kill(&mut self) {
        let server = self.server.take().expect("the cluster is running");
        let pid = server.postmaster_pid();
        let postmaster = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(postmaster, nix::sys::signal::Signal::SIGKILL)
            .expect("SIGKILL the postmaster");
        // The postmaster is not our child (pg_ctl started it), so it cannot
        // be reaped here: it is gone once /proc no longer lists it alive.
        let deadline = Instant::now() + Duration::from_secs(30);
        while process_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "the SIGKILLed postmaster {pid} did not die within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Dropping the handle would try to stop the dead server.
        std::mem::forget(server);
    }

    /// Starts the stopped (or killed) server again on the same directory.
    pub async fn start_again(&mut self) {
        assert!(self.server.is_none(), "the cluster is running already");
        let path = self.root.path().to_owned();
        let options = self.options.clone();
        let server = tokio::task::spawn_blocking(move || LocalPostgres::start(&path, options))
            .await
            .unwrap()
            .expect("start the cluster again");
        self.server = Some(server);
    }
}

/// Whether `pid` runs and is not a zombie (state `Z` in `/proc/<pid>/stat`).
fn process_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}
