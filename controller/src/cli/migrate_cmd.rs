//! `autoforge migrate`: bring the database schema up to date and exit.

use std::process::ExitCode;

use anyhow::Context;

use crate::config::Config;
use crate::database::OpenDatabase;

/// Opens the configured database, applies every pending migration, reports
/// the outcome and shuts the managed cluster down again.
pub fn run(config: &Config) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let database =
            OpenDatabase::open(&config.database, config.settings.database.max_connections).await?;
        let outcome = migrate(&database).await;
        let managed = database.is_managed();
        database.shutdown().await;
        outcome?;
        let location = if managed {
            "the managed local PostgreSQL"
        } else {
            "the configured PostgreSQL"
        };
        println!("ok: migrations are current in {location}");
        Ok(ExitCode::SUCCESS)
    })
}

async fn migrate(database: &OpenDatabase) -> anyhow::Result<()> {
    database
        .journal
        .migrate()
        .await
        .context("applying the migrations failed")?;
    let current = database
        .journal
        .migrations_current()
        .await
        .context("cannot read the applied migrations")?;
    anyhow::ensure!(
        current,
        "the migrations ran but the schema is still not current"
    );
    Ok(())
}
