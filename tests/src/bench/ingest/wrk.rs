//! Load from wrk: a closed loop of `connections` keep-alive connections for
//! a fixed time, every request a signed delivery with an id of its own
//! (`tests/bench-tools/wrk-webhook.lua`), read back as one JSON line.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::Command;

use super::Figures;

/// What every request of a load run carries.
pub struct Delivery<'a> {
    /// A file holding the body, byte for byte as signed.
    pub body: &'a Path,
    pub signature: &'a str,
    pub event: &'a str,
}

/// Runs wrk against `url`; `prefix` makes this run's delivery ids unique.
pub async fn load(
    url: &str,
    delivery: &Delivery<'_>,
    connections: usize,
    duration: Duration,
    prefix: &str,
) -> anyhow::Result<Figures> {
    let script = crate::repo_root().join("tests/bench-tools/wrk-webhook.lua");
    // One wrk thread per core at most: the machine has two, and the server
    // under test needs the rest.
    let threads = connections.min(2);
    let stdout = crate::bench::tool_output(
        Command::new("wrk")
            .arg(format!("--threads={threads}"))
            .arg(format!("--connections={connections}"))
            .arg(format!("--duration={}s", duration.as_secs().max(1)))
            .arg("--timeout=10s")
            .arg(format!("--script={}", script.display()))
            .arg(url)
            .env("BENCH_BODY", delivery.body)
            .env("BENCH_SIGNATURE", delivery.signature)
            .env("BENCH_EVENT", delivery.event)
            .env("BENCH_PREFIX", prefix),
        "scripts/install-bench-tools.sh installs it",
    )
    .await?;
    let line = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .with_context(|| format!("wrk printed no figures: {stdout}"))?;
    let figures: serde_json::Value = serde_json::from_str(line)?;
    let number = |key: &str| {
        figures[key]
            .as_f64()
            .with_context(|| format!("wrk's figures lack {key}: {line}"))
    };
    let failed = number("failed")?;
    if failed > 0.0 {
        bail!("{failed} of wrk's requests to {url} failed or were refused: {line}");
    }
    let requests = number("requests")?;
    Ok(Figures {
        requests: requests as u64,
        rate: requests / (number("duration_us")? / 1e6),
        p50_ms: number("p50_us")? / 1000.0,
        p99_ms: number("p99_us")? / 1000.0,
        p999_ms: number("p999_us")? / 1000.0,
    })
}
