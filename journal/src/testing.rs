//! Test support, public so other crates' tests use the same harness:
//! [`TestDatabase::fresh`] gives each test its own migrated database, and
//! [`TestDatabase::fresh_migrated_to`] one that an older build left (its
//! migrations up to a version), which [`TestDatabase::copy_rows_to`] fills
//! with the rows of another.
//!
//! With `DATABASE_URL` set, the databases are created on that server. Without
//! it, one ephemeral [`LocalPostgres`] is started per test process, on first
//! use. A `static` is never dropped, so that cluster is guarded by a small
//! child process that waits for its stdin (a pipe only this process holds)
//! to close — which happens however the test process ends — and then stops
//! the server and deletes its directory.
//!
//! Databases created on a `DATABASE_URL` server are left in place (CI
//! servers are throwaway); they are named `aft_<uuid>`.

use std::process::ChildStdin;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

use secrecy::{ExposeSecret, SecretString};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{Connection, PgConnection};

use crate::Journal;
use crate::localpg::{LocalPgOptions, LocalPostgres};

/// A uniquely named, migrated database for one test.
#[derive(Debug)]
pub struct TestDatabase {
    journal: Journal,
    url: SecretString,
    name: String,
}

impl TestDatabase {
    /// Creates and migrates a new database. Panics with the reason if that
    /// is impossible: a test cannot proceed without it.
    pub async fn fresh() -> TestDatabase {
        match Self::try_fresh().await {
            Ok(database) => database,
            Err(error) => panic!("cannot create a test database: {error:#}"),
        }
    }

    /// Like [`TestDatabase::fresh`] but without applying the migrations.
    pub async fn fresh_unmigrated() -> TestDatabase {
        match Self::try_fresh_unmigrated().await {
            Ok(database) => database,
            Err(error) => panic!("cannot create a test database: {error:#}"),
        }
    }

    /// Like [`TestDatabase::fresh`], on the server at `server` (a cluster
    /// of the test's own that it stops and starts).
    pub async fn fresh_on(server: &SecretString) -> TestDatabase {
        match Self::try_fresh_on(Some(server)).await {
            Ok(database) => database,
            Err(error) => panic!("cannot create a test database: {error:#}"),
        }
    }

    async fn try_fresh() -> anyhow::Result<TestDatabase> {
        Self::try_fresh_on(None).await
    }

    async fn try_fresh_on(server: Option<&SecretString>) -> anyhow::Result<TestDatabase> {
        use anyhow::Context as _;
        let database = Self::try_fresh_unmigrated_on(server).await?;
        database
            .journal
            .migrate()
            .await
            .context("migrate the test database")?;
        Ok(database)
    }

    async fn try_fresh_unmigrated() -> anyhow::Result<TestDatabase> {
        Self::try_fresh_unmigrated_on(None).await
    }

    async fn try_fresh_unmigrated_on(
        server: Option<&SecretString>,
    ) -> anyhow::Result<TestDatabase> {
        use anyhow::Context as _;
        let server = match server {
            Some(server) => server.clone(),
            None => server_url().await?,
        };
        let name = format!("aft_{}", uuid::Uuid::new_v4().simple());
        create_database(&server, &name).await?;
        let mut url = url::Url::parse(server.expose_secret()).context("parse the server URL")?;
        url.set_path(&format!("/{name}"));
        let url = SecretString::from(String::from(url));
        let journal = Journal::connect(&url)
            .await
            .context("connect to the test database")?;
        Ok(TestDatabase { journal, url, name })
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The database's URL, to open more connections (a second replica).
    pub fn url(&self) -> &SecretString {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw pool, for tests that must inspect or break the schema.
    pub fn pool(&self) -> &PgPool {
        &self.journal.pool
    }
}

/// The versions of the migrations this build embeds, oldest first.
pub fn migration_versions() -> Vec<i64> {
    crate::journal::MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .map(|m| m.version)
        .collect()
}

impl TestDatabase {
    /// A new database with the embedded migrations applied up to and
    /// including `version` only: the journal as the build before a newer
    /// migration left it.
    pub async fn fresh_migrated_to(version: i64) -> TestDatabase {
        let database = TestDatabase::fresh_unmigrated().await;
        if let Err(error) = crate::journal::MIGRATOR
            .run_to(version, &database.journal.pool)
            .await
        {
            panic!("cannot migrate a test database to version {version}: {error}");
        }
        database
    }

    /// Copies every row of this database into `target`, table by table,
    /// for the tables and columns `target` has: a column it lacks (one a
    /// later migration added) is left out, one only it has takes its
    /// default. Ids are kept, and `target`'s identity sequences continue
    /// after them. Tables are filled parents first, so the foreign keys
    /// hold. Returns how many rows were copied.
    pub async fn copy_rows_to(&self, target: &TestDatabase) -> anyhow::Result<u64> {
        let mut tx = target.pool().begin().await?;
        let mut copied = 0;
        for table in tables_parents_first(&mut tx).await? {
            let columns: Vec<String> = sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = 'public' AND table_name = $1 AND is_generated = 'NEVER' \
                 ORDER BY ordinal_position",
            )
            .bind(&table)
            .fetch_all(&mut *tx)
            .await?;
            let list = columns
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ");
            // Through JSON, each value leaves by its type's output and comes
            // back by its input function: bytes, times and documents alike.
            let rows: Vec<serde_json::Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT to_jsonb(t) FROM \"{table}\" t"
            )))
            .fetch_all(self.pool())
            .await?;
            let insert = format!(
                "INSERT INTO \"{table}\" ({list}) OVERRIDING SYSTEM VALUE \
                 SELECT {list} FROM jsonb_populate_record(NULL::\"{table}\", $1)"
            );
            for row in rows {
                sqlx::query(sqlx::AssertSqlSafe(insert.clone()))
                    .bind(row)
                    .execute(&mut *tx)
                    .await?;
                copied += 1;
            }
            continue_identities(&mut tx, &table).await?;
        }
        tx.commit().await?;
        Ok(copied)
    }
}

