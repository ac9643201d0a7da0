//! Throughput bench: simple authenticated GETs per second against an
//! in-process fakehub at a fixed concurrency. Prints a small report.
//!
//! `cargo run --release -p fakehub --bin fakehub-bench -- [seconds] [concurrency]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use secrecy::ExposeSecret;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()
        .context("seconds")?
        .unwrap_or(5);
    let concurrency: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()
        .context("concurrency")?
        .unwrap_or(16);
    // A limit high enough that the bench measures serving, not the 5,000/h cap.
    let hub = fakehub::start(fakehub::Config {
        rate_limit: u64::MAX / 2,
        ..Default::default()
    })
    .await?;
    let user = hub
        .create_user("bench", fakehub::world::UserKind::User)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let spec = fakehub::RepoSpec {
        owner: "bench".into(),
        name: "repo".into(),
        default_branch: "main".into(),
        private: true,
        files: [("README.md".to_string(), "bench\n".to_string())].into(),
        required_checks: vec![],
    };
    hub.create_repo(&spec)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let create = format!("{}/repos/bench/repo/issues", hub.base_url());
    let token = user.token.expose_secret().to_string();
    client
        .post(&create)
        .bearer_auth(&token)
        .json(&serde_json::json!({"title": "bench"}))
        .send()
        .await?
        .error_for_status()?;
    let url = format!("{}/repos/bench/repo/issues/1", hub.base_url());
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, token, done, failed) = (
            client.clone(),
            url.clone(),
            token.clone(),
            done.clone(),
            failed.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                match client.get(&url).bearer_auth(&token).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ok = done.load(Ordering::Relaxed);
    println!("fakehub bench: GET /repos/{{owner}}/{{repo}}/issues/{{n}} with a personal token");
    println!(
        "concurrency {concurrency}, {elapsed:.2} s, {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!(
        "requests ok {ok}, failed {}",
        failed.load(Ordering::Relaxed)
    );
    println!("throughput {:.0} GETs/s", ok as f64 / elapsed);
    Ok(())
}
