//! `autoforge serve`: the process wiring. It opens the database, binds the
//! listener and runs the intake loops (dispatcher, poller), the run driver
//! and the HTTP surface together until a signal stops them (SPEC §14).
//!
//! Start-up order: the webhook secret is required before anything else;
//! then the database (the managed local Postgres when no URL is set) is
//! opened and migrated, the GitHub client learns the App's identity, the
//! listener is bound and the dispatcher and poller start. On SIGTERM/SIGINT
//! the listener stops accepting, in-flight requests finish, the loops stop
//! after the item in hand, and the database is closed (and the managed
//! cluster stopped).

mod http;

pub use http::router;

use anyhow::Context;
use tokio::sync::watch;

use crate::config::Config;
use crate::database::OpenDatabase;
use crate::intake::{Dispatcher, GitHubAccess, Poller};

/// Runs the server until SIGTERM or SIGINT.
pub async fn run(config: &Config) -> anyhow::Result<()> {
    let secret = config.require_webhook_secret()?.clone();
    let database =
        OpenDatabase::open(&config.database, config.settings.database.max_connections).await?;
    let outcome = run_with_database(config, &database, secret).await;
    database.shutdown().await;
    outcome
}

async fn run_with_database(
    config: &Config,
    database: &OpenDatabase,
    secret: secrecy::SecretString,
) -> anyhow::Result<()> {
    let journal = database.journal.clone();
    journal
        .migrate()
        .await
        .context("applying the database migrations failed")?;
    let listener = tokio::net::TcpListener::bind(config.settings.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.settings.server.listen))?;
    serve_on(config, journal, secret, listener, shutdown_signal()).await
}

/// Serves an already migrated journal on `listener` until `shutdown`
/// resolves, then stops the loops after the item in hand. `run` passes the
/// SIGTERM/SIGINT future; `autoforge demo` binds the listener itself (its
/// fake GitHub must know the webhook URL before serve starts) and stops on
/// its own terms.
pub async fn serve_on(
    config: &Config,
    journal: autoforge_journal::Journal,
    secret: secrecy::SecretString,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Agents and validation commands start only inside the sandbox: a host
    // where bubblewrap cannot work must not take runs.
    let sandbox = config.settings.agents.sandbox;
    crate::sandbox::startup_check(sandbox).await?;
    let access = GitHubAccess::connect(config).await?;
    if !access.is_app() && access.configured_repositories.is_empty() {
        tracing::warn!(
            "authenticating with a token but github.repositories is empty: the poller watches nothing"
        );
    }
    // The run driver leases the runs the dispatcher and poller start and
    // moves them through the phase machine. Built before anything is served
    // so a configuration it cannot use stops start-up cleanly.
    let driver = crate::driver::driver_from_config(config, &access, journal.clone())
        .await
        .context("cannot set up the run driver")?;
    let address = listener.local_addr()?;
    // The first stdout line tells scripts and tests where we listen (the
    // configured port may be 0).
    println!("listening on http://{address}");
    tracing::info!(%address, app = %access.app_slug, "autoforge serve started");

    let (stop_loops, loops_stopped) = watch::channel(false);
    let wakeup = std::sync::Arc::new(tokio::sync::Notify::new());
    let dispatcher = Dispatcher {
        journal: journal.clone(),
        access: access.clone(),
        worker: format!("serve-{}-{}", std::process::id(), uuid::Uuid::new_v4()),
        wakeup: std::sync::Arc::clone(&wakeup),
        notifier: std::sync::Arc::new(driver.notifier()),
    };
    let dispatcher = tokio::spawn(dispatcher.run(loops_stopped.clone()));
    let poller = Poller::new(journal.clone(), access, config.settings.poll.interval())
        .with_notifier(std::sync::Arc::new(driver.notifier()));
    let poller = tokio::spawn(poller.run(loops_stopped.clone()));
    let driver = tokio::spawn(driver.run(loops_stopped));

    let dashboard = crate::dashboard::dashboard_router(
        journal.clone(),
        crate::dashboard::Links {
            html_base: crate::publish::html_base(&config.settings.github.api_url),
        },
        crate::dashboard::DashboardAccess::for_listener(
            &config.settings.server.listen.to_string(),
            config.dashboard_token.clone(),
        ),
    );
    let app = router(journal, config.settings.webhook.endpoint(secret), wakeup)
        .merge(dashboard)
        .layer(axum::Extension(sandbox));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("the HTTP server failed");
    tracing::info!(
        "stopped accepting requests; stopping the dispatcher, the poller and the driver"
    );
    let _ignored = stop_loops.send(true);
    for task in [dispatcher, poller, driver] {
        if let Err(error) = task.await {
            tracing::error!(%error, "a serve loop ended abnormally");
        }
    }
    served
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
}
