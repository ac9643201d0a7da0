//! The local web flow of `setup`: serve the start page on loopback, wait for
//! GitHub's redirect with the code and our `state`, convert the code, save
//! the credentials, and stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use secrecy::SecretString;
use serde::Deserialize;
use tokio::sync::oneshot;

use super::credentials::{self, NewCredentials, WrittenCredentials};
use super::manifest::app_manifest;
use super::pages::{self, DonePage, StartPage};
use crate::github::convert_manifest_code;
use crate::github::permissions::{APP_EVENTS, APP_PERMISSIONS};

/// GitHub.com's API, after which the env file needs no API URL.
const GITHUB_COM_API: &str = "https://api.github.com";

/// What `setup` creates and where it saves it.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// GitHub's web address: `https://github.com`, or a GitHub Enterprise
    /// Server's `https://HOST`.
    pub web_url: String,
    /// Its REST API: `https://api.github.com` or `https://HOST/api/v3`.
    pub api_url: String,
    /// Create the App for this organization instead of the signed-in account.
    pub org: Option<String>,
    /// The public address `serve` will be reached at (webhooks go to
    /// `<url>/webhook`); none leaves the App's webhook inactive.
    pub public_url: Option<String>,
    pub app_name: String,
    pub out_dir: PathBuf,
    /// Loopback address of the local page (port 0: any free port).
    pub listen: SocketAddr,
    pub force: bool,
}

/// The App that was created and the files written for it.
#[derive(Debug, Clone)]
pub struct SetupOutcome {
    pub app_id: u64,
    pub slug: String,
    pub html_url: String,
    pub install_url: String,
    pub webhook_active: bool,
    pub written: WrittenCredentials,
}

struct Flow {
    options: SetupOptions,
    state: String,
    start_page: String,
    finished: Mutex<Option<oneshot::Sender<SetupOutcome>>>,
}

/// Runs the flow; `ready` receives the local page's URL once it is served.
pub async fn run(options: SetupOptions, ready: impl FnOnce(&str)) -> anyhow::Result<SetupOutcome> {
    anyhow::ensure!(
        options.listen.ip().is_loopback(),
        "the setup page must listen on loopback (got {}): it hands out the App's key",
        options.listen
    );
    credentials::check_free(&options.out_dir, options.force)?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let local = format!("http://{}", listener.local_addr().context("local address")?);
    let state = uuid::Uuid::new_v4().simple().to_string();
    let start_page = render_start(&options, &local, &state)?;
    let (sender, receiver) = oneshot::channel();
    let flow = Arc::new(Flow {
        options,
        state,
        start_page,
        finished: Mutex::new(Some(sender)),
    });
    let app = Router::new()
        .route("/", get(start))
        .route("/callback", get(callback))
        .with_state(flow);
    ready(&format!("{local}/"));
    let (done_tx, done_rx) = oneshot::channel::<SetupOutcome>();
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        if let Ok(outcome) = receiver.await {
            let _ = done_tx.send(outcome);
        }
    });
    serve.await.context("the setup page stopped")?;
    done_rx
        .await
        .context("the setup page stopped before the App was saved")
}

fn render_start(options: &SetupOptions, local: &str, state: &str) -> anyhow::Result<String> {
    let web = options.web_url.trim_end_matches('/');
    let path = match &options.org {
        Some(org) => format!(
            "organizations/{}/settings/apps/new",
            crate::github::encode_component(org)
        ),
        None => "settings/apps/new".to_owned(),
    };
    let action = format!("{web}/{path}?state={state}");
    let public = options
        .public_url
        .as_deref()
        .map(|url| url.trim_end_matches('/'));
    let webhook = public.map(|url| format!("{url}/webhook"));
    let homepage = public.unwrap_or(local);
    let manifest = app_manifest(
        &options.app_name,
        homepage,
        webhook.as_deref(),
        &format!("{local}/callback"),
    );
    let manifest = serde_json::to_string(&manifest).context("render the manifest")?;
    let page = StartPage {
        app_name: &options.app_name,
        action: &action,
        owner: options.org.as_deref(),
        manifest: &manifest,
        webhook_url: webhook.as_deref(),
        permissions: APP_PERMISSIONS
            .iter()
            .map(|grant| {
                (
                    grant.permission.to_owned(),
                    grant.access.as_str().to_owned(),
                )
            })
            .collect(),
        events: APP_EVENTS.iter().map(|event| (*event).to_owned()).collect(),
    };
    Ok(pages::start(&page).into_string())
}

async fn start(State(flow): State<Arc<Flow>>) -> Html<String> {
    Html(flow.start_page.clone())
}

#[derive(Debug, Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
}

async fn callback(State(flow): State<Arc<Flow>>, Query(callback): Query<Callback>) -> Response {
    // The state proves the redirect answers the form this process served,
    // not a link someone else made the browser open.
    if callback.state.as_deref() != Some(flow.state.as_str()) {
        let reason =
            "This answer does not belong to the form this setup served (its state differs).";
        return (
            StatusCode::BAD_REQUEST,
            Html(pages::failed(reason).into_string()),
        )
            .into_response();
    }
    let Some(code) = callback
        .code
        .filter(|c| !c.is_empty() && c.chars().all(|c| c.is_ascii_alphanumeric()))
    else {
        let reason = "GitHub's redirect carries no usable code.";
        return (
            StatusCode::BAD_REQUEST,
            Html(pages::failed(reason).into_string()),
        )
            .into_response();
    };
    match save(&flow, &code).await {
        Ok(outcome) => {
            let env_file = outcome.written.env.display().to_string();
            let page = DonePage {
                app_name: &outcome.slug,
                app_id: outcome.app_id,
                install_url: &outcome.install_url,
                env_file: &env_file,
            };
            let html = pages::done(&page).into_string();
            if let Some(sender) = flow.finished.lock().ok().and_then(|mut slot| slot.take()) {
                let _ = sender.send(outcome);
            }
            Html(html).into_response()
        }
        Err(error) => {
            tracing::error!("setup: {error:#}");
            let html = pages::failed(&format!("{error:#}")).into_string();
            (StatusCode::BAD_GATEWAY, Html(html)).into_response()
        }
    }
}

async fn save(flow: &Flow, code: &str) -> anyhow::Result<SetupOutcome> {
    let options = &flow.options;
    let app = convert_manifest_code(&options.api_url, code).await?;
    let webhook_active = app.webhook_secret.is_some();
    // Without a webhook GitHub issues no secret; one is made here so that
    // the operator sets the same one when they add the URL.
    let secret = app.webhook_secret.unwrap_or_else(|| {
        let mut bytes = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut bytes);
        SecretString::from(hex::encode(bytes))
    });
    let api_url = options.api_url.trim_end_matches('/');
    let new = NewCredentials {
        app_id: app.id,
        private_key: &app.pem,
        webhook_secret: &secret,
        api_url: (api_url != GITHUB_COM_API).then_some(api_url),
    };
    let written = credentials::write(&options.out_dir, &new, options.force)?;
    Ok(SetupOutcome {
        app_id: app.id,
        install_url: format!("{}/installations/new", app.html_url.trim_end_matches('/')),
        slug: app.slug,
        html_url: app.html_url,
        webhook_active,
        written,
    })
}
