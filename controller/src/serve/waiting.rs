//! Start-up while the database does not answer yet. An external Postgres
//! that is down or still starting (a host reboot, a container started
//! before its database) must not make `serve` exit: it keeps trying to
//! connect, with a growing pause and one log line per attempt, while its
//! listeners already answer — `/healthz` 200, `/readyz` 503 saying why,
//! `/webhook` 503 so GitHub records the delivery as failed and it comes
//! back by redelivery (nothing is acknowledged without a durable row).
//! The probes are served on duplicates of the real sockets, so the full
//! server takes over the same ports without a moment of refusing.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use autoforge_journal::JournalError;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::Listeners;
use crate::config::{Config, DatabaseSource};
use crate::database::OpenDatabase;

/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(15);

/// Opens the configured database, waiting for an external one that does
/// not answer yet. `None` when `shutdown` resolved first. An error that
/// waiting cannot cure (a malformed URL, a managed cluster that cannot
/// start) is returned at once.
pub(super) async fn open_database(
    config: &Config,
    listeners: &Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Option<OpenDatabase>> {
    let max_connections = config.settings.database.max_connections;
    let first = OpenDatabase::open(&config.database, max_connections).await;
    let mut error = match first {
        Ok(database) => return Ok(Some(database)),
        Err(error) if !worth_waiting_for(&config.database, &error) => return Err(error),
        Err(error) => error,
    };
    let reason = Arc::new(Mutex::new(String::new()));
    let (stop, stopped) = watch::channel(false);
    let probes = serve_probes(listeners, Arc::clone(&reason), stopped)?;
    tokio::pin!(shutdown);
    let mut pause = FIRST_PAUSE;
    let mut attempt: u32 = 1;
    let opened = loop {
        tracing::warn!(
            attempt,
            retry_in_ms = pause.as_millis() as u64,
            "the database does not answer yet; serve waits for it and tries again: {error:#}"
        );
        if let Ok(mut text) = reason.lock() {
            *text = format!(
                "database unreachable: serve is waiting for it (attempt {attempt} failed, next in {} ms)",
                pause.as_millis()
            );
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = &mut shutdown => break None,
        }
        attempt = attempt.saturating_add(1);
        pause = (pause * 2).min(MAX_PAUSE);
        match OpenDatabase::open(&config.database, max_connections).await {
            Ok(database) => break Some(database),
            Err(next) if !worth_waiting_for(&config.database, &next) => {
                let _ignored = stop.send(true);
                return Err(next);
            }
            Err(next) => error = next,
        }
    };
    let _ignored = stop.send(true);
    for probe in probes {
        if let Err(failure) = probe.await {
            tracing::warn!(error = %failure, "the waiting probe server ended abnormally");
        }
    }
    if opened.is_some() {
        tracing::info!(attempts = attempt, "the database answers; serve starts");
    }
    Ok(opened)
}

/// Only an external server can come up by itself, and only a URL that
/// parses can ever reach it.
fn worth_waiting_for(source: &DatabaseSource, error: &anyhow::Error) -> bool {
    matches!(source, DatabaseSource::External(_))
        && !error
            .chain()
            .any(|cause| matches!(cause.downcast_ref(), Some(JournalError::InvalidUrl(_))))
}

/// Serves the waiting answers on duplicates of both listeners until `stop`
/// turns true.
fn serve_probes(
    listeners: &Listeners,
    reason: Arc<Mutex<String>>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<std::io::Result<()>>>> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(not_ready))
        .fallback(|| async {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable; try again later",
            )
        })
        .with_state(reason);
    let mut served = Vec::new();
    for listener in [&listeners.webhook, &listeners.admin] {
        let duplicate = duplicate(listener).context("cannot share a listening socket")?;
        let mut stop = stop.clone();
        let server = axum::serve(duplicate, app.clone()).with_graceful_shutdown(async move {
            let _ignored = stop.wait_for(|stop| *stop).await;
        });
        served.push(tokio::spawn(server.into_future()));
    }
    Ok(served)
}

async fn not_ready(State(reason): State<Arc<Mutex<String>>>) -> (StatusCode, String) {
    let text = reason
        .lock()
        .map(|text| text.clone())
        .unwrap_or_else(|_| "database unreachable".to_owned());
    (StatusCode::SERVICE_UNAVAILABLE, text)
}

/// A second handle on the same listening socket: connections either
/// accepts are the socket's, so the full server later serves the same
/// port, including connections that queued meanwhile.
fn duplicate(listener: &TcpListener) -> std::io::Result<TcpListener> {
    let fd = listener.as_fd().try_clone_to_owned()?;
    let std_listener = std::net::TcpListener::from(fd);
    std_listener.set_nonblocking(true)?;
    TcpListener::from_std(std_listener)
}
