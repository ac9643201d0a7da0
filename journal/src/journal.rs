//! The connection pool handle (`Journal`), migrations, readiness checks and
//! the transaction wrapper (`JournalTx`) that multi-row changes go through.

use std::str::FromStr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{PgConnection, Postgres, Transaction};

use crate::error::{JournalError, Result};

/// The migrations, embedded at build time so the binary carries its schema.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The pool size unless the caller names one (`database.max_connections`).
/// Sized for one controller process: ingress inserts, the dispatcher, a
/// driver task per leased run and the dashboard share it. Replicas each get
/// their own pool, so this stays well under Postgres' default 100.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 24;
/// No journal statement should take long; a stuck one is a bug or a lock
/// pile-up and must surface as an error rather than hang a driver.
const STATEMENT_TIMEOUT: &str = "30s";
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handle to the journal database. Cheap to clone; all clones share a pool.
#[derive(Clone, Debug)]
pub struct Journal {
    pub(crate) pool: PgPool,
}

impl Journal {
    /// Opens the pool and its first connection now, so a wrong URL or an
    /// unreachable server fails here rather than at the first query. Every
    /// connection gets a statement timeout.
    pub async fn connect(url: &SecretString) -> Result<Journal> {
        Self::connect_with_pool(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// [`Self::connect`] with a pool of at most `max_connections` (at
    /// least one).
    pub async fn connect_with_pool(url: &SecretString, max_connections: u32) -> Result<Journal> {
        let options = PgConnectOptions::from_str(url.expose_secret())
            .map_err(|error| JournalError::InvalidUrl(describe_url_error(&error)))?
            .options([("statement_timeout", STATEMENT_TIMEOUT)]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        Ok(Journal { pool })
    }

    /// Applies every embedded migration not yet applied. Safe to run from
    /// several replicas at once: sqlx serialises them with an advisory lock.
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// True when the database has exactly the migrations this build embeds,
    /// all applied successfully and unmodified. Used by `/readyz`.
    pub async fn migrations_current(&self) -> Result<bool> {
        let table_exists: bool =
            sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                .fetch_one(&self.pool)
                .await?;
        if !table_exists {
            return Ok(false);
        }
        let applied: Vec<(i64, Vec<u8>, bool)> =
            sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations")
                .fetch_all(&self.pool)
                .await?;
        let expected: Vec<_> = MIGRATOR
            .iter()
            .filter(|m| m.migration_type.is_up_migration())
            .collect();
        let all_present = expected.iter().all(|m| {
            applied
                .iter()
                .any(|(v, sum, ok)| *v == m.version && *ok && sum.as_slice() == &*m.checksum)
        });
        // A version we do not know means a newer build migrated this
        // database; we must not drive runs against a schema we do not know.
        let none_unknown = applied
            .iter()
            .all(|(v, _, _)| expected.iter().any(|m| m.version == *v));
        Ok(all_present && none_unknown)
    }

    /// One round trip to the server.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Starts a transaction. Dropping the returned value without calling
    /// [`JournalTx::commit`] rolls it back.
    pub async fn begin(&self) -> Result<JournalTx> {
        Ok(JournalTx {
            tx: self.pool.begin().await?,
            pool: self.pool.clone(),
        })
    }

    /// The most connections the pool opens.
    pub fn max_connections(&self) -> u32 {
        self.pool.options().get_max_connections()
    }

    /// Closes every pooled connection and waits for them to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub(crate) async fn conn(&self) -> Result<sqlx::pool::PoolConnection<Postgres>> {
        Ok(self.pool.acquire().await?)
    }
}

/// A journal transaction. Operations that change several rows are methods of
/// this type, so none of them can half-apply: either `commit` succeeds or
/// nothing they did is visible.
#[derive(Debug)]
pub struct JournalTx {
    tx: Transaction<'static, Postgres>,
    /// For what must outlive a rollback (counting a refused write).
    pool: PgPool,
}

impl JournalTx {
    /// Makes every change of this transaction durable.
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }

    /// Discards every change. Dropping the transaction does the same; this
    /// form waits for the server to acknowledge.
    pub async fn rollback(self) -> Result<()> {
        self.tx.rollback().await?;
        Ok(())
    }

    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Describes a URL parse failure without echoing the URL, which may hold a
/// password.
fn describe_url_error(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        _ => "unrecognised connection string".to_owned(),
    }
}