/// The tables of the connection's database (the migrations' own left
/// out), each after the tables its foreign keys name.
async fn tables_parents_first(conn: &mut PgConnection) -> anyhow::Result<Vec<String>> {
    let mut left: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' \
         AND table_name <> '_sqlx_migrations' ORDER BY table_name",
    )
    .fetch_all(&mut *conn)
    .await?;
    let edges: Vec<(String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint \
         WHERE contype = 'f' AND connamespace = 'public'::regnamespace",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut ordered: Vec<String> = Vec::new();
    while !left.is_empty() {
        let ready: Vec<String> = left
            .iter()
            .filter(|table| {
                edges.iter().all(|(child, parent)| {
                    child != *table || parent == *table || ordered.contains(parent)
                })
            })
            .cloned()
            .collect();
        anyhow::ensure!(!ready.is_empty(), "foreign keys in a cycle among {left:?}");
        left.retain(|table| !ready.contains(table));
        ordered.extend(ready);
    }
    Ok(ordered)
}

/// Moves each identity sequence of `table` past the ids it holds, so the
/// next row inserted without an id does not collide with a copied one.
async fn continue_identities(conn: &mut PgConnection, table: &str) -> anyhow::Result<()> {
    let identities: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = $1 AND is_identity = 'YES'",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    for column in identities {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), \
             COALESCE((SELECT max(\"{column}\") FROM \"{table}\"), 1), \
             EXISTS (SELECT 1 FROM \"{table}\"))"
        )))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The URL of the server test databases are created on: `DATABASE_URL`, or
/// the process's shared ephemeral cluster (started on first call).
pub async fn server_url() -> anyhow::Result<SecretString> {
    if let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        return Ok(SecretString::from(url));
    }
    let cluster =
        tokio::task::spawn_blocking(|| SHARED.get_or_init(start_shared_cluster).clone()).await?;
    cluster.map_err(|error| anyhow::anyhow!(error))
}

/// Holds the guardian's stdin for the life of the process; never dropped.
static GUARDIAN: Mutex<Option<ChildStdin>> = Mutex::new(None);
static SHARED: OnceLock<Result<SecretString, String>> = OnceLock::new();

fn start_shared_cluster() -> Result<SecretString, String> {
    let root = tempfile::Builder::new()
        .prefix("aft-pg-")
        .tempdir_in("/tmp")
        .map_err(|e| format!("create a temporary directory: {e}"))?
        .keep();
    let options = LocalPgOptions {
        // The guardian stops it; dropping is never reached for a static.
        stop_on_drop: false,
        ..LocalPgOptions::ephemeral()
    };
    let server = LocalPostgres::start(&root, options).map_err(|e| e.to_string())?;
    let guardian = server
        .spawn_guardian(&root)
        .map_err(|e| format!("start the cluster's guardian: {e}"))?;
    if let Ok(mut slot) = GUARDIAN.lock() {
        *slot = Some(guardian);
    }
    Ok(server.database_url())
}

/// `CREATE DATABASE` serialised across processes sharing a server, because
/// concurrent copies of `template1` can fail with "source database is being
/// accessed by other users".
async fn create_database(server: &SecretString, name: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let options = PgConnectOptions::from_str(server.expose_secret())
        .map_err(|_| anyhow::anyhow!("DATABASE_URL is not a valid postgres URL"))?;
    let mut admin = PgConnection::connect_with(&options)
        .await
        .context("connect to the test server")?;
    sqlx::query("SELECT pg_advisory_lock(727274)")
        .execute(&mut admin)
        .await?;
    let created = sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await;
    sqlx::query("SELECT pg_advisory_unlock(727274)")
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    created.with_context(|| format!("create database {name}"))?;
    Ok(())
}

/// A valid commit SHA named by a short tag, for tests that need distinct
/// commits without a repository: a 40-hex tag is taken as it is; anything
/// else is its bytes in hex, padded with zeros (tags of up to 20 bytes stay
/// distinct).
pub fn sha(tag: &str) -> crate::CommitSha {
    if let Ok(sha) = crate::CommitSha::parse(tag) {
        return sha;
    }
    let mut hex: String = tag.bytes().map(|b| format!("{b:02x}")).collect();
    hex.truncate(40);
    while hex.len() < 40 {
        hex.push('0');
    }
    crate::CommitSha::parse(&hex).expect("hex digits padded to 40")
}

/// An issue number for tests; panics outside GitHub's range.
pub const fn issue(number: u64) -> crate::IssueNumber {
    crate::IssueNumber::literal(number)
}

/// A pull request number for tests; panics outside GitHub's range.
pub const fn pull(number: u64) -> crate::PullNumber {
    crate::PullNumber::literal(number)
}
