//! `autoforge serve`: the process wiring. It opens the database, binds the
//! webhook and admin listeners and runs the intake loops (dispatcher,
//! poller), the run driver and the HTTP surface together until a signal
//! stops them (SPEC §14).
//!
//! Start-up order: the webhook secret is required before anything else;
//! then both listeners are bound, the database (the managed local Postgres
//! when no URL is set) is opened — an external one that does not answer
//! yet is waited for (`waiting`) — and migrated, the GitHub client learns
//! the App's identity and the dispatcher and poller start. On SIGTERM/SIGINT
//! both listeners stop accepting, in-flight requests finish, the loops stop
//! after the item in hand, and the database is closed (and the managed
//! cluster stopped). Meanwhile `rate_readings` keeps the journal's copy of
//! the GitHub client's rate-limit budgets current for `autoforge status`.

mod http;
mod rate_readings;
mod waiting;

pub use http::{admin_listener_router, webhook_listener_router};

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Config, ServerSettings};
use crate::database::OpenDatabase;
use crate::intake::{Dispatcher, GitHubAccess, Poller};

/// Runs the server until SIGTERM or SIGINT.
pub async fn run(config: &Config) -> anyhow::Result<()> {
    let secret = config.require_webhook_secret()?.clone();
    // Bound first, so that while the database is awaited the probes say why
    // serve is not ready and deliveries are refused rather than lost.
    let listeners = Listeners::bind(&config.settings.server).await?;
    let Some(database) = waiting::open_database(config, &listeners, shutdown_signal()).await?
    else {
        tracing::info!("stopped while waiting for the database");
        return Ok(());
    };
    let outcome = run_with_database(config, &database, secret, listeners).await;
    database.shutdown().await;
    outcome
}

async fn run_with_database(
    config: &Config,
    database: &OpenDatabase,
    secret: secrecy::SecretString,
    listeners: Listeners,
) -> anyhow::Result<()> {
    let journal = database.journal.clone();
    journal
        .migrate()
        .await
        .context("applying the database migrations failed")?;
    serve_on(config, journal, secret, listeners, shutdown_signal()).await
}

/// The two sockets serve answers on: `/webhook` on one, the dashboard and
/// `/metrics` on the other, so that exposing the first exposes nothing
/// else. Both carry the health probes.
pub struct Listeners {
    pub webhook: TcpListener,
    pub admin: TcpListener,
}

impl Listeners {
    /// Binds `server.listen` and `server.admin_listen`.
    pub async fn bind(server: &ServerSettings) -> anyhow::Result<Listeners> {
        Ok(Listeners {
            webhook: bind(server.listen, "server.listen").await?,
            admin: bind(server.admin_listen, "server.admin_listen").await?,
        })
    }
}

async fn bind(address: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address} ({key})"))
}

/// Serves an already migrated journal on `listeners` until `shutdown`
/// resolves, then stops the loops after the item in hand. `run` passes the
/// SIGTERM/SIGINT future; `autoforge demo` binds the listeners itself (its
/// fake GitHub must know the webhook URL before serve starts) and stops on
/// its own terms.
pub async fn serve_on(
    config: &Config,
    journal: autoforge_journal::Journal,
    secret: secrecy::SecretString,
    listeners: Listeners,
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
    let address = listeners.webhook.local_addr()?;
    let admin_address = listeners.admin.local_addr()?;
    // The first two stdout lines tell scripts and tests where we listen
    // (the configured ports may be 0).
    println!("listening on http://{address}");
    println!("admin listening on http://{admin_address}");
    tracing::info!(%address, %admin_address, app = %access.app_slug, "autoforge serve started");

    let (stop_loops, loops_stopped) = watch::channel(false);
    let wakeup = std::sync::Arc::new(tokio::sync::Notify::new());
    let worker = format!("serve-{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let readings = tokio::spawn(rate_readings::run(
        journal.clone(),
        access.client.clone(),
        worker.clone(),
        loops_stopped.clone(),
    ));
    let dispatcher = Dispatcher {
        journal: journal.clone(),
        access: access.clone(),
        worker,
        wakeup: std::sync::Arc::clone(&wakeup),
        notifier: std::sync::Arc::new(driver.notifier()),
    };
    let dispatcher = tokio::spawn(dispatcher.run(loops_stopped.clone()));
    let poller = Poller::new(journal.clone(), access, config.settings.poll.interval())
        .with_notifier(std::sync::Arc::new(driver.notifier()));
    let poller = tokio::spawn(poller.run(loops_stopped.clone()));
    let driver = tokio::spawn(driver.run(loops_stopped));

    let served = serve_http(config, journal, secret, wakeup, listeners, shutdown).await;
    tracing::info!(
        "stopped accepting requests; stopping the dispatcher, the poller and the driver"
    );
    let _ignored = stop_loops.send(true);
    for task in [dispatcher, poller, driver, readings] {
        if let Err(error) = task.await {
            tracing::error!(%error, "a serve loop ended abnormally");
        }
    }
    served
}

/// Both listeners until `shutdown` resolves (or one of them fails, which
/// stops the other too).
async fn serve_http(
    config: &Config,
    journal: autoforge_journal::Journal,
    secret: secrecy::SecretString,
    wakeup: std::sync::Arc<tokio::sync::Notify>,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let sandbox = config.settings.agents.sandbox;
    let admin_address = listeners.admin.local_addr()?;
    let dashboard_access = crate::dashboard::DashboardAccess::for_listener(
        &admin_address.to_string(),
        config.dashboard_token.clone(),
    );
    tracing::info!(
        address = %admin_address,
        "dashboard and /metrics: {}",
        dashboard_access.describe()
    );
    let site = crate::dashboard::Site {
        links: crate::dashboard::Links {
            html_base: crate::publish::html_base(&config.settings.github.api_url),
        },
        sandbox,
    };
    let webhook_app = webhook_listener_router(
        journal.clone(),
        config.settings.webhook.endpoint(secret),
        wakeup,
    )
    .layer(axum::Extension(sandbox));
    let admin_app =
        admin_listener_router(journal, site, dashboard_access).layer(axum::Extension(sandbox));

    // One shutdown signal, passed on to both servers.
    let (stop, stopping) = watch::channel(false);
    let forward = async move {
        shutdown.await;
        let _ignored = stop.send(true);
        Ok::<(), anyhow::Error>(())
    };
    let stopped = |mut stopping: watch::Receiver<bool>| async move {
        // An error means the sender is gone, which is a stop as well.
        let _ignored = stopping.wait_for(|stop| *stop).await;
    };
    let webhook = axum::serve(listeners.webhook, webhook_app)
        .with_graceful_shutdown(stopped(stopping.clone()))
        .into_future();
    let admin = axum::serve(listeners.admin, admin_app)
        .with_graceful_shutdown(stopped(stopping))
        .into_future();
    tokio::try_join!(
        forward,
        async { webhook.await.context("the webhook listener failed") },
        async { admin.await.context("the admin listener failed") },
    )
    .map(|((), (), ())| ())
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
