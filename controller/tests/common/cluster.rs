//! A Postgres cluster of one test's own, which the test stops and starts
//! (a database outage) without touching the cluster the other tests
//! share. Its URL (a Unix socket in the cluster's directory, and the
//! generated password) stays the same across restarts.

use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};
use secrecy::SecretString;

pub struct TestCluster {
    // Declared before `root`: the server stops before its directory goes.
    server: Option<LocalPostgres>,
    root: tempfile::TempDir,
    url: SecretString,
}

impl TestCluster {
    /// Initialises and starts a cluster in a fresh directory.
    pub async fn start() -> TestCluster {
        let root = tempfile::Builder::new()
            .prefix("aft-own-pg-")
            .tempdir_in("/tmp")
            .expect("a directory for the cluster");
        let path = root.path().to_owned();
        let server = tokio::task::spawn_blocking(move || {
            LocalPostgres::start(&path, LocalPgOptions::ephemeral())
        })
        .await
        .unwrap()
        .expect("start the test's own cluster");
        let url = server.database_url();
        TestCluster {
            server: Some(server),
            root,
            url,
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

    /// Starts the stopped server again on the same directory.
    pub async fn start_again(&mut self) {
        assert!(self.server.is_none(), "the cluster is running already");
        let path = self.root.path().to_owned();
        let server = tokio::task::spawn_blocking(move || {
            LocalPostgres::start(&path, LocalPgOptions::ephemeral())
        })
        .await
        .unwrap()
        .expect("start the cluster again");
        self.server = Some(server);
    }
}
