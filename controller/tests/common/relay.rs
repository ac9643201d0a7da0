//! A load balancer for webhooks in front of several `autoforge serve`
//! replicas: GitHub knows one URL, the relay's, and the relay hands each
//! delivery to the next replica in turn, passing headers and body through
//! untouched and the replica's answer back. A replica that does not answer
//! (killed, paused) is skipped for the next one, as a load balancer's
//! health check would; with none answering GitHub sees a 502 and records
//! the delivery as failed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// How long one replica gets to answer before the next is tried.
const REPLICA_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Targets {
    /// Each replica's `http://127.0.0.1:PORT`.
    urls: Mutex<Vec<String>>,
    /// Deliveries each replica answered, by index.
    answered: Mutex<Vec<usize>>,
    next: AtomicUsize,
}

/// The running relay; dropping it stops it.
pub struct Relay {
    /// `http://127.0.0.1:PORT/webhook`, the URL to give GitHub.
    pub url: String,
    targets: Arc<Targets>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    pub async fn start() -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the relay");
        let url = format!(
            "http://{}/webhook",
            listener.local_addr().expect("relay address")
        );
        let targets = Arc::new(Targets::default());
        let client = reqwest::Client::builder()
            .timeout(REPLICA_TIMEOUT)
            .build()
            .expect("relay client");
        let app = axum::Router::new()
            .route("/webhook", axum::routing::post(forward))
            .with_state((Arc::clone(&targets), client));
        let task = tokio::spawn(async move {
            let _served = axum::serve(listener, app).await;
        });
        Relay { url, targets, task }
    }

    /// Adds a replica (its webhook listener's base URL); returns its index.
    pub fn add(&self, replica_url: &str) -> usize {
        let mut urls = self.targets.urls.lock().unwrap();
        urls.push(replica_url.to_owned());
        self.targets.answered.lock().unwrap().push(0);
        urls.len() - 1
    }

    /// How many deliveries each replica answered, by index.
    pub fn answered(&self) -> Vec<usize> {
        self.targets.answered.lock().unwrap().clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(
    State((targets, client)): State<(Arc<Targets>, reqwest::Client)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let urls = targets.urls.lock().unwrap().clone();
    let start = targets.next.fetch_add(1, Ordering::Relaxed);
    let mut passed = headers;
    passed.remove(header::HOST);
    passed.remove(header::CONTENT_LENGTH);
    for offset in 0..urls.len() {
        let index = (start + offset) % urls.len();
        let sent = client
            .post(format!("{}/webhook", urls[index]))
            .headers(passed.clone())
            .body(body.clone())
            .send()
            .await;
        let Ok(answer) = sent else { continue };
        let status = StatusCode::from_u16(answer.status().as_u16())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let Ok(text) = answer.bytes().await else {
            continue;
        };
        targets.answered.lock().unwrap()[index] += 1;
        return (status, text).into_response();
    }
    (StatusCode::BAD_GATEWAY, "no replica answered").into_response()
}
