//! Opening the journal the configuration asks for: an external Postgres
//! server named by `DATABASE_URL` / `database.url`, or the managed local
//! cluster under `<state_dir>/postgres` that autoforge starts and stops
//! itself. Every command that needs the database goes through here so the
//! managed cluster is started and stopped in exactly one way. The managed
//! cluster requires its generated password (see
//! `autoforge_journal::localpg`); the URL carrying it is a secret and never
//! logged.

use anyhow::Context;
use autoforge_journal::Journal;
use autoforge_journal::localpg::{LocalPgOptions, LocalPostgres};

use crate::config::DatabaseSource;

/// The journal plus, in managed mode, the cluster behind it.
#[derive(Debug)]
pub struct OpenDatabase {
    pub journal: Journal,
    managed: Option<LocalPostgres>,
    /// Whether the managed cluster was already running before this open
    /// (under `serve`, say), so that [`OpenDatabase::release`] leaves it be.
    adopted: bool,
}

impl OpenDatabase {
    /// Connects to the configured database with a pool of at most
    /// `max_connections` (`database.max_connections`), starting the managed
    /// cluster first when no URL is configured. Does not migrate.
    pub async fn open(
        source: &DatabaseSource,
        max_connections: u32,
    ) -> anyhow::Result<OpenDatabase> {
        match source {
            DatabaseSource::External(url) => {
                let journal = Journal::connect_with_pool(url, max_connections)
                    .await
                    .context(
                        "cannot connect to the database named by DATABASE_URL / database.url",
                    )?;
                Ok(OpenDatabase {
                    journal,
                    managed: None,
                    adopted: false,
                })
            }
            DatabaseSource::Managed { dir } => {
                // The state directory first, private: the cluster then lets
                // only its server account traverse it.
                if let Some(state_dir) = dir.parent() {
                    crate::workspace::restrict_state_dir(state_dir).with_context(|| {
                        format!("cannot prepare the state directory {}", state_dir.display())
                    })?;
                }
                let dir = dir.clone();
                let adopted = server_running(&dir);
                tracing::info!(dir = %dir.display(), "starting the managed local PostgreSQL");
                // initdb and pg_ctl block for up to seconds: keep them off the
                // async workers.
                let server = tokio::task::spawn_blocking(move || {
                    LocalPostgres::start(&dir, LocalPgOptions::persistent())
                })
                .await
                .context("the managed PostgreSQL start-up task failed")?
                .context("cannot start the managed local PostgreSQL (or set DATABASE_URL to use an existing server)")?;
                match Journal::connect_with_pool(&server.database_url(), max_connections).await {
                    Ok(journal) => Ok(OpenDatabase {
                        journal,
                        managed: Some(server),
                        adopted,
                    }),
                    Err(error) => {
                        stop_managed(server).await;
                        Err(error).context("cannot connect to the managed local PostgreSQL")
                    }
                }
            }
        }
    }

    /// Whether autoforge runs the database server itself.
    pub fn is_managed(&self) -> bool {
        self.managed.is_some()
    }

    /// Closes the pool; stops the managed cluster only if this open
    /// started it. For commands that look while `serve` may be running
    /// (`doctor`): the cluster serve runs on stays up.
    pub async fn release(self) {
        if self.adopted {
            self.journal.close().await;
            // Persistent handles do not stop their server when dropped.
            drop(self.managed);
            return;
        }
        self.shutdown().await;
    }

    /// Closes the pool, then stops the managed cluster if there is one.
    pub async fn shutdown(self) {
        self.journal.close().await;
        if let Some(server) = self.managed {
            stop_managed(server).await;
        }
    }
}

/// Whether the cluster's lock file names a live postmaster. A lock file
/// left by a crash names a dead one.
fn server_running(data_root: &std::path::Path) -> bool {
    std::fs::read_to_string(data_root.join("data").join("postmaster.pid"))
        .ok()
        .and_then(|text| text.lines().next()?.trim().parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

async fn stop_managed(server: LocalPostgres) {
    match tokio::task::spawn_blocking(move || server.stop()).await {
        Ok(Ok(())) => tracing::info!("stopped the managed local PostgreSQL"),
        Ok(Err(error)) => tracing::warn!(%error, "could not stop the managed local PostgreSQL"),
        Err(error) => tracing::warn!(%error, "the managed PostgreSQL stop task failed"),
    }
}
